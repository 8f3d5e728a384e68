"""The sympy backend: the ``paper`` preset's totals in the paper's own variables (l, d, r, ρ, gqa).

Taken from the one assembly (:mod:`.assembly`: placement, theory-mode part times, totals) and rewritten
with :func:`assembly.to_paper_variables`, so the closed-form solver differentiates exactly the expressions
the numerical evaluator runs.
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from . import assembly as A
from .assembly import to_paper_variables
from .symbols import B, S_in, b_w, beta, d, l, pi, t


def _theory_totals(preset: str = "paper") -> dict[str, sp.Expr]:
    """Prefill and decode seconds, FLOPs and bytes of a theory preset over architecture symbols, with one
    compute roof ``pi`` and bandwidth ``beta`` (the paper's operators all run on the linear roof)."""
    parts = A.place(preset)
    rate = {A.INV_ROOF["linear"]: 1 / pi, A.INV_BETA: 1 / beta}
    pre = dec = sp.Integer(0)
    for p in parts:
        if p.roof not in ("linear", "memory"):
            raise ValueError(f"theory preset {preset}: operator {p.name} runs on the {p.roof} roof")
        tm = A.part_times(p, A.inv_roof(p.roof), A.inv_roof(p.roof), theory=True)
        pre += p.count * tm["pre"]
        dec += p.count * tm["dec"]
    tot = A.totals(preset, parts)
    flops = sum(tot.flops_pre.values()) + sum(tot.flops_dec.values())
    return {"T_pre": pre.xreplace(rate), "T_dec": dec.xreplace(rate), "M": A.memory_expr(preset, tot),
            "F": flops, "B": tot.bytes_pre + tot.bytes_dec}  # fmt: skip


@lru_cache(maxsize=1)
def theory_expressions() -> dict[str, sp.Expr]:
    """Symbolic theory-mode cost model.

    Keys: ``T_pre`` (s, compute-bound prefill, Eq. 28–29), ``T_dec`` (s, all S_out memory-bound
    decode steps, Eq. 37), ``M`` (bytes of weights of all experts, Eq. 41), ``F`` and ``B`` (FLOPs and bytes
    of both phases, for energy), and the per-layer coefficients ``xi_F``, ``xi_W_dec``, ``xi_W_all``
    (App. E.4). Symbols: l, d, r, rho, gqa and B, S_in, S_out, b_w, b_kv, pi, beta.
    """
    raw = _theory_totals()
    out = {k: to_paper_variables(v) for k, v in raw.items()}
    xi_F = sp.simplify(out["T_pre"] * pi / (l * B * S_in * d**2))
    out["xi_F"] = xi_F
    out["xi_W_all"] = sp.simplify(out["M"] / (l * d**2 * b_w))
    out["xi_W_dec"] = sp.simplify(xi_F / 2)
    return out


__all__ = ["theory_expressions", "to_paper_variables", "t"]
