"""Constraints end to end: each budget object's column, bound, sense and violation against hand values; the
per-token budgets (TPOT, TTFT) solved by every method and checked against a brute-force enumeration of the space
that recomputes TPOT from the decode time itself; the one Scenario the evaluation takes."""

from __future__ import annotations

import json

import numpy as np
import pytest
from cli_helpers import run_cli

import rooflaw as rl
from rooflaw.constraints import assembly as A
from rooflaw.constraints.scenario import Scenario
from rooflaw.solver.budgets import Capacity, relaxation

DEV = "jetson-orin-nano-8gb"
WL = {"batch": 1, "input_tokens": 2048, "output_tokens": 16}


# ---- the objects -------------------------------------------------------------------------------------------------
def test_each_constraint_knows_its_column_bound_sense_and_violation():
    vals = {"tpot_s": np.array([0.010, 0.025]), "prefill_s": np.array([0.3, 0.1]), "memory_bytes": np.array([5e9])}
    tpot, ttft, mem = rl.TPOTBudget("20ms"), rl.TTFTBudget(0.2), rl.MemoryBudget("4GB")
    assert (tpot.column, tpot.bound, tpot.upper, tpot.kind) == ("tpot_s", 0.02, True, "tpot")
    assert (ttft.column, ttft.bound) == ("prefill_s", 0.2)
    assert tpot.satisfied(vals).tolist() == [True, False]
    assert tpot.violation(vals) == pytest.approx([0.0, 0.005])  # seconds past the bound
    assert tpot.ratio(vals) == pytest.approx([0.5, 1.25]) and tpot.slack(vals) == pytest.approx([0.5, -0.25])
    assert ttft.satisfied(vals).tolist() == [False, True] and ttft.violation(vals) == pytest.approx([0.1, 0.0])
    assert mem.violation(vals) == pytest.approx([1e9])
    assert tpot.describe() == "TPOT ≤ 20 ms" and ttft.describe() == "TTFT ≤ 200 ms"
    with pytest.raises(rl.RooflawError, match="^tpot_budget="):
        rl.TPOTBudget(-1)
    with pytest.raises(rl.RooflawError, match="^ttft_budget="):
        rl.TTFTBudget("20 parsecs")


def test_the_relaxation_takes_tpot_as_a_decode_budget_times_the_output_tokens():
    wl = rl.Workload(**WL)
    rel = relaxation([rl.TPOTBudget(0.02), rl.MemoryBudget(4e9)], wl)
    r, c = rel["latency"]
    assert (r.phase, r.bound, r.scale, c.kind) == ("decode", 0.02 * 16, 16.0, "tpot")
    # a decode latency budget and a TPOT budget bound one phase: the tighter one is kept
    r2, c2 = relaxation([rl.LatencyBudget("decode", 0.5), rl.TPOTBudget(0.02)], wl)["latency"]
    assert (r2.bound, c2.kind) == (0.32, "tpot")
    with pytest.raises(rl.RooflawError, match="one latency phase"):
        relaxation([rl.TPOTBudget(0.02), rl.TTFTBudget(0.3)], wl)


def test_problem_holds_final_types_and_the_capacity_among_its_constraints():
    p = rl.Problem(device=DEV, tpot_budget="20ms", ttft_budget="300ms", memory_budget="64GB", workload=WL)
    assert isinstance(p.scenario, Scenario) and p.scenario.device is p.device and p.engine == p.scenario.engine
    kinds = [c.kind for c in p.constraints]
    assert kinds == ["tpot", "ttft", "memory"]
    cap = p.constraint("memory")  # a budget looser than the 8 GB device: the capacity binds, the budget is kept
    assert isinstance(cap, Capacity) and cap.bound == p.device.memory_capacity and p.memory_budget == 64e9
    assert (p.tpot_budget, p.ttft_budget, p.latency_budget) == (0.02, 0.3, None)
    q = p.replace(tpot_budget=None, latency_budget="1s")
    assert [c.kind for c in q.constraints] == ["latency", "ttft", "memory"] and q.memory_budget == 64e9
    assert rl.Problem(device=DEV, constraints=p.constraints, workload=WL).constraints == p.constraints
    with pytest.raises(rl.RooflawError, match="^tpot_budget="):
        rl.Problem(device=DEV, tpot_budget=0.02, constraints=[rl.TPOTBudget(0.03)])


