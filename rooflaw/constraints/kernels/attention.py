"""The attention kernel families: FlashAttention-style prefill (``context_attention``) and one decode step
(``generation_attention``), priced on the kernel curves (MLA: :mod:`.mla`, on the same figures).

Prefill, per sequence and head: the causal kernel skips the masked half, so it computes ``P`` (query, key) pairs with
``P = S(S+1)/2``, or with a sliding window ``W``: ``W(W+1)/2 + (S-W)·W`` for ``S > W``; it visits whole blocks of 128
query rows × its KV-loop step (128 keys; TensorRT-LLM's Hopper FMHA: :func:`.attention_prefill.kv_steps`) -- so ``P``
counts those (:func:`block_pairs`). FLOPs ``= 4·B·H·d·P``; bytes read/written ``= B·S·(2·H·d·2 +
2·H_kv·d·b_kv)`` (Q and O in bf16, K and V in the KV dtype). ``t = blend((t_mma^p + t_softmax^p)^(1/p) / rate, bytes /
(bandwidth · memory · l2)) + prep_bytes / (bandwidth · memory · l2) + (waves · tile / rate + kernel_s) · z + launch``
(``z``: :func:`.gemm.cycle_scale`; ``tile`` = ``attention_tile_s``, ``attention_ws_tile_s`` for a warp-specialised
kernel, :func:`.attention_prefill.warp_specialised`; both and ``kernel_s`` SM cycles at the curves' ``clock_mhz``)
with ``t_mma = FLOPs / (peak · attention · tile·wave)``, ``t_softmax = B·H·P · attention_softmax / peak_fp32`` (its
exponentials faster on faster SFUs: :mod:`.sfu`), ``p = softmax_overlap``, ``blend`` the p-norm of ``prefill_blend`` (0:
the max; :func:`.gemm.blend`) and ``rate`` the engine's kernel rate (``KernelCurves.rate``, TensorRT-LLM 1; its fp8-KV
kernel's ``rate["<engine>/context_attention/fp8"]``, a side kernel's ``rate["<engine>/context_attention/<path>"]``
(:mod:`.attention_prefill`), where fitted): the softmax (max, exponent, sum, rescale) runs on the fp32 vector units, not
the tensor cores, so an fp8 kernel does not speed it up, and a FlashAttention-3-style schedule hides it under the MMAs
(``p`` large) where FlashAttention-2 runs them in series (``p = 1``); ``prep_bytes = B·S·d·(4·H + H_kv·2·(2 + b_kv))``
the RoPE and KV-cache write the op runs beside the kernel (vLLM's measured call: the cache write alone,
``B·S·d·H_kv·2·(2 + b_kv)``; its model applies RoPE outside); ``waves = ceil(B·H·ceil(S/128) / SMs)``; the tile/wave
term is :func:`rooflaw.constraints.tiles.tile_efficiency` of 128-query-row tiles over the ``B·H`` heads; the roof is fp8
where the attention math is fp8 (fraction ``attention_fp8``; :func:`.attention_prefill.fp8_math`: the attention dtype,
or vLLM's FlashAttention/FlashInfer over an fp8 KV cache, which take an fp8 query), else fp16. ``l2 = max(1, peak_fp32 ·
attention_l2 / (bandwidth · memory))`` where the kernel's own working set (Q, K, V, O: ``bytes``) fits in the device's
L2 (a benchmark re-running the kernel finds it there, the prep traffic beside it streaming through; ``attention_l2`` in
bytes per fp32 FLOP, a proxy of SMs × clock), else 1.

Decode: each sequence reads its cached context ``L = isl + step`` (``min(L, W)`` with a window; a clipped window reads
up to ``decode_window_tokens`` more, the partial KV pages it starts in). A GQA kernel runs one CTA per (sequence, KV
head) and reads that head's K and V once for its query heads (``n = B·H_kv`` KV streams; TensorRT-LLM's XQA serves at
most :data:`XQA_GROUP_ROWS` query heads a CTA: ``n = B·H_kv·ceil(g/16)``, the extra CTAs finding their head's K and V in
L2); TensorRT-LLM runs its masked-MHA kernel, one CTA per query head, where a KV head serves one query head or more than
its XQA kernel takes (:data:`XQA_MAX_GROUP`), or where XQA's CTAs would not fill the SMs
(:func:`.attention_decode.xqa_falls_back`; then ``n = B·H`` streams, the group's CTAs sharing their KV head's K and V
through L2, read from DRAM once; FlashAttention-2 likewise under a local window). bytes ``= B·L·2·H_kv·d·b_kv +
2·B·H·d·2``, FLOPs ``= 4·B·H·d·L``; ``t = (t_stream^p +
t_prologue^p)^(1/p) + kernel_s + launch`` (``p = 1 + (decode_blend - 1)·(1 - 1/⌈n/SMs⌉)``: one wave's prologue has
no earlier stream to hide under, many waves' do) with ``t_stream = max(t_mma, bytes · (1 +
decode_half_occupancy / x) / (bandwidth · attention_memory · l2), t_l2)`` (``t_l2``, ``l2``: :mod:`.attention_decode`'s
L2 traffic and residency at ``decode_l2`` bytes per SM-cycle): a split-KV (flash-decoding) kernel cuts each stream
into chunks of at least ``decode_split_tokens`` tokens, up to ``decode_split`` CTAs per SM, and ``x`` CTAs per SM keep
too few loads in flight to reach the bandwidth when few (Little's law; ``t_l2`` too); ``t_prologue = (W - c·(W -
n/SMs)) · tile · (1 - s + s·d/128) · clock_mhz / clock / rate``, ``W = ceil(n / SMs)``: each wave of CTAs pays a fixed
prologue (page table, Q, the split merge, O), a partial wave ``c = decode_cta_share`` of it in proportion to its CTAs,
SM cycles written as seconds at the curves' ``clock_mhz`` (:func:`.gemm.cycle_scale`), ``tile = decode_tile_s``
(``decode_mha_tile_s`` for the masked-MHA kernel, ``decode_ws_tile_s`` for the warp-specialised ones:
:func:`.attention_decode.warp_specialised`), ``s = decode_dim_share``, ``rate`` the engine's
(``rate["<engine>/generation_attention"]``, its fp8-KV kernel's ``rate["<engine>/generation_attention/fp8"]``,
TensorRT-LLM's fp8-KV masked-MHA kernel's ``rate["trtllm/generation_attention/fp8/mha"]``, where fitted).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from ...devices.device import Device
from . import Family, KernelCurves, register
from . import attention_prefill as AP
from .attention_decode import (
    XQA_MAX_GROUP,
    decode_path_params,
    decode_path_rate,
    decode_paths,
    fa2_unpacked,
    fused_rope,
    l2_terms,
    masked_mha,
    warp_specialised,
    ws_params,
    xqa_device,
    xqa_falls_back,
    xqa_split_cap,
)
from .attention_prefill import (
    PREFILL_FIGURES,
    Q_TILE,
    ROPE_OUTSIDE,
    fp8_math,
    kernel_paths,
    kv_steps,
    path_params,
    path_rate,
    q_rows,
    query_tiles,
)
from .gemm import blend, cycle_scale, launch_s
from .sfu import softmax_scale

#: KV-cache / attention dtype -> bytes per element
DTYPE_BYTES = {"bfloat16": 2.0, "float16": 2.0, "fp8": 1.0, "fp8_e4m3": 1.0, "int8": 1.0, "nvfp4": 0.5 + 1 / 16}
#: the framework whose attention kernels' rate is the curves' own (others' are relative to it: ``KernelCurves.rate``)
REFERENCE_FRAMEWORK = "trtllm"
#: the engine whose prefill kernel (FlashAttention-3) can pack a GQA group's query heads into one tile
PACK_GQA_ENGINE = "vllm"
#: query heads one XQA CTA serves (the rows of its 16-row MMA tile): a larger group runs ``ceil(g / 16)`` CTAs per
#: KV head, each reading the head's K and V (from L2 but the first)
XQA_GROUP_ROWS = 16


def column(rows: pd.DataFrame, name: str, default: float = 0.0) -> np.ndarray:
    if name not in rows:
        return np.full(len(rows), default)
    return pd.to_numeric(rows[name], errors="coerce").fillna(default).to_numpy(dtype=np.float64)


def bytes_of(rows: pd.DataFrame, name: str) -> np.ndarray:
    return rows[name].astype(str).map(DTYPE_BYTES).to_numpy(dtype=np.float64)


def causal_pairs(S, W):
    """(query, key) pairs a causal kernel computes per sequence and head: S(S+1)/2, or with a window W > 0
    (each query sees at most W keys, itself included): W(W+1)/2 + (S - W)·W for S > W."""
    S, W = np.asarray(S, dtype=np.float64), np.asarray(W, dtype=np.float64)
    win = (W > 0) & (S > W)
    return np.where(win, W * (W + 1) / 2 + (S - W) * W, S * (S + 1) / 2)


def block_pairs(S, W, block=Q_TILE, kv=None):
    """(query, key) pairs a block-sparse causal kernel computes per sequence and head: query tiles of ``block`` rows
    against every key block of ``kv`` keys (default ``block``; each a number or per-row array) that holds an
    unmasked pair (the diagonal block whole, a window's edge blocks whole), so ``>=`` :func:`causal_pairs`. Rows of a
    partial last tile count as themselves, keys past ``S`` not at all."""
    S, W = np.asarray(S, dtype=np.float64), np.asarray(W, dtype=np.float64)
    kv = np.asarray(block if kv is None else kv, dtype=np.float64)
    n = np.ceil(S / block)
    total = np.zeros(np.broadcast(S, W, kv).shape)
    for i in range(int(np.max(n, initial=0))):
        live = i < n
        rows = np.clip(S - i * block, 0, block)
        last = np.minimum((i + 1) * block, S) - 1  # the tile's last query row: keys to the end of its key block
        hi = np.minimum((np.floor(last / kv) + 1) * kv, S)
        first = np.where(W > 0, np.floor(np.maximum(0.0, i * block - W + 1) / kv), 0.0) * kv
        total += np.where(live, rows * (hi - first), 0.0)
    return total


@dataclasses.dataclass(frozen=True)
class AttentionTerms:
    """Curve-independent terms of each row (arrays), the fp8 flag and the engine group for fixed latencies."""

    flops: np.ndarray
    bytes: np.ndarray
    peak16: np.ndarray
    peak8: np.ndarray
    peak32: np.ndarray  #: the fp32 vector roof (FLOP/s) the softmax runs on
    eff: np.ndarray
    extra_bytes: np.ndarray  #: bytes of the work the op runs beside the kernel (RoPE, KV-cache write), added
    waves: np.ndarray  #: waves of query-tile CTAs over the SMs (each costs ``attention_tile_s``)
    #: independent KV streams of a decode kernel (one per sequence and KV head; ``inf``: no ramp)
    streams: np.ndarray
    #: bool: the kernel's whole working set fits in the device's L2 (a kernel re-run on the same tensors, as a
    #: benchmark does, reads them from there)
    resident: np.ndarray
    pairs: np.ndarray  #: (query, key) pairs scored over all sequences and heads (softmax work)
    fp8: np.ndarray  #: bool: the attention math runs on the fp8 roof
    group: np.ndarray
    labels: tuple[str, ...]  #: framework of each group ("" where a row is not modelled)
    op: str
    prefill: bool = True  #: a prefill kernel (GEMM ``memory``, ``attention_tile_s``), else decode
    #: prefill: tile/wave efficiency and waves where the engine packs a GQA group's query heads into one tile
    #: (``prefill_pack_gqa`` of its tiles do; ``None``: none)
    eff_packed: np.ndarray | None = None
    waves_packed: np.ndarray | None = None
    #: bool, decode: TensorRT-LLM's masked-MHA kernel runs (one CTA per query head; ``decode_mha_tile_s``)
    mha: np.ndarray | None = None
    #: decode: head dim / 128 (the wave cost's ``decode_dim_share`` scales with it); ``None``: 1
    dim: np.ndarray | None = None
    sms: float = 1.0  #: the device's SMs (decode CTAs run in waves over them)
    #: decode: cached tokens each KV stream reads (a split-KV kernel splits them); ``None``: prefill
    context: np.ndarray | None = None
    #: decode: cached tokens beyond a sliding window (a clipped window's kernel reads up to ``decode_window_tokens`` of
    #: them: the partial KV pages at the window's start); ``None``: none
    overhang: np.ndarray | None = None
    #: decode: bytes of the KV reads in ``bytes`` (the rest: Q and O)
    kv_bytes: np.ndarray | None = None
    #: bool: the KV cache is fp8 (an engine's fp8-KV kernel has its own ``rate``); ``None``: none
    kv8: np.ndarray | None = None
    #: decode: KV bytes each stream's CTA reads (a query head's CTA past XQA's group reads its KV head's whole K and V,
    #: found in L2 after the group's first CTA brought it from DRAM)
    stream_bytes: np.ndarray | None = None
    #: prefill: per row, the side kernel its engine ran (:data:`.attention_prefill.KERNEL_PATHS`; '' its own); ``None``
    path: np.ndarray | None = None
    #: bool, decode: TensorRT-LLM's XQA kernel runs (before Blackwell: :func:`.attention_decode.xqa_split_cap`)
    xqa: np.ndarray | None = None
    #: bool: a warp-specialised TMA kernel runs (``warp_specialised`` of :mod:`.attention_decode`, of the prefill's)
    ws: np.ndarray | None = None
    #: bool, decode: the kernel applies RoPE itself, one kernel for the op (:func:`.attention_decode.fused_rope`)
    fused: np.ndarray | None = None


def groups_of(rows: pd.DataFrame, ok: np.ndarray) -> tuple[np.ndarray, tuple[str, ...]]:
    fw = rows["framework"].astype(str).to_numpy() if "framework" in rows else np.full(len(rows), "", dtype=object)
    fw = np.where(ok, fw, "")
    codes, labels = pd.factorize(fw)
    return np.asarray(codes), tuple(str(x) for x in labels)


def context_terms(rows: pd.DataFrame, device: Device) -> AttentionTerms:
    B, S = column(rows, "batch_size"), column(rows, "isl")
    H, Hkv, d, W = (
        column(rows, "num_heads"),
        column(rows, "num_key_value_heads"),
        column(rows, "head_dim"),
        column(rows, "window_size"),
    )
    b_kv, b_q = bytes_of(rows, "kv_cache_dtype"), bytes_of(rows, "attn_dtype")
    fp8 = (b_q == 1.0) | fp8_math(rows)
    qr = q_rows(rows, device)
    pairs = block_pairs(S, W, block=qr, kv=kv_steps(rows, device))
    flops = 4.0 * B * H * d * pairs
    byts = B * S * (2.0 * H * d * 2.0 + 2.0 * Hkv * d * b_kv)
    fw = rows["framework"].astype(str).to_numpy() if "framework" in rows else np.full(len(rows), "")
    # the RoPE pass (Q read and written) is TensorRT-LLM's op's own; vLLM's runs outside its measured attention call
    extra = B * S * d * (np.where(fw == ROPE_OUTSIDE, 0.0, H * 2.0 * 2.0) + Hkv * 2.0 * (2.0 + b_kv))
    te, we = query_tiles(S, B * H, qr, device)
    waves = np.ceil(B * H * np.ceil(S / qr) / (device.sm_count or 1))
    # vLLM's FlashAttention-3 packs a GQA group's query heads into one tile (S·g rows per KV head)
    g = H / np.maximum(Hkv, 1.0)
    packable = (fw == PACK_GQA_ENGINE) & (g > 1.0)
    tp, wp = query_tiles(S * g, B * Hkv, qr, device)
    waves_p = np.where(packable, np.ceil(B * Hkv * np.ceil(S * g / qr) / (device.sm_count or 1)), waves)
    ok = np.isfinite(byts) & (flops > 0)
    group, labels = groups_of(rows, ok)
    return AttentionTerms(
        flops=np.where(ok, flops, np.nan),
        bytes=byts,
        peak16=np.full(len(rows), device.roof("fp16")[1]),
        peak8=np.full(len(rows), device.roof("fp8")[1]),
        peak32=np.full(len(rows), device.roof("fp32")[1]),
        eff=te * we,
        extra_bytes=extra,
        waves=waves,
        sms=float(device.sm_count or 1),
        streams=np.full(len(rows), np.inf),
        resident=byts <= (device.l2_bytes or 0.0),
        pairs=B * H * pairs,
        fp8=fp8,
        group=group,
        labels=labels,
        op="context_attention",
        eff_packed=np.where(packable, tp * wp, te * we),
        waves_packed=waves_p,
        kv8=b_kv == 1.0,
        path=kernel_paths(rows),
        ws=AP.warp_specialised(kernel_paths(rows), len(rows), device),
    )


def generation_terms(rows: pd.DataFrame, device: Device) -> AttentionTerms:
    B, L_all = column(rows, "batch_size"), column(rows, "isl") + column(rows, "step")
    H, Hkv, d, W = (
        column(rows, "num_heads"),
        column(rows, "num_key_value_heads"),
        column(rows, "head_dim"),
        column(rows, "window_size"),
    )
    L = np.where(W > 0, np.minimum(L_all, W), L_all)
    b_kv = bytes_of(rows, "kv_cache_dtype")
    flops = 4.0 * B * H * d * L
    fw = rows["framework"].astype(str).to_numpy() if "framework" in rows else np.full(len(rows), "")
    # a GQA kernel runs one CTA group per (sequence, KV head) and reads that head's K and V once for its query heads;
    # TensorRT-LLM's XQA serves groups of at most XQA_MAX_GROUP query heads, beyond which its generic kernel runs
    # one CTA per query head, each reading its KV head's K and V (from L2 but the first: DRAM bytes once per KV head)
    group = H / np.maximum(Hkv, 1.0)
    small = xqa_falls_back(rows, device)  # too few CTAs for XQA: TensorRT-LLM runs its masked-MHA kernel
    per_q = ((fw == "trtllm") & ((group > XQA_MAX_GROUP) | small)) | fa2_unpacked(rows)
    # an XQA CTA serves at most XQA_GROUP_ROWS query heads of its KV head: a larger group runs more CTAs per KV head
    xqa_ctas = np.where((fw == "trtllm") & (group > 1.0), np.ceil(group / XQA_GROUP_ROWS), 1.0)
    kv_heads = np.where(per_q, H, Hkv * xqa_ctas)
    mha = masked_mha(rows) | small
    stream = L * 2.0 * d * b_kv
    byts = B * Hkv * stream + 2.0 * B * H * d * 2.0
    ok = np.isfinite(byts) & (flops > 0)
    group, labels = groups_of(rows, ok)
    return AttentionTerms(
        flops=np.where(ok, flops, np.nan),
        bytes=byts,
        peak16=np.full(len(rows), device.roof("fp16")[1]),
        peak8=np.full(len(rows), device.roof("fp16")[1]),
        peak32=np.full(len(rows), device.roof("fp32")[1]),
        eff=np.ones(len(rows)),
        extra_bytes=np.zeros(len(rows)),
        waves=np.ceil(B * kv_heads / (device.sm_count or 1)),
        sms=float(device.sm_count or 1),
        streams=B * kv_heads,
        resident=byts <= (device.l2_bytes or 0.0),
        pairs=B * H * L,
        fp8=np.zeros(len(rows), dtype=bool),
        group=group,
        labels=labels,
        op="generation_attention",
        prefill=False,
        mha=mha,
        dim=d / 128.0,
        context=L,
        stream_bytes=stream,
        kv8=b_kv == 1.0,
        overhang=L_all - L,
        kv_bytes=B * Hkv * stream,
        path=decode_paths(rows),
        xqa=(fw == "trtllm") & ~mha & xqa_device(device),
        ws=warp_specialised(rows, device) & ~mha,
        fused=fused_rope(rows, device) & ~mha,
    )


def decode_window(t: AttentionTerms, curves: KernelCurves) -> AttentionTerms:
    """``t`` with a clipped sliding window's extra reads: up to ``decode_window_tokens`` cached tokens before the
    window (the partial KV pages it starts in) added to each stream's context and bytes."""
    if t.overhang is None or t.context is None or curves.decode_window_tokens <= 0:
        return t
    extra = np.minimum(t.overhang, curves.decode_window_tokens)
    scale = (t.context + extra) / np.maximum(t.context, 1.0)
    kv = t.kv_bytes if t.kv_bytes is not None else t.bytes
    stream = t.stream_bytes * scale if t.stream_bytes is not None else None
    return dataclasses.replace(t, context=t.context + extra, bytes=t.bytes + kv * (scale - 1.0), stream_bytes=stream,
                               kv_bytes=kv * scale)  # fmt: skip


def split_shares(t: AttentionTerms, curves: KernelCurves) -> np.ndarray | float:
    """Per row, the share of ``decode_split`` its engine's decode kernel splits up to: ``split_share["<engine>/<op>"]``
    (``.../fp8`` for its fp8-KV kernel, else the engine's), 1 where not named."""
    if not curves.split_share:
        return 1.0
    share = np.array([curves.split_share.get(f"{f}/{t.op}", 1.0) for f in t.labels] or [1.0])[t.group]
    if t.kv8 is not None:
        s8 = np.array([curves.split_share.get(f"{f}/{t.op}/fp8", np.nan) for f in t.labels] or [np.nan])[t.group]
        share = np.where(t.kv8 & np.isfinite(s8), s8, share)
    return share


def decode_occupancy(t: AttentionTerms, curves: KernelCurves) -> np.ndarray:
    """CTAs per SM of a decode kernel: a split-KV (flash-decoding) kernel splits each of the ``streams`` into chunks
    of at least ``decode_split_tokens`` cached tokens, up to ``decode_split`` (times its kernel's
    :func:`split_shares`) CTAs per SM (counted smoothly)."""
    assert t.context is not None
    splits = np.ones_like(t.context)
    if curves.decode_split > 0:
        cap = np.maximum(1.0, curves.decode_split * split_shares(t, curves) * t.sms / t.streams)
        by_len = t.context / curves.decode_split_tokens if curves.decode_split_tokens > 0 else cap
        splits = np.clip(xqa_split_cap(t, by_len), 1.0, cap)
    return t.streams * splits / t.sms


def decode_prologues(t: AttentionTerms, curves: KernelCurves) -> np.ndarray:
    """Seconds of a decode kernel's CTA prologues (page table, Q, the split merge, O; rate 1): one per wave of the
    unsplit CTAs over the SMs, ``decode_tile_s`` (``decode_mha_tile_s`` for TensorRT-LLM's masked-MHA kernel), a
    ``decode_dim_share`` of it growing with the head dim; a partial last wave pays ``decode_cta_share`` of it in
    proportion to its CTAs (8 CTAs on 132 SMs: ``1 - c + c·8/132``)."""
    tile = np.full(len(t.streams), curves.decode_tile_s)
    if t.mha is not None and curves.decode_mha_tile_s > 0:
        tile = np.where(t.mha, curves.decode_mha_tile_s, tile)
    if t.ws is not None and curves.decode_ws_tile_s > 0:  # the warp-specialised TMA kernels' own
        tile = np.where(t.ws, curves.decode_ws_tile_s, tile)
    dim = t.dim if t.dim is not None else 1.0
    waves = np.ceil(t.streams / t.sms)
    waves = waves - curves.decode_cta_share * (waves - t.streams / t.sms)  # a partial last wave pays its CTAs' share
    return waves * tile * (1.0 - curves.decode_dim_share + curves.decode_dim_share * dim)


def fp8_kv_rate(t: AttentionTerms, curves: KernelCurves, fw_rate: np.ndarray) -> np.ndarray:
    """``fw_rate`` with an engine's fp8-KV kernel's own rate, ``rate["<engine>/<op>/fp8"]``, on its fp8-KV rows (an
    fp8-KV kernel is a kernel of its own; where not fitted, the engine's)."""
    if t.kv8 is None:
        return fw_rate
    r8 = np.array([curves.rate.get(f"{f}/{t.op}/fp8", np.nan) for f in t.labels] or [np.nan])[t.group]
    out = np.where(t.kv8 & np.isfinite(r8), r8, fw_rate)
    if t.mha is not None:  # TensorRT-LLM's fp8-KV masked-MHA kernel is not its fp8-KV XQA: ``.../fp8/mha``
        rm = np.array([curves.rate.get(f"{f}/{t.op}/fp8/mha", np.nan) for f in t.labels] or [np.nan])[t.group]
        out = np.where(t.mha & t.kv8, np.where(np.isfinite(rm), rm, fw_rate), out)
    return out


def seconds(t: AttentionTerms, device: Device, curves: KernelCurves) -> np.ndarray:
    """Seconds of each prepared attention row (NaN where not modelled)."""
    a8 = curves.attention_fp8 or curves.attention
    eff, waves_pre = t.eff, t.waves
    pk = curves.prefill_pack_gqa
    if t.eff_packed is not None and t.waves_packed is not None and pk > 0:
        eff = 1.0 / ((1.0 - pk) / t.eff + pk / t.eff_packed)
        waves_pre = (1.0 - pk) * t.waves + pk * t.waves_packed
    rate = np.where(t.fp8, t.peak8 * a8, t.peak16 * curves.attention) * eff
    mem = curves.memory if t.prefill else curves.attention_memory
    lat = np.array([launch_s(curves, t.op, f) if f else np.nan for f in t.labels] or [np.nan])[t.group]
    if t.fused is not None:  # no separate RoPE / KV-append kernel before it: one kernel's fixed time less
        lat = lat - np.where(t.fused, curves.kernel_s, 0.0)
    fw_rate = np.array([curves.rate.get(f"{f}/{t.op}", 1.0) for f in t.labels] or [1.0])[t.group]
    bw = device.memory_bandwidth
    # a working set resident in L2 streams at the larger of DRAM's rate and L2's (bytes per fp32 FLOP of the SMs)
    l2 = np.where(t.resident, np.maximum(1.0, t.peak32 * curves.attention_l2 / (bw * mem)), 1.0)
    softmax = t.pairs * curves.attention_softmax / t.peak32 * softmax_scale(curves.attention_softmax, device)
    pn = curves.softmax_overlap
    tc = t.flops / rate
    both = (tc**pn + softmax**pn) ** (1.0 / pn) if pn != 1.0 else tc + softmax
    if t.prefill:
        fw_rate = fp8_kv_rate(t, curves, fw_rate)  # the whole prefill kernel runs at its fp8-KV variant's rate
        fw_rate = path_rate(fw_rate, t.path, np.array(t.labels or ("",), dtype=object)[t.group], t.op, curves.rate)
    byts = t.bytes
    fw_own = fw_rate
    if not t.prefill:
        fw_rate = decode_path_rate(t, curves, fw_rate)  # a decode side kernel's own rate
        t = decode_window(t, curves)
        # a decode kernel with few CTAs per SM keeps too few loads in flight to reach the bandwidth (Little's law)
        occ = decode_occupancy(t, curves)
        ramp = 1.0 + curves.decode_half_occupancy / occ
        byts = t.bytes * ramp
        if (l2t := l2_terms(t, device, curves, bw * mem)) is not None:  # decode's own L2 rate and L2 traffic
            l2, both = l2t[0], np.maximum(both / fw_rate, l2t[1] * ramp) * fw_rate
    # prefill: the math and the stream blend at the ridge (``prefill_blend``; decode: the larger)
    core = blend(both / fw_rate, byts / (bw * mem * l2), curves.prefill_blend if t.prefill else 0.0)
    if t.prefill:
        cyc = cycle_scale(curves, device)  # tiles and kernel_s: SM cycles (the engine's kernel: its tiles at its rate)
        tiles = waves_pre * AP.tile_seconds(t.ws, curves) * cyc / fw_rate + (cyc - 1.0) * curves.kernel_s
        return core + t.extra_bytes / (bw * curves.memory * l2) + tiles + lat
    # decode: the KV stream and the CTAs' prologues overlap in part (the p-norm blend)
    rate_p = decode_path_rate(t, curves, fp8_kv_rate(t, curves, fw_own))
    waves = decode_prologues(t, curves) * cycle_scale(curves, device) / rate_p
    # the first wave's prologues add to the stream (nothing before them to hide under), later waves' overlap it
    p = 1.0 + (curves.decode_blend - 1.0) * (1.0 - 1.0 / np.ceil(t.streams / t.sms))
    total = (core**p + waves**p) ** (1.0 / p)
    return total + t.extra_bytes / (bw * curves.memory * l2) + lat


def used_params_for(op: str, fitted: tuple[str, ...], rated: bool = False, kv8_rated: bool = False,
                    split: bool = False):  # fmt: skip
    """``used`` of an attention family: ``fitted``, ``attention_fp8`` where a prefill row runs fp8 math, each engine's
    ``launch`` extra, (``rated``) each non-reference engine's ``rate`` and (``kv8_rated``) the rate of each engine's
    fp8-KV kernel, ``rate["<engine>/<op>/fp8"]``, where it has fp8-KV rows (decode: TensorRT-LLM's fp8-KV masked-MHA
    kernel's ``.../fp8/mha`` too), and (``split``, with ``kv8_rated``) the decode kernels' ``split_share``: each
    non-reference engine's and each fp8-KV kernel's."""

    def used(rows: pd.DataFrame) -> tuple[str, ...]:
        fws = sorted(set(rows["framework"].astype(str)))
        fp8 = op == "context_attention" and bool(fp8_math(rows).any())
        extra = ("attention_fp8",) if fp8 else ()
        rates = [f"rate.{f}/{op}" for f in fws if f != REFERENCE_FRAMEWORK] if rated else []
        if kv8_rated and "kv_cache_dtype" in rows:
            kv8 = rows["kv_cache_dtype"].astype(str).map(DTYPE_BYTES) == 1.0
            rates += [f"rate.{f}/{op}/fp8" for f in sorted(set(rows["framework"].astype(str)[kv8]))]
            if op == "generation_attention" and (kv8 & (rows["framework"].astype(str) == "trtllm")).any():
                rates.append(f"rate.trtllm/{op}/fp8/mha")
            if split:  # the decode kernels' own split shares: each non-reference engine's, each fp8-KV kernel's
                rates += [f"split_share.{f}/{op}" for f in fws if f != REFERENCE_FRAMEWORK]
                rates += [f"split_share.{f}/{op}/fp8" for f in sorted(set(rows["framework"].astype(str)[kv8]))]
        return (*fitted, *extra, *(f"launch.{f}/{op}" for f in fws), *rates)

    return used


def predict_context(rows: pd.DataFrame, device: Device, curves: KernelCurves) -> np.ndarray:
    """Predicted ms of each row of a ``context_attention_perf`` table."""
    return seconds(context_terms(rows, device), device, curves) * 1e3


def predict_generation(rows: pd.DataFrame, device: Device, curves: KernelCurves) -> np.ndarray:
    """Predicted ms of each row of a ``generation_attention_perf`` table."""
    return seconds(generation_terms(rows, device), device, curves) * 1e3


CONTEXT_USED = used_params_for("context_attention", PREFILL_FIGURES, True, True)
CONTEXT = register(
    Family(
        name="context_attention",
        tables=("context_attention_perf",),
        params=(PREFILL_FIGURES[0], "attention_fp8", *PREFILL_FIGURES[1:], *AP.TILE_FIGURES),
        predict=predict_context,
        used=lambda rows: (*CONTEXT_USED(rows), *AP.tile_params(rows), *path_params(rows, "context_attention")),
        prepare=context_terms,
        evaluate=seconds,
    )
)
#: the figures decode attention rows fit
DECODE_PARAMS = (
    "attention_memory",
    "decode_tile_s",
    "decode_half_occupancy",
    "decode_blend",
    "decode_split",
    "decode_split_tokens",
    "decode_mha_tile_s",
    "decode_dim_share",
    "decode_window_tokens",
    "decode_cta_share",
    "decode_l2",
)
GENERATION_USED = used_params_for("generation_attention", DECODE_PARAMS, True, True, True)
GENERATION = register(
    Family(
        name="generation_attention",
        tables=("generation_attention_perf",),
        params=DECODE_PARAMS,
        predict=predict_generation,
        used=lambda rows: (*GENERATION_USED(rows), *decode_path_params(rows), *ws_params(rows)),
        prepare=generation_terms,
        evaluate=seconds,
    )
)
