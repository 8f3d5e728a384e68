"""The MoE kernel family's padded rows, carried into the one assembly's routed-expert grouped GEMMs.

A grouped GEMM computes whole M tiles per expert: each expert's rows are padded up to the tile height
``m = min(max(2^⌈log2 r⌉, 16), 128)``, ``r`` the mean rows per touched expert (:mod:`.kernels.moe`, ``tile_rows``
and ``expected_load``; the family fits ``moe`` against these padded rows). Under uniform top-``K`` routing of
``T`` tokens over ``E`` experts each expert gets ``X ~ Binomial(T, p)`` rows, ``p = K/E`` (the family's own
uniform law), so the expected padded rows of the layer are::

    padded = m · E · E[⌈X/m⌉] = m · (E_cov + E · G),    E_cov = E · (1 − (1 − p)^T) = E · P(X > 0)
    G = Σ_{j ≥ 1} P(X > j·m)   (the tiles beyond each expert's first)
      ≈ max(n − 1, 0) + [n ≥ 1] · Φ((y − n)/s) + Φ((y − n − 1)/s),   n = max(⌊y⌋, 0)
    y = (μ − 1/2)/m,  s = σ/m,  μ = T·p,  σ² = T·p·(1 − p)

(the normal law of ``X`` with a continuity correction; the tiles ``j < n`` are full, ``j > n + 1`` empty, the
two about the mean are the normal's tail shares; ``Φ`` by Abramowitz & Stegun 7.1.27, within 2.5e-4, in additions,
products, one division and ``max``: :class:`ncdf`, the same bits in numpy and the numba kernel). The factor on the
routed experts' compute is ``padded/(T·K) ≥ 1`` (:func:`padding_factor`); ``r = T·K/E_cov`` and ``E_cov`` are the
assembly's own (its expert coverage, :data:`.operators.EXPERTS_TOUCHED`; under EP the busiest rank's ``top_k``,
:mod:`.parallel.routing`, so ``p`` is that rank's). :data:`MOE_PAD` (prefill, a multi-token pass) and
:data:`MOE_PAD_DEC` (a decode step) are 1 where kernel curves price the layer and 0 without, or where the engine
runs the pass's linear layers as dequantising GEMVs (``engines.gemv_path``: one row per expert, no tile); at 0 the
factor is 1, bit for bit the model without it. No fitted figure. The GP relaxation drops it
(a factor ≥ 1 left out: it stays a lower bound).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import sympy as sp

from . import operators as O
from .symbols import ARCH, T, sym

#: 1 where the routed experts' grouped GEMMs compute padded rows (the kernel curves price the layer), 0: none; in
#: prefill and multi-token passes, and in a decode step.
MOE_PAD, MOE_PAD_DEC = sym("moe_pad"), sym("moe_pad_dec")
#: Tile heights a grouped GEMM picks from (rows; ``kernels.moe.TILE_MIN``, ``TILE_MAX``), powers of two between.
TILE_MIN, TILE_MAX = 16, 128
#: Abramowitz & Stegun 7.1.27: erf(x) ≈ 1 − (1 + a1·x + a2·x² + a3·x³ + a4·x⁴)^−4 for x ≥ 0 (|error| ≤ 5e-4)
ERF_COEFFS = (0.278393, 0.230389, 0.000972, 0.078108)
#: Bound on |z| of :class:`ncdf` (Φ is 0 or 1 beyond to 1e-196; keeps the fourth power finite)
Z_MAX = 40


class ncdf(sp.Function):  # noqa: N801 - printed by name: the backends' function of the same name
    """``ncdf(z)``: the standard normal CDF Φ(z), unevaluated; numpy and the numba tracer compute it with
    :func:`ncdf_values`."""

    nargs = 1


def ncdf_values(z: Any) -> Any:
    """Φ(z) by :data:`ERF_COEFFS` (|error| ≤ 2.5e-4): numpy arrays, or the numba tracer's values (only ``+ − × ÷``,
    ``maximum``, ``minimum`` and ``sign``, which the kernel runs with the same bits)."""
    a1, a2, a3, a4 = ERF_COEFFS
    z = np.minimum(np.maximum(z, -Z_MAX), Z_MAX)
    x = np.maximum(z, -z) * 0.7071067811865476  # |z|/√2
    q = 1.0 + x * (a1 + x * (a2 + x * (a3 + x * a4)))
    q2 = q * q
    return 0.5 + 0.5 * np.sign(z) * (1.0 - 1.0 / (q2 * q2))


def _step(x: sp.Expr) -> sp.Expr:
    """1 where x > 0, else 0."""
    return O.nonzero(sp.Max(x, 0))


def tile_height(r: sp.Expr) -> sp.Expr:
    """The family's tile height for ``r`` mean rows per touched expert: the smallest power of two ≥ r, in
    [:data:`TILE_MIN`, :data:`TILE_MAX`]."""
    m, h = sp.Integer(TILE_MIN), TILE_MIN
    while h < TILE_MAX:
        m += h * _step(r - h)
        h *= 2
    return m


def padded_rows(tokens: sp.Expr, top_k: sp.Expr, experts: sp.Expr, touched: sp.Expr) -> sp.Expr:
    """Expected rows of the layer's grouped GEMMs padded to the family's tile (module docstring), for ``tokens``
    routed uniformly top-``top_k`` of ``experts``, ``touched`` of them with ≥ 1 row."""
    p = top_k / sp.Max(experts, 1)
    mu = tokens * p
    m = tile_height(tokens * top_k / sp.Max(touched, sp.Float(1e-9)))
    y = (mu - sp.Rational(1, 2)) / m
    s = sp.sqrt(sp.Max(mu * (1 - p), sp.Float(1e-12))) / m
    n = sp.Max(sp.floor(y), 0)
    beyond = sp.Max(n - 1, 0) + O.nonzero(n) * ncdf((y - n) / s) + ncdf((y - n - 1) / s)
    return m * (touched + experts * beyond)


def padding_factor(switch: sp.Expr = MOE_PAD) -> sp.Expr:
    """Factor on a routed-expert layer's grouped-GEMM compute: padded rows over its ``T·K`` token-expert rows (≥ 1)
    where ``switch`` (:data:`MOE_PAD`, :data:`MOE_PAD_DEC`) is 1, else 1; over ``T``, ``E_cov`` and the
    architecture's symbols."""
    a = ARCH
    rows = T * a["top_k"]
    pad = sp.Max(padded_rows(T, a["top_k"], a["experts"], O.experts_touched) / sp.Max(rows, sp.Float(1e-9)), 1)
    return 1 + switch * (pad - 1)


