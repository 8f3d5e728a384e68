"""Closed-form optima of the continuous relaxation (paper §5), derived with sympy from rooflaw's own expressions.

The problem: min L(l, d, r, ρ, gqa) s.t. g_j(x) ≤ budget_j (theory-mode latency of a phase, weight memory,
energy) and the space's box bounds. In log variables the paper's law and every theory-mode constraint are
posynomials, so the problem is convex and a KKT point is the global optimum.

A *regime* is a set of binding constraints plus the variables they are solved for. For each regime sympy

1. solves each binding constraint for its variable (``l* = F̄_p/(ξ_F d²)`` and friends -- Table 22 -- and, in
   the dual regimes, ``ρ*`` from the memory constraint -- Theorem 5.3),
2. substitutes them into the law (the multipliers are eliminated exactly as in Apps. F–K), and
3. differentiates the reduced loss twice.

The remaining stationarity conditions (r*, gqa* -- implicit in the paper because ξ depends on r and gqa -- and
d*, which the paper leaves unsolved) are solved by a projected Newton method in log variables with the box
bounds as KKT constraints (a variable at its bound stays there while its reduced gradient points outwards).
ρ* = ρ_min under latency (Theorem 5.1) and ρ*(d) under memory (Theorem 5.2) come out of the same equations
and are checked against their sympy-derived closed forms. The regime whose solution is feasible with the
lowest loss is the optimum; its multipliers are recovered and checked (μ ≥ 0).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy as sp

from ...errors import Infeasible, RooflawError
from ..budgets import relaxation
from ..infeasible import relaxed_report, space_name
from . import kkt as K
from .certificate import cheapest_corner as _cheapest
from .certificate import constraint_values as _constraint_values
from .certificate import kkt_certificate as _kkt
from .certificate import numerical_kkt as _numerical_kkt
from .kkt import BUDGET, CONSTS, VARS, X
from .newton import projected_newton

_TOL_FEAS = 1e-9


# ---- regimes --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Regime:
    """Binding constraints (name) with the variable each is solved for, in order."""

    elim: tuple[tuple[str, str], ...]

    @property
    def active(self) -> tuple[str, ...]:
        return tuple(c for c, _ in self.elim)


def regime_name(active: tuple[str, ...] | list[str], phase: str) -> str:
    """Human name of a set of binding constraints: ``decode-latency``, ``memory``, ``prefill+memory`` …"""
    act = set(active)
    if not act:
        return "unconstrained"
    parts = []
    if "latency" in act:
        parts.append(phase if act - {"latency"} else f"{phase}-latency")
    parts += [c for c in ("memory", "energy") if c in act]
    return "+".join(parts)


def _regimes(kinds: tuple[str, ...]) -> list[Regime]:
    """Candidate regimes, most common first: each binding constraint fixes depth (Table 22); in the dual
    regimes memory then fixes ρ (Theorem 5.3), or r / d when ρ sits at a bound; when depth is at a bound the
    constraint fixes the width instead."""
    out = [Regime(())]
    out += [Regime(((c, "l"),)) for c in kinds]
    for c1, c2 in itertools.combinations(kinds, 2):
        if "memory" in (c1, c2):
            m, o = (c1, c2) if c1 == "memory" else (c2, c1)
            out += [Regime(((o, "l"), (m, "rho"))), Regime(((o, "l"), (m, "r")))]
    out += [Regime(((c, "d"),)) for c in kinds]
    out += [Regime(((c, "r"),)) for c in kinds]
    for c1, c2 in itertools.combinations(kinds, 2):
        out += [Regime(((c1, "l"), (c2, "d"))), Regime(((c2, "l"), (c1, "d")))]
        out += [Regime(((c1, "l"), (c2, "gqa"))), Regime(((c2, "l"), (c1, "gqa")))]
    return out


# ---- one compiled regime ----------------------------------------------------------------------------
@dataclass
class CompiledRegime:
    regime: Regime
    free: tuple[str, ...]
    elim_exprs: dict[str, sp.Expr]  # variable -> expression in free vars, constants, budgets
    fgh: Any  # f(*free, *CONSTS, *budgets) -> [f, grad_y..., hess_y...]
    elim_fn: Any
    ok: bool = True


@dataclass
class Derivation:
    """All regimes of one law and one constraint set, derived once and cached."""

    phase: str
    kinds: tuple[str, ...]
    constraints: dict[str, sp.Expr]
    specs: list[Regime]
    law: sp.Expr
    compiled: dict[Regime, CompiledRegime | None]
    grads: Any  # x, consts -> [L, dL/dx..., g_j, dg_j/dx ... per kind]
    seconds: float
    theorems: K.Theorems | None = None

    def regime(self, reg: Regime) -> CompiledRegime | None:
        """The compiled regime (derived on first use, then cached)."""
        if reg not in self.compiled:
            t0 = time.perf_counter()
            self.compiled[reg] = _compile_regime(reg, self.law, self.constraints)
            self.seconds += time.perf_counter() - t0
        return self.compiled[reg]


_BUDGET_SYMS = (K.T_lat, K.M_budget, K.E_budget)
_MODULES = [{"DiracDelta": lambda *a: 0.0, "Heaviside": lambda x, *a: float(x > 0)}, "math"]


def _compile_regime(reg: Regime, L: sp.Expr, cons: Mapping[str, sp.Expr]) -> CompiledRegime | None:
    elim: dict[str, sp.Expr] = {}
    for c, v in reg.elim:
        g = cons[c].subs({X[k]: e for k, e in elim.items()})
        s = K.solve_for(g - BUDGET[c], X[v])
        if s is None:
            return None
        elim = {k: e.subs(X[v], s) for k, e in elim.items()}
        elim[v] = s
    free = tuple(v for v in VARS if v not in elim)
    f = L.subs({X[k]: e for k, e in elim.items()})
    ys = [X[v] for v in free]
    grad = [sp.diff(f, y) for y in ys]
    hess = [sp.diff(grad[i], ys[j]) for i in range(len(ys)) for j in range(len(ys))]
    args = (*ys, *CONSTS, *_BUDGET_SYMS)
    fgh = sp.lambdify(args, [f, *grad, *hess], modules=_MODULES, cse=True)
    elim_fn = sp.lambdify(args, [elim[v] for v in elim], modules=_MODULES, cse=True)
    return CompiledRegime(reg, free, elim, fgh, elim_fn)


_DERIVATIONS: dict[tuple, Derivation] = {}


def derive(
    law: Any, phase: str = "decode", kinds: tuple[str, ...] = ("latency", "memory"), **law_kw: Any
) -> Derivation:
    """Derive (and cache) every regime of ``law`` under the constraints ``kinds`` (latency of ``phase``)."""
    key = (K.law_key(law), phase, kinds, tuple(sorted(law_kw.items())))
    if key in _DERIVATIONS:
        return _DERIVATIONS[key]
    disk = _load_derivation(key)
    if disk is not None:
        _DERIVATIONS[key] = disk
        return disk
    t0 = time.perf_counter()
    L = K.law_in_paper_variables(law, **law_kw)
    cons = {k: K.constraint_expr(k, phase) for k in kinds}
    xs = [X[v] for v in VARS]
    exprs = [L, *[sp.diff(L, x) for x in xs]]
    for k in kinds:
        exprs += [cons[k], *[sp.diff(cons[k], x) for x in xs]]
    grads = sp.lambdify((*xs, *CONSTS), exprs, modules="math", cse=True)
    thm = None
    if {"rho", "r"} <= set(law.variables):
        thm = K.theorems(law)
    der = Derivation(phase, kinds, cons, _regimes(kinds), L, {}, grads, time.perf_counter() - t0, thm)
    _DERIVATIONS[key] = der
    return der


# ---- the on-disk copy: a warm `rooflaw solve` in a new process skips the symbolic work --------------------
def _disk_key(key: tuple) -> str:
    import hashlib

    from ... import cache

    return cache.source_key("closed-form-" + hashlib.sha256(repr(key).encode()).hexdigest()[:16])


def _load_derivation(key: tuple) -> Derivation | None:
    """The derivation stored by an earlier process (with the regimes it compiled), or None. The entry is keyed by
    the law, phase, constraint kinds and every cost-model source file (:func:`rooflaw.cache.source_key`)."""
    import cloudpickle

    from ... import cache

    blob = cache.load(_disk_key(key))
    if not isinstance(blob, bytes):
        return None
    try:
        der = cloudpickle.loads(blob)
    except Exception:  # noqa: BLE001 - a stale or foreign entry only costs a recomputation
        return None
    return der if isinstance(der, Derivation) else None


def save_derivation(der: Derivation, law: Any, law_kw: Mapping[str, Any]) -> None:
    """Store ``der`` (and every regime compiled so far) for later processes; lambdified functions travel by value
    (cloudpickle), signed with the cache's key like every entry."""
    import cloudpickle

    from ... import cache

    key = (K.law_key(law), der.phase, der.kinds, tuple(sorted(law_kw.items())))
    try:
        cache.store(_disk_key(key), cloudpickle.dumps(der))
    except Exception:  # noqa: BLE001 - not picklable here: the cache is an optimisation only
        return


