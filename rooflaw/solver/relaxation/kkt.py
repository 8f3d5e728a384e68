"""Symbolic building blocks of the closed-form solver: the continuous problem in the paper's variables.

Everything here is *derived* from :func:`rooflaw.constraints.theory.theory_expressions` (the theory-mode
cost model, built from the same operator list as the numerical evaluator) and from the law's own sympy
expression -- no formula of the paper is typed in by hand.

Variables: ``l, d, r, rho, gqa`` (the paper's §5 parametrisation, d_m = d/gqa). Constants: the workload
(``B, S_in, S_out``), the byte widths (``b_w, b_kv``), the roofs (``pi, beta``), the energy coefficients
(``P_idle, e_F, e_B``) and one budget symbol per constraint (``T_lat, M_budget, E_budget``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import sympy as sp

from ...constraints import assembly as A
from ...constraints.symbols import B, S_in, S_out, b_kv, b_w, beta, pi, sym
from ...constraints.theory import theory_expressions
from ...errors import RooflawError

VARS = ("l", "d", "r", "rho", "gqa")
X = {n: sym(n) for n in VARS}
l, d, r, rho, gqa = (X[n] for n in VARS)

P_idle, e_F, e_B = sym("P_idle"), sym("e_F"), sym("e_B")
T_lat, M_budget, E_budget = sym("T_lat"), sym("M_budget"), sym("E_budget")
#: Constant symbols, in the order the compiled functions take them.
CONSTS = (B, S_in, S_out, b_w, b_kv, pi, beta, P_idle, e_F, e_B)
#: Budget symbol of each constraint kind.
BUDGET = {"latency": T_lat, "memory": M_budget, "energy": E_budget}
#: Law variables the continuous relaxation can express.
CONTINUOUS_LAW_VARS = ("l", "d", "r", "rho", "gqa", "d_m", "N_nonembed", "N_active_nonembed", "N", "N_active", "D")


@lru_cache(maxsize=1)
def theory_energy() -> sp.Expr:
    """Theory-mode energy (J) from the assembly's energy model: E = P_idle·(T_pre + T_dec) + e_F·FLOPs + e_B·bytes
    (FLOPs and bytes of both phases, all on the linear roof; see :func:`rooflaw.constraints.assembly.energy`)."""
    th = theory_expressions()
    coef = _SymbolicEnergy()
    return A.energy(coef, th["T_pre"] + th["T_dec"], {"linear": th["F"], "attention": 0, "vector": 0}, th["B"])


class _SymbolicEnergy:
    """The assembly's energy coefficients as the symbols P_idle, e_F, e_B (numbers come from :func:`constants`)."""

    p_idle = P_idle
    per_flop = {"linear": e_F, "attention": e_F, "vector": e_F}
    per_byte = e_B


def constraint_expr(kind: str, phase: str = "decode") -> sp.Expr:
    """Theory-mode expression of a constraint: ``latency`` (of ``phase``), ``memory`` or ``energy``."""
    th = theory_expressions()
    if kind == "latency":
        return {"prefill": th["T_pre"], "decode": th["T_dec"], "total": th["T_pre"] + th["T_dec"]}[phase]
    if kind == "memory":
        return th["M"]
    if kind == "energy":
        return theory_energy()
    raise RooflawError(f"constraint {kind!r}: unknown; known: latency, memory, energy")


def constants(problem: Any) -> dict[sp.Symbol, float]:
    """Numbers for :data:`CONSTS` from a :class:`~rooflaw.solver.Problem` (efficiency factors included, as the
    ``paper`` preset evaluates them)."""
    wl, prec = problem.workload, problem.precision
    theory = dataclasses.replace(problem.scenario, preset="paper")  # the device's scalar efficiencies, no engine
    rates, coef = theory.rates, theory.energy
    nan = float("nan")
    pidle, ef, eb = (coef.p_idle, coef.per_flop["linear"], coef.per_byte) if coef else (nan, nan, nan)
    return {
        B: float(wl.batch),
        S_in: float(wl.input_tokens),
        S_out: float(wl.output_tokens),
        b_w: float(prec.weights.bytes),
        b_kv: float(prec.kv.bytes),
        pi: 1.0 / rates.inv["linear"],
        beta: 1.0 / rates.inv_beta,
        P_idle: pidle,
        e_F: ef,
        e_B: eb,
    }


