"""The continuous relaxation over the **full** cost preset as a geometric program (cvxpy DGP).

The posynomials (one per operator and phase, memory, energy; dense and MoE branches) come from the posynomial
backend of the cost model, :mod:`rooflaw.constraints.posynomial` (its docstring states the substitutions and the
expert-coverage stand-in). This module splits the space into branches, builds the cvxpy problem of each, solves it
and reports the best branch.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import numpy as np

from ...constraints.posynomial import Branch, Posy, k_dependent_ops, space_fixed
from ...constraints.posynomial import build_branch as _build_branch
from ...errors import Infeasible, RooflawError
from ..infeasible import report, space_name
from .gp_fallback import solve_with_fallback
from .kkt import VARS, X

PHASE_COLUMN = {"prefill": "prefill_s", "decode": "decode_s", "total": "total_s"}


def build_branch(
    problem: Any, name: str, K: float, moe: int, bounds: dict[str, tuple[float, float]], decode_cover: str = "auto"
) -> Branch:
    """The branch's posynomials (:func:`rooflaw.constraints.posynomial.build_branch`) for ``problem``."""
    return _build_branch(problem.device, problem.workload, problem.precision, space_fixed(problem.space), name, K,
                         moe, bounds, decode_cover, engine=problem.engine)  # fmt: skip


def branches(problem: Any) -> list[Branch]:
    """The dense and/or MoE branches of ``problem``'s space (see the module docstring)."""
    sp_ = problem.space
    pairs = [tuple(p) for p in sp_.choices()["moe"]]
    b = sp_.bounds()
    kk = [k for _, k in pairs]
    ratio_lo, ratio_hi = b["r"][0] / min(kk), b["r"][1] / max(kk)  # per-expert ffn/d range of the width table
    base = {v: (float(b[v][0]), float(b[v][1])) for v in ("l", "d", "gqa")}
    out = []
    dense = [p for p in pairs if p[0] == 1]
    moe = [p for p in pairs if p[0] > 1]
    if dense:
        bb = dict(base, r=(ratio_lo, ratio_hi), rho=(1.0, 1.0))
        out.append(build_branch(problem, "dense", 1.0, 0, bb))
    if moe:
        ks = [k for _, k in moe]
        rhos = [k / e for e, k in moe]
        bb = dict(base, r=(ratio_lo * min(ks), ratio_hi * max(ks)), rho=(min(rhos), max(rhos)))
        knee = 1.0 / problem.workload.batch  # B·K ≤ E ⟺ ρ ≤ 1/B
        if knee >= bb["rho"][1]:
            out.append(build_branch(problem, "moe", float(min(ks)), 1, bb, "BK"))
        elif knee <= bb["rho"][0]:
            out.append(build_branch(problem, "moe", float(min(ks)), 1, bb, "E"))
        else:  # min(E, B·K) exactly: one GP on each side of the knee
            out.append(build_branch(problem, "moe", float(min(ks)), 1, dict(bb, rho=(bb["rho"][0], knee)), "BK"))
            out.append(build_branch(problem, "moe-wide", float(min(ks)), 1, dict(bb, rho=(knee, bb["rho"][1])), "E"))
    return out


# ---- the GP --------------------------------------------------------------------------------------
class _Basis:
    """All monomials of one cvxpy problem, computed once with ``gmatmul``; posynomials index into it."""

    def __init__(self) -> None:
        self.keys: dict[tuple[float, ...], int] = {}

    def idx(self, p: Posy) -> list[int]:
        out = []
        for row in p.A:
            k = tuple(np.round(row, 12))
            out.append(self.keys.setdefault(k, len(self.keys)))
        return out

    def expr(self, u: Any, log_ref: np.ndarray):
        """Monomials of x = ref·u (u ~ 1 over the box: better conditioned exponential cones)."""
        import cvxpy as cp

        A = np.array(list(self.keys), dtype=float).reshape(-1, len(VARS))
        self.log_ref = log_ref
        self.M = cp.gmatmul(A, u)
        return self.M

    def factor(self, A: np.ndarray) -> np.ndarray:
        return np.exp(A @ self.log_ref)


