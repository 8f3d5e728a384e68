"""``rooflaw report``: the page's data against independent computations (the frontier CLI's CSV, per-point
``evaluate``), the page is offline and holds exactly what ``--json`` prints, and its errors. The page in a real
browser: test_report_browser.py."""

from __future__ import annotations

import csv
import json
import math
import re
import sys

import pytest
from cli_helpers import run_cli, space_file

import rooflaw as rl

pytest.importorskip("plotly", reason="the report extra (plotly) is not installed")

DEVICE = "jetson-orin-nano-8gb"


def page_data(html: str) -> dict:
    """The JSON the page embeds (the ``rooflaw-data`` script element)."""
    m = re.search(r'<script type="application/json" id="rooflaw-data">(.*?)</script>', html, re.S)
    assert m is not None
    return json.loads(m.group(1).replace("<\\/", "</").replace("<\\!--", "<!--"))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return space_file(tmp_path_factory.mktemp("space"))


def _problem(tiny, **kw):
    return rl.Problem(law=rl.get_law("paper-2602.10377"), device=rl.get_device(DEVICE), space=rl.get_space(str(tiny)),
                      allow_extrapolation=True, **kw)  # fmt: skip


def test_points_and_details_match_the_frontier_and_evaluate(tiny):
    prob = _problem(tiny, latency_budget=0.2)
    res = rl.frontier(prob, n_jobs=1, cloud=0)
    data = rl.report_data(prob, res)
    assert data["kind"] == "single" and len(data["points"]) == len(res.frontier) >= 3
    assert data["summary"] == res.to_dict()
    for i, (p, row) in enumerate(zip(data["points"], res.frontier.to_dict("records"), strict=True)):
        for k in ("layers", "d_model", "heads", "kv_heads", "ffn", "experts", "top_k"):
            assert p[k] == row[k]
        assert p["loss"] == row["loss"] and p["decode_s"] == row["decode_s"]
        assert rl.from_spec(p["spec"]) == prob.space.architecture(row)
        # the detail is one architecture priced on its own (CostReport), the frontier a vectorised column pass
        d = data["details"][str(i)]
        ev = rl.evaluate(p["spec"], DEVICE, prob.workload, "fp16", "full").to_dict()
        for k in ("prefill_s", "decode_s", "memory_bytes", "energy_j"):
            assert math.isclose(d["evaluate"][k], row[k], rel_tol=1e-9), k
            assert math.isclose(d["evaluate"][k], ev[k], rel_tol=1e-12), k
        parts = d["evaluate"]["weight_bytes"] + d["evaluate"]["kv_cache_bytes"] + d["evaluate"]["activation_bytes"]
        assert math.isclose(parts, row["memory_bytes"], rel_tol=1e-9)
        assert {r["phase"] for r in d["evaluate"]["ops"]} == {"prefill", "decode"}
        decode_ops = sum(r["seconds"] for r in d["evaluate"]["ops"] if r["phase"] == "decode")
        assert math.isclose(decode_ops, row["decode_s"], rel_tol=1e-9)
        assert d["roofline"]["roofs"] and d["roofline"]["points"]
        assert f"frontier point {i} of {len(res.frontier)}" in d["explain"]
    # the first point is the fastest: it names no faster neighbour, the last no slower one
    assert "next faster" not in data["details"]["0"]["explain"]
    assert "next slower" not in data["details"][str(len(res.frontier) - 1)]["explain"]
    assert "latency: " in data["details"]["0"]["explain"] and "budgets" in data["details"]["0"]["explain"]


def test_explain_names_the_edge_of_the_space_and_of_the_law(tiny):
    prob = _problem(tiny)
    data = rl.report_data(prob, rl.frontier(prob, n_jobs=1, cloud=0), details=1)
    p, text = data["points"][0], data["details"]["0"]["explain"]
    assert p["layers"] == 4 and "layers = 4 is the space's minimum" in text
    assert p["d_model"] == 512 and "d = 512 lies outside the law's fitted domain 768–3072" in text
    assert list(data["details"]) == ["0"] and data["details_shown"] == 1


def test_cli_page_holds_what_json_prints_and_the_frontier_csv(tmp_path, capsys, tiny):
    out = tmp_path / "r.html"
    common = ["--device", DEVICE, "--space", tiny, "--allow-extrapolation", "--n-jobs", "1"]
    code, text, err = run_cli(capsys, "report", *common, "--out", out, "--json")
    assert code == 0, err
    printed = json.loads(text)
    html = out.read_text(encoding="utf-8")
    assert page_data(html) == printed
    # offline: no script, style or image is fetched from anywhere
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=[\"']?(https?:)?//", html, re.I)
    assert "Plotly.newPlot" in html and len(html) > 1_000_000  # Plotly's bundle is inlined
    csv_path = tmp_path / "f.csv"
    code, _, err = run_cli(capsys, "frontier", *common, "--out", csv_path)
    assert code == 0, err
    rows = list(csv.DictReader(csv_path.open()))
    assert len(rows) == len(printed["points"])
    for r, p in zip(rows, printed["points"], strict=True):
        assert [int(r[k]) for k in ("layers", "d_model", "kv_heads", "ffn", "experts")] == [
            p[k] for k in ("layers", "d_model", "kv_heads", "ffn", "experts")]  # fmt: skip
        assert math.isclose(float(r["loss"]), p["loss"], rel_tol=1e-12)


