"""Figures: the roofline's roofs, ridge points and operator points; the breakdown's sums; file formats; the CLI."""

import csv
import json
import math

import pytest

from rooflaw import evaluate, from_spec, get_device, op_rows, plot_breakdown, plot_roofline, throughput
from rooflaw.cli import main
from rooflaw.plots import breakdown_data, roofline_data
from rooflaw.plots.roofline import ridge_text

SPEC = "layers=4,d_model=512,heads=8,kv_heads=2,head_dim=64,ffn=1536,vocab=32000"
MOE = "layers=4,d_model=512,heads=8,kv_heads=2,head_dim=64,ffn=512,experts=8,top_k=2,vocab=32000"


@pytest.fixture(scope="module")
def report():
    # the pure roofline (engine "ideal": efficiencies 1, no launch overhead), so every operator sits on its roof
    dev = get_device("jetson-agx-orin-64gb")
    return evaluate(from_spec(SPEC), dev, precision="fp16", engine="ideal", attention="unfused")


def test_ridge_points_are_peak_over_bandwidth(report):
    dev = report.device
    data = roofline_data(report)
    assert {r["dtype"] for r in data.roofs} == set(dev.peak_flops)
    for r in data.roofs:
        assert r["ridge"] == pytest.approx(dev.peak_flops[r["dtype"]] / dev.memory_bandwidth, rel=1e-12)
    used = {r["dtype"] for r in data.roofs if r["used"]}
    assert used == {"fp16", "fp32"}  # GEMMs on the fp16 roof, softmax/norms on the fp32 vector roof


def test_every_operator_is_plotted_on_its_roof(report):
    data = roofline_data(report)
    dev = report.device
    plotted = {(p["phase"], n): p for p in data.points for n in p["ops"]}
    skipped = {(s["phase"], s["op"]) for s in data.skipped}
    for o in report.ops:
        key = (o.phase, o.name)
        if o.flops == 0:
            assert key in skipped and key not in plotted
            continue
        p = plotted[key]
        intensity = o.flops / o.bytes
        assert p["intensity"] == pytest.approx(intensity, rel=0.05)  # merged points lie within MERGE_DEX
        # an ideal device charges exactly the roofline: min(peak of the op's roof, intensity x bandwidth)
        peak = dev.peak_flops[o.roof]
        assert o.flops / o.seconds == pytest.approx(min(peak, intensity * dev.memory_bandwidth), rel=1e-9)
    assert len(plotted) + len(skipped) == len(report.ops)


def test_roofline_svg_names_every_operator_and_roof(report, tmp_path):
    out = tmp_path / "roof.svg"
    data = plot_roofline(report, out)
    text = out.read_text()
    assert text.lstrip().startswith("<?xml") and "</svg>" in text
    for p in data.points:
        assert ", ".join(p["ops"]) in text
    for r in data.roofs:
        assert f"ridge {ridge_text(r['ridge'])} FLOP/B" in text
    assert "not shown (no FLOPs, bytes only): embed" in text


def test_roofline_png(report, tmp_path):
    out = tmp_path / "roof.png"
    plot_roofline(report, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_breakdown_sums_to_phase_times(report, tmp_path):
    res = plot_breakdown(report, tmp_path / "b.svg")
    for phase in ("prefill", "decode"):
        total = sum(s for _, s in res["segments"][phase])
        assert total == pytest.approx(report.values[f"{phase}_s"], rel=1e-12)
    assert breakdown_data(report) == res["segments"]


def test_moe_breakdown_and_shares():
    rep = evaluate(from_spec(MOE), get_device("h100-sxm"), precision="fp16")
    rows = op_rows(rep)
    for phase in ("prefill", "decode"):
        assert sum(r["share"] for r in rows if r["phase"] == phase) == pytest.approx(1.0, rel=1e-12)
    assert any(r["name"] == "router" for r in rows)
    tps = throughput(rep)
    assert tps["decode"] == pytest.approx(16 / rep.decode_s)
    assert tps["prefill"] == pytest.approx(1024 / rep.prefill_s)
    assert tps["total"] == pytest.approx(16 / rep.total_s)


@pytest.mark.parametrize("ext", ["pdf", "jpg", ""])
def test_unknown_extension_exits_2_and_writes_nothing(capsys, tmp_path, ext):
    out = tmp_path / (f"fig.{ext}" if ext else "fig")
    code = main(["plot", "roofline", "--device", "h100-sxm", "--arch", SPEC, "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "out=" in err[0] and ".png or .svg" in err[0]
    assert not out.exists()


def test_cli_plots_and_evaluate_csv(capsys, tmp_path):
    for kind in ("roofline", "breakdown"):
        out = tmp_path / f"{kind}.png"
        assert main(["plot", kind, "--device", "jetson-agx-orin-64gb", "--arch", SPEC, "--out", str(out)]) == 0
        assert out.stat().st_size > 10_000
    capsys.readouterr()
    fig, table = tmp_path / "ev.svg", tmp_path / "ev.csv"
    code = main(["evaluate", "--device", "jetson-agx-orin-64gb", "--arch", SPEC, "--plot", str(fig),
                 "--csv", str(table), "--json"])  # fmt: skip
    assert code == 0
    d = json.loads(capsys.readouterr().out)
    rows = list(csv.DictReader(table.open()))
    assert [r["name"] for r in rows] == [o["name"] for o in d["ops"]]
    for phase in ("prefill", "decode"):
        assert sum(float(r["seconds"]) for r in rows if r["phase"] == phase) == pytest.approx(d[f"{phase}_s"])
    for r, o in zip(rows, d["ops"], strict=True):
        f, b = float(r["flops"]), float(r["bytes"])
        # no bytes (a fused softmax on chip, the engine's per-pass overhead): intensity is infinite
        assert float(r["intensity"]) == (pytest.approx(f / b) if b > 0 else math.inf)
        assert o["share"] == pytest.approx(float(r["share"]))
    assert d["tokens_per_s"]["decode"] == pytest.approx(16 / d["decode_s"])
    assert "ffn_up" in fig.read_text()


def test_evaluate_table_has_share_intensity_and_tokens_per_s(capsys):
    assert main(["evaluate", "--device", "jetson-agx-orin-64gb", "--arch", SPEC]) == 0
    out = capsys.readouterr().out
    assert "FLOP/B" in out and "share" in out and "decode tokens/s" in out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert not math.isnan(float(out.split("decode tokens/s")[1].split()[1]))
