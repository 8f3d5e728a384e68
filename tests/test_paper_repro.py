"""paper_repro end to end: a reduced ``all`` writes every figure, REPORT.md section and sane claims."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

paper_repro = pytest.importorskip("paper_repro")

FIGURES = (
    "fig5_frontiers.png", "fig7_evolution_paper.png", "fig7_evolution_paper-ops.png", "fig7_evolution_full.png",
    "table2_targets.png", "fig4_fit.png",
    "theorems.png", "fig8_qwen.png", "seed_guidelines.png", "beyond_moe.png", "search_adaptive.png",
    "guideline4_precision.png",
)  # fmt: skip


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    d = tmp_path_factory.mktemp("repro")
    assert paper_repro.main(["all", "--quick", "--out", str(d)]) == 0
    return d


@pytest.fixture(scope="module")
def claims(out):
    return json.loads((out / "claims.json").read_text())


def test_files_and_sections(out):
    for f in FIGURES:
        p = out / f
        assert p.exists() and p.stat().st_size > 10_000, f
    text = (out / "REPORT.md").read_text()
    for s in ("setup", *paper_repro.SECTIONS):
        assert text.count(f"<!-- section:{s} -->") == 1, s
    # three cost presets since the App. D per-operator model became the `paper-ops` preset
    head = "| claim | paper | rooflaw (paper preset) | rooflaw (paper-ops preset) | rooflaw (full preset) | verdict |"
    assert head in text
    for f in FIGURES:
        assert f"]({f})" in text, f


def test_rerun_replaces_sections(out):
    assert paper_repro.main(["seed", "--out", str(out)]) == 0
    text = (out / "REPORT.md").read_text()
    assert text.count("<!-- section:seed -->") == 1
    assert text.count("<!-- section:fig5 -->") == 1
    data = json.loads((out / "claims.json").read_text())
    assert {"fig5", "fig7", "seed", "theorems"} <= set(data)


def test_int8_speedup(claims):
    s = claims["fig5"]["int8_speedup"]
    for ps in ("paper", "paper-ops", "full"):
        for ph in ("prefill", "decode", "total"):
            x = s[ps][ph]
            assert 1.0 < x["min"] <= x["median"] <= x["max"]
    # the paper's formulas scale every term with the precision: exactly 2x for the same architecture
    for ph in ("prefill", "decode", "total"):
        assert claims["fig5"]["int8_speedup_same_arch"]["paper"][ph]["median"] == pytest.approx(2.0)
        assert claims["fig5"]["int8_speedup_same_arch"]["full"][ph]["max"] <= 2.0 + 1e-9
    # App. D per-operator model with the score matrix in 16 bits: INT8 helps prefill well below 2x
    assert claims["fig5"]["int8_speedup_same_arch"]["paper-ops"]["prefill"]["max"] < 1.95
    # weight-only INT8 does not speed prefill up 2x
    assert claims["fig5"]["variants_speedup"]["w8a16"]["full"]["prefill"]["median"] < 1.6


def test_moe_share(claims):
    m = claims["fig7"]["moe_share"]
    for ps in ("paper", "full"):
        for ph in ("prefill", "decode", "total"):
            for pr in ("fp16", "int8"):
                assert 0.0 <= m[ps][ph][pr] <= 1.0
    assert m["paper"]["decode"]["fp16"] == 1.0  # ρ never enters the paper's decode cost
    # MoE still dominates the full preset's FP16 total frontier: 84 % (quick mode) since session 14 gave the Orin its
    # 1.3 GHz GPU clock, so the curves' cycle-counted fixed times (a MoE layer's among them) are 8 % longer than at the
    # A100's 1.41 GHz; 89 % on session 12's kernel curves, 96 % before them, 100 % in the paper; dense models take
    # its fast end
    assert m["full"]["total"]["fp16"] > 0.8
    for k in ("top1_share", "depth_le_20_share", "width_at_bound_share", "median_experts"):
        assert k in claims["fig7"]


def test_table2(claims):
    t = claims["table2"]
    for name in ("embodied_ai", "autonomous_driving", "smart_home", "private_serving"):
        for ps in ("paper", "full"):
            p = t[name][ps]["fp16"]
            assert p is not None and p["latency_s"] <= t[name]["budget_s"]
            assert 2.5 < p["loss"] < 5
    # a larger budget never buys a worse model
    losses = [t[n]["full"]["fp16"]["loss"] for n in ("autonomous_driving", "smart_home", "private_serving")]
    assert losses == sorted(losses, reverse=True)


def test_fig4_and_theorems(claims):
    f = claims["fig4"]
    assert 0.8 < f["paper_form_fixed_tokens"]["r2_train"] <= 1
    assert f["paper_form_fixed_tokens"]["r2_holdout"] is not None
    th = claims["theorems"]
    assert th["corollary_1"]["exponent"] == pytest.approx(-1.19, abs=0.01)
    assert th["theorem_5_2"]["rho_star"]["1024"] == pytest.approx(0.395, abs=0.001)
    assert th["worked_example"]["M_d_bar"] == pytest.approx(5e9)
    assert th["depth_width"]["exponent"]["prefill"] == pytest.approx(-2.0, abs=1e-6)


def test_closed_forms_and_search(claims):
    rows = claims["closed_forms"]["rows"]
    assert len(rows) >= 20
    for r in rows:
        assert {"claim", "paper", "rooflaw", "agree", "why"} <= set(r)
    # the printed r*/gqa* formulas and Tables 4/17/22 agree with the derivation; the depth-first rule does not
    assert all(r["agree"] for r in rows if r["claim"].startswith(("r*", "gqa*", "Table")))
    assert any(r["agree"] is False for r in rows if "shrink d" in r["claim"])
    s = claims["search"]
    assert s["paper"]["rate_per_s"] == pytest.approx(50_000 / 1200)
    assert s["evaluate_50k"]["rate_per_s"] > s["paper"]["rate_per_s"]
    for run in s["adaptive"]["runs"]:
        shares = [c["share"] for c in run["curve"]]
        assert 0 <= shares[0] <= shares[-1] <= 1
    t5 = s["table5"]
    # n_kv = 4 is dropped at four widths, n_kv = 8 at six (five of them below n_h; 768 has n_h = 6 < 8)
    assert t5["added_by_kv"]["4"] == [768, 1280, 1792, 2304]
    assert t5["added_by_kv"]["8"] == [1280, 1536, 1792, 2304, 2560]
    assert t5["undivided_grid_points"] == t5["paper_space_points"] + t5["added_points"]


def test_qwen_and_seed(claims):
    q = claims["qwen"]
    assert q["qwen"]["params_total"] == 494032768
    assert q["qwen"]["full"]["total_s"] > q["qwen"]["paper"]["total_s"]  # LM head + attention cost
    for ps in ("paper", "full"):
        assert q[ps]["pick"]["latency_s"] <= q["qwen"][ps]["total_s"]
        assert 0 < q[ps]["perplexity_gap"] < 1
    ai = {(r["m"], r["n"], r["k"]): r for r in claims["seed"]["gemm_intensity"]}
    assert ai[(2048, 8192, 512)]["correct"] == pytest.approx(195.05, abs=0.01)
    assert ai[(2048, 8192, 8192)]["correct"] == pytest.approx(682.67, abs=0.01)
    assert ai[(2048, 8192, 512)]["seed_formula"] == pytest.approx(819.2)
    assert ai[(2048, 8192, 512)]["bound_h100"] == ai[(2048, 8192, 8192)]["bound_h100"] == "compute"
    assert claims["seed"]["wider_vs_deeper"]["lowest_loss_shape"] == {"layers": 20, "d_model": 1024}
    # the tile table's pure-roofline column is the roofline (no kernel curves): measured kernels reach less than it
    for per_d in claims["seed"]["tile_alignment"].values():
        for e in per_d.values():
            assert e["seconds"] > 1.05 * e["ideal_seconds"]


def test_beyond(claims):
    b = claims["beyond"]
    for key in ("agx_b1", "agx_b8", "agx_b64", "nano_b1"):
        assert 0 <= b[key]["full"]["total"]["moe_share"] <= 1
    assert b["nano_b1"]["full"]["fits_share"] < b["agx_b1"]["full"]["fits_share"]


def test_cli_repro_unknown_section(tmp_path):
    assert paper_repro.main(["nope", "--out", str(tmp_path)]) == 2