def test_joint_and_layout_details_use_each_points_choice(tiny):
    prob = _problem(tiny, precision="bf16")
    joint = rl.JointSpace(precisions=("bf16", "int8"), batches=(1, 4))
    res = rl.joint_frontier(prob, joint, n_jobs=1)
    data = rl.report_data(prob, res, joint)
    assert data["kind"] == "joint" and {p["precision"] for p in data["points"]} <= {"bf16", "int8"}
    for i, p in enumerate(data["points"]):
        ev = data["details"][str(i)]["evaluate"]
        assert ev["precision"]["name"] == p["precision"] and ev["workload"]["batch"] == p["batch"]
        want = rl.evaluate(p["spec"], DEVICE, {"batch": p["batch"]}, p["precision"], "full").to_dict()
        assert math.isclose(ev["decode_s"], want["decode_s"], rel_tol=1e-12)
        assert math.isclose(ev["decode_s"], p["decode_s"], rel_tol=1e-9)
    prob8 = rl.Problem(law=rl.get_law("paper-2602.10377"), device=rl.get_device("h100-sxm"),
                       space=rl.get_space(str(tiny)), allow_extrapolation=True, precision="bf16")  # fmt: skip
    lay = rl.JointSpace(batches=(8,), options=rl.layout_options("h100-sxm:8", ["tp=1", "tp=2"]))
    res = rl.joint_frontier(prob8, lay, n_jobs=1)
    data = rl.report_data(prob8, res, lay)
    assert data["kind"] == "layouts"
    for i, p in enumerate(data["points"]):
        d = data["details"][str(i)]
        assert d["evaluate"]["layout"] == p["option"]
        if p["option"] == "tp=1":  # one device: the single-chip model, so its roofline and operators are drawn
            decode = sum(r["seconds"] for r in d["evaluate"]["ops"] if r["phase"] == "decode")
            assert d["roofline"]["points"] and math.isclose(decode, p["decode_s"], rel_tol=1e-9)
        else:
            assert d["roofline"] is None and "ops" not in d["evaluate"]
        want = rl.evaluate_layout(rl.from_spec(p["spec"]), rl.get_system("h100-sxm:8"), p["option"],
                                  rl.Workload(8, 1024, 16), "bf16")  # fmt: skip
        assert math.isclose(d["evaluate"]["tpot_s"], want["tpot_s"], rel_tol=1e-12)
        assert math.isclose(d["evaluate"]["tpot_s"], p["tpot_s"], rel_tol=1e-9)


def test_missing_plotly_names_the_extra(tmp_path, capsys, monkeypatch, tiny):
    monkeypatch.setitem(sys.modules, "plotly.offline", None)  # import fails as if plotly were absent
    out = tmp_path / "r.html"
    code, _, err = run_cli(capsys, "report", "--device", DEVICE, "--space", tiny, "--out", out)
    assert code == 2 and "rooflaw[report]" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.parametrize(("args", "needle"), [
    (["--out", "r.png"], "unknown format"),
    (["--out", "nodir/r.html"], "does not exist"),
    (["--out", "r.html", "--details", "-1"], "details"),
])  # fmt: skip
def test_bad_input_is_one_line(tmp_path, capsys, monkeypatch, tiny, args, needle):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, "report", "--device", DEVICE, "--space", tiny, "--allow-extrapolation", *args)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1


def test_cli_report_of_a_search_is_the_trials_pareto_set(tmp_path, capsys, tiny):
    """--method optuna: the page's points are the non-dominated feasible trials of the same search (brute force over
    the trials `rooflaw search --out` writes for the same seed)."""
    common = ["--device", DEVICE, "--space", tiny, "--allow-extrapolation", "--n-trials", "30", "--seed", "3",
              "--latency-budget", "40ms"]  # fmt: skip
    code, text, err = run_cli(capsys, "report", *common, "--method", "optuna", "--out", tmp_path / "r.html", "--json")
    assert code == 0, err
    data = json.loads(text)
    code, _, err = run_cli(capsys, "search", *common, "--out", tmp_path / "t.csv")
    assert code == 0, err
    rows = [r for r in csv.DictReader((tmp_path / "t.csv").open()) if r["feasible"] == "True"]
    first = {}
    for r in rows:  # the first trial of each distinct point, as the search's frontier keeps
        first.setdefault(r["index"], r)
    pts = [(float(r["loss"]), float(r["latency_s"]), int(r["trial"])) for r in first.values()]
    front = {t for a, b, t in pts if not any(c <= a and d <= b and (c, d) != (a, b) for c, d, _ in pts)}
    assert {p["trial"] for p in data["points"]} == front and data["summary"]["trials"] == 30
    assert all(p["latency_s"] <= 0.040 for p in data["points"])


def test_bands_are_taken_from_the_evaluation_when_present():
    from rooflaw.report.data import _bands

    assert _bands({"decode_s": 1.0}) == {}
    assert _bands({"bands": {"decode_s": [0.9, 1.2]}, "prefill_s_band": [1, 2]}) == {
        "decode_s": [0.9, 1.2], "prefill_s": [1, 2]}  # fmt: skip


def test_a_budget_nothing_meets_exits_3_and_writes_nothing(tmp_path, capsys, tiny):
    out = tmp_path / "r.html"
    for method in ("exhaustive", "optuna"):
        args = ["--latency-budget", "1us", "--method", method, "--n-trials", "5", "--out", out]
        code, _, err = run_cli(capsys, "report", "--device", DEVICE, "--space", tiny, "--allow-extrapolation", *args)
        assert code == 3 and err.startswith("rooflaw: infeasible:") and len(err.strip().splitlines()) == 1
        assert not out.exists()
