"""GP solver fallback: when Clarabel fails the other installed conic solvers are tried; when all fail the error
(exit 4) names each one. Checked on a small geometric program with a known optimum."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

from rooflaw.errors import ExternalError
from rooflaw.solver.relaxation.gp_fallback import solve_with_fallback


def _gp():
    # min x + y  s.t.  x·y ≥ 4  ->  x = y = 2, optimum 4
    x, y = cp.Variable(pos=True), cp.Variable(pos=True)
    return cp.Problem(cp.Minimize(x + y), [4 / (x * y) <= 1]), x, y


def _failing(names):
    real = cp.Problem.solve

    def solve(self, *a, **kw):
        if kw.get("solver") in names:
            raise cp.error.SolverError(f"{kw.get('solver')} failed on purpose")
        return real(self, *a, **kw)

    return solve


def test_clarabel_failure_falls_back_to_another_solver(monkeypatch):
    if "SCS" not in cp.installed_solvers():
        pytest.skip("SCS is not installed")
    monkeypatch.setattr(cp.Problem, "solve", _failing({"CLARABEL"}))
    prob, x, y = _gp()
    assert solve_with_fallback(prob, "CLARABEL", ({}, {"max_step_fraction": 0.9})) in ("optimal", "optimal_inaccurate")
    assert prob.solver_stats.solver_name != "CLARABEL"
    assert float(prob.value) == pytest.approx(4.0, rel=1e-4)
    assert float(x.value) == pytest.approx(2.0, rel=1e-3) and float(y.value) == pytest.approx(2.0, rel=1e-3)


def test_every_solver_failing_names_them_all(monkeypatch):
    monkeypatch.setattr(cp.Problem, "solve", _failing({"CLARABEL", "SCS", "ECOS", None}))
    prob, _, _ = _gp()
    with pytest.raises(ExternalError) as e:
        solve_with_fallback(prob, None)
    msg = str(e.value)
    assert "\n" not in msg and "CLARABEL" in msg and "failed on purpose" in msg
    if "SCS" in cp.installed_solvers():
        assert "SCS" in msg


def test_unfailing_clarabel_is_used_first():
    prob, _, _ = _gp()
    assert solve_with_fallback(prob, None, ({},)) == "optimal"
    assert prob.solver_stats.solver_name == "CLARABEL"
    assert float(prob.value) == pytest.approx(4.0, rel=1e-6)


# ---- the decode-step node bound and a CI subset of the 72-problem sweep (benchmarks/bench_gp_sweep.py) ----------
def test_step_nodes_bound_every_convex_two_piece_cost_and_are_exact_on_affine_ones():
    import numpy as np

    from rooflaw.solver.relaxation.gp_full import STEP_NODES, step_nodes

    rng = np.random.default_rng(0)
    for S in (1, 2, STEP_NODES + 1, STEP_NODES + 2, 256, 1000, 4097):
        tau, w = step_nodes(S)
        t = np.arange(1, S + 1, dtype=float)
        assert tau[0] == 1 and tau[-1] == S and np.all(w > 0) and w.sum() == pytest.approx(S, rel=1e-12)
        if S <= STEP_NODES + 1:
            assert len(tau) == S and np.all(w == 1)  # every step is a node: exact
        for _ in range(50):
            a0, b0 = rng.uniform(0, 10, 2)
            a1, b1 = rng.uniform(0, 1, 2)
            aff = a0 + a1 * t
            assert (w * (a0 + a1 * tau)).sum() == pytest.approx(aff.sum(), rel=1e-12)
            f = np.maximum(a0 + a1 * t, b0 + b1 * t)  # one kink: the shape of every decode cost
            bound = (w * np.maximum(a0 + a1 * tau, b0 + b1 * tau)).sum()
            assert bound >= f.sum() * (1 - 1e-12)
            assert bound <= f.sum() * (1 + 4.0 / max(len(tau) - 1, 1))  # only the kink's segment over-states


SWEEP = [  # (device, batch, input, output, attention, total-latency budget as a multiple of the fastest point)
    ("jetson-agx-orin-64gb", 8, 4096, 256, "fused", 1.5),  # the failing example (500 ms then)
    ("l4", 1, 4096, 256, "unfused", 3.0),
    ("h100-sxm", 8, 1024, 16, "unfused", 10.0),
]


def _fastest_total(problem) -> float:
    """Smallest exact total latency over the problem's discrete space (enumerated), so the budgets follow the
    fitted efficiencies instead of going stale when they are refitted."""
    from rooflaw import evaluate_columns

    best = np.inf
    for cols in problem.space.iter_chunks(1 << 16):
        r = evaluate_columns(cols, problem.device, problem.workload, problem.precision, engine=problem.engine)
        ok = r["fits_in_memory"]
        if ok.any():
            best = min(best, float(r["total_s"][ok].min()))
    return best


@pytest.mark.parametrize("dev,B,s_in,s_out,att,factor", SWEEP, ids=[f"{c[0]}-b{c[1]}-{c[3]}-{c[4]}" for c in SWEEP])
def test_gp_sweep_subset_solves_with_clarabel_and_meets_the_budget(dev, B, s_in, s_out, att, factor):
    from rooflaw import Problem, Workload, solve

    wl = Workload(B, s_in, s_out, att)
    budget = factor * _fastest_total(Problem(device=dev, workload=wl, latency_budget=1.0, phase="total"))
    p = Problem(device=dev, workload=wl, latency_budget=budget, phase="total")
    r = solve(p, "gp")
    gp = r.extra["gp"]
    assert gp["status"] == "optimal" and gp["solver"] == "CLARABEL"  # no fallback to SCS needed
    assert r.latency_s["total"] <= budget * (1 + 1e-9)  # the rounded answer, exact cost model
    # the relaxed optimum's exact latency (every decode step summed) meets the budget: the node bound is conservative
    assert gp["values"]["latency"] <= budget * (1 + 1e-6)
    assert r.continuous_loss is not None and r.continuous_loss <= r.loss + 0.05


def test_full_gp_checks_the_solvers_point_against_the_budget(monkeypatch):
    """A fallback solver can call a program that cannot be met "optimal" (measured: every variable fixed, a total
    latency budget 1e-4 below that point's latency; Clarabel fails on every rung, SCS answered "optimal" with the
    budget exceeded). The solver's point is now checked against the branch's exact costs. Here the solver is a
    stand-in that answers the fixed point itself, under a budget just below and just above its latency."""
    import rooflaw.solver.relaxation.gp_full as G
    from rooflaw import Infeasible, Space, get_device
    from rooflaw.constraints import Workload
    from rooflaw.solver import Problem

    space = Space(name="s", layers=[2, 4, 8], d_model=[512, 1024], head_dim=[128], kv_heads=[1, "heads"],
                  moe=[(1, 1)], r_single=[2.0, 4.0])  # fmt: skip
    fix = {"l": 4.0, "d": 1024.0, "r": 4.0, "rho": 1.0, "gqa": 1.0}

    def problem(budget):
        return Problem("paper-2602.10377", get_device("rtx-4090"), space=space, workload=Workload(1, 128, 16),
                       precision="fp16", engine="tensorrt-llm", phase="total", latency_budget=budget)  # fmt: skip

    true = float(G.branches(problem(1.0))[0].values(fix)[G.PHASE_COLUMN["total"]])
    answer = {"status": "optimal", "solver": "SCS", "x": dict(fix), "duals": {}, "bounds": {}}
    monkeypatch.setattr(G, "_solve_branch", lambda *a: dict(answer))
    with pytest.raises(Infeasible):
        G.solve_gp_full(problem(true * (1 - 1e-4)), fix=fix)
    ok = G.solve_gp_full(problem(true * (1 + 1e-4)), fix=fix)
    assert ok.values["latency"] == pytest.approx(true, rel=1e-12)
    assert G._over_budget(G.branches(problem(1.0))[0], fix, {"latency": true * (1 - 1e-4)}, "total")
