"""`solve --explain` explains the discrete answer: slacks, runner-ups, what rounding changed."""

import dataclasses
import json

import pytest

from rooflaw import Problem, Workload, evaluate, explain_discrete, explain_text, get_device, get_law, solve
from rooflaw.cli import main

# these tests check explanations and the domain guard, not the physics: the pure roofline (no fitted
# achieved-performance figures), as in the other solver tests
ORIN = dataclasses.replace(get_device("jetson-agx-orin-64gb"), achieved={})


@pytest.fixture(scope="module")
def demo():
    prob = Problem(law=get_law("paper-2602.10377"), device=ORIN,
                   latency_budget=0.02, phase="decode")  # fmt: skip
    res = solve(prob, "closed-form")
    return prob, res, explain_discrete(prob, res)


def test_slacks_match_an_independent_evaluation(demo):
    prob, res, ex = demo
    rep = evaluate(res.architecture, prob.device, prob.workload, prob.precision, prob.preset)
    by = {c["name"]: c for c in ex["constraints"]}
    assert by["latency"]["value"] == pytest.approx(rep.decode_s, rel=1e-9)
    assert by["latency"]["slack"] == pytest.approx((0.02 - rep.decode_s) / 0.02, rel=1e-9)
    assert by["capacity"]["slack"] == pytest.approx(1 - rep.memory_bytes / prob.device.memory_capacity, rel=1e-9)
    assert ex["tightest"] == "latency" and by["latency"]["tightest"]
    assert 0 <= by["latency"]["slack"] < 0.1  # the latency binds (the demo: 18.4 ms of 20 ms on the kernel curves)


def test_rounding_accounts_for_the_loss_gap(demo):
    prob, res, ex = demo
    rnd = ex["rounding"]
    assert rnd["loss"]["continuous"] == pytest.approx(res.continuous_loss)
    assert rnd["loss"]["discrete"] == pytest.approx(res.loss)
    assert rnd["loss"]["discrete"] > rnd["loss"]["continuous"]
    const = prob.law.params["L_inf"]
    # the law's non-constant terms plus L_inf add up to the loss at both points
    for side in ("continuous", "discrete"):
        assert const + sum(t[side] for t in rnd["terms"]) == pytest.approx(rnd["loss"][side], rel=1e-9)
    a = res.architecture
    assert rnd["variables"]["l"]["discrete"] == a.layers and rnd["variables"]["d"]["discrete"] == a.d_model
    theory = evaluate(a, prob.device, prob.workload, prob.precision, "paper")
    assert rnd["latency_theory_s"] == pytest.approx(theory.decode_s)


def test_runner_ups_are_feasible_and_near(demo):
    prob, res, ex = demo
    ups = ex["runner_ups"]
    assert 1 <= len(ups) <= 5
    cols = {k: [u[k] for u in ups] for k in ("layers", "d_model", "heads", "kv_heads", "head_dim", "ffn",
                                               "experts", "top_k")}  # fmt: skip
    cols.update(vocab=[32000] * len(ups), tied=[0] * len(ups))
    df = prob.evaluate(cols)
    assert df["feasible"].all()
    assert (df["loss"] <= res.loss * 1.03 + 1e-12).all()
    assert [u["loss"] for u in ups] == pytest.approx(list(df["loss"]))
    assert [u["loss"] for u in ups] == sorted(u["loss"] for u in ups)
    a = res.architecture
    assert all((u["layers"], u["d_model"], u["kv_heads"], u["ffn"], u["experts"], u["top_k"])
               != (a.layers, a.d_model, a.kv_heads, a.ffn, a.experts, a.top_k) for u in ups)  # fmt: skip
    text = explain_text(ex)
    assert "what rounding changed" in text and "runner-ups within 3%" in text and "slack" in text


def test_exhaustive_answer_is_explained_too():
    prob = Problem(law="paper-2602.10377", device=ORIN, latency_budget=0.02,
                   workload=Workload(1, 1024, 16))  # fmt: skip
    res = solve(prob, "exhaustive")
    ex = explain_discrete(prob, res)
    assert "rounding" not in ex  # no continuous optimum to compare with
    assert all(u["loss"] >= res.loss for u in ex["runner_ups"])  # exhaustive is the optimum of the space


def test_cli_explain_json(capsys):
    code = main(["solve", "--device", "jetson-agx-orin-64gb", "--latency-budget", "20ms", "--explain", "--json"])
    assert code == 0
    d = json.loads(capsys.readouterr().out)
    ex = d["explain_discrete"]
    assert ex["loss"] == pytest.approx(d["loss"])
    assert ex["rounding"]["loss"]["continuous"] == pytest.approx(d["continuous_loss"])
    assert "KKT" in d["explain"]
