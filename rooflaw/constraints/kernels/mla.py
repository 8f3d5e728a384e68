"""The MLA attention families (DeepSeek's multi-head latent attention): prefill (``context_mla``) and one decode
step (``generation_mla``), priced with the attention physics and figures of :mod:`.attention` -- each engine's fixed
extra per call (``launch``) and kernel rate (``rate``, vLLM's) are MLA's own, and decode has its own bandwidth
fraction (``mla_memory``) and token walk (``mla_token_s``, ``mla_walk_blend``,
``rate["<engine>/generation_mla/walk"]``).

The measured tables hold DeepSeek-V3's MLA shapes (``num_heads`` per GPU after tensor parallelism; per head a
``QK_NOPE + QK_ROPE = 192``-wide query/key and a ``V_DIM = 128``-wide value; a compressed KV cache of
``KV_LORA + QK_ROPE = 576`` values per token, shared by every head).

Prefill decompresses the cache into per-head K and V and runs a causal FlashAttention kernel: FLOPs
``= 2·B·H·P·(192 + 128)`` over the ``P`` block pairs (:func:`.attention.block_pairs`), bytes ``= B·S·H·(2·192 +
2·128)·2`` (Q, K, V, O in bf16), plus the latent written to the cache beside it (``B·S·576·b_kv``). With an fp8 KV
cache on sm90+ TensorRT-LLM runs its fp8 context MLA (:func:`fp8_mla`): a pass quantising Q, K and V (``B·S·H·512``
values read in bf16, written in fp8) and the FMHA on the fp8 roof (``attention_fp8``), a kernel of its own: its own
rate (``rate["trtllm/context_mla/fp8"]``), and its quantise pass one kernel more (``kernel_s``: B200 and H100 take
2-3.5 µs longer in fp8 than in bf16 at one token); an engine's fp8-cache path has its own fixed time per call
(``launch["<engine>/context_mla/fp8"]``, :func:`context_seconds`). vLLM's prefill op up-projects the latent itself
(:func:`projection`: ``kv_b_proj`` on ``B·S`` tokens, ``2·B·S·512·H·256`` FLOPs at the GEMM figures, and the K copy).
Decode runs with the up-projections absorbed into the query and output (an MQA over the latent): every head scores
the 576-wide latent and sums the 512-wide one, FLOPs ``= 2·B·H·L·(576 + 512)`` (on the fp8 roof in TensorRT-LLM's
fp8-KV kernel from sm90 on), bytes ``= B·L·576·b_kv + B·H·(576 + 512)·2`` at ``mla_memory`` of the bandwidth, one KV
stream per sequence (``n = B``). Times as :func:`.attention.seconds`. The streaming (sm90+) kernels run a CTA per
sequence and :data:`HEAD_BLOCK` query heads (FlashMLA's 64-row MMA tile), each wave of them costing ``mla_tile_s`` (SM
cycles, the MLA kernels' own ``decode_tile_s``: at one cached token the time grows ~linearly with the batch from 128
sequences, 36 ns a sequence on B200, 55 ns on H100, and doubles from 64 to 128 heads on H100); an engine's fp8-KV
kernel runs at its own rate and fixed time per call (``rate`` and ``launch["<engine>/generation_mla/fp8"]``: vLLM
runs FlashMLA on an fp8 cache, 40 µs a call more on H100, and FlashAttention's MLA on a bf16 one; the fixed time, like a
GEMM library's, is not carried into ``generic``). TensorRT-LLM's sm90 kernel (FlashMLA) runs a combine kernel after
it, one ``kernel_s`` more (:func:`side_kernels`).

Which decode kernel runs is a property of the device's architecture and the engine (:func:`walks`): before Hopper
(compute capability < 9.0: Ampere, Ada) there is no split MLA decode kernel (FlashMLA and TensorRT-LLM's trtllm-gen
MLA kernels need sm90's warpgroup MMA and TMA), and both engines' kernels walk the latent token by token: TensorRT-LLM
one CTA per sequence over its whole context, vLLM's Triton kernel one CTA per (sequence, 16 query heads, one of 4 KV
splits) over a quarter of it (:func:`walk_layout`); the CTAs run in waves over the SMs, one per SM, each token
``mla_token_s`` (SM cycles written as seconds at the curves' ``clock_mhz``, whatever its bytes or heads: 112-127 ns
on A100, 78-81 ns on L40S in both engines' tables). The walk and the rest of the kernel (stream, math, prologues,
fixed time; the stream without the occupancy ramp, the walk being its CTAs' latency limit) blend as a p-norm
(``mla_walk_blend``), at the walking kernel's own rate. Hopper's and Blackwell's kernels stream. The walk's figures
are fitted on the walking rows only, so the pooled ``generic`` curves carry them to a held-out Ampere or Ada GPU.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from ...devices.device import Device
from ..tiles import tile_efficiency
from . import Family, KernelCurves, register
from . import attention_prefill as AP
from .attention import (
    Q_TILE,
    AttentionTerms,
    block_pairs,
    bytes_of,
    column,
    groups_of,
    seconds,
    used_params_for,
)
from .gemm import cycle_scale

KV_LORA = 512.0  #: compressed KV width (values per token)
QK_ROPE = 64.0  #: rotary part of each query/key head, also cached per token
QK_NOPE = 128.0  #: non-rotary part of each query/key head
V_DIM = 128.0  #: value head width
#: architectures without a split MLA decode kernel (compute capability < 9.0: no warpgroup MMA / TMA, which FlashMLA
#: and TensorRT-LLM's trtllm-gen MLA kernels need)
WALK_ARCHITECTURES = ("ampere", "ada")
#: the engines whose MLA decode walks the latent on :data:`WALK_ARCHITECTURES`: TensorRT-LLM one CTA per sequence,
#: vLLM's Triton kernel one CTA per (sequence, :data:`TRITON_HEADS` query heads, one of :data:`TRITON_SPLITS` KV
#: splits)
WALK_ENGINES = ("trtllm", "vllm")
#: the engine whose MLA kernels run their math in fp8 with an fp8 KV cache on sm90+ (:func:`fp8_mla`)
FP8_CONTEXT_ENGINE = "trtllm"
#: query heads per CTA (its ``BLOCK_H``) and KV splits per sequence of vLLM's Triton MLA decode kernel
TRITON_HEADS, TRITON_SPLITS = 16.0, 4.0
#: query heads per CTA of the streaming (sm90+) MLA decode kernels (FlashMLA's and TensorRT-LLM's: a 64-row MMA tile)
HEAD_BLOCK = 64.0
#: the engines whose timed MLA prefill op up-projects the latent itself (vLLM's ``MLACommonImpl`` prefill:
#: ``kv_b_proj`` on the new tokens' latent, then K = [k_nope, k_pe] concatenated, before the FMHA): a GEMM of
#: ``B·S`` tokens x ``KV_LORA`` -> ``H·(QK_NOPE + V_DIM)`` at the GEMM figures and a copy pass (:func:`projection`)
PROJECTING_ENGINES = ("vllm",)
#: architectures on which :data:`SPLIT_ENGINE`'s MLA decode runs FlashMLA's split-KV scheme as separate kernels
#: (sm90, TensorRT-LLM's ``mUseGenFlashMLA`` path of ``AttentionOp::mlaGeneration``): the split-KV kernel and a
#: combine kernel after it inside the timed op (its tile-scheduler metadata is computed beforehand, in the attention
#: metadata's ``prepare``, from TensorRT-LLM 1.x: outside the collector's CUDA graph); Blackwell's trtllm-gen kernel
#: reduces its KV splits inside its one kernel, and sm8x runs one XQA / FMHA kernel
SPLIT_ARCHITECTURES = ("hopper",)
SPLIT_ENGINE = "trtllm"
#: kernels a :data:`SPLIT_ARCHITECTURES` MLA decode call runs beyond the one every kernel's fixed time counts
SPLIT_KERNELS = 1.0


@dataclasses.dataclass(frozen=True)
class MlaDecodeTerms(AttentionTerms):
    """:class:`.attention.AttentionTerms` of MLA decode rows, with the rows whose kernel walks the latent."""

    walk: np.ndarray | None = None  #: bool per row: the kernel walks the latent token by token (:func:`walks`)
    walk_ctas: np.ndarray | None = None  #: CTAs of a walking kernel (they run in waves over the SMs)
    walk_tokens: np.ndarray | None = None  #: cached tokens each of them walks
    side_kernels: np.ndarray | None = None  #: kernels each call runs beyond its main one (:func:`side_kernels`)


@dataclasses.dataclass(frozen=True)
class MlaContextTerms(AttentionTerms):
    """:class:`.attention.AttentionTerms` of MLA prefill rows, with the rows holding an fp8 KV cache (any engine)."""

    cache8: np.ndarray | None = None  #: bool per row: the KV cache is fp8 (its engine's fp8 path's own fixed time)
    proj_flops: np.ndarray | None = None  #: FLOPs of the op's own latent up-projection GEMM (0: none)
    proj_bytes: np.ndarray | None = None  #: bytes that GEMM reads and writes (its latent, weights, K/V nope)


def walks(rows: pd.DataFrame, device: Device) -> np.ndarray:
    """bool per decode row: its kernel walks the latent token by token -- :data:`WALK_ENGINES` on a device of
    :data:`WALK_ARCHITECTURES`."""
    fw = rows["framework"].astype(str).to_numpy() if "framework" in rows else np.full(len(rows), "")
    return np.isin(fw, WALK_ENGINES) & (device.architecture in WALK_ARCHITECTURES)


def side_kernels(rows: pd.DataFrame, device: Device) -> np.ndarray:
    """Kernels each MLA decode row's call runs beyond its main one: :data:`SPLIT_KERNELS` for :data:`SPLIT_ENGINE`
    on :data:`SPLIT_ARCHITECTURES` (FlashMLA's combine kernel), else 0."""
    fw = rows["framework"].astype(str).to_numpy() if "framework" in rows else np.full(len(rows), "")
    split = (fw == SPLIT_ENGINE) & (device.architecture in SPLIT_ARCHITECTURES)
    return np.where(split, SPLIT_KERNELS, 0.0)


def walk_layout(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """CTAs and cached tokens per CTA of each row's walking kernel: TensorRT-LLM's one CTA per sequence walks its
    whole context; vLLM's Triton kernel splits each sequence into ``ceil(H / 16)`` head blocks x 4 KV splits."""
    B, L, H = column(rows, "batch_size"), column(rows, "isl") + column(rows, "step"), column(rows, "num_heads")
    fw = rows["framework"].astype(str).to_numpy() if "framework" in rows else np.full(len(rows), "")
    triton = fw == "vllm"
    ctas = np.where(triton, B * np.ceil(H / TRITON_HEADS) * TRITON_SPLITS, B)
    return ctas, np.where(triton, L / TRITON_SPLITS, L)


def _dtype(rows: pd.DataFrame, name: str) -> np.ndarray:
    return bytes_of(rows, name) if name in rows else np.full(len(rows), 2.0)


def fp8_mla(rows: pd.DataFrame, device: Device) -> np.ndarray:
    """bool per row: :data:`FP8_CONTEXT_ENGINE`'s fp8 MLA kernels run -- an fp8 KV cache on a device past
    :data:`WALK_ARCHITECTURES` (sm90+), where TensorRT-LLM's context MLA quantises Q, K and V to fp8 and runs the FMHA
    in fp8, and its decode kernel runs its math in fp8 too."""
    fw = rows["framework"].astype(str).to_numpy() if "framework" in rows else np.full(len(rows), "")
    sm90 = device.architecture not in WALK_ARCHITECTURES
    return (fw == FP8_CONTEXT_ENGINE) & (_dtype(rows, "kv_cache_dtype") == 1.0) & sm90


def projection(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(FLOPs, bytes, copy bytes) of the latent up-projection inside a :data:`PROJECTING_ENGINES` prefill op, 0
    elsewhere: the GEMM ``2·B·S·KV_LORA·H·(QK_NOPE + V_DIM)`` reading the latent and the weights and writing the
    per-head K/V nope parts in bf16, and the copy assembling K (the 128-wide nope part read, 192 wide written)."""
    B, S, H = column(rows, "batch_size"), column(rows, "isl"), column(rows, "num_heads")
    fw = rows["framework"].astype(str).to_numpy() if "framework" in rows else np.full(len(rows), "")
    own = np.isin(fw, PROJECTING_ENGINES)
    width = QK_NOPE + V_DIM
    flops = 2.0 * B * S * KV_LORA * H * width
    byts = (B * S * KV_LORA + KV_LORA * H * width + B * S * H * width) * 2.0
    copy = B * S * H * (QK_NOPE + QK_NOPE + QK_ROPE) * 2.0
    return np.where(own, flops, 0.0), np.where(own, byts, 0.0), np.where(own, copy, 0.0)


def context_terms(rows: pd.DataFrame, device: Device) -> MlaContextTerms:
    B, S, H = column(rows, "batch_size"), column(rows, "isl"), column(rows, "num_heads")
    b_kv, b_q = _dtype(rows, "kv_cache_dtype"), _dtype(rows, "mla_dtype")
    dqk = QK_NOPE + QK_ROPE
    pairs = block_pairs(S, np.zeros_like(S))
    flops = 2.0 * B * H * pairs * (dqk + V_DIM)
    byts = B * S * H * (2.0 * dqk + 2.0 * V_DIM) * 2.0
    q8 = fp8_mla(rows, device)
    # the latent written to the cache; the fp8 kernel's quantise pass reads Q, K, V in bf16 and writes them in fp8
    extra = B * S * (KV_LORA + QK_ROPE) * b_kv + np.where(q8, B * S * H * (2.0 * dqk + V_DIM) * (2.0 + 1.0), 0.0)
    proj_flops, proj_bytes, copy = projection(rows)
    extra = extra + copy
    te, we = tile_efficiency(S, 1.0, B * H, dataclasses.replace(device, tile=(Q_TILE, 1), gemm_half_rows=0.0))
    ok = np.isfinite(byts + extra) & (flops > 0)
    group, labels = groups_of(rows, ok)
    return MlaContextTerms(
        flops=np.where(ok, flops, np.nan),
        bytes=byts,
        peak16=np.full(len(rows), device.roof("fp16")[1]),
        peak8=np.full(len(rows), device.roof("fp8")[1]),
        peak32=np.full(len(rows), device.roof("fp32")[1]),
        eff=te * we,
        extra_bytes=extra,
        waves=np.ceil(B * H * np.ceil(S / Q_TILE) / (device.sm_count or 1)),
        sms=float(device.sm_count or 1),
        streams=np.full(len(rows), np.inf),
        resident=byts + extra <= (device.l2_bytes or 0.0),
        pairs=B * H * pairs,
        fp8=(b_q == 1.0) | q8,
        group=group,
        labels=labels,
        op="context_mla",
        kv8=q8,
        ws=AP.warp_specialised(None, len(rows), device),  # the engines' own MLA prefill kernels' kind
        cache8=b_kv == 1.0,
        proj_flops=proj_flops,
        proj_bytes=proj_bytes,
    )


def context_seconds(t: MlaContextTerms, device: Device, curves: KernelCurves) -> np.ndarray:
    """Seconds of each prepared MLA prefill row: :func:`.attention.seconds` (the fp8 MLA kernel's rows, ``t.kv8``, at
    its own rate ``rate["<engine>/context_mla/fp8"]``), the fp8-cache rows (``t.cache8``) with their engine's fp8
    path's own fixed time per call where fitted (``launch["<engine>/context_mla/fp8"]``, not pooled: vLLM's fp8 path
    takes 30-40 µs a call more on H100), the fp8 MLA kernel's quantise pass one kernel more (``kernel_s``, SM
    cycles)."""
    passes = np.zeros(len(t.bytes)) if t.kv8 is None else t.kv8.astype(float)
    passes = passes * cycle_scale(curves, device)  # the quantise kernel's kernel_s: SM cycles at the curves' clock
    base = seconds(t, device, curves) + passes * curves.kernel_s + projection_seconds(t, device, curves)
    key = {f"{f}/{t.op}": f"{f}/{t.op}/fp8" for f in t.labels}
    fixed = {k: curves.launch[v] for k, v in key.items() if v in curves.launch}
    if t.cache8 is None or not fixed or not np.any(t.cache8):
        return base
    own = seconds(t, device, dataclasses.replace(curves, launch={**curves.launch, **fixed})) + passes * curves.kernel_s
    return np.where(t.cache8, own + projection_seconds(t, device, curves), base)


def projection_seconds(t: MlaContextTerms, device: Device, curves: KernelCurves) -> np.ndarray:
    """Seconds of the op's own latent up-projection (:func:`projection`): its GEMM on the bf16 roof at the GEMM
    figures, ``max(FLOPs / (peak · compute["fp16"]), bytes / (bandwidth · memory))``, and two kernels' fixed time
    (the GEMM's and the K copy's; SM cycles); 0 on rows without one."""
    if t.proj_flops is None or t.proj_bytes is None or not np.any(t.proj_flops > 0):
        return np.zeros(len(t.bytes))
    eff = curves.compute.get("fp16", 0.0) or 1.0
    gemm = np.maximum(t.proj_flops / (t.peak16 * eff), t.proj_bytes / (device.memory_bandwidth * curves.memory))
    return np.where(t.proj_flops > 0, gemm + 2.0 * curves.kernel_s * cycle_scale(curves, device), 0.0)


def generation_terms(rows: pd.DataFrame, device: Device) -> MlaDecodeTerms:
    B, L, H = column(rows, "batch_size"), column(rows, "isl") + column(rows, "step"), column(rows, "num_heads")
    b_kv = _dtype(rows, "kv_cache_dtype")
    latent = KV_LORA + QK_ROPE
    flops = 2.0 * B * H * L * (latent + KV_LORA)
    byts = B * L * latent * b_kv + B * H * (latent + KV_LORA) * 2.0
    ok = np.isfinite(byts) & (flops > 0)
    group, labels = groups_of(rows, ok)
    ctas, tokens = walk_layout(rows)
    walk = walks(rows, device)
    return MlaDecodeTerms(
        flops=np.where(ok, flops, np.nan),
        bytes=byts,
        peak16=np.full(len(rows), device.roof("fp16")[1]),
        peak8=np.full(len(rows), device.roof("fp8")[1]),
        peak32=np.full(len(rows), device.roof("fp32")[1]),
        eff=np.ones(len(rows)),
        extra_bytes=np.zeros(len(rows)),
        waves=np.ceil(B / (device.sm_count or 1)),
        sms=float(device.sm_count or 1),
        streams=np.where(walk, B, B * np.ceil(H / HEAD_BLOCK)),
        resident=byts <= (device.l2_bytes or 0.0),
        pairs=B * H * L,
        fp8=fp8_mla(rows, device),
        group=group,
        labels=labels,
        op="generation_mla",
        prefill=False,
        context=L,
        stream_bytes=L * latent * b_kv,
        kv8=b_kv == 1.0,
        walk=walk,
        walk_ctas=ctas,
        walk_tokens=tokens,
        side_kernels=side_kernels(rows, device),
    )


def walk_key(framework: str) -> str:
    """The :attr:`KernelCurves.rate` key of ``framework``'s walking MLA decode kernel (:func:`walks`)."""
    return f"{framework}/generation_mla/walk"


def fp8_key(framework: str) -> str:
    """The :attr:`KernelCurves.rate` and ``launch`` key of ``framework``'s streaming MLA decode kernel for an fp8 KV
    cache (a kernel of its own: vLLM runs FlashMLA there and FlashAttention's MLA on a bf16 cache; TensorRT-LLM its fp8
    kernel)."""
    return f"{framework}/generation_mla/fp8"


def fp8_stream(t: MlaDecodeTerms, device: Device, curves: KernelCurves) -> np.ndarray:
    """:func:`.attention.seconds` of streaming MLA decode rows, the fp8-KV rows (``t.kv8``) at their engine's fp8-KV
    kernel's rate and fixed time (``rate`` / ``launch["<engine>/generation_mla/fp8"]``; the rate its whole kernel's:
    math and prologues; where not fitted, the engine's)."""
    base = seconds(t, device, curves)
    own = {f"{f}/{t.op}": curves.rate[fp8_key(f)] for f in t.labels if fp8_key(f) in curves.rate}
    fixed = {f"{f}/{t.op}": curves.launch[fp8_key(f)] for f in t.labels if fp8_key(f) in curves.launch}
    if t.kv8 is None or not (own or fixed) or not np.any(t.kv8):
        return base
    kv8 = dataclasses.replace(curves, rate={**curves.rate, **own}, launch={**curves.launch, **fixed})
    return np.where(t.kv8, seconds(t, device, kv8), base)


def walk_seconds(t: MlaDecodeTerms, curves: KernelCurves) -> np.ndarray:
    """Seconds (rate 1) of each row's walking kernel: its CTAs in waves over the SMs (one resident per SM), each
    walking its tokens at ``mla_token_s`` a token (as ``curves`` give it: seconds)."""
    assert t.walk_ctas is not None and t.walk_tokens is not None
    return np.ceil(t.walk_ctas / t.sms) * t.walk_tokens * curves.mla_token_s


def decode_seconds(t: MlaDecodeTerms, device: Device, curves: KernelCurves) -> np.ndarray:
    """Seconds of each prepared MLA decode row: :func:`.attention.seconds`; on walking rows (``t.walk``) its p-norm
    blend (``mla_walk_blend``) with the walk, :func:`walk_seconds` (``mla_token_s`` in SM cycles), both at the walking
    kernel's own rate (``rate["<engine>/generation_mla/walk"]``), the stream without the occupancy ramp (the walk is
    its CTAs' latency limit)."""
    if curves.mla_memory > 0:  # the MLA kernels' own bandwidth fraction
        curves = dataclasses.replace(curves, attention_memory=curves.mla_memory)
    # the streaming kernels' own cost per wave of CTAs (the walking kernels' prologues stay the decode kernels')
    tile = curves.mla_tile_s if curves.mla_tile_s > 0 else curves.decode_tile_s
    stream = fp8_stream(t, device, dataclasses.replace(curves, mla_token_s=0.0, decode_tile_s=tile))
    # sm90's split-KV scheme: its combine kernel, a kernel's fixed time (SM cycles)
    if t.side_kernels is not None:
        stream = stream + t.side_kernels * curves.kernel_s * cycle_scale(curves, device)
    if t.walk is None or not np.any(t.walk) or curves.mla_token_s <= 0:
        return stream
    own = {f"{f}/{t.op}": curves.rate[walk_key(f)] for f in t.labels if walk_key(f) in curves.rate}
    rates = {k: v for k, v in {**curves.rate, **own}.items() if k not in (fp8_key(f) for f in t.labels)}
    walker = dataclasses.replace(curves, mla_token_s=0.0, rate=rates, decode_half_occupancy=0.0)
    rate = np.array([walker.rate.get(f"{f}/{t.op}", 1.0) for f in t.labels] or [1.0])[t.group]
    token_s = curves.mla_token_s * cycle_scale(curves, device)
    walk = walk_seconds(t, dataclasses.replace(curves, mla_token_s=token_s)) / rate
    rest = seconds(t, device, walker)
    p = curves.mla_walk_blend
    return np.where(t.walk, (rest**p + walk**p) ** (1.0 / p), stream)


def predict_context(rows: pd.DataFrame, device: Device, curves: KernelCurves) -> np.ndarray:
    """Predicted ms of each row of a ``context_mla_perf`` table."""
    return context_seconds(context_terms(rows, device), device, curves) * 1e3


def predict_generation(rows: pd.DataFrame, device: Device, curves: KernelCurves) -> np.ndarray:
    """Predicted ms of each row of a ``generation_mla_perf`` table."""
    return decode_seconds(generation_terms(rows, device), device, curves) * 1e3


def context_used(rows: pd.DataFrame) -> tuple[str, ...]:
    """The MLA prefill figures ``rows`` determine: each engine's fixed extra, each non-reference engine's rate, and
    ``rate["<engine>/context_mla/fp8"]`` where :data:`FP8_CONTEXT_ENGINE` has fp8-KV rows (fitted on the fp8 MLA
    kernel's rows, sm90+: a GPU without them leaves it at its start)."""
    fw = rows["framework"].astype(str)
    cache8 = _dtype(rows, "kv_cache_dtype") == 1.0
    fp8 = (f"rate.{FP8_CONTEXT_ENGINE}/context_mla/fp8",) if (cache8 & (fw == FP8_CONTEXT_ENGINE)).any() else ()
    fixed = tuple(f"launch.{f}/context_mla/fp8" for f in sorted(set(fw[cache8])))
    return (*used_params_for("context_mla", (), True)(rows), *fp8, *fixed)


CONTEXT = register(
    Family(
        name="context_mla",
        tables=("context_mla_perf",),
        params=(),
        predict=predict_context,
        used=context_used,
        prepare=context_terms,
        evaluate=context_seconds,
    )
)


def walk_rate(rows: pd.DataFrame) -> tuple[str, ...]:
    """``rate.<engine>/generation_mla/walk`` of each walking engine ``rows`` hold (fitted on walking rows only: a GPU
    whose rows do not walk leaves it at its start), and ``rate``/``launch.<engine>/generation_mla/fp8`` of each engine
    with fp8-KV rows (fitted on streaming rows only: a GPU whose rows walk leaves them at their start)."""
    fw = rows["framework"].astype(str)
    kv8 = _dtype(rows, "kv_cache_dtype") == 1.0
    walk = tuple(f"rate.{walk_key(f)}" for f in WALK_ENGINES if (fw == f).any())
    return (*walk, *(f"{d}.{fp8_key(f)}" for f in sorted(set(fw[kv8])) for d in ("rate", "launch")))


#: the figures of MLA decode's own (its token walk), beside each engine's fixed extra and rate
DECODE_PARAMS = ("mla_token_s", "mla_walk_blend", "mla_memory", "mla_tile_s")
GENERATION = register(
    Family(
        name="generation_mla",
        tables=("generation_mla_perf",),
        params=DECODE_PARAMS,
        predict=predict_generation,
        used=lambda rows: (*used_params_for("generation_mla", DECODE_PARAMS, True)(rows), *walk_rate(rows)),
        prepare=generation_terms,
        evaluate=decode_seconds,
    )
)