# ---- the solver ---------------------------------------------------------------------------------------
@dataclass
class ClosedForm:
    """A continuous optimum of the relaxation and how it was obtained."""

    x: dict[str, float]
    loss: float
    regime: str
    active: tuple[str, ...]
    binding: str
    at_bound: dict[str, str]
    multipliers: dict[str, float]
    values: dict[str, float]  # constraint values (SI)
    budgets: dict[str, float]
    eliminated: dict[str, sp.Expr]
    method: str = "closed-form"
    kkt_residual: float = 0.0
    eta: dict[str, float] = field(default_factory=dict)
    paper_regime: str = ""
    theorem_checks: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    derivation_seconds: float = 0.0
    candidates: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "continuous": dict(self.x), "loss": self.loss, "regime": self.regime, "binding": self.binding,
            "active": list(self.active), "at_bound": dict(self.at_bound), "multipliers": dict(self.multipliers),
            "values": dict(self.values), "budgets": dict(self.budgets), "method": self.method,
            "kkt_residual": self.kkt_residual, "eta": dict(self.eta), "paper_regime": self.paper_regime,
            "theorem_checks": dict(self.theorem_checks), "notes": list(self.notes),
            "eliminated": {k: sp.sstr(v) for k, v in self.eliminated.items()},
        }  # fmt: skip


