"""Numbers from the sympy-derived theorems of §5, for tables and checks (paper_repro calls these).

Every function evaluates an expression that :func:`rooflaw.explain.derive_theorems` derived from rooflaw's own law and
theory-mode cost model; none types in the paper's formula.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import sympy as sp

import rooflaw

PAPER_LAW = "paper-2602.10377"
#: The widths of the paper's Theorem 5.2 discussion and of the [check] table in the reference digest.
THEOREM_5_2_WIDTHS = (768, 1024, 1536, 2048, 2560, 3072)


def _derived(law: Any) -> rooflaw.explain.DerivedTheorems:
    return rooflaw.explain.derive_theorems(PAPER_LAW if law is None else law)


def rho_star_memory(d: float | Iterable[float], law: Any = None) -> float | np.ndarray:
    """Theorem 5.2: the memory-constrained activation rate ρ*(d) (independent of the budget and of the phase)."""
    dt = _derived(law)
    th = dt.theorems
    if th.rho_memory_bound is None:
        raise ValueError("sympy could not solve the memory stationarity condition for rho for this law")
    f = sp.lambdify(dt.variables["d"], th.rho_memory_bound, "numpy")
    out = f(np.asarray(d, dtype=float))
    return float(out) if np.ndim(out) == 0 else np.asarray(out)


def rho_star_table(widths: Iterable[float] = THEOREM_5_2_WIDTHS, law: Any = None) -> dict[int, float]:
    """Theorem 5.2 evaluated at each width: {d: ρ*(d)}."""
    return {int(d): float(rho_star_memory(d, law)) for d in widths}


def width_sparsity_exponent(law: Any = None) -> float:
    """Corollary 1: the exponent of ρ* ∝ d^k, read off the derived expression (the paper: (β₁ − β₂)/α_ρ)."""
    dt = _derived(law)
    e = sp.expand_power_base(dt.theorems.rho_memory_bound, force=True)
    d = dt.variables["d"]
    return float(sp.simplify(d * sp.diff(e, d) / e))


def rho_star_dual(phase: str, r: float, gqa: float, d: float, constants: Mapping[str, float],
                  latency_budget: float, memory_budget: float, law: Any = None) -> float:  # fmt: skip
    """Theorem 5.3(a) (``phase='prefill'``) / (b) (``'decode'``): ρ* when latency and memory both bind, at
    (r, gqa, d). ``constants``: B, S_in, S_out, b_w, b_kv, pi, beta by name."""
    dt = _derived(law)
    x, bud = dt.variables, dt.budgets
    subs = {x["r"]: r, x["gqa"]: gqa, x["d"]: d, bud["latency"]: latency_budget, bud["memory"]: memory_budget}
    subs.update({s: float(constants[n]) for n, s in dt.constants.items() if n in constants})
    return float(dt.theorems.rho_dual[phase].subs(subs))


def rho_star_prefill_memory_eta(r: float, gqa: float, eta_p_bw: float) -> float:
    """Theorem 5.3(a) in the paper's variables: ρ* as a function of η_p·b_w (derived expression, re-parametrised).

    Built from :func:`rho_star_dual` with unit constants, since F̄_p/M_budget = η_p."""
    c = {"B": 1.0, "S_in": 1.0, "S_out": 1.0, "b_w": 1.0, "b_kv": 1.0, "pi": 1.0, "beta": 1.0}
    return rho_star_dual("prefill", r, gqa, 1.0, c, eta_p_bw, 1.0)


def l_star(constraint: str, d: float, r: float, gqa: float, rho: float, constants: Mapping[str, float],
           budget: float) -> float:  # fmt: skip
    """Table 22: the depth that saturates ``constraint`` (prefill | decode | total | memory) at (d, r, gqa, ρ)."""
    dt = _derived(None)
    x = dt.variables
    b = dt.budgets["latency" if constraint != "memory" else "memory"]
    subs = {x["d"]: d, x["r"]: r, x["gqa"]: gqa, x["rho"]: rho, b: budget}
    subs.update({s: float(constants[n]) for n, s in dt.constants.items() if n in constants})
    return float(dt.theorems.l_star[constraint].subs(subs))


def depth_width_exponent(constraint: str, widths: Iterable[float], r: float, gqa: float, rho: float,
                         constants: Mapping[str, float], budget: float) -> float:  # fmt: skip
    """Slope of log l* against log d over ``widths`` at fixed (r, gqa, ρ): −2 for prefill and memory, slightly
    above −2 for decode (the KV-cache term is linear in d)."""
    ds = np.asarray(list(widths), dtype=float)
    ls = np.array([l_star(constraint, d, r, gqa, rho, constants, budget) for d in ds])
    return float(np.polyfit(np.log(ds), np.log(ls), 1)[0])


def worked_example(tops: float = 10e12, bandwidth: float = 50e9, memory: float = 4e9, latency: float = 0.1,
                   output_tokens: int = 1) -> dict[str, float]:  # fmt: skip
    """§5.5.2's worked example re-computed from §5.1's definitions: M̄_d = T·β/S_out, η = M̄_d/M_budget.

    The paper prints M̄_d = 0.5 GB and η = 0.125; the definitions give 5 GB and 1.25 for S_out = 1.
    """
    Md = latency * bandwidth / output_tokens
    return {"M_d_bar": Md, "eta": Md / memory, "paper_M_d_bar": 0.5e9, "paper_eta": 0.125, "pi": tops}


def regime(problem: Any) -> dict[str, Any]:
    """Classify ``problem`` both ways: rooflaw's KKT regime (which multipliers are positive) and the paper's
    §5.5.2 rule from η, η_p; with the ratios."""
    cf = rooflaw.closed_form(problem)
    return {"regime": cf.regime, "binding": cf.binding, "paper_regime": cf.paper_regime, **cf.eta,
            "multipliers": cf.multipliers, "at_bound": cf.at_bound}  # fmt: skip


__all__ = [
    "THEOREM_5_2_WIDTHS",
    "depth_width_exponent",
    "l_star",
    "regime",
    "rho_star_dual",
    "rho_star_memory",
    "rho_star_prefill_memory_eta",
    "rho_star_table",
    "width_sparsity_exponent",
    "worked_example",
]
