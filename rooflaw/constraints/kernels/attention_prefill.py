"""Prefill attention's side kernels: the kernels an engine hands some prefill shapes to, each at its own rate.

An engine's prefill op runs its own kernel for most shapes and hands the rest to another library (the table's
``kernel_source`` names it): a one-token prompt to a decode kernel, a head dim its backend lacks to a Triton or
FlashAttention-4 kernel, TensorRT-LLM's wide heads on Blackwell to FlashInfer. Each such kernel runs at its own
``rate["<engine>/<op>/<path>"]`` (relative to the curves' prefill fraction, as an engine's rate is), where fitted;
elsewhere at the engine's rate.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ...devices.device import Device
from ..tiles import tile_efficiency

#: query rows per FlashAttention tile
Q_TILE = 128
#: the prefill family's fitted figures (beside ``attention_fp8``, the engines' rates and per-call extras, and the
#: per-wave figures of the kernels ``rows`` run: :data:`TILE_FIGURES`, :func:`tile_params`)
PREFILL_FIGURES = ("attention", "attention_softmax", "attention_l2", "softmax_overlap", "prefill_pack_gqa",
                   "prefill_blend")  # fmt: skip
#: per wave of query-tile CTAs, SM cycles at the curves' clock: the ``mma.sync`` kernels' and the warp-specialised
#: TMA kernels' (:func:`warp_specialised`)
TILE_FIGURES = ("attention_tile_s", "attention_ws_tile_s")
#: kernel architectures (``Device.curves_architecture``) whose engines' own prefill kernels are warp-specialised TMA
#: kernels: TensorRT-LLM's sm90 ``fmha_v2`` (warp-specialised, TMA) and sm100 trtllm-gen FMHA, vLLM's
#: FlashAttention-3 (Hopper) and FlashInfer's trtllm-gen prefill and decode (Blackwell); Ampere's and Ada's run
#: ``mma.sync`` kernels (``fmha_v2`` sm80/89, FlashAttention-2, FlashInfer's FA2 backend)
WS_ARCHITECTURES = ("hopper", "blackwell")
#: side kernels (:data:`KERNEL_PATHS`) that are not warp-specialised on those: vLLM's Triton kernel, FlashInfer's FA2
#: prefill that TensorRT-LLM hands d = 256, 512 to on Blackwell (trtllm-gen and FlashInfer's sm100 cutlass FMHA lack
#: them); FlashAttention-4 (d = 512 on Hopper) and the trtllm-gen decode kernel are warp-specialised
MMA_SYNC_PATHS = ("triton", "flashinfer")
#: ``kernel_source`` substrings of vLLM's warp-specialised prefill kernels (FlashAttention-3/-4, trtllm-gen): a GPU
#: whose rows hold one runs the warp-specialised kind (:func:`tile_params`)
WS_SOURCES = ("fa3", "fa4", "trtllm")
#: the engine whose measured prefill call leaves the RoPE pass to the model's own layer (its prep traffic: the KV-cache
#: write alone)
ROPE_OUTSIDE = "vllm"
#: (substring of a table's ``kernel_source``, name) of the side kernels an engine hands some prefill shapes to, first
#: match wins; a row whose source names none runs the engine's own prefill kernel (TensorRT-LLM's FMHA, vLLM's
#: FlashAttention or FlashInfer prefill), priced at the engine's rate. vLLM runs a one-token prompt through its decode
#: kernel (FlashInfer's, TensorRT-LLM-gen's: no 128-row query tiles), a head dim its backend lacks through its Triton
#: kernel (d = 192 on Blackwell and Ada) or FlashAttention-4 (d = 512 on Hopper); TensorRT-LLM hands d = 256 and 512
#: to FlashInfer on Blackwell.
KERNEL_PATHS = (("decode", "decode"), ("triton", "triton"), ("fa4", "fa4"), ("torch_flow_flashinfer", "flashinfer"))
SIDE_NAMES = frozenset(n for _, n in KERNEL_PATHS)
#: the prefill ops whose rows name side kernels
PREFILL_OPS = ("context_attention", "context_mla")


#: keys per KV-loop step of TensorRT-LLM's warp-specialized Hopper FMHA by head dim (fmha_v2's kernels: bf16/fp16
#: ``64_256`` to d = 64, ``64_128`` to 128, ``64_64`` above, to fit the registers; e4m3 ``64_256`` to d = 128,
#: ``64_128`` above): each 128-row query tile visits whole steps, so a 128-token window at d = 64 costs 384 keys a
#: tile on average, not 256. Other kernels: one step of :data:`Q_TILE` keys.
HOPPER_TRTLLM_KV_STEPS = {False: ((64, 256), (128, 128), (np.inf, 64)), True: ((128, 256), (np.inf, 128))}


#: (head dim up to, query rows, KV step) of FlashAttention-3's forward tiles on Hopper (vLLM's ``fa3``) by fp8 math
#: (an fp8 query: :func:`fp8_math`), causal over a paged KV cache whose 64-token pages TMA cannot load in one step
#: (FA3's ``tile_size_fwd_sm90``: bf16 192 x 128 to d = 96, 128 x 128 to 128, 128 x 96 to 192, 128 x 80 above; e4m3
#: 192 x 160 to 64, 192 x 128 to 96, 128 x 160 to 192, 128 x 128 above)
HOPPER_FA3_TILES = {
    False: ((64, 192, 128), (96, 192, 128), (128, 128, 128), (192, 128, 96), (np.inf, 128, 80)),
    True: ((64, 192, 160), (96, 192, 128), (128, 128, 160), (192, 128, 160), (np.inf, 128, 128)),
}


def _fa3_tiles(rows, device) -> tuple[np.ndarray, np.ndarray] | None:
    """(query rows, KV step) per row of vLLM's FlashAttention-3 on a Hopper device (:data:`HOPPER_FA3_TILES`; NaN
    elsewhere), ``None`` where no row runs it."""
    if device.architecture != "hopper" or not {"framework", "head_dim", "kernel_source"} <= set(rows.columns):
        return None
    src = rows["kernel_source"].astype(str).str.lower().to_numpy().astype(str)
    fa3 = (rows["framework"].astype(str).to_numpy() == "vllm") & (np.char.find(src, "fa3") >= 0)
    if not fa3.any():
        return None
    d, fp8 = rows["head_dim"].to_numpy(dtype=np.float64), fp8_math(rows)
    q, kv = np.full(len(rows), np.nan), np.full(len(rows), np.nan)
    for e4m3, tiles in HOPPER_FA3_TILES.items():
        sel = fa3 & (fp8 == e4m3)
        q = np.where(sel, np.select([d <= lim for lim, _, _ in tiles], [m for _, m, _ in tiles], np.nan), q)
        kv = np.where(sel, np.select([d <= lim for lim, _, _ in tiles], [n for _, _, n in tiles], np.nan), kv)
    return q, kv


def q_rows(rows, device) -> np.ndarray:
    """Per row, the query rows of its prefill kernel's tile (:data:`HOPPER_FA3_TILES` for vLLM's FlashAttention-3 on
    Hopper, else :data:`Q_TILE`)."""
    out = np.full(len(rows), float(Q_TILE))
    fa3 = _fa3_tiles(rows, device)
    return out if fa3 is None else np.where(np.isfinite(fa3[0]), fa3[0], out)


def kv_steps(rows, device) -> np.ndarray:
    """Per row, the keys of its prefill kernel's KV-loop step (:data:`HOPPER_TRTLLM_KV_STEPS`, by head dim and fp8
    math, for TensorRT-LLM on a Hopper device; :data:`HOPPER_FA3_TILES` for vLLM's FlashAttention-3 there; else
    :data:`Q_TILE`)."""
    out = np.full(len(rows), float(Q_TILE))
    if device.architecture != "hopper" or not {"framework", "head_dim"} <= set(rows.columns):
        return out
    fa3 = _fa3_tiles(rows, device)
    if fa3 is not None:
        out = np.where(np.isfinite(fa3[1]), fa3[1], out)
    d = rows["head_dim"].to_numpy(dtype=np.float64)
    fp8 = rows["attn_dtype"].astype(str).to_numpy() == "fp8" if "attn_dtype" in rows else np.zeros(len(rows), bool)
    for e4m3, steps in HOPPER_TRTLLM_KV_STEPS.items():
        step = np.select([d <= lim for lim, _ in steps], [k for _, k in steps], Q_TILE)
        out = np.where((rows["framework"].astype(str).to_numpy() == "trtllm") & (fp8 == e4m3), step, out)
    return out


def warp_specialised(paths: np.ndarray | None, n: int, device: Device) -> np.ndarray:
    """bool per prefill row (``paths``: :func:`kernel_paths`, ``None``: the engines' own kernels): a warp-specialised
    TMA kernel runs -- on a :data:`WS_ARCHITECTURES` device, but for the :data:`MMA_SYNC_PATHS` -- whose wave costs
    ``attention_ws_tile_s`` (~7k SM cycles fitted on Hopper and Blackwell, against ~3k of Ampere's and Ada's
    ``mma.sync`` kernels' ``attention_tile_s``), as decode's (:func:`.attention_decode.warp_specialised`)."""
    if device.curves_architecture not in WS_ARCHITECTURES:
        return np.zeros(n, dtype=bool)
    return np.ones(n, dtype=bool) if paths is None else ~np.isin(paths.astype(str), MMA_SYNC_PATHS)


def tile_params(rows) -> tuple[str, ...]:
    """The :data:`TILE_FIGURES` ``rows`` (one GPU's prefill rows) determine: ``attention_ws_tile_s`` where its vLLM
    rows name a warp-specialised kernel (:data:`WS_SOURCES`: the GPU is of that kind, so are its TensorRT-LLM rows),
    ``attention_tile_s`` where some row runs an ``mma.sync`` kernel (every row elsewhere, the side kernels there)."""
    if "kernel_source" not in rows or "framework" not in rows:
        return TILE_FIGURES[:1]
    src = rows["kernel_source"].astype(str).str.lower().to_numpy().astype(str)
    vllm = rows["framework"].astype(str).str.lower().to_numpy() == "vllm"
    if not (vllm & np.logical_or.reduce([np.char.find(src, s) >= 0 for s in WS_SOURCES])).any():
        return TILE_FIGURES[:1]
    mma_sync = bool(np.isin(kernel_paths(rows).astype(str), MMA_SYNC_PATHS).any())
    return TILE_FIGURES if mma_sync else TILE_FIGURES[1:]


def tile_seconds(ws: np.ndarray | None, curves: Any) -> np.ndarray | float:
    """Per row, the per-wave figure of its kernel (SM cycles at the curves' clock): ``attention_ws_tile_s`` where a
    warp-specialised kernel runs (``ws``), else ``attention_tile_s``; a figure the curves' GPUs did not determine (0:
    Hopper's curves fit the warp-specialised one only, Ampere's and Ada's the other) takes the other's value, as one
    figure priced every kernel before the two were split, not 0."""
    ws_s = curves.attention_ws_tile_s or curves.attention_tile_s
    tile_s = curves.attention_tile_s or curves.attention_ws_tile_s
    return tile_s if ws is None else np.where(ws, ws_s, tile_s)


def kernel_paths(rows) -> np.ndarray:
    """Per row, the :data:`KERNEL_PATHS` name its ``kernel_source`` names ('' for the engine's own kernel or none)."""
    if "kernel_source" not in rows:
        return np.full(len(rows), "", dtype=object)
    src, inv = np.unique(rows["kernel_source"].astype(str).str.lower().to_numpy(), return_inverse=True)
    names = np.array([next((n for sub, n in KERNEL_PATHS if sub in s), "") for s in src] or [""], dtype=object)
    return names[inv]


def path_key(framework: str, op: str, path: str) -> str:
    """The :attr:`KernelCurves.rate` key of an engine's side kernel ``path`` for prefill op ``op``."""
    return f"{framework}/{op}/{path}"


def path_rate(rate: np.ndarray, paths: np.ndarray | None, frameworks: np.ndarray, op: str, table: dict) -> np.ndarray:
    """``rate`` with each side kernel's own ``rate["<engine>/<op>/<path>"]`` where the curves hold it."""
    if paths is None or not table or not len(rate):
        return rate
    pairs = np.char.add(np.char.add(frameworks.astype(str), "|"), paths.astype(str))
    keys, inv = np.unique(pairs, return_inverse=True)
    own = []
    for k in keys:
        fw, path = k.split("|")
        own.append(table.get(path_key(fw, op, path), np.nan) if path else np.nan)
    mine = np.asarray(own)[inv]
    return np.where(np.isfinite(mine), mine, rate)


def side_rate(name: str) -> bool:
    """Whether fitted figure ``name`` is a side kernel's rate, ``rate.<engine>/<prefill op>/<path>``: a kernel an
    architecture's engines hand shapes to (Triton on Blackwell 0.2 of the engine's rate, on Ada 0.8), with no
    architecture-free value, so not pooled in ``generic`` (:func:`.generic.pooled`)."""
    parts = name.split("/")
    return name.startswith("rate.") and len(parts) == 3 and parts[1] in PREFILL_OPS and parts[2] in SIDE_NAMES


def path_params(rows, op: str) -> list[str]:
    """``rate.<engine>/<op>/<path>`` of each side kernel ``rows`` run (fitted figures)."""
    fws = rows["framework"].astype(str).to_numpy()
    return sorted({f"rate.{path_key(f, op, p)}" for f, p in zip(fws, kernel_paths(rows), strict=True) if p})


#: ``kernel_source`` substrings of vLLM's backends that take an fp8 query with an fp8 KV cache (FlashAttention,
#: FlashInfer: vLLM, and the tables' collector, cast the query to the cache's fp8 before the call), so their MMAs
#: run on the fp8 roof though the table's ``attn_dtype`` says bfloat16
FP8_QUERY_SOURCES = ("flash_attn", "flashinfer")


def fp8_math(rows) -> np.ndarray:
    """bool per prefill row: its attention MMAs run in fp8 -- ``attn_dtype`` fp8, or vLLM's FlashAttention or
    FlashInfer kernel over an fp8 KV cache (:data:`FP8_QUERY_SOURCES`)."""
    n = len(rows)
    col = lambda name: rows[name].astype(str).str.lower().to_numpy() if name in rows else np.full(n, "")  # noqa: E731
    src, kv = col("kernel_source"), col("kv_cache_dtype")
    cast = (col("framework") == "vllm") & np.isin(kv, ("fp8", "fp8_e4m3"))
    cast &= np.logical_or.reduce([np.char.find(src.astype(str), s) >= 0 for s in FP8_QUERY_SOURCES])
    return (col("attn_dtype") == "fp8") | cast


def query_tiles(rows, groups, q_rows, device: Device) -> tuple[np.ndarray, np.ndarray]:
    """(tile, wave) efficiency of ``groups`` heads of ``rows`` query rows each in tiles of ``q_rows`` rows (per row)."""
    te, we = np.ones(np.shape(rows)), np.ones(np.shape(rows))
    for q in np.unique(q_rows):
        t, w = tile_efficiency(rows, 1.0, groups, dataclasses.replace(device, tile=(int(q), 1), gemm_half_rows=0.0))
        te, we = np.where(q_rows == q, t, te), np.where(q_rows == q, w, we)
    return te, we