def law_in_paper_variables(
    law: Any, symbolic_params: bool = False, vocab: int = 32000, tied: bool = False, tokens: float | None = None
) -> sp.Expr:
    """The law as an expression in (l, d, r, rho, gqa) (theory-mode parameter counts for N-type variables).

    ``d_m`` = d/gqa; ``N_nonembed`` = l·d²·ξ_W^all, ``N_active_nonembed`` = l·d²·ξ_W^dec; ``N``/``N_active``
    add the embeddings and the LM head (``vocab``·d, twice when untied); ``D`` = ``tokens``. Raises when the
    law uses a variable the continuous relaxation cannot express (E, K, G).
    """
    bad_vars = [v for v in law.variables if v not in CONTINUOUS_LAW_VARS]
    if bad_vars:
        raise RooflawError(
            f"law {law.name} uses {', '.join(bad_vars)}: the continuous relaxation is over l, d, r, rho, gqa "
            f"(d_m, N*, D derived); use --method exhaustive or optuna"
        )
    if "D" in law.variables and tokens is None:
        raise RooflawError(f"law {law.name} uses D (training tokens): give tokens")
    th = theory_expressions()
    if symbolic_params:
        from ...objectives.law import param_symbol

        subs_p = {}
        for k in law.params:
            ps = param_symbol(k)
            subs_p[ps] = sp.Symbol(k, positive=True) if law.params[k] > 0 else sp.Symbol(k, real=True)
        e = law.expr.xreplace(subs_p)
    else:
        e = law.bound_expr()
    emb = vocab * d * (1 if tied else 2)
    subs = {
        sym("d_m"): d / gqa,
        sym("N_nonembed"): th["M"] / b_w,
        sym("N_active_nonembed"): l * d**2 * th["xi_W_dec"],
        sym("N"): th["M"] / b_w + emb,
        sym("N_active"): l * d**2 * th["xi_W_dec"] + emb,
    }
    if tokens is not None:
        subs[sym("D")] = sp.Float(tokens)
    return e.subs(subs)


# ---- theorem derivations (symbolic params) -----------------------------------------------------
@dataclass(frozen=True)
class Theorems:
    """What sympy derives for a law (parameters symbolic and bound): §5's Theorems 5.1–5.3 and Table 22."""

    #: Theorem 5.1: d loss / d rho (must be > 0) and the latency expressions' d/d rho (must be 0).
    rho_latency_at_min: bool
    dL_drho: sp.Expr
    #: Theorem 5.2: rho* under memory (stationarity in r and rho, multiplier eliminated); None when sympy fails.
    rho_memory: sp.Expr | None
    rho_memory_bound: sp.Expr | None
    #: Theorem 5.3(a)/(b): rho* when latency (prefill/decode) and memory both bind, over (l, d, r, gqa).
    rho_dual: dict[str, sp.Expr]
    #: Table 22: l* when a constraint binds, per constraint name.
    l_star: dict[str, sp.Expr]


def _positive_root(sols: list[sp.Expr], probe: Mapping[sp.Symbol, float]) -> sp.Expr | None:
    best = None
    for s in sols:
        try:
            v = complex(s.evalf(subs=dict(probe)))
        except (TypeError, ValueError):
            continue
        if abs(v.imag) <= 1e-9 * max(1.0, abs(v.real)) and v.real > 0:
            best = s
            break
    return best


PROBE = {
    B: 1.0, S_in: 1024.0, S_out: 16.0, b_w: 2.0, b_kv: 2.0, pi: 4.25e13, beta: 2.048e11, P_idle: 15.0,
    e_F: 5e-13, e_B: 1e-10, T_lat: 0.05, M_budget: 4e9, E_budget: 2.0,
    l: 16.0, d: 1536.0, r: 2.0, rho: 0.25, gqa: 4.0,
}  # fmt: skip


def solve_for(expr: sp.Expr, var: sp.Symbol, probe: Mapping[sp.Symbol, float] | None = None) -> sp.Expr | None:
    """The positive root of ``expr = 0`` in ``var`` (sympy), chosen at a probe point; None if sympy fails."""
    try:
        sols = sp.solve(expr, var, dict=False)
    except (NotImplementedError, sp.PolynomialError, ValueError):
        return None
    if not sols:
        return None
    if len(sols) == 1:
        return sols[0]
    return _positive_root(sols, probe or PROBE)