def problem_budgets(problem: Any) -> dict[str, float]:
    """The relaxation's budgets, from ``problem.constraints`` (:func:`~rooflaw.solver.budgets.relaxation`):
    memory (capacity or budget), latency of :func:`relaxed_phase` (a TPOT budget as a decode budget × S_out, a TTFT
    budget as a prefill budget), energy."""
    return {k: r.bound for k, (r, _) in relaxation(problem.constraints, problem.workload).items()}


def relaxed_phase(problem: Any) -> str:
    """The latency phase the relaxation bounds: its latency budget's (a TPOT budget: decode; TTFT: prefill), else
    the problem's phase."""
    lat = relaxation(problem.constraints, problem.workload).get("latency")
    return lat[0].phase if lat is not None and lat[0].phase is not None else problem.phase


def bounds_of(problem: Any) -> dict[str, tuple[float, float]]:
    """The space's box of (l, d, r, rho, gqa), narrowed to the law's fitted domain unless the problem extrapolates."""
    if getattr(problem.space, "has_patterns", False):  # the theory model is a uniform stack
        raise RooflawError(f"space {problem.space.name!r} searches layer patterns; the closed form models uniform "
                           "stacks only: use --method exhaustive or optuna")  # fmt: skip
    b = {k: (float(v[0]), float(v[1])) for k, v in dict(problem.space.bounds()).items() if k in VARS}
    dom = {} if getattr(problem, "allow_extrapolation", False) else problem.law.domain
    for v in ("l", "d"):
        if v in dom and max(b[v][0], dom[v][0]) <= min(b[v][1], dom[v][1]):
            b[v] = (max(b[v][0], dom[v][0]), min(b[v][1], dom[v][1]))
    if "E" in dom and "K" in dom:
        b["rho"] = (min(max(b["rho"][0], dom["K"][0] / dom["E"][1]), b["rho"][1]), b["rho"][1])
    return {k: b[k] for k in VARS}


def budget_ratios(problem: Any) -> dict[str, float]:
    """§5.1's F̄_p = T·π/(B·S_in), M̄_d = T·β/S_out and η = M̄_d/M_budget, η_p = F̄_p/M_budget."""
    c = K.constants(problem)
    T = problem_budgets(problem).get("latency")
    if T is None:
        return {}
    Fp = T * c[K.pi] / (c[K.B] * c[K.S_in])
    Md = T * c[K.beta] / c[K.S_out]
    M = float(problem.capacity)
    return {"F_p_bar": Fp, "M_d_bar": Md, "eta": Md / M, "eta_p": Fp / M}


