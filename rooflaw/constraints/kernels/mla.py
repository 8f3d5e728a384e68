"""The MLA attention families (DeepSeek's multi-head latent attention): prefill (``context_mla``) and one decode
step (``generation_mla``), priced with the attention physics and figures of :mod:`.attention` -- each engine's fixed
extra per call (``launch``) and kernel rate (``rate``, vLLM's) are MLA's own, and decode's token walk
(``mla_token_s``, ``mla_split``).

The measured tables hold DeepSeek-V3's MLA shapes (``num_heads`` per GPU after tensor parallelism; per head a
``QK_NOPE + QK_ROPE = 192``-wide query/key and a ``V_DIM = 128``-wide value; a compressed KV cache of
``KV_LORA + QK_ROPE = 576`` values per token, shared by every head).

Prefill decompresses the cache into per-head K and V and runs a causal FlashAttention kernel: FLOPs
``= 2·B·H·P·(192 + 128)`` over the ``P`` block pairs (:func:`.attention.block_pairs`), bytes ``= B·S·H·(2·192 +
2·128)·2`` (Q, K, V, O in bf16), plus the latent written to the cache beside it (``B·S·576·b_kv``).
Decode runs with the up-projections absorbed into the query and output (an MQA over the latent): every head scores
the 576-wide latent and sums the 512-wide one, FLOPs ``= 2·B·H·L·(576 + 512)``, bytes ``= B·L·576·b_kv +
B·H·(576 + 512)·2``, one KV stream per sequence (``n = B``). Times as :func:`.attention.seconds`, where the KV stream
takes at least :func:`.attention.mla_sequential`: a kernel that walks each sequence's latent token by token in one CTA
(``mla_token_s`` a token, whatever its bytes or heads; TensorRT-LLM 1.0 on Ampere and Ada), split over up to
``mla_split`` CTAs per SM.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from ...devices.device import Device
from ..tiles import tile_efficiency
from . import Family, KernelCurves, register
from .attention import Q_TILE, AttentionTerms, block_pairs, bytes_of, column, groups_of, seconds, used_params_for

KV_LORA = 512.0  #: compressed KV width (values per token)
QK_ROPE = 64.0  #: rotary part of each query/key head, also cached per token
QK_NOPE = 128.0  #: non-rotary part of each query/key head
V_DIM = 128.0  #: value head width


def _dtype(rows: pd.DataFrame, name: str) -> np.ndarray:
    return bytes_of(rows, name) if name in rows else np.full(len(rows), 2.0)


def context_terms(rows: pd.DataFrame, device: Device) -> AttentionTerms:
    B, S, H = column(rows, "batch_size"), column(rows, "isl"), column(rows, "num_heads")
    b_kv, b_q = _dtype(rows, "kv_cache_dtype"), _dtype(rows, "mla_dtype")
    dqk = QK_NOPE + QK_ROPE
    pairs = block_pairs(S, np.zeros_like(S))
    flops = 2.0 * B * H * pairs * (dqk + V_DIM)
    byts = B * S * H * (2.0 * dqk + 2.0 * V_DIM) * 2.0
    extra = B * S * (KV_LORA + QK_ROPE) * b_kv
    te, we = tile_efficiency(S, 1.0, B * H, dataclasses.replace(device, tile=(Q_TILE, 1), gemm_half_rows=0.0))
    ok = np.isfinite(byts + extra) & (flops > 0)
    group, labels = groups_of(rows, ok)
    return AttentionTerms(
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
        fp8=b_q == 1.0,
        group=group,
        labels=labels,
        op="context_mla",
    )


def generation_terms(rows: pd.DataFrame, device: Device) -> AttentionTerms:
    B, L, H = column(rows, "batch_size"), column(rows, "isl") + column(rows, "step"), column(rows, "num_heads")
    b_kv = _dtype(rows, "kv_cache_dtype")
    latent = KV_LORA + QK_ROPE
    flops = 2.0 * B * H * L * (latent + KV_LORA)
    byts = B * L * latent * b_kv + B * H * (latent + KV_LORA) * 2.0
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
        waves=np.ceil(B / (device.sm_count or 1)),
        sms=float(device.sm_count or 1),
        streams=B,
        resident=byts <= (device.l2_bytes or 0.0),
        pairs=B * H * L,
        fp8=np.zeros(len(rows), dtype=bool),
        group=group,
        labels=labels,
        op="generation_mla",
        prefill=False,
        context=L,
        stream_bytes=L * latent * b_kv,
    )


def predict_context(rows: pd.DataFrame, device: Device, curves: KernelCurves) -> np.ndarray:
    """Predicted ms of each row of a ``context_mla_perf`` table."""
    return seconds(context_terms(rows, device), device, curves) * 1e3


def predict_generation(rows: pd.DataFrame, device: Device, curves: KernelCurves) -> np.ndarray:
    """Predicted ms of each row of a ``generation_mla_perf`` table."""
    return seconds(generation_terms(rows, device), device, curves) * 1e3


CONTEXT = register(
    Family(
        name="context_mla",
        tables=("context_mla_perf",),
        params=(),
        predict=predict_context,
        used=used_params_for("context_mla", (), True),
        prepare=context_terms,
        evaluate=seconds,
    )
)
GENERATION = register(
    Family(
        name="generation_mla",
        tables=("generation_mla_perf",),
        params=("mla_token_s", "mla_split"),
        predict=predict_generation,
        used=used_params_for("generation_mla", ("mla_token_s", "mla_split"), True),
        prepare=generation_terms,
        evaluate=seconds,
    )
)