@lru_cache(maxsize=16)
def _theorems_cached(key: tuple, law: Any) -> Theorems:
    """Per process (lru) and on disk (:mod:`rooflaw.cache`, keyed by the law and the deriving sources)."""
    import hashlib
    import sys

    from ... import cache as disk
    from ...constraints import assembly, operators
    from ...constraints import theory as theory_mod

    tag = "theorems-" + hashlib.sha256(repr(key).encode()).hexdigest()[:16]
    dkey = disk.source_key(tag, sys.modules[__name__], theory_mod, operators, assembly)
    hit = disk.load(dkey)
    if isinstance(hit, Theorems):
        return hit
    out = _derive_theorems(law)
    disk.store(dkey, out)
    return out


def _derive_theorems(law: Any) -> Theorems:
    e_sym = law_in_paper_variables(law, symbolic_params=True)
    e = law_in_paper_variables(law)
    th = theory_expressions()
    M = th["M"]
    dL = sp.simplify(sp.diff(e_sym, rho))
    lat_free = all(sp.simplify(sp.diff(th[k], rho)) == 0 for k in ("T_pre", "T_dec"))
    at_min = bool(lat_free and dL.is_positive)
    # Theorem 5.2: ∂L/∂ρ·∂M/∂r − ∂L/∂r·∂M/∂ρ = 0 (both equal −μ·∂M/∂x); l and μ drop out.
    rho_mem = rho_mem_b = None
    if "rho" in {s.name for s in e.free_symbols} and "r" in {s.name for s in e.free_symbols}:
        cond = sp.simplify(sp.diff(e_sym, rho) * sp.diff(M, r) - sp.diff(e_sym, r) * sp.diff(M, rho))
        sols = []
        try:
            sols = sp.solve(cond, rho)
        except (NotImplementedError, ValueError):
            sols = []
        if len(sols) == 1:
            rho_mem = sols[0]
            pvals = {s: law.params[s.name] for s in rho_mem.free_symbols if s.name in law.params}
            rho_mem_b = rho_mem.xreplace({k: sp.Float(v) for k, v in pvals.items()})
    # Table 22: l* saturates the binding constraint (each constraint is linear in l).
    l_star = {}
    for name, g, bud in (
        ("prefill", th["T_pre"], T_lat),
        ("decode", th["T_dec"], T_lat),
        ("total", th["T_pre"] + th["T_dec"], T_lat),
        ("memory", M, M_budget),
    ):
        l_star[name] = sp.simplify(solve_for(g - bud, l))
    # Theorem 5.3: l from the latency constraint, rho from memory = budget.
    rho_dual = {}
    for ph in ("prefill", "decode", "total"):
        s = solve_for(M.subs(l, l_star[ph]) - M_budget, rho)
        if s is not None:
            rho_dual[ph] = sp.simplify(s)
    return Theorems(at_min, dL, rho_mem, rho_mem_b, rho_dual, l_star)


def law_kwargs(problem: Any) -> dict[str, Any]:
    """What rewriting a problem's law in paper variables needs: training tokens D, and vocab/tied for N."""
    law_kw: dict[str, Any] = {}
    if problem.tokens is not None:
        law_kw["tokens"] = float(problem.tokens)
    if any(v in problem.law.variables for v in ("N", "N_active")):
        law_kw["vocab"], law_kw["tied"] = int(problem.space.vocab[0]), bool(problem.space.tied[0])
    return law_kw


def law_key(law: Any) -> tuple:
    return (law.name, sp.srepr(law.expr), tuple(sorted(law.params.items())), tuple(law.variables))


def theorems(law: Any) -> Theorems:
    """Derive (once per law, cached) Theorems 5.1–5.3 and the Table-22 depths for ``law``."""
    return _theorems_cached(law_key(law), law)


__all__ = [
    "BUDGET",
    "CONSTS",
    "PROBE",
    "Theorems",
    "VARS",
    "X",
    "constants",
    "constraint_expr",
    "law_in_paper_variables",
    "solve_for",
    "theorems",
    "theory_energy",
]
