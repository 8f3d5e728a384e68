"""A fused (FlashAttention-style) causal prefill kernel's blocks, query tiles and waves, for the one assembly.

The kernel curves' prefill family (:mod:`.kernels.attention`: ``block_pairs``, ``context_terms``, ``seconds``) prices
a kernel that cuts each sequence's and head's ``S`` queries into tiles of ``b`` rows and visits whole blocks of ``b``
keys (``b`` = 128, :data:`.kernels.attention_prefill.Q_TILE`): the diagonal blocks are computed whole, so it scores
more pairs than the causal ``S(S+1)/2`` (+25 % at S = 512, +12 % at 1,024). Its ``B·H·⌈S/b⌉`` query tiles run in
waves over the SMs, each wave costing ``attention_tile_s`` (Q load, softmax epilogue, O write), and its matmuls run at
the tiles' efficiency ``B·H·S / (rows·waves·SMs)`` (a partial tile does a whole tile's work: rows = the smallest
power of two ≥ S, 8 to b; :func:`.tiles.tile_rows`); its math and its stream of Q, K, V, O blend at ``prefill_blend``
(p-norm). The assembly prices the kernel as its two matmul ops (QKᵀ and ·V, equal FLOPs and equal bytes, so the sum
of their blends is the blend of their sums), with the softmax op beside them.

Each term enters as a symbol the backends give a value (:meth:`.device_rates.Rates.stream_args`): ``attn_block`` (``b``
under kernel curves; 1 without: then the pairs are the exact causal ones and the tiles are off), ``attention_tile_s`` (s
per wave, 0 without; the family's figure of the kernel the engine runs, ``attention_ws_tile_s`` for a warp-specialised
one: :func:`.curves_applied.prefill_wave_s`; SM cycles at the curves' clock, times the device's cycle scale) and
``prefill_blend`` (p; inf: the hard max). The blocks' extra pairs sit in the unevaluated identity :data:`blocked`, which
the GP relaxation drops (block pairs ≥ causal pairs, so it stays a lower bound, as it does without the tiles' waves and
efficiency).
Not followed: the family's per-engine KV-loop steps (TensorRT-LLM's Hopper FMHA: 256 keys at d ≤ 64, 64 above 128),
FlashAttention-3's 192-row tiles and pack-GQA (vLLM on Hopper), the engines' kernel rates and L2 residency.

The softmax (2026-12-03): under kernel curves the fused kernel's softmax is the family's, ``attention_softmax``
FLOP-equivalents a pair on the fp32 roof times :func:`.kernels.sfu.softmax_scale` (:data:`SOFTMAX_S`, s per pair and
head), combined with the matmuls by the curves' ``softmax_overlap`` p-norm (:data:`SOFTMAX_P`; 1: in series):
``(t_mma^p + t_softmax^p)^(1/p)``, t_mma at the tiles' efficiency, before the blend with the stream; the assembly's
own softmax op (5 FLOP a pair on the vector roof) is then off. Each matmul op takes the softmax's share of its FLOPs
(p-norms are homogeneous, so the sum of the two ops' p-norms is the kernel's). A decode step does the same (the family's
decode kernel: that math, max'd with its stream). Without curves or SMs (:data:`SOFTMAX_S` = 0) or unfused, nothing
changes.
"""

from __future__ import annotations

import sympy as sp

from . import operators as O
from .streams import SMS, WAVE_OPS, blend, roofline_time
from .symbols import ARCH, B, S_in, sym, unfused

#: Query rows of a tile and keys of a block of the fused prefill kernel (1: exact causal pairs, no tiles).
ATTN_BLOCK = sym("attn_block")
#: Seconds per wave of the fused prefill kernel's query tiles over the SMs (the curves' ``attention_tile_s``; 0: none).
PREFILL_WAVE = sym("attention_tile_s")
#: p of the prefill kernel's blend of its math and its stream (the curves' ``prefill_blend``; inf: the hard max).
PREFILL_BLEND = sym("prefill_blend")
#: The fused kernel's matmul ops (QKᵀ, ·V; MLA's): prefill compute at the tiles' efficiency, blended at p.
MMA_OPS = ("attn_scores", "attn_values", "mla_scores", "mla_values")
#: Seconds per (query, key) pair and head of the fused kernel's softmax (the curves' ``attention_softmax`` / the fp32
#: peak × ``softmax_scale``; 0: the assembly's softmax op instead)
SOFTMAX_S = sym("softmax_pair_s")
#: p of the fused kernel's p-norm of its matmuls and its softmax (the curves' ``softmax_overlap``; 1: in series)
SOFTMAX_P = sym("softmax_overlap")
#: The assembly's own softmax ops, off where the fused kernel prices its softmax (:func:`kernel_math`).
SOFTMAX_OPS = ("softmax", "mla_softmax")
#: Identity the backends evaluate (numpy, numba) and the GP relaxation replaces by 0: the blocks' extra pairs.
blocked = sp.Function("blocked")


def visited_pairs(S: sp.Expr, C: sp.Expr, b: sp.Expr = ATTN_BLOCK) -> sp.Expr:
    """(query, key) pairs per sequence and head the block kernel computes for ``S`` queries each seeing at most ``C``
    keys (itself included; ``C`` = S without a window): query tile i (``r_i`` rows) visits the key blocks from
    ``b·max(0, i - m)``, m = ⌈(C - 1)/b⌉, to the end of its last row's block, ``min(b(i + 1), S)``. In closed form,
    n = ⌈S/b⌉ tiles, the last of r = S - b(n - 1) rows, k = max(0, n - 1 - m) tiles past the window's reach:
    ``b²n(n - 1)/2 + S·r - b²k(k + 1)/2 + b·k·(b - r)`` (:func:`.kernels.attention.block_pairs` at ``kv = block = b``;
    b = 1: the exact ``S·C - C(C - 1)/2``)."""
    n = sp.ceiling(S / b)
    r = S - b * (n - 1)
    k = sp.Max(0, n - 1 - sp.ceiling((C - 1) / b))
    return b**2 * n * (n - 1) / 2 + S * r - b**2 * k * (k + 1) / 2 + b * k * (b - r)


