"""The continuous relaxation over the **full** cost preset as a geometric program (cvxpy DGP).

The posynomials (one per operator and phase, memory, energy; dense and MoE branches) come from the posynomial
backend of the cost model, :mod:`rooflaw.constraints.posynomial` (its docstring states the substitutions and the
expert-coverage stand-in). This module splits the space into branches, builds the convex program of each (the GP
written in log space, see below), solves it and reports the best branch. Decodes longer than ``STEP_NODES + 1``
steps are priced at ``STEP_NODES + 1`` nodes (:func:`step_nodes`: a conservative bound, exact away from the one
segment per operator where it switches bound) -- pricing all 256 steps of a 4096/256 decode made a problem of
7 000 cone rows on which Clarabel stalled and SCS needed ~100 s; 33 nodes make ~1 200 rows (docs/benchmarks.md).
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
from ..infeasible import relaxed_report, space_name
from .gp_fallback import solve_with_fallback
from .kkt import VARS, X
from .result import RelaxationResult

PHASE_COLUMN = {"prefill": "prefill_s", "decode": "decode_s", "total": "total_s"}


def _phase(problem: Any) -> str:
    """The latency phase the relaxation bounds (:func:`.closed_form.relaxed_phase`)."""
    from .closed_form import relaxed_phase

    return relaxed_phase(problem)


def build_branch(
    problem: Any, name: str, K: float, moe: int, bounds: dict[str, tuple[float, float]], decode_cover: str = "auto"
) -> Branch:
    """The branch's posynomials (:func:`rooflaw.constraints.posynomial.build_branch`) for ``problem``."""
    return _build_branch(problem.scenario, space_fixed(problem.space), name, K, moe, bounds, decode_cover)


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


# ---- the GP, written in log space -----------------------------------------------------------------
# A posynomial p(x) = Σ_j c_j Π_i x_i^A_ji at x = ref·e^y is log p = LSE_j(A_j·y + log(c_j Π ref^A_j)): the problem
# below is that convex (DCP) program in y, which is exactly the DGP cvxpy would build -- but written with a few
# vectorised atoms (one log-sum-exp over an S_out × k matrix per operator for the per-step decode terms) instead
# of one atom per step and monomial, so cvxpy compiles it in a fraction of the time (docs/benchmarks.md, GP sweep).
def _log_coef(p: Posy, log_ref: np.ndarray) -> np.ndarray:
    return np.log(p.c) + p.A @ log_ref


def _log_posy(y: Any, p: Posy, log_ref: np.ndarray, shift: float = 0.0):
    """log p(ref·e^y) + shift: affine for one monomial, else a log-sum-exp."""
    import cvxpy as cp

    e = p.A @ y + (_log_coef(p, log_ref) + shift)
    return e[0] if len(p.c) == 1 else cp.log_sum_exp(e)


#: Decode steps priced one by one in the relaxation; longer decodes are priced at this many + 1 nodes (below).
STEP_NODES = 32


