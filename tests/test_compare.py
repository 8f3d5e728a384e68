"""`rooflaw compare`: equal-latency and equal-loss answers checked by brute force over the whole space."""

import json

import numpy as np
import pytest

from rooflaw import Problem, compare, from_hf_config, get_device
from rooflaw.cli import main


@pytest.fixture(scope="module")
def setup():
    prob = Problem(law="paper-2602.10377", device=get_device("jetson-agx-orin-64gb"), space="paper")
    arch = from_hf_config("qwen2.5-0.5b")
    space = prob.space
    df = prob.evaluate(space.columns_at(np.arange(space.size, dtype=np.int64), np.float64))
    return prob, arch, compare(arch, prob, n_jobs=1), df[df["feasible"]]


def test_equal_latency_is_the_lowest_loss_at_the_models_latency(setup):
    prob, arch, res, df = setup
    m, e = res["model"], res["equal_latency"]
    assert e["latency_s"] <= m["latency_s"]
    brute = df[df["decode_s"] <= m["latency_s"]]["loss"].min()
    assert e["loss"] == pytest.approx(brute, rel=1e-12)
    assert e["loss"] <= m["loss"]  # the paper's finding for a dense model on the Orin
    assert e["loss_change"] == pytest.approx(e["loss"] - m["loss"])


def test_equal_loss_is_the_fastest_reaching_the_models_loss(setup):
    prob, arch, res, df = setup
    m, e = res["model"], res["equal_loss"]
    assert e["loss"] <= m["loss"]
    brute = df[df["loss"] <= m["loss"]]["decode_s"].min()
    assert e["latency_s"] == pytest.approx(brute, rel=1e-12)
    assert e["speedup"] == pytest.approx(m["latency_s"] / e["latency_s"])


def test_model_numbers_match_evaluate(setup):
    from rooflaw import evaluate

    prob, arch, res, _ = setup
    rep = evaluate(arch, prob.device, prob.workload, prob.precision, prob.preset)
    assert res["model"]["latency_s"] == pytest.approx(rep.decode_s)
    assert res["model"]["loss"] == pytest.approx(prob.law.loss(arch))


def test_no_architecture_as_fast_reports_none(setup):
    # a tiny model whose latency no architecture of the paper space reaches
    prob, _, _, df = setup
    from rooflaw import from_spec

    tiny = from_spec("layers=1,d_model=256,heads=2,kv_heads=1,head_dim=128,ffn=256,vocab=32000")
    res = compare(tiny, prob, n_jobs=1)
    assert res["equal_latency"] is None
    assert res["fastest_latency_s"] == pytest.approx(df["decode_s"].min())


def test_cli_compare_json_and_table(capsys):
    args = ["compare", "--hf-config", "qwen2.5-0.5b", "--device", "jetson-agx-orin-64gb", "--n-jobs", "1"]
    assert main([*args, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert set(d) >= {"model", "equal_latency", "equal_loss", "space", "law", "device"}
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "equal latency" in out and "equal loss" in out and "faster" in out
    assert max(len(line) for line in out.splitlines()) <= 80