def masked_pairs(S: sp.Expr, C: sp.Expr) -> sp.Expr:
    """``Mk`` of a pass of ``S`` queries over a context of ``C`` keys: the pairs of the S × C block the fused kernel
    skips, the causal mask's ``C(C - 1)/2`` less the blocks' extra pairs (:data:`blocked`)."""
    exact = S * C - C * (C - 1) / 2
    return C * (C - 1) / 2 - blocked(visited_pairs(S, C) - exact)


def _over(x: sp.Expr) -> sp.Expr:
    """1 where the integer ``x`` > 0, else 0."""
    return sp.Min(1, sp.Max(0, x))


def tile_rows(S: sp.Expr, b: sp.Expr = ATTN_BLOCK) -> sp.Expr:
    """Rows of a query tile for ``S`` queries: the smallest power of two ≥ S, at least 8, at most b (b ≤ 128)."""
    return sp.Min(b, 8 + 8 * _over(S - 8) + 16 * _over(S - 16) + 32 * _over(S - 32) + 64 * _over(S - 64))


def tile_waves(S: sp.Expr = S_in) -> sp.Expr:
    """Waves of the ``B·heads·⌈S/b⌉`` query tiles over the SMs."""
    return sp.ceiling(B * ARCH["heads"] * sp.ceiling(S / ATTN_BLOCK) / SMS)


def inv_tile_efficiency(S: sp.Expr = S_in) -> sp.Expr:
    """1 / the query tiles' tile × wave efficiency, ``rows·waves·SMs / (B·heads·S)``; 1 where ``b`` = 1 or the
    attention is unfused (separate GEMMs and softmax: no fused kernel's tiles, waves or blend)."""
    inv = tile_rows(S) * tile_waves(S) * SMS / (B * ARCH["heads"] * S)
    return 1 + O.nonzero(ATTN_BLOCK - 1) * (1 - unfused) * (inv - 1)


def prefill_time(op: O.Op, F: sp.Expr, tc: sp.Expr, tm: sp.Expr, gemm: bool = False) -> sp.Expr:
    """Seconds of ``op`` in a prefill of ``F`` FLOPs, compute time ``tc`` and memory time ``tm``: a fused kernel's
    matmul op (:data:`MMA_OPS`) at the query tiles' efficiency, p-normed with its softmax (:func:`kernel_math`), its
    math and stream blended at :data:`PREFILL_BLEND`, plus (the op standing for the kernel,
    :data:`.streams.WAVE_OPS`) its waves; any other op :func:`.streams.roofline_time` (a softmax op's compute off
    under :func:`kernel_math`)."""
    if op.name not in MMA_OPS or op.roof != "attention":
        return roofline_time(op, kernel_math(op, F, tc), tm, gemm)
    tc = kernel_math(op, F, tc * inv_tile_efficiency())
    waves = tile_waves() * PREFILL_WAVE * (1 - unfused) if op.name in WAVE_OPS else 0
    return blend(sp.Max(tc, tm), sp.Min(tc, tm), PREFILL_BLEND, 1 - unfused) + waves


def softmax_on() -> sp.Expr:
    """1 where the fused kernel prices its softmax (kernel curves with SMs: :data:`SOFTMAX_S` > 0, fused), else 0."""
    return O.nonzero(SOFTMAX_S) * (1 - unfused)


def pair_flops(name: str) -> sp.Expr:
    """FLOPs per (query, key) pair and head of the fused kernel holding matmul op ``name``: QKᵀ and ·V, 2·(d_qk + d_v)
    (GQA: 4·head_dim; MLA: 2·(kv_lora + rope + kv_lora))."""
    if name.startswith("mla_"):
        return 2 * (2 * O.kv_lora + O.rope)
    return 4 * ARCH["head_dim"]


def kernel_math(op: O.Op, F: sp.Expr, tc: sp.Expr) -> sp.Expr:
    """Compute seconds of ``op`` (``F`` FLOPs, ``tc`` seconds at its roof, the tiles' efficiency included) as the
    fused kernel prices its softmax: a matmul op (:data:`MMA_OPS`) ``(tc^p + t_s^p)^(1/p)``, ``t_s = F/pair_flops ·
    softmax_pair_s`` its share of the softmax, p = :data:`SOFTMAX_P`; a softmax op (:data:`SOFTMAX_OPS`) 0 where
    that is on; any other op ``tc``. Exact per coefficient of a step-affine ``F`` (the p-norm is homogeneous)."""
    if op.name in SOFTMAX_OPS:
        return tc * (1 - softmax_on())
    if op.name not in MMA_OPS or op.roof != "attention":
        return tc
    ts = F * SOFTMAX_S / sp.Max(pair_flops(op.name), 1)  # (a model without the kernel: F = 0)
    return blend(sp.Max(tc, ts), sp.Min(tc, ts), SOFTMAX_P, softmax_on())


def drop_blocks(expr: sp.Expr) -> sp.Expr:
    """``expr`` without the blocks' extra pairs (the GP relaxation's causal pairs: a lower bound)."""
    return sp.sympify(expr).replace(blocked, lambda *_: sp.Integer(0))


def blocked_values(x):  # noqa: ANN001, ANN201 - numpy arrays or the numba tracer's values
    """The value of :data:`blocked`: ``x`` itself."""
    return x