def _cvx_posy(basis: _Basis, p: Posy, idx: list[int], s: float):
    import cvxpy as cp

    c = p.c * basis.factor(p.A) / s
    if len(c) == 1:
        return float(c[0]) * basis.M[idx[0]]
    return cp.sum(cp.multiply(c, basis.M[idx]))


def _latency_exprs(br: Branch, basis: _Basis, s: float) -> dict[str, Any]:
    """cvxpy expressions of prefill and decode latency / s, and the pending index lists (two passes)."""
    import cvxpy as cp

    def mx(f: Posy, b: Posy, mult: float = 1.0):
        if f and b:
            return cp.maximum(_cvx_posy(basis, f, basis.idx(f), s / mult), _cvx_posy(basis, b, basis.idx(b), s / mult))
        p = f or b
        return _cvx_posy(basis, p, basis.idx(p), s / mult) if p else None

    pre = [mx(f, b) for f, b in br.pre]
    if br.overhead_pre:
        pre.append(_cvx_posy(basis, br.overhead_pre, basis.idx(br.overhead_pre), s))
    dec = [mx(f, b, br.S_out) for f, b in br.dec_const]
    steps = np.arange(1, br.S_out + 1, dtype=float)
    for a0, a1, b0, b1 in br.dec_step:
        side = []
        for p0, p1 in ((a0, a1), (b0, b1)):
            p = p0 + p1  # union of monomials; per-step coefficient c0 + c1·t > 0
            if not p:
                side.append(None)
                continue
            idx = basis.idx(p)
            c0 = np.array([_coef_of(p0, row) for row in p.A])
            c1 = np.array([_coef_of(p1, row) for row in p.A])
            C = (c0[None, :] + c1[None, :] * steps[:, None]) * basis.factor(p.A)[None, :] / s
            side.append(C @ basis.M[idx] if len(idx) > 1 else C[:, 0] * basis.M[idx[0]])
        if side[0] is not None and side[1] is not None:
            dec.append(cp.sum(cp.maximum(side[0], side[1])))
        else:
            dec.append(cp.sum(side[0] if side[0] is not None else side[1]))
    if br.overhead_dec:
        dec.append(_cvx_posy(basis, br.overhead_dec, basis.idx(br.overhead_dec), s))
    f = lambda xs: cp.sum(cp.hstack([e for e in xs if e is not None]))  # noqa: E731
    return {"prefill": f(pre), "decode": f(dec)}


def _coef_of(p: Posy, row: np.ndarray) -> float:
    if not p:
        return 0.0
    hit = np.all(np.abs(p.A - row[None, :]) < 1e-12, axis=1)
    return float(p.c[hit].sum())


#: Compiled cvxpy problems, reused when only the budgets change (they are cvxpy Parameters): a budget
#: sweep on one device/workload/space pays cvxpy's DGP compilation once.
_COMPILED: OrderedDict[str, tuple] = OrderedDict()
_COMPILED_MAX = 32


def _compiled_key(problem: Any, br: Branch, lmons: Any, budgets: Mapping[str, float], solver: str | None) -> str:
    return repr((
        problem.law.name, sorted(problem.law.params.items()), lmons, problem.device.to_dict(),
        problem.workload.to_dict(), problem.precision.name, getattr(problem.space, "name", ""), problem.phase,
        problem.preset, sorted(budgets), br.name, br.K, sorted(br.bounds.items()), solver,
    ))  # fmt: skip


def _solve_branch(problem, br: Branch, lmons, budgets, fix, solver):

    bounds = dict(br.bounds)
    for k, v in (fix or {}).items():
        bounds[k] = (float(v), float(v))
    key = None if fix else _compiled_key(problem, br, lmons, budgets, solver)
    if key is not None and key in _COMPILED:
        _COMPILED.move_to_end(key)
        prob, x, named, ref, params = _COMPILED[key]
    else:
        prob, x, named, ref, params = _build_branch_problem(problem, br, lmons, budgets, bounds)
        if key is not None:
            _COMPILED[key] = (prob, x, named, ref, params)
            while len(_COMPILED) > _COMPILED_MAX:
                _COMPILED.popitem(last=False)
    for k, par in params.items():
        par.value = float(budgets[k])
    status = _run(prob, solver)
    name = prob.solver_stats.solver_name if prob.solver_stats else ""
    out: dict[str, Any] = {"status": status, "bounds": bounds, "solver": name}
    if status in ("optimal", "optimal_inaccurate"):
        xv = {v: min(max(float(x.value[i]) * ref[i], bounds[v][0]), bounds[v][1]) for i, v in enumerate(VARS)}
        out["x"] = xv
        out["duals"] = {
            k: float(np.atleast_1d(c.dual_value)[0]) if c.dual_value is not None else float("nan")
            for k, c in named.items()
        }
    return out