# ---- TPOT / TTFT on every method ------------------------------------------------------------------------------------
def _brute(p: rl.Problem) -> tuple[float, dict[str, float]]:
    """The lowest loss of the space meeting TPOT, TTFT and the capacity, with TPOT recomputed from decode_s."""
    space = p.space
    cols = space.columns_at(np.arange(space.size), np.float64)
    r = rl.evaluate_columns(cols, p.device, p.workload, p.precision, p.preset, engine=p.engine, backend="numpy")
    loss = p.law.evaluate(rl.law_inputs(rl.complete_columns(cols)))
    inside = np.broadcast_to(p.law.in_domain(rl.law_inputs(rl.complete_columns(cols))), loss.shape)
    tpot = r["decode_s"] / p.workload.output_tokens
    ok = np.isfinite(loss) & inside & (r["memory_bytes"] <= p.device.memory_capacity)
    if p.tpot_budget is not None:
        ok &= tpot <= p.tpot_budget
    if p.ttft_budget is not None:
        ok &= r["prefill_s"] <= p.ttft_budget
    lo = {"tpot": float(tpot[np.isfinite(loss) & inside].min()), "ttft": float(r["prefill_s"].min())}
    return (float(loss[ok].min()) if ok.any() else np.inf), lo


@pytest.mark.parametrize("method", ["closed-form", "gp", "exhaustive"])
def test_a_tpot_budget_is_met_by_every_method_and_exhaustive_is_the_brute_force_optimum(method):
    p = rl.Problem(device=DEV, tpot_budget="20ms", workload=WL)
    best, _ = _brute(p)
    res = rl.solve(p, method)
    rep = rl.evaluate(res.architecture, p.device, p.workload, p.precision, engine=p.engine)
    assert rep.decode_s / 16 <= 0.02 and res.latency_s["tpot"] == pytest.approx(rep.decode_s / 16, rel=1e-12)
    assert res.loss >= best - 1e-12
    if method == "exhaustive":
        assert res.loss == pytest.approx(best, rel=1e-12)
    else:  # the relaxation took the budget as 20 ms x 16 tokens of decode, and says so
        assert any("320 ms = 20 ms × 16 output tokens" in n for n in res.notes)


def test_tpot_and_ttft_together_on_the_relaxations_and_the_enumeration():
    p = rl.Problem(device=DEV, tpot_budget="20ms", ttft_budget="300ms", workload=WL)
    best, _ = _brute(p)
    ex = rl.solve(p, "exhaustive")
    assert ex.loss == pytest.approx(best, rel=1e-12)
    for method in ("closed-form", "gp"):
        res = rl.solve(p, method)
        assert res.latency_s["tpot"] <= 0.02 and res.latency_s["ttft"] <= 0.3 and res.loss >= best - 1e-12
        assert any("one latency phase at a time" in n for n in res.notes)


def test_optuna_trials_carry_the_tpot_constraint():
    p = rl.Problem(device=DEV, tpot_budget="20ms", workload=WL)
    res = rl.solve(p, "optuna", n_trials=40, seed=0)
    assert res.latency_s["tpot"] <= 0.02


def test_an_unmeetable_tpot_budget_exits_3_naming_tpot_and_the_smallest_value(capsys):
    p = rl.Problem(device=DEV, tpot_budget="1ms", workload=WL)
    _, lo = _brute(p)
    for method in ("closed-form", "exhaustive"):
        with pytest.raises(rl.Infeasible) as e:
            rl.solve(p, method)
        assert e.value.binding == "tpot" and e.value.smallest == pytest.approx(lo["tpot"], rel=1e-9)
    code, _, err = run_cli(capsys, "solve", "--device", DEV, "--input-tokens", 2048, "--tpot-budget", "1ms")
    assert code == 3 and f"TPOT ≥ {lo['tpot'] * 1e3:.4g} ms" in err and "budget 1 ms" in err


def test_cli_tpot_and_ttft_budgets_without_layouts(capsys):
    code, out, _ = run_cli(capsys, "solve", "--device", DEV, "--input-tokens", 2048, "--method", "exhaustive",
                           "--tpot-budget", "20ms", "--ttft-budget", "300ms", "--json")  # fmt: skip
    assert code == 0
    d = json.loads(out)
    assert d["latency_s"]["tpot"] <= 0.02 and d["latency_s"]["ttft"] <= 0.3
    assert set(d["slack"]) == {"tpot", "ttft", "capacity"}


