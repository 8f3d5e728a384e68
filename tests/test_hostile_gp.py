"""GP solver fallback: when Clarabel fails the other installed conic solvers are tried; when all fail the error
(exit 4) names each one. Checked on a small geometric program with a known optimum."""

from __future__ import annotations

import cvxpy as cp
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
