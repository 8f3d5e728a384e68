"""Law variables: the architecture/workload quantities a loss law may use, and how they are computed.

Every variable has a sympy symbol named exactly like it, ``sympy.Symbol(name, positive=True)``, so
other modules build the same symbols independently.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import sympy

from ..arch.architecture import COLUMNS, param_counts
from ..devices.precision import Precision
from ..errors import RooflawError

#: name -> description of every variable a law may use.
VARIABLES: dict[str, str] = {
    "l": "layers (depth)",
    "d": "d_model (width)",
    "r": "active FFN expansion ratio top_k*ffn/d_model (the paper's r = K*r_single)",
    "rho": "expert activation rate top_k/experts",
    "gqa": "GQA ratio heads/kv_heads",
    "d_m": "KV dimension kv_heads*head_dim (= d/gqa when head_dim = d/heads)",
    "N": "total parameters, embeddings and LM head included (all experts)",
    "N_active": "parameters used per token, embeddings and LM head included",
    "N_nonembed": "total parameters minus token embeddings and the untied LM head",
    "N_active_nonembed": "active parameters minus token embeddings and the untied LM head",
    "D": "training tokens",
    "E": "number of routed experts (in user expressions a bare additive E is the irreducible loss)",
    "K": "experts per token (top_k)",
    "G": "granularity (Krajewski 2024): 4*d_model/ffn, i.e. d_ff of the dense 4x FFN over the expert size",
    "P_w": "weight bits per parameter, scales included (nvfp4 4.5, fp8 8, bf16 16): from the problem's precision",
    "P_a": "activation bits per element, scales included: from the problem's precision",
    "P_kv": "KV-cache bits per element, scales included: from the problem's precision",
}


def symbol(name: str) -> sympy.Symbol:
    """The sympy symbol of a law variable (positive)."""
    return sympy.Symbol(name, positive=True)


SYMBOLS: dict[str, sympy.Symbol] = {name: symbol(name) for name in VARIABLES}


def _arr(v: Any, name: str) -> np.ndarray:
    if getattr(v, "__traced__", False):  # a recording tracer (constraints.numba_trace): passed through
        return v
    try:
        return np.asarray(v, dtype=float)
    except (TypeError, ValueError) as e:
        raise RooflawError(f"{name}: not numeric ({e})") from None


def law_inputs(columns: Mapping[str, Any], tokens: Any = None, precision: Any = None) -> dict[str, np.ndarray]:
    """Every law variable computable from architecture ``columns`` (keys of ``arch.COLUMNS``).

    ``tokens`` (a number or an array broadcastable to the columns) feeds ``D``; ``precision`` (a ``Precision`` or
    its text) the bits ``P_w``, ``P_a``, ``P_kv`` (scale overhead included). Variables whose
    inputs are missing are left out (a law that needs them then names them when evaluated);
    the parameter counts need every column of ``COLUMNS``.
    """
    c = {k: _arr(v, k) for k, v in columns.items() if k in COLUMNS}
    out: dict[str, np.ndarray] = {}
    has = c.__contains__
    if has("layers"):
        out["l"] = c["layers"]
    if has("d_model"):
        out["d"] = c["d_model"]
    if has("ffn") and has("d_model"):
        k = c["top_k"] if has("top_k") else 1.0
        out["r"] = k * c["ffn"] / c["d_model"]
        out["G"] = 4.0 * c["d_model"] / c["ffn"]
    if has("top_k") and has("experts"):
        out["rho"] = c["top_k"] / c["experts"]
    if has("heads") and has("kv_heads"):
        out["gqa"] = c["heads"] / c["kv_heads"]
    if has("kv_heads") and has("head_dim"):
        out["d_m"] = c["kv_heads"] * c["head_dim"]
    if has("experts"):
        out["E"] = c["experts"]
    if has("top_k"):
        out["K"] = c["top_k"]
    if all(has(k) for k in COLUMNS):
        pc = param_counts(c)
        emb = pc["embed"] + pc["lm_head"]
        out["N"] = _arr(pc["total"], "N")
        out["N_active"] = _arr(pc["active"], "N_active")
        out["N_nonembed"] = out["N"] - emb
        out["N_active_nonembed"] = out["N_active"] - emb
    if tokens is not None:
        out["D"] = _arr(tokens, "tokens")
    if precision is not None:
        out |= {k: np.asarray(v) for k, v in Precision.parse(precision).bits.items()}
    return out