# ---- the Scenario ---------------------------------------------------------------------------------------------------
def test_a_scenario_derives_its_rates_once_and_evaluates_like_the_loose_arguments(monkeypatch):
    dev = rl.get_device(DEV)
    cols = rl.get_space("paper").columns_at(np.arange(64), np.float64)
    sc = Scenario.of(dev, rl.Workload(**WL), "int8", engine="vllm")
    calls = []
    real = A.rates
    monkeypatch.setattr(A, "rates", lambda *a, **k: calls.append(1) or real(*a, **k))
    got = [rl.evaluate_columns(cols, sc, backend="numpy")]
    first = len(calls)  # the roofs' rates, and the ones energy_coefficients derives its per-FLOP energies from
    got += [rl.evaluate_columns(cols, sc, backend="numpy") for _ in range(2)]
    assert first <= 2 and len(calls) == first  # two more evaluations derive nothing again
    ref = rl.evaluate_columns(cols, dev, rl.Workload(**WL), "int8", engine="vllm", backend="numpy")
    for k in ref:
        assert np.array_equal(got[2][k], ref[k]), k
    with pytest.raises(rl.RooflawError, match="^precision="):
        rl.evaluate_columns(cols, sc, precision="bf16")


def test_a_layout_is_a_field_of_the_scenario():
    system = rl.get_system("h100-sxm:8")
    cols = rl.get_space("paper").columns_at(np.arange(0, 6800, 97), np.float64)
    wl = rl.Workload(8, 1024, 16)
    sc = Scenario.of(system, wl, "bf16", layout="tp=4")
    got = rl.evaluate_columns(cols, sc)
    ref = rl.layout_columns(cols, system, "tp=4", wl, "bf16")
    assert set(got) == set(ref) and all(np.array_equal(got[k], ref[k]) for k in ref)


# ---- a floor (upper=False): one class, every solver ----------------------------------------------------------------
def test_a_throughput_floor_is_a_constraint_with_the_other_sense():
    f = rl.ThroughputFloor(50)
    vals = {"tpot_s": np.array([0.01, 0.04])}
    assert (f.upper, f.column, f.as_upper()) == (False, "tpot_s", ("tpot_s", 0.02))
    assert f.value(vals) == pytest.approx([100.0, 25.0]) and f.satisfied(vals).tolist() == [True, False]
    assert f.violation(vals) == pytest.approx([0.0, 25.0]) and f.ratio(vals) == pytest.approx([0.5, 2.0])
    assert f.slack(vals) == pytest.approx([1.0, -0.5]) and f.from_ceiling(0.04) == pytest.approx(25.0)
    assert f.describe() == "decode tokens/s per request ≥ 50 tokens/s"
    with pytest.raises(rl.RooflawError, match="^min_tokens_per_s="):
        rl.ThroughputFloor(0)


def test_a_throughput_floor_answers_as_the_tpot_budget_it_equals_on_every_method():
    floor = rl.Problem(device=DEV, constraints=[rl.ThroughputFloor(50)], workload=WL)
    tpot = rl.Problem(device=DEV, tpot_budget=0.02, workload=WL)
    best, _ = _brute(tpot)
    for method in ("exhaustive", "closed-form", "gp"):
        a, b = rl.solve(floor, method), rl.solve(tpot, method)
        assert a.architecture == b.architecture and a.loss == b.loss, method
        assert 16 / a.latency_s["decode"] >= 50 and a.slack["throughput"] >= 0
    assert rl.solve(floor, "exhaustive").loss == pytest.approx(best, rel=1e-12)


def test_an_unmeetable_floor_names_the_largest_throughput_reached():
    p = rl.Problem(device=DEV, constraints=[rl.ThroughputFloor(2000)], workload=WL)
    _, lo = _brute(p)
    for method in ("exhaustive", "closed-form"):
        with pytest.raises(rl.Infeasible, match="decode tokens/s per request ≤ .* tokens/s") as e:
            rl.solve(p, method)
        assert e.value.binding == "throughput" and e.value.smallest == pytest.approx(1 / lo["tpot"], rel=1e-9)
