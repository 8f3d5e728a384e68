"""Roof and memory stream classes, and the per-operator time rules of the kernel curves, for :mod:`.assembly`.

An operator runs on a compute roof (:data:`ROOF_CLASSES`, :func:`roof`).

An operator's bytes move at the bandwidth of its stream class (:data:`STREAM_CLASSES`): ``weights`` (a kernel
streaming its operands: the kernel curves' ``memory``), ``kv`` (decode attention reading the KV cache:
``attention_memory``, ramped by its CTAs per SM ``x/(x + decode_half_occupancy)``), ``experts`` (a
routed-expert layer's grouped GEMMs: ``memory · moe_memory``). A routed expert's GEMMs blend compute and streaming
(:func:`roofline_time`, ``moe_serial``; in the tile/wave model every other GEMM too, at ``gemm_blend``) and decode
attention pays its waves of CTAs (:func:`decode_waves`). Every
figure enters as a symbol the backends give a value (:meth:`.device_rates.Rates.stream_args`); without kernel curves
every class is ``inv_beta``, the blend the hard max and the decode terms 0, bit for bit the one-bandwidth model.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import sympy as sp

from ..errors import RooflawWarning
from . import operators as O
from .symbols import ARCH, B, sym

#: Compute roofs (an op on roof ``memory`` only moves data).
ROOF_CLASSES = ("linear", "attention", "vector")
#: Inverse bandwidth (s/byte) of the ``weights`` stream.
INV_BETA = sym("inv_beta")
nonzero = O.nonzero
#: Memory stream classes: the bandwidth an operator's bytes move at. ``weights``: a kernel streaming its operands
#: (GEMM weights, activations; the kernel curves' ``memory``); ``kv``: decode attention reading the KV cache
#: (``attention_memory``); ``experts``: the routed experts' grouped GEMMs of an MoE layer (``moe_memory``).
STREAM_CLASSES = ("weights", "kv", "experts")
#: Inverse bandwidth (s/byte) per stream class (``weights`` is :data:`INV_BETA`).
INV_STREAM = {"weights": INV_BETA, "kv": sym("inv_beta_kv"), "experts": sym("inv_beta_experts")}
#: p = 1/moe_serial of the routed experts' roofline blend ``(t_c^p + t_m^p)^(1/p)`` (inf: the hard max).
MOE_BLEND = sym("moe_blend")
#: Expert width per GPU (elements) at which a routed expert's grouped GEMMs reach half their rate: their compute
#: time takes ``1 + moe_half_inter/ffn`` (the MoE kernel family's ``i/(i + moe_half_inter·2/b_a)``; 0: none).
MOE_HALF = sym("moe_half_inter")
#: 1 / the grouped MoE kernel's fraction of the linear roof (the kernel curves' ``moe × moe_compute[key]``; 1: none)
INV_MOE = sym("inv_moe")
#: The operators a routed-expert layer runs as grouped GEMMs (``moe`` > 0): their bytes stream at the ``experts``
#: class, their compute and streaming blend with :data:`MOE_BLEND` (in a dense layer: ``weights``, the hard max).
EXPERT_OPS = ("ffn_up", "ffn_down")
#: p of a GEMM's round roofline corner ``(t_c^p + t_m^p)^(1/p)`` (the kernel curves' ``gemm_blend``; inf: the hard
#: max), in the tile/wave model only (the model that prices a GEMM's shape)
GEMM_BLEND = sym("gemm_blend")
#: Decode attention's kernel terms (kernel curves; 0 without): KV streams at which its bandwidth halves, seconds per
#: wave of its CTAs, and the SMs the waves fill.
DECODE_HALF, DECODE_WAVE, SMS = sym("decode_half_occupancy"), sym("decode_tile_s"), sym("sm_count")
#: CTAs per SM a split-KV (flash-decoding) decode kernel fills by splitting its streams' contexts (0: no split)
DECODE_SPLIT = sym("decode_split")
#: Independent KV streams of each decode attention op (one per sequence and KV head; MLA: per sequence, its latent
#: cache is one head): with x CTAs per SM its KV reads reach ``attention_memory · x/(x + decode_half_occupancy)``
#: of the bandwidth (Little's law), x = max(n/SMs, decode_split): the kernel splits few streams' contexts over the
#: SMs up to ``decode_split`` CTAs per SM (the kernel family's ``decode_occupancy`` with contexts long enough to
#: split; its least tokens per split is left out here, so the decode cost stays affine in the step).
KV_STREAMS: dict[str, sp.Expr] = {"attn_scores": B * ARCH["kv_heads"], "attn_values": B * ARCH["kv_heads"],
                                  "mla_scores": B, "mla_values": B}  # fmt: skip
#: The op that stands for the fused decode attention kernel (QKᵀ, softmax and ·V are one kernel): it pays
#: ``decode_tile_s`` per wave of its ``streams`` CTAs over the SMs, per decode step.
WAVE_OPS = ("attn_scores", "mla_scores")


def stream_class(name: str, roof: str, phase: str) -> str:
    """The memory stream class (:data:`STREAM_CLASSES`) of the bytes of op ``name`` on ``roof`` in ``phase``
    (``prefill`` | ``decode``): ``kv`` for an attention-roof op of a decode pass (its bytes are the KV-cache read; a
    prefill attention kernel streams at ``weights``, as the kernel curves' prefill family does), ``experts`` for
    :data:`EXPERT_OPS` (in a routed-expert layer: :func:`inv_bandwidth`), else ``weights``."""
    if roof == "attention" and phase == "decode":
        return "kv"
    return "experts" if name in EXPERT_OPS else "weights"


def routed() -> sp.Expr:
    """1 in a routed-expert (MoE) layer, 0 in a dense one (``nonzero(moe)``)."""
    return nonzero(ARCH["moe"])


def inv_bandwidth(op: O.Op, phase: str) -> sp.Expr:
    """Inverse bandwidth (s/byte) ``op``'s bytes move at in ``phase``: its :func:`stream_class`'s symbol; the
    ``experts`` class only in a routed-expert layer (a dense FFN's weights stream at ``weights``)."""
    cls = stream_class(op.name, op.roof, phase)
    if cls == "experts":
        m = routed()
        return INV_BETA * (1 - m) + INV_STREAM["experts"] * m
    if cls == "kv" and op.name in KV_STREAMS:  # few streams do not fill the DRAM pipe (split-KV or not)
        return INV_STREAM["kv"] * (1 + DECODE_HALF / sp.Max(KV_STREAMS[op.name] / SMS, DECODE_SPLIT))
    return INV_STREAM[cls]


def decode_waves(op: O.Op) -> sp.Expr:
    """Seconds a decode pass of ``op`` adds for its waves of CTAs (:data:`WAVE_OPS`; 0 for any other op):
    ``ceiling(streams / SMs) · decode_tile_s``."""
    if op.name not in WAVE_OPS or op.roof != "attention":
        return sp.Integer(0)
    return sp.ceiling(KV_STREAMS[op.name] / SMS) * DECODE_WAVE


class blend(sp.Function):  # noqa: N801 - printed by name: the backends' function of the same name
    """``blend(hi, lo, p, on)``: ``hi·(1 + (lo/hi)^p)^(1/p)`` = ``(hi^p + lo^p)^(1/p)`` where ``on`` ≠ 0, p < inf and
    hi > 0, else ``hi`` -- unevaluated; numpy and the numba tracer compute it with :func:`blend_values`."""

    nargs = 4


def blend_values(hi: Any, lo: Any, p: Any, on: Any) -> Any:
    """The value of :class:`blend`: numpy arrays (the power computed only where it applies), or, on the numba
    tracer's values, one statement whose powers run only where it applies (numpy's scalar-power fast paths)."""
    traced = next((x for x in (hi, lo, p, on) if getattr(x, "__traced__", False)), None)
    if traced is not None:
        return traced.tape.emit("_rl_blend({0}, {1}, {2}, {3})", hi, lo, p, on)  # numba_trace.BLEND_SOURCE
    h, lo_, on_ = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in (hi, lo, on)))
    p = float(p)
    mask = (on_ != 0) & (h > 0) if p != math.inf else np.zeros(h.shape, dtype=bool)
    out = np.array(h, dtype=np.float64)
    if mask.any():
        hm = h[mask]
        out[mask] = hm * (1.0 + (lo_[mask] / hm) ** p) ** (1.0 / p)
    return out