def _solve_regime(cr: CompiledRegime, bounds, rest) -> dict[str, float] | None:
    """Solve one regime's reduced stationarity conditions; None when it has no point inside the box."""

    lo = np.log([bounds[v][0] for v in cr.free])
    hi = np.log([bounds[v][1] for v in cr.free])
    sol = None
    for s in (0.5, 0.2, 0.8, 0.05, 0.95):
        sol = projected_newton(cr.fgh, lo + (hi - lo) * s, lo, hi, rest)
        if sol is not None:
            break
    if sol is None:
        return None
    x = dict(zip(cr.free, np.exp(sol[0]).tolist(), strict=False))
    try:
        ev = cr.elim_fn(*[x[v] for v in cr.free], *rest)
    except (ValueError, ZeroDivisionError, OverflowError):
        return None
    for v, val in zip([e[1] for e in cr.regime.elim], ev, strict=False):
        if isinstance(val, complex) or not math.isfinite(val) or val <= 0:
            return None
        x[v] = float(val)
    for v in VARS:  # eliminated variables must land inside the box
        lo_v, hi_v = bounds[v]
        if x[v] < lo_v * (1 - 1e-9) or x[v] > hi_v * (1 + 1e-9):
            return None
        x[v] = min(max(x[v], lo_v), hi_v)
    return x


def closed_form(problem: Any, fix: Mapping[str, float] | None = None) -> ClosedForm:
    """The continuous optimum of ``problem``'s relaxation (theory-mode constraints, the space's bounds).

    ``fix`` pins variables (e.g. ``{"d": 1024}`` for the paper's "choose d, then solve" workflow). Raises
    :class:`~rooflaw.errors.Infeasible` when no point of the box meets the budgets.
    """
    t0 = time.perf_counter()
    budgets = problem_budgets(problem)
    kinds = tuple(k for k in ("latency", "memory", "energy") if k in budgets)
    law_kw = K.law_kwargs(problem)
    phase = relaxed_phase(problem)
    der = derive(problem.law, phase, kinds, **law_kw)
    compiled_before = len(der.compiled)
    c = K.constants(problem)
    if "energy" in kinds and not math.isfinite(c[K.P_idle]):
        raise RooflawError(f"energy budget: device {problem.device.id} has no power or energy figures")
    cvals = [c[s] for s in CONSTS]
    bvals = [budgets.get("latency", 1.0), budgets.get("memory", 1.0), budgets.get("energy", 1.0)]
    bounds = bounds_of(problem)
    fix = dict(fix or {})
    for k, v in fix.items():
        if k not in VARS:
            raise RooflawError(f"fix: unknown variable {k!r}; known: {', '.join(VARS)}")
        bounds[k] = (float(v), float(v))
    _, low = _constraint_values(der, _cheapest(bounds), cvals)
    if any(low[k] > budgets[k] for k in kinds):  # not even the cheapest corner of the box fits: skip the regimes
        raise explain_infeasible(problem, der, cvals, bounds, budgets)
    # a variable the loss does not depend on sits where every constraint is smallest: that costs no loss and only
    # frees budget (left to the regimes, its arbitrary value could break a budget an equal-loss point meets)
    law_vars = {s.name for s in der.law.free_symbols}
    pinned = {v: _cheapest(bounds)[v] for v in VARS if v not in law_vars and v not in fix}
    box = {**bounds, **{v: (x_, x_) for v, x_ in pinned.items()}}
    best = None
    cands: list[dict[str, Any]] = []
    rest = [*cvals, *bvals]
    for spec in der.specs:
        if any(e[1] in fix or e[1] in pinned for e in spec.elim):
            continue
        cr = der.regime(spec)
        if cr is None:
            continue
        x = _solve_regime(cr, box, rest)
        if x is None:
            continue
        loss, vals = _constraint_values(der, x, cvals)
        if any(vals[k] > budgets[k] * (1 + _TOL_FEAS) for k in kinds):
            continue
        active = tuple(k for k in kinds if vals[k] >= budgets[k] * (1 - 1e-7))
        mu, resid, at, sign_ok = _kkt(der, x, cvals, active, budgets, bounds, frozenset(fix))
        certified = (not mu or min(mu.values()) >= -1e-9) and resid < 1e-7 and sign_ok
        cand = {"regime": regime_name(spec.active, phase), "solved_for": dict((v, c_) for c_, v in spec.elim),
                "x": x, "loss": loss, "kkt": certified}  # fmt: skip
        cands.append(cand)
        if best is None or loss < best[2] - 1e-15 * abs(loss) or (certified and not best[4][-1]):
            best = (cr, x, loss, vals, (active, mu, resid, at, certified))
        if certified:
            best = (cr, x, loss, vals, (active, mu, resid, at, certified))
            break
    notes = []
    method = "closed-form"
    if best is None:
        # the cheapest corner of the box fits (checked above), so the relaxation is feasible: no regime reached it
        cr, x, certified = None, _cheapest(box), False
        notes.append("no regime gave a feasible stationary point; solved by the numerical KKT fallback (SLSQP in "
                     "log variables, many starts, one from the cheapest corner of the box)")  # fmt: skip
    else:
        cr, x, loss, vals, (active, mu, resid, at, certified) = best
        if not certified:
            notes.append(
                f"no regime gave a certified KKT point (residual {resid:.2e}, multipliers {mu}); "
                "solved by the numerical KKT fallback (SLSQP in log variables, many starts)"
            )
    if not certified:
        x, loss, vals = _numerical_kkt(der, cvals, box, budgets, kinds, x)
        active = tuple(k for k in kinds if vals[k] >= budgets[k] * (1 - 1e-7))
        mu, resid, at, sign_ok = _kkt(der, x, cvals, active, budgets, bounds, frozenset(fix))
        method = "numerical-kkt"
    name = regime_name(active, phase)
    binding = "+".join(active) if active else "none"
    eta = budget_ratios(problem)
    elim = dict(cr.elim_exprs) if cr is not None else {}
    out = ClosedForm(
        x=x, loss=loss, regime=name, active=active, binding=binding, at_bound=at, multipliers=mu, values=vals,
        budgets=budgets, eliminated=elim, method=method, kkt_residual=resid, eta=eta,
        paper_regime=paper_regime(eta, phase), notes=notes, derivation_seconds=der.seconds,
        candidates=cands,
    )  # fmt: skip
    out.theorem_checks = _theorem_checks(der, out, c)
    if len(der.compiled) > compiled_before:  # new regimes derived: keep them for the next process
        save_derivation(der, problem.law, law_kw)
    out.seconds = time.perf_counter() - t0
    return out