def step_nodes(n_steps: int, nodes: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Nodes τ (1 = τ_0 < … < τ_G = n_steps) and weights w ≥ 0 with Σ_t f(t) ≤ Σ_k w_k f(τ_k) for every convex f on
    [1, n_steps] (each step's linear interpolation between its two nodes bounds f from above), with equality for f
    affine on every segment. A decode cost max(a + b·t, c + e·t) is convex in t and has at most one kink, so
    the bound is exact except on the one segment holding the kink, where it over-states that segment's
    sum by at most its length × the kink's gap. With n_steps ≤ ``nodes`` + 1 every step is a node (exact)."""
    nodes = STEP_NODES if nodes is None else nodes
    if n_steps <= nodes + 1:
        return np.arange(1, n_steps + 1, dtype=float), np.ones(n_steps)
    tau = np.unique(np.round(np.linspace(1, n_steps, nodes + 1)))
    w = np.zeros(len(tau))
    t = np.arange(1, n_steps + 1, dtype=float)
    k = np.clip(np.searchsorted(tau, t, side="right") - 1, 0, len(tau) - 2)
    frac = (t - tau[k]) / (tau[k + 1] - tau[k])
    np.add.at(w, k, 1 - frac)
    np.add.at(w, k + 1, frac)
    return tau, w


def _nodes_note(n_steps: int) -> str:
    return (f"decode steps priced at {len(step_nodes(n_steps)[0])} nodes of {n_steps} (an upper bound, exact except on "
            "the segment where an operator switches bound; the rounded answer is checked on every step)")  # fmt: skip


def _log_steps(y: Any, p0: Posy, p1: Posy, tau: np.ndarray, log_w: np.ndarray, log_ref: np.ndarray):
    """log of w_k·(p0 + τ_k·p1)(ref·e^y) for every node τ_k: a vector of convex expressions (one atom)."""
    import cvxpy as cp

    p = p0 + p1  # union of monomials; per-step coefficient c0 + c1·t > 0
    c0 = np.array([_coef_of(p0, row) for row in p.A])
    c1 = np.array([_coef_of(p1, row) for row in p.A])
    C = c0[None, :] + c1[None, :] * tau[:, None]
    logC = np.log(np.where(C > 0, C, 1e-300)) + (p.A @ log_ref)[None, :] + log_w[:, None]
    ay = cp.reshape(p.A @ y, (1, len(p.c)), order="C")
    M = logC + np.ones((len(tau), 1)) @ ay
    return cp.log_sum_exp(M, axis=1) if len(p.c) > 1 else M[:, 0]


def _latency_logs(br: Branch, y: Any, log_ref: np.ndarray) -> tuple[dict[str, list], list]:
    """Per phase, the log of every additive latency piece (scalars or vectors of convex expressions), and the
    constraints they need.

    Roofline pieces and the per-operator launches add up; the engine overhead adds to them, or, when the branch
    overlaps them (``Branch.overlap``: a host-launching engine on an accelerator), the phase is one epigraph
    variable u = log t with t ≥ Σ roofline pieces and t ≥ engine overhead (posynomial ≤ monomial t, both)."""
    import cvxpy as cp

    def mx(f: Posy, b: Posy, shift: float = 0.0, p: float = math.inf):
        if f and b:
            lf, lb = _log_posy(y, f, log_ref, shift), _log_posy(y, b, log_ref, shift)
            if p == math.inf:
                return cp.maximum(lf, lb)
            # a routed expert's blend (f^p + b^p)^(1/p): (1/p)·log(e^(p·log f) + e^(p·log b)), convex in y
            return cp.log_sum_exp(cp.hstack([p * lf, p * lb])) / p
        q = f or b
        return _log_posy(y, q, log_ref, shift) if q else None

    pre = [mx(f, b, 0.0, p) for (f, b), p in zip(br.pre, br.pre_p or [math.inf] * len(br.pre), strict=True)]
    if br.launch_pre:
        pre.append(_log_posy(y, br.launch_pre, log_ref))
    dec = [mx(f, b, math.log(br.S_out), p)
           for (f, b), p in zip(br.dec_const, br.dec_p or [math.inf] * len(br.dec_const), strict=True)]  # fmt: skip
    tau, w = step_nodes(br.S_out)
    log_w = np.log(w)
    for a0, a1, b0, b1 in br.dec_step:
        side = [_log_steps(y, p0, p1, tau, log_w, log_ref) if (p0 or p1) else None for p0, p1 in ((a0, a1), (b0, b1))]
        if side[0] is not None and side[1] is not None:
            dec.append(cp.maximum(side[0], side[1]))
        else:
            dec.append(side[0] if side[0] is not None else side[1])
    if br.launch_dec:
        dec.append(_log_posy(y, br.launch_dec, log_ref))
    out, cons = {"prefill": [e for e in pre if e is not None], "decode": [e for e in dec if e is not None]}, []
    for phase, ovh in (("prefill", br.overhead_pre), ("decode", br.overhead_dec)):
        if not ovh:
            continue
        if br.overlap and out[phase]:
            u = cp.Variable(name=f"log_{phase}_s")  # log t: t ≥ the roofline sum, t ≥ the engine overhead
            cons += [u >= _lse(out[phase]), u >= _log_posy(y, ovh, log_ref)]
            out[phase] = [u]
        else:
            out[phase].append(_log_posy(y, ovh, log_ref))
    return out, cons


def _lse(pieces: list):
    """log Σ exp of the pieces (scalars and vectors)."""
    import cvxpy as cp

    flat = [cp.reshape(e, (e.size,), order="C") if e.ndim else cp.reshape(e, (1,), order="C") for e in pieces]
    return cp.log_sum_exp(cp.hstack(flat))


def _coef_of(p: Posy, row: np.ndarray) -> float:
    if not p:
        return 0.0
    hit = np.all(np.abs(p.A - row[None, :]) < 1e-12, axis=1)
    return float(p.c[hit].sum())


#: Compiled cvxpy problems, reused when only the budgets change (they are cvxpy Parameters): a budget
#: sweep on one device/workload/space pays cvxpy's compilation once.
_COMPILED: OrderedDict[str, tuple] = OrderedDict()
_COMPILED_MAX = 32


def _compiled_key(problem: Any, br: Branch, lmons: Any, budgets: Mapping[str, float], solver: str | None) -> str:
    return repr((
        problem.law.name, sorted(problem.law.params.items()), lmons, problem.device.to_dict(),
        problem.workload.to_dict(), problem.precision.name, getattr(problem.space, "name", ""), _phase(problem),
        problem.preset, sorted(budgets), br.name, br.K, sorted(br.bounds.items()), solver,
        getattr(problem, "engine", None),
    ))  # fmt: skip


def _solve_branch(problem, br: Branch, lmons, budgets, fix, solver):

    bounds = dict(br.bounds)
    for k, v in (fix or {}).items():
        bounds[k] = (float(v), float(v))
    key = None if fix else _compiled_key(problem, br, lmons, budgets, solver)
    if key is not None and key in _COMPILED:
        _COMPILED.move_to_end(key)
        prob, y, named, ref, params = _COMPILED[key]
    else:
        prob, y, named, ref, params = _build_branch_problem(problem, br, lmons, budgets, bounds)
        if key is not None:
            _COMPILED[key] = (prob, y, named, ref, params)
            while len(_COMPILED) > _COMPILED_MAX:
                _COMPILED.popitem(last=False)
    for k, par in params.items():
        par.value = math.log(float(budgets[k]))
    status = _run(prob, solver)
    name = prob.solver_stats.solver_name if prob.solver_stats else ""
    out: dict[str, Any] = {"status": status, "bounds": bounds, "solver": name}
    if status in ("optimal", "optimal_inaccurate"):
        xv = {v: min(max(float(np.exp(y.value[i])) * ref[i], bounds[v][0]), bounds[v][1]) for i, v in enumerate(VARS)}
        out["x"] = xv
        out["duals"] = {
            k: float(np.atleast_1d(c.dual_value)[0]) if c.dual_value is not None else float("nan")
            for k, c in named.items()
        }
    return out


def _build_branch_problem(problem, br: Branch, lmons, budgets, bounds):
    """The branch's relaxation as a convex program in y = log(x / ref), with log(budget) as Parameters."""
    import cvxpy as cp

    y = cp.Variable(len(VARS), name="y")  # log(x / ref); ref = geometric centre of the box (y ~ 0: well scaled)
    lo = np.array([bounds[v][0] for v in VARS])
    hi = np.array([bounds[v][1] for v in VARS])
    ref = np.sqrt(lo * hi)
    log_ref = np.log(ref)
    params = {k: cp.Parameter(name=f"log_{k}_budget", value=math.log(float(budgets[k]))) for k in budgets}
    named: dict[str, Any] = {}
    lat: dict[str, list] = {}  # per phase, when a latency or energy budget needs it
    cons: list = []
    if "latency" in budgets or "energy" in budgets:
        lat, cons = _latency_logs(br, y, log_ref)
    if "latency" in budgets:
        by_phase = {"prefill": lat["prefill"], "decode": lat["decode"], "total": lat["prefill"] + lat["decode"]}
        named["latency"] = _lse(by_phase[_phase(problem)]) <= params["latency"]
    named["memory"] = _log_posy(y, br.memory, log_ref) <= params["memory"]
    if "energy" in budgets:
        pieces = [_log_posy(y, br.energy_dyn, log_ref)]
        if br.p_idle:
            pieces += [e + math.log(br.p_idle) for e in lat["prefill"] + lat["decode"]]
        named["energy"] = _lse(pieces) <= params["energy"]
    cons += list(named.values())
    for i in range(len(VARS)):
        if lo[i] == hi[i]:
            cons.append(y[i] == 0.0)
        else:
            cons += [y[i] >= math.log(lo[i] / ref[i]), y[i] <= math.log(hi[i] / ref[i])]
    x0 = {v: math.sqrt(bounds[v][0] * bounds[v][1]) for v in VARS}
    f0 = sum(cc * np.prod([x0[v] ** a for v, a in p.items()]) for cc, p in lmons)
    A = np.array([[p.get(v, 0.0) for v in VARS] for _, p in lmons])
    c = np.array([cc for cc, _ in lmons]) / f0
    obj = _log_posy(y, Posy(c, A), log_ref)  # log of the law's variable part / f0: the same minimiser
    return cp.Problem(cp.Minimize(obj), cons), y, named, ref, params


#: Clarabel settings tried in turn (tight tolerances first; a shorter step or no equilibration when Clarabel stalls
#: with "insufficient progress", which happens on some devices' exponential cones), then Clarabel's defaults.
_TIGHT = {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10, "tol_ktratio": 1e-8}
_LADDER: tuple[dict[str, Any], ...] = (
    _TIGHT, {**_TIGHT, "max_step_fraction": 0.9}, {**_TIGHT, "equilibrate_enable": False},
    {"tol_gap_abs": 1e-8, "tol_gap_rel": 1e-8, "tol_feas": 1e-8}, {"max_step_fraction": 0.9}, {},
)  # fmt: skip


def _run(prob: Any, solver: str | None) -> str:
    """Solve ``prob`` (a DCP program); the status of the first accurate solve, else the last one's. When Clarabel
    fails on every rung of its ladder, the other installed conic solvers (SCS, ECOS) are tried in turn."""
    return solve_with_fallback(prob, solver, _LADDER, gp=False)


def _corner(br: Branch) -> dict[str, float]:
    """The box corner where every full-preset cost is smallest (costs increase in l, d, r, decrease in ρ, gqa)."""
    b = br.bounds
    return {"l": b["l"][0], "d": b["d"][0], "r": b["r"][0], "rho": b["rho"][1], "gqa": b["gqa"][1]}


#: Relative slack within which the solver's point counts as meeting a budget (Clarabel's tolerances are 1e-10).
BUDGET_RTOL = 1e-6


def _over_budget(br: Branch, x: Mapping[str, float], budgets: Mapping[str, float], phase: str) -> str:
    """Which budget the branch's exact costs at ``x`` exceed by more than :data:`BUDGET_RTOL` ('' if none)."""
    vals = br.values(x)
    col = {"latency": PHASE_COLUMN[phase], "memory": "memory_bytes", "energy": "energy_j"}
    for k, b in budgets.items():
        v = float(vals[col[k]])
        if v > b * (1 + BUDGET_RTOL):
            return f"its point's {k} {v:.6g} exceeds the budget {b:.6g}"
    return ""


def solve_gp_full(problem: Any, fix: Mapping[str, float] | None = None, solver: str | None = None) -> RelaxationResult:
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
        over = _over_budget(br, o["x"], budgets, _phase(problem))
        if over:  # a fallback solver (SCS) can call a program that cannot be met "optimal": check the point
            summary[br.name] = f"{o['status']} by {o['solver']}, but {over}"
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
    col = {"latency": PHASE_COLUMN[_phase(problem)], "memory": "memory_bytes", "energy": "energy_j"}
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
        *([_nodes_note(br.S_out)] if br.S_out > STEP_NODES + 1 else []),
        f"branches: {', '.join(f'{k} {v:.6g}' if isinstance(v, float) else f'{k} {v}' for k, v in summary.items())}"
        + (f"; MoE branch at K = {br.K:g} (top_k enters {', '.join(br.k_dependent)})" if br.moe else ""),
    ]
    return RelaxationResult(
        x=o["x"], loss=o["loss"], constant=const, active=active, values=values, budgets=budgets, status=o["status"],
        solver=o["solver"], duals=o["duals"], seconds=time.perf_counter() - t0, build_seconds=t1 - t0,
        solve_seconds=t2 - t1, preset="full", branch=br.name, branches=summary, notes=notes,
        all_values={k: float(v) for k, v in vals.items()},
    )  # fmt: skip


def _infeasible_full(problem: Any, brs: list[Branch], budgets: dict[str, float]) -> Infeasible:
    col = {"latency": PHASE_COLUMN[_phase(problem)], "memory": "memory_bytes", "energy": "energy_j"}
    smallest = {k: min(float(b.values(_corner(b))[col[k]]) for b in brs) for k in budgets}
    where = f"of the continuous relaxation of space {space_name(problem)!r} (full model)"
    return relaxed_report(problem, smallest, where)


__all__ = ["Branch", "Posy", "branches", "build_branch", "k_dependent_ops", "solve_gp_full", "space_fixed"]
