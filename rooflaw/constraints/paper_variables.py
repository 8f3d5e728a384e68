"""The mapping from architecture symbols to the paper's variables (l, d, r, ρ, gqa), defined once."""

from __future__ import annotations

import sympy as sp

from .symbols import ARCH, sym

PAPER_VARS = ("l", "d", "r", "rho", "gqa")


def paper_variable_map(head_dim: sp.Expr | None = None, top_k: sp.Expr | None = None) -> dict[sp.Symbol, sp.Expr]:
    """Architecture symbols in the paper's (l, d, r, ρ, gqa): layers = l, d_model = d, kv_heads = heads/gqa,
    ffn = r·d/K, experts = K/ρ. With ``head_dim`` fixed, heads = d/head_dim (so kv_heads = d/(head_dim·gqa));
    with ``top_k`` given, K is that expression (else the top_k symbol stays)."""
    l, d, r, rho, gqa = (sym(v) for v in PAPER_VARS)
    a = ARCH
    K = a["top_k"] if top_k is None else top_k
    out: dict[sp.Symbol, sp.Expr] = {a["layers"]: l, a["d_model"]: d, a["ffn"]: r * d / K, a["experts"]: K / rho}
    if head_dim is None:
        out[a["kv_heads"]] = a["heads"] / gqa
    else:
        out.update({a["heads"]: d / head_dim, a["kv_heads"]: d / (head_dim * gqa), a["head_dim"]: head_dim})
    if top_k is not None:
        out[a["top_k"]] = top_k
    return out


def to_paper_variables(expr: sp.Expr) -> sp.Expr:
    """Rewrite an expression over architecture symbols in the paper's (l, d, r, ρ, gqa)."""
    return sp.simplify(sp.sympify(expr).subs(paper_variable_map(), simultaneous=True))


__all__ = ["PAPER_VARS", "paper_variable_map", "to_paper_variables"]