def paper_regime(eta: Mapping[str, float], phase: str) -> str:
    """The §5.5.2 rule as the paper states it: η (η_p for prefill) ≪ 1 → memory, ≫ 1 → latency, else dual.

    Kept for comparison only: with η = M̄_d/M_budget a *small* η means a tight latency budget, so the rule points
    the wrong way (see docs/solver.md); rooflaw classifies by which KKT multipliers are positive.
    """
    if not eta:
        return "memory"
    e = eta["eta_p"] if phase == "prefill" else eta["eta"]
    if e < 0.1:
        return "memory"
    if e > 10:
        return f"{phase}-latency"
    return f"{phase}+memory"


def _theorem_checks(der: Derivation, cf: ClosedForm, c) -> dict[str, float]:
    """Relative differences between the solution and the sympy-derived theorem closed forms (where they apply)."""
    th = der.theorems
    if th is None:
        return {}
    out = {}
    x = cf.x
    subs = {**{X[v]: x[v] for v in VARS}, **c}
    subs.update({K.T_lat: cf.budgets.get("latency", 1.0), K.M_budget: cf.budgets["memory"]})
    interior = lambda v: v not in cf.at_bound  # noqa: E731
    act = set(cf.active)
    if act == {"latency"} and th.rho_latency_at_min:
        out["theorem_5_1_rho_at_min"] = 0.0 if cf.at_bound.get("rho") == "lower" else 1.0
    if act == {"memory"} and th.rho_memory_bound is not None and interior("rho") and interior("r"):
        val = float(th.rho_memory_bound.subs(X["d"], x["d"]))
        out["theorem_5_2_rho"] = abs(val / x["rho"] - 1)
    if act == {"latency", "memory"} and der.phase in th.rho_dual and interior("rho"):
        val = float(th.rho_dual[der.phase].subs(subs))
        out["theorem_5_3_rho"] = abs(val / x["rho"] - 1)
    if act and interior("l"):
        key = der.phase if "latency" in act else ("memory" if "memory" in act else None)
        if key in th.l_star:
            val = float(th.l_star[key].subs(subs))
            out[f"table_22_l_{key}"] = abs(val / x["l"] - 1)
    return out


def explain_infeasible(problem, der, cvals, bounds, budgets) -> Infeasible:
    """The binding constraint and its smallest value over the box."""
    best_x = _cheapest(bounds)
    _, vals = _constraint_values(der, best_x, cvals)
    where = f"of the continuous relaxation of space {space_name(problem)!r} (theory model)"
    return relaxed_report(problem, vals, where)


__all__ = ["ClosedForm", "Derivation", "Regime", "budget_ratios", "closed_form", "derive", "paper_regime",
           "problem_budgets", "regime_name"]  # fmt: skip
