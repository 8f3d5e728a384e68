"""The paper preset in the paper's own variables (l, d, r, ρ, gqa), for the symbolic solver.

Derived by substitution from :data:`operators.PAPER_OPS` (heads/kv_heads = gqa, K·ffn = r·d,
E = K/ρ), so the closed-form solver differentiates exactly the expressions the numerical
evaluator runs.
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from . import operators as O
from .compile import affine_in_t, decode_step, prefill
from .symbols import ARCH, B, S_in, S_out, b_w, beta, d, gqa, l, pi, r, rho, t


def to_paper_variables(expr: sp.Expr) -> sp.Expr:
    """Rewrite an expression over architecture symbols in the paper's (l, d, r, ρ, gqa)."""
    K = ARCH["top_k"]
    return sp.simplify(
        sp.sympify(expr).subs(
            {
                ARCH["layers"]: l,
                ARCH["d_model"]: d,
                ARCH["kv_heads"]: ARCH["heads"] / gqa,
                ARCH["ffn"]: r * d / K,
                ARCH["experts"]: K / rho,
            },
            simultaneous=True,
        )
    )


@lru_cache(maxsize=1)
def theory_expressions() -> dict[str, sp.Expr]:
    """Symbolic theory-mode cost model.

    Keys: ``T_pre`` (s, compute-bound prefill, Eq. 28–29), ``T_dec`` (s, all S_out memory-bound
    decode steps, Eq. 37), ``M`` (bytes of weights of all experts, Eq. 41), and the per-layer
    coefficients ``xi_F``, ``xi_W_dec``, ``xi_W_all`` (App. E.4). Symbols: l, d, r, rho, gqa and
    B, S_in, S_out, b_w, b_kv, pi, beta.
    """
    lay = ARCH["layers"]
    pre_flops = sum(prefill(op.flops) for op in O.PAPER_OPS) * lay
    dec_bytes = 0
    for op in O.PAPER_OPS:
        b0, b1 = affine_in_t(decode_step(op.bytes))
        dec_bytes += S_out * b0 + b1 * S_out * (S_out + 1) / 2
    dec_bytes *= lay
    T_pre = to_paper_variables(pre_flops / pi)
    T_dec = to_paper_variables(dec_bytes / beta)
    M = to_paper_variables(O.paper_weight_bytes_expr())
    xi_F = sp.simplify(T_pre * pi / (l * B * S_in * d**2))
    xi_W_all = sp.simplify(M / (l * d**2 * b_w))
    xi_W_dec = sp.simplify(xi_F / 2)
    return {"T_pre": T_pre, "T_dec": T_dec, "M": M, "xi_F": xi_F, "xi_W_dec": xi_W_dec, "xi_W_all": xi_W_all}


__all__ = ["theory_expressions", "to_paper_variables", "t"]