def compute_time(op: O.Op, tc: sp.Expr, pad: sp.Expr = sp.Integer(1)) -> sp.Expr:
    """Compute seconds of ``op`` at roof time ``tc``: a routed expert's grouped GEMM (:data:`EXPERT_OPS` in an MoE
    layer) at the MoE family's rate, its routed experts' share ``w`` of the FLOPs (K·ffn of K·ffn + shared·shared_ffn
    per token; the shared experts' dense GEMM at the roof) × ``pad`` (their rows padded to whole tiles, the phase's
    :func:`.moe_padding.padding_factor`) × :data:`INV_MOE` · (1 + :data:`MOE_HALF`/ffn); any other op ``tc``."""
    if op.name not in EXPERT_OPS:
        return tc
    m, a = routed(), ARCH
    w = a["top_k"] * a["ffn"] / sp.Max(a["top_k"] * a["ffn"] + a["shared_experts"] * a["shared_ffn"], 1)
    return tc * (m * (w * pad * INV_MOE * (1 + MOE_HALF / sp.Max(a["ffn"], 1)) + 1 - w) + 1 - m)


def roofline_time(op: O.Op, tc: sp.Expr, tm: sp.Expr, gemm: bool = False, pad: sp.Expr = sp.Integer(1)) -> sp.Expr:
    """Seconds of an op of compute time ``tc`` and memory time ``tm``: max(tc, tm), or for a routed expert layer's
    grouped GEMMs (:data:`EXPERT_OPS`) the kernel curves' blend ``(tc^p + tm^p)^(1/p)``, p = :data:`MOE_BLEND`
    (= 1/moe_serial: inf the hard max, 1 the sum; :class:`blend`), its compute time :func:`compute_time` (the MoE
    family's grouped-GEMM rate on the rows padded by ``pad``); with ``gemm`` (the tile/wave model) every other GEMM
    blends with p = :data:`GEMM_BLEND`."""
    linear = gemm and op.roof == "linear" and op.gemm is not None
    if op.name not in EXPERT_OPS:
        hi, lo = sp.Max(tc, tm), sp.Min(tc, tm)
        return blend(hi, lo, GEMM_BLEND, 1) if linear else hi
    m = routed()
    tc = compute_time(op, tc, pad)
    hi, lo = sp.Max(tc, tm), sp.Min(tc, tm)
    if not linear:
        return blend(hi, lo, MOE_BLEND, m)
    return m * blend(hi, lo, MOE_BLEND, m) + (1 - m) * blend(hi, lo, GEMM_BLEND, 1 - m)


def roof(op_roof: str, device: Any, precision: Any) -> tuple[str, float]:
    """(dtype, peak FLOP/s) an op runs on: linear layers on the (activation, weight) pair's roof, QKᵀ and ·V
    on the (activation, KV) pair's, vector ops on the FP32 vector roof; memory ops have none (inf)."""
    if op_roof == "linear":
        return device.roof(precision.linear_dtype)
    if op_roof == "attention":
        return device.roof(precision.attention_dtype)
    if op_roof == "vector":
        if device.vector_fallback:
            warnings.warn(device.vector_fallback, RooflawWarning, stacklevel=2)
        return "fp32", device.vector_flops
    return "-", float("inf")
