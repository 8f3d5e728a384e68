"""The continuous relaxation as a geometric program (cvxpy DGP): a certified global optimum.

Two relaxations: ``preset="full"`` (the default for a problem judged by the full cost model) is built in
:mod:`rooflaw.solver.relaxation.gp_full`; ``preset="paper"`` is the theory-mode relaxation below
(:mod:`rooflaw.solver.relaxation.geometric` chooses).

Variables l, d, r, ρ, gqa (positive, boxed by the space's bounds). The objective is the law in those variables
minus its constant terms (a posynomial for the paper's law and any sum of power laws with positive
coefficients); the constraints are the theory-mode latency of the problem's phase, the weight memory and the
energy -- all posynomials, derived from the same operator list as the numerical evaluator. Anything that is
not a posynomial is refused with the term that breaks it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import sympy as sp

from ...errors import RooflawError
from . import kkt as K
from .kkt import VARS, X
from .result import RelaxationResult


def posynomial_terms(expr: sp.Expr, what: str) -> tuple[float, list[tuple[float, dict[str, float]]]]:
    """Split ``expr`` (numbers substituted) into a constant and monomials c·Π x^a over :data:`VARS` (c > 0).

    Raises :class:`RooflawError` naming the first term that is not a positive monomial.
    """
    e = sp.expand(expr)
    terms = e.args if isinstance(e, sp.Add) else (e,)
    const = 0.0
    mons: list[tuple[float, dict[str, float]]] = []
    names = {X[v]: v for v in VARS}
    for t in terms:
        if not t.free_symbols:
            const += float(t)
            continue
        extra = t.free_symbols - set(names)
        if extra:
            raise RooflawError(
                f"{what} is not a posynomial in l, d, r, rho, gqa: term {t} uses {sorted(map(str, extra))}"
            )
        coeff, rest = t.as_coeff_Mul()
        powers: dict[str, float] = {}
        for base, ex in rest.as_powers_dict().items():
            if base not in names or not ex.is_number or not ex.is_real:
                raise RooflawError(f"{what} is not a posynomial in l, d, r, rho, gqa: term {t} has factor {base}**{ex}")
            powers[names[base]] = powers.get(names[base], 0.0) + float(ex)
        if not (coeff.is_number and float(coeff) > 0):
            raise RooflawError(f"{what} is not a posynomial: term {t} has a non-positive coefficient {coeff}")
        mons.append((float(coeff), powers))
    if not mons:
        raise RooflawError(f"{what} does not depend on l, d, r, rho, gqa")
    return const, mons


def _cvx(mons, xs, scale: float = 1.0):
    import cvxpy as cp

    out = []
    for c, p in mons:
        m = c / scale
        for v, a in p.items():
            m = m * cp.power(xs[v], a) if a != 1 else m * xs[v]
        out.append(m)
    return cp.sum(cp.hstack(out)) if len(out) > 1 else out[0]


def law_posynomial(problem: Any) -> tuple[sp.Expr, float, list]:
    """The problem's law in (l, d, r, ρ, gqa), its constant and its posynomial monomials (raises if not one)."""
    L = K.law_in_paper_variables(problem.law, **K.law_kwargs(problem))
    const, lmons = posynomial_terms(L, f"law {problem.law.name}")
    return L, const, lmons