@functools.cache
def _padding_numpy() -> Any:
    tokens, top_k, experts = sp.symbols("tokens top_k experts", positive=True)
    a = ARCH
    touched = experts * (1 - (1 - top_k / experts) ** tokens)  # the assembly's coverage, operators.EXPERTS_TOUCHED
    subs = {T: tokens, a["top_k"]: top_k, a["experts"]: experts, O.experts_touched: touched, MOE_PAD: 1}
    funcs = {"Max": np.maximum, "Min": np.minimum, "nonzero": np.sign, "ncdf": ncdf_values}
    return sp.lambdify((tokens, top_k, experts), padding_factor().xreplace(subs), modules=[funcs, "numpy"])


def padding_value(tokens: float, top_k: float, experts: float) -> float:
    """:func:`padding_factor` with :data:`MOE_PAD` = 1 for ``tokens`` routed top-``top_k`` of ``experts`` (1 for a
    dense layer, ``experts`` ≤ 1, or no tokens): the efficiency fit's mirror of the assembly."""
    if experts <= 1 or tokens <= 0 or top_k <= 0:
        return 1.0
    return float(_padding_numpy()(float(tokens), float(top_k), float(experts)))


__all__ = ["MOE_PAD", "MOE_PAD_DEC", "TILE_MAX", "TILE_MIN", "ncdf", "ncdf_values", "padded_rows", "padding_factor",
           "padding_value", "tile_height"]  # fmt: skip