def _build_branch_problem(problem, br: Branch, lmons, budgets, bounds):
    """The cvxpy DGP of one branch, with the budgets as positive Parameters (set before each solve)."""
    import cvxpy as cp

    x = cp.Variable(len(VARS), pos=True, name="u")  # x / ref
    basis = _Basis()
    params = {k: cp.Parameter(pos=True, name=f"{k}_budget", value=float(budgets[k])) for k in budgets}

    def build():
        cons = []
        named = {}
        lat = None
        if "latency" in budgets or "energy" in budgets:
            lat = _latency_exprs(br, basis, 1.0)
        if "latency" in budgets:
            e = {"prefill": lat["prefill"], "decode": lat["decode"], "total": lat["prefill"] + lat["decode"]}
            named["latency"] = e[problem.phase] <= params["latency"]
        named["memory"] = _cvx_posy(basis, br.memory, basis.idx(br.memory), 1.0) <= params["memory"]
        if "energy" in budgets:
            en = _cvx_posy(basis, br.energy_dyn, basis.idx(br.energy_dyn), 1.0)
            if br.p_idle:
                en = en + br.p_idle * (lat["prefill"] + lat["decode"])
            named["energy"] = en <= params["energy"]
        cons += list(named.values())
        return named, cons

    _register(br, basis)  # every monomial first, then one gmatmul for all of them
    lo = np.array([bounds[v][0] for v in VARS])
    hi = np.array([bounds[v][1] for v in VARS])
    ref = np.sqrt(lo * hi)
    basis.expr(x, np.log(ref))
    named, cons = build()
    fixed_mask = lo == hi
    for i in range(len(VARS)):
        if fixed_mask[i]:
            cons.append(x[i] == 1.0)
        else:
            cons += [x[i] >= lo[i] / ref[i], x[i] <= hi[i] / ref[i]]
    x0 = {v: math.sqrt(bounds[v][0] * bounds[v][1]) for v in VARS}
    f0 = sum(cc * np.prod([x0[v] ** a for v, a in p.items()]) for cc, p in lmons)
    terms = []
    for cc, p in lmons:
        m = cc / f0
        for v, a in p.items():
            i = VARS.index(v)
            m = m * ref[i] ** a * (cp.power(x[i], a) if a != 1 else x[i])
        terms.append(m)
    obj = cp.sum(cp.hstack(terms)) if len(terms) > 1 else terms[0]
    return cp.Problem(cp.Minimize(obj), cons), x, named, ref, params


#: Clarabel settings tried in turn (tight tolerances first; a shorter step or no equilibration when Clarabel stalls
#: with "insufficient progress", which happens on some devices' exponential cones), then Clarabel's defaults.
_TIGHT = {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10, "tol_ktratio": 1e-8}
_LADDER = (_TIGHT, {**_TIGHT, "max_step_fraction": 0.9}, {**_TIGHT, "equilibrate_enable": False},
           {"tol_gap_abs": 1e-8, "tol_gap_rel": 1e-8, "tol_feas": 1e-8}, {"max_step_fraction": 0.9}, {})  # fmt: skip


def _run(prob: Any, solver: str | None) -> str:
    """Solve ``prob`` (DGP); the status of the first accurate solve, else the last one's. When Clarabel
    fails on every rung of its ladder, the other installed conic solvers (SCS, ECOS) are tried in turn."""
    return solve_with_fallback(prob, solver, _LADDER)


def _register(br: Branch, basis: _Basis) -> None:
    for f, b in br.pre + br.dec_const:
        basis.idx(f), basis.idx(b)
    for a0, a1, b0, b1 in br.dec_step:
        basis.idx(a0 + a1), basis.idx(b0 + b1)
    for p in (br.overhead_pre, br.overhead_dec, br.memory, br.energy_dyn):
        basis.idx(p)