def solve_gp_theory(
    problem: Any, fix: Mapping[str, float] | None = None, solver: str | None = None
) -> RelaxationResult:
    """Solve ``problem``'s theory-mode relaxation (compute-bound prefill, memory-bound decode, weight memory -- the
    relaxation the closed form solves) as a GP. Returns the keys documented in
    :func:`rooflaw.solver.relaxation.geometric.solve_gp`; raises :class:`Infeasible` when the GP is."""
    import cvxpy as cp

    from .closed_form import bounds_of, problem_budgets, relaxed_phase

    t0 = time.perf_counter()
    L, const, lmons = law_posynomial(problem)
    c = K.constants(problem)
    budgets = problem_budgets(problem)
    phase = relaxed_phase(problem)
    if "energy" in budgets and not math.isfinite(c[K.P_idle]):
        raise RooflawError(f"energy budget: device {problem.device.id} has no power or energy figures")
    xs = {v: cp.Variable(pos=True, name=v) for v in VARS}
    cons = []
    cmons = {}
    for k, bud in budgets.items():
        g = K.constraint_expr(k, phase).xreplace({s: sp.Float(v) for s, v in c.items()})
        k0, m = posynomial_terms(g, f"{k} constraint")
        if k0:
            m = m + [(k0, {})]
        cmons[k] = m
        cons.append(_cvx(m, xs, bud) <= 1)
    bounds = bounds_of(problem)
    for k, fixed in (fix or {}).items():
        bounds[k] = (float(fixed), float(fixed))
    for v in VARS:
        lo, hi = bounds[v]
        if lo == hi:
            cons.append(xs[v] == lo)
        else:
            cons += [xs[v] >= lo, xs[v] <= hi]
    # Scale the objective to O(1) for the conic solver.
    x0 = {v: math.sqrt(bounds[v][0] * bounds[v][1]) for v in VARS}
    f0 = sum(cc * np.prod([x0[v] ** a for v, a in p.items()]) for cc, p in lmons)
    obj = _cvx(lmons, xs, f0)
    prob = cp.Problem(cp.Minimize(obj), cons)
    t1 = time.perf_counter()
    solver = solver or ("CLARABEL" if "CLARABEL" in cp.installed_solvers() else None)
    kw: dict[str, Any] = {"solver": solver} if solver else {}
    import warnings

    for tol in (1e-10, 1e-9, 1e-8, None):
        if solver == "CLARABEL" and tol is not None:
            kw.update(tol_gap_abs=tol, tol_gap_rel=tol, tol_feas=tol, tol_ktratio=max(tol, 1e-8))
        elif solver == "CLARABEL":
            for k in ("tol_gap_abs", "tol_gap_rel", "tol_feas", "tol_ktratio"):
                kw.pop(k, None)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                prob.solve(gp=True, **kw)
        except cp.error.SolverError:  # Clarabel gave up: the other conic solvers, or exit 4 naming them
            from .gp_fallback import solve_with_fallback

            solve_with_fallback(prob, solver)
            break
        if prob.status != "optimal_inaccurate" or solver != "CLARABEL":
            break
    t2 = time.perf_counter()
    if prob.status in ("infeasible", "infeasible_inaccurate"):
        from .closed_form import derive, explain_infeasible

        kinds = tuple(k for k in ("latency", "memory", "energy") if k in budgets)
        der = derive(problem.law, phase, kinds, **K.law_kwargs(problem))
        raise explain_infeasible(problem, der, [c[s] for s in K.CONSTS], bounds, budgets) from None
    if prob.status not in ("optimal", "optimal_inaccurate"):
        raise RooflawError(f"GP solver returned status {prob.status}")
    x: dict[str, float] = {}
    for v in VARS:
        val = xs[v].value
        assert val is not None  # status optimal: cvxpy has set every variable
        x[v] = min(max(float(val), bounds[v][0]), bounds[v][1])
    subs = {X[v]: x[v] for v in VARS}
    loss = float(L.xreplace(subs))
    values = {}
    for k in budgets:
        values[k] = float(sum(cc * np.prod([x[v] ** a for v, a in p.items()]) for cc, p in cmons[k]))
    active = tuple(k for k in budgets if values[k] >= budgets[k] * (1 - 1e-5))
    duals = {k: float(np.atleast_1d(con.dual_value)[0]) if con.dual_value is not None else float("nan")
             for k, con in zip(budgets, cons, strict=False)}  # fmt: skip
    return RelaxationResult(
        x=x, loss=loss, constant=const, active=active, values=values, budgets=budgets, status=prob.status,
        solver=prob.solver_stats.solver_name if prob.solver_stats else "", duals=duals,
        seconds=time.perf_counter() - t0, build_seconds=t1 - t0, solve_seconds=t2 - t1, preset="paper",
        notes=["continuous optimum from the theory-mode model (compute-bound prefill, memory-bound decode, weight "
               "memory)"],
    )  # fmt: skip


__all__ = ["law_posynomial", "posynomial_terms", "solve_gp_theory"]