def _corner(br: Branch) -> dict[str, float]:
    """The box corner where every full-preset cost is smallest (costs increase in l, d, r, decrease in ρ, gqa)."""
    b = br.bounds
    return {"l": b["l"][0], "d": b["d"][0], "r": b["r"][0], "rho": b["rho"][1], "gqa": b["gqa"][1]}


def solve_gp_full(problem: Any, fix: Mapping[str, float] | None = None, solver: str | None = None) -> dict[str, Any]:
    """The full-preset relaxation of ``problem`` as GPs (one per branch); the best branch's optimum.

    Returns the keys of :func:`.geometric.solve_gp` plus ``branch``, ``branches`` (loss or status per
    branch) and ``notes``. Raises :class:`Infeasible` when no branch is feasible.
    """
    import cvxpy as cp

    from .closed_form import problem_budgets
    from .gp import law_posynomial

    t0 = time.perf_counter()
    L, const, lmons = law_posynomial(problem)
    budgets = problem_budgets(problem)
    brs = branches(problem)
    if "energy" in budgets and not all(b.has_energy for b in brs):
        raise RooflawError(f"energy budget: device {problem.device.id} has no power or energy figures")
    t1 = time.perf_counter()
    solver = solver or ("CLARABEL" if "CLARABEL" in cp.installed_solvers() else None)
    best, summary = None, {}
    for br in brs:
        if fix and "rho" in fix and not (br.bounds["rho"][0] - 1e-12 <= fix["rho"] <= br.bounds["rho"][1] + 1e-12):
            summary[br.name] = "excluded by fix"
            continue
        o = _solve_branch(problem, br, lmons, budgets, fix, solver)
        if "x" not in o:
            summary[br.name] = o["status"]
            continue
        o["loss"] = float(L.xreplace({X[v]: o["x"][v] for v in VARS}))
        summary[br.name] = o["loss"]
        if best is None or o["loss"] < best[1]["loss"]:
            best = (br, o)
    t2 = time.perf_counter()
    if best is None:
        raise _infeasible_full(problem, brs, budgets)
    br, o = best
    vals = br.values(o["x"])
    col = {"latency": PHASE_COLUMN[problem.phase], "memory": "memory_bytes", "energy": "energy_j"}
    values = {k: float(vals[col[k]]) for k in budgets}
    active = tuple(k for k in budgets if values[k] >= budgets[k] * (1 - 1e-5))
    notes = [
        "continuous optimum from the full-preset relaxation (roofline max(compute, memory) per operator, attention "
        "S² terms, embeddings and LM head, KV cache and activations in memory; per-step decode context)",
        "expert coverage stand-in: all E experts in prefill (exact to (1-ρ)^T), min(E, B·K) in decode"
        + (
            " (an upper bound at batch > 1, ≤ 1/(1-(1-1/B)^B) × the expected coverage)"
            if problem.workload.batch > 1
            else " (exact at batch 1)"
        ),
        f"branches: {', '.join(f'{k} {v:.6g}' if isinstance(v, float) else f'{k} {v}' for k, v in summary.items())}"
        + (f"; MoE branch at K = {br.K:g} (top_k enters {', '.join(br.k_dependent)})" if br.moe else ""),
    ]
    return {
        "x": o["x"], "loss": o["loss"], "constant": const, "active": active, "values": values, "budgets": budgets,
        "status": o["status"], "solver": o["solver"], "duals": o["duals"], "seconds": time.perf_counter() - t0,
        "build_seconds": t1 - t0, "solve_seconds": t2 - t1, "preset": "full", "branch": br.name,
        "branches": summary, "notes": notes, "all_values": {k: float(v) for k, v in vals.items()},
    }  # fmt: skip


def _infeasible_full(problem: Any, brs: list[Branch], budgets: dict[str, float]) -> Infeasible:
    col = {"latency": PHASE_COLUMN[problem.phase], "memory": "memory_bytes", "energy": "energy_j"}
    smallest = {k: min(float(b.values(_corner(b))[col[k]]) for b in brs) for k in budgets}
    where = f"of the continuous relaxation of space {space_name(problem)!r} (full model)"
    return report(problem, smallest, budgets, where)


__all__ = ["Branch", "Posy", "branches", "build_branch", "k_dependent_ops", "solve_gp_full", "space_fixed"]
