"""Decode attention's L2 terms (``generation_attention``): the L2 rate in bytes per SM per SM-clock cycle, the rate a
working set resident in L2 streams at, and the L2-to-SM traffic of kernels whose CTAs re-read a KV head's K and V.

TensorRT-LLM's masked-MHA kernel runs one CTA per query head; where a KV head serves ``g`` > 32 query heads its
``g`` CTAs each read the head's K and V, the first from DRAM, the others from L2: the L2-to-SM traffic is ``g`` times
the DRAM bytes (XQA's ``ceil(g/16)`` CTAs per KV head likewise). With ``g = 64`` that traffic, not DRAM, sets the
time (H100, B = 1, d = 128, 64 query heads on one KV head, 32,768 cached tokens: 235 µs, 1.07 GB of L2 reads at 4.6
TB/s, against 5 µs for its 16.8 MB from DRAM). ``t_l2 = streams · stream_bytes / r_l2``, a floor under the DRAM
stream, with ``r_l2 = max(SMs · clock · decode_l2, DRAM's rate)`` (DRAM's bytes pass through the L2); a working set
that fits in the device's L2 streams at ``r_l2``. ``decode_l2`` is an architecture's figure (the L2's bytes per
SM-cycle), pooled in ``generic``.

TensorRT-LLM's XQA kernel picks its split-KV (multi-block) count ``m`` per (sequence, KV head) from the context alone
and caps it at ``sqrt(8·m)`` (``computeMultiBlockCount`` in its ``decoderXQAImplCommon.h``: "avoid using too many
blocks for one sequence, otherwise the final reduction may dominate"), before trimming it to a target number of waves
(``decode_split`` here): :func:`xqa_split_cap`. And it runs XQA only where those CTAs, four times over, fill the SMs
(``mayHavePerfGain``), else its masked-MHA kernel: :func:`xqa_falls_back`. Both are its ``DecoderXQARunner``'s, which
runs before Blackwell; on Blackwell (sm100) TensorRT-LLM runs trtllm-gen kernels instead (``XqaDispatcher``:
``mUseTllmGen``), priced without them (:func:`xqa_device`).

FlashAttention-2's KV-cache kernel packs a GQA group's query heads into one CTA per KV head (``seqlenq_ngroups_swapped``
in its ``mha_fwd_kvcache``) only without a local window: with one it runs a CTA per query head, each reading its KV
head's K and V (the first from DRAM, the rest from L2), as TensorRT-LLM's masked-MHA kernel does
(:func:`fa2_unpacked`; vLLM's ``vllm_flash_attn`` on Ampere, ``..._fa2`` on Ada).

NVIDIA's warp-specialised TMA decode kernels -- trtllm-gen (TensorRT-LLM on sm100, vLLM's FlashInfer ``trtllm``
decode) and TensorRT-LLM's Hopper XQA ``mha_sm90`` for an fp8 KV cache -- pay ``decode_ws_tile_s`` a wave (~3k SM
cycles against the other kernels' 7-9k: :func:`warp_specialised`); the Hopper one applies RoPE itself, so its op runs
one kernel, not two (:func:`fused_rope`).

An engine hands some decode shapes to another kernel (the table's ``kernel_source``): vLLM a head dim its backend
lacks to Triton (d = 192 on Blackwell and Ada) or FlashAttention-4 (d = 512 on Hopper), TensorRT-LLM d = 256 and 512
to FlashInfer on Blackwell. Each runs at its own ``rate["<engine>/generation_attention/<path>"]`` (its compute and
prologues, as an engine's rate), where fitted (:func:`decode_path_rate`); a kernel's figure, not pooled in ``generic``
(:func:`side_rate`), as prefill's side kernels (:mod:`.attention_prefill`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ...devices.device import Device
from . import KernelCurves
from .attention_prefill import path_key, path_rate

#: the op whose kernels these terms price (MLA decode keeps the prefill's ``attention_l2``)
OP = "generation_attention"
#: XQA's cap on its split count per (sequence, KV head): ``m <= sqrt(XQA_SPLIT_ROOT · m)`` (TensorRT-LLM's constant)
XQA_SPLIT_ROOT = 8.0
#: XQA runs only where its CTAs, ``kEnableMinBlockFactor`` times over, fill the SMs (TensorRT-LLM's
#: ``mayHavePerfGain``), counting each stream's chunks of ``XQA_SPLIT_TOKENS`` cached tokens
#: (``kMinHistoryTokensPerBlock``)
XQA_MIN_BLOCK_FACTOR, XQA_SPLIT_TOKENS = 4.0, 128.0
#: most query heads TensorRT-LLM's XQA decode kernel serves per KV head
XQA_MAX_GROUP = 32
#: ``kernel_source`` of vLLM's FlashAttention-2 decode rows (Ampere's, Ada's)
FA2_SOURCES = ("vllm_flash_attn", "vllm_flash_attn_fa2")
HEADS = ("num_heads", "num_key_value_heads")
#: (substring of ``kernel_source``, name) of the decode side kernels, first match wins (prefill's list less its
#: ``decode``: vLLM's FlashInfer and TensorRT-LLM-gen decode kernels are its main ones)
DECODE_PATHS = (("triton", "triton"), ("fa4", "fa4"), ("torch_flow_flashinfer", "flashinfer"))
#: the decode figures' starting value, lower and upper bound and typical scale in a fit (``fit._BOUNDS``' form); each
#: fit starts from these (from a default at a bound it stalls)
BOUNDS = {
    "decode_tile_s": (3e-6, 0.0, 1e-3, 1e-6),
    "decode_half_occupancy": (0.5, 0.0, 8.0, 0.1),
    "decode_blend": (2.0, 1.0, 30.0, 1.0),
    "decode_split": (2.0, 0.0, 16.0, 1.0),
    "decode_split_tokens": (256.0, 16.0, 8192.0, 100.0),
    "decode_mha_tile_s": (1.5e-6, 0.0, 1e-3, 1e-6),
    "decode_dim_share": (0.3, 0.0, 1.0, 0.1),
    "decode_window_tokens": (32.0, 0.0, 4096.0, 10.0),
    "decode_cta_share": (0.3, 0.0, 1.0, 0.1),
    "decode_l2": (20.0, 0.0, 200.0, 10.0),
    "decode_ws_tile_s": (2e-6, 0.0, 1e-3, 1e-6),
}
#: substring of a vLLM row's ``kernel_source`` naming FlashInfer's trtllm-gen decode (``vllm_flashinfer_trtllmdecode``)
GEN_SOURCE = "trtllm"
#: TensorRT-LLM's Hopper warp-specialised XQA kernel (``supportConfigQGMMA``): its architecture, largest head dim and
#: group, and the KV-cache dtypes it takes (fp8)
QGMMA_ARCH, QGMMA_MAX_DIM, QGMMA_MAX_GROUP, FP8_KV = "hopper", 256.0, 32.0, ("fp8", "fp8_e4m3")


def l2_rate(t: Any, device: Device, curves: KernelCurves) -> float:
    """Bytes/s of the device's L2 to its SMs at ``decode_l2`` bytes per SM-cycle (0 where not fitted)."""
    return float(t.sms) * float(device.clock or 0.0) * curves.decode_l2


def l2_terms(t: Any, device: Device, curves: KernelCurves, dram: float) -> tuple[np.ndarray, np.ndarray] | None:
    """``(gain, traffic_s)`` of decode rows ``t`` (after their window): the factor on a resident working set's DRAM
    rate ``dram`` (bytes/s; ``max(1, L2 rate / dram)``, else 1) and the seconds of the CTAs' L2-to-SM traffic
    (``streams · stream_bytes``) at the L2 rate; ``None`` where ``decode_l2`` is not fitted or ``t`` is not
    :data:`OP`'s."""
    rate = l2_rate(t, device, curves)
    if rate <= 0 or t.op != OP or t.stream_bytes is None:
        return None
    rate = max(rate, dram)  # DRAM's bytes pass through the L2: it is never the slower
    gain = np.where(t.resident, rate / dram, 1.0)
    return gain, t.streams * t.stream_bytes / rate


def xqa_split_cap(t: Any, by_len: np.ndarray) -> np.ndarray:
    """``by_len`` (per decode row of ``t``, the chunks of ``decode_split_tokens`` its context makes) capped at
    ``sqrt(XQA_SPLIT_ROOT · by_len)`` where TensorRT-LLM's XQA kernel runs (its engine's GQA rows; not its masked-MHA
    kernel; ``t.xqa``): a 32,768-token context in 128-token chunks splits 45 ways, not 256."""
    if t.op != OP or getattr(t, "xqa", None) is None:  # MLA decode's kernels are not XQA's GQA kernel
        return by_len
    return np.where(t.xqa, np.minimum(by_len, np.sqrt(XQA_SPLIT_ROOT * np.maximum(by_len, 0.0))), by_len)


def fa2_unpacked(rows: pd.DataFrame) -> np.ndarray:
    """bool per decode row: FlashAttention-2 runs one CTA per query head (a local window and more than one query head
    per KV head), not one per KV head."""
    if "kernel_source" not in rows or "window_size" not in rows:
        return np.zeros(len(rows), dtype=bool)
    fa2 = rows["kernel_source"].astype(str).isin(FA2_SOURCES).to_numpy()
    window = pd.to_numeric(rows["window_size"], errors="coerce").fillna(0.0).to_numpy() > 0
    heads, kv_heads = (pd.to_numeric(rows[c], errors="coerce").to_numpy(dtype=float) for c in HEADS)
    return fa2 & window & (heads > kv_heads)


def decode_paths(rows: pd.DataFrame) -> np.ndarray:
    """Per decode row, the :data:`DECODE_PATHS` name its ``kernel_source`` names ('' for the engine's own kernel)."""
    if "kernel_source" not in rows:
        return np.full(len(rows), "", dtype=object)
    src, inv = np.unique(rows["kernel_source"].astype(str).str.lower().to_numpy(), return_inverse=True)
    names = np.array([next((n for sub, n in DECODE_PATHS if sub in s), "") for s in src] or [""], dtype=object)
    return names[inv]


def decode_path_rate(t: Any, curves: KernelCurves, rate: np.ndarray) -> np.ndarray:
    """``rate`` with each decode side kernel's own ``rate["<engine>/<op>/<path>"]`` where the curves hold it."""
    if t.path is None or not curves.rate:
        return rate
    frameworks = np.array([*t.labels, ""], dtype=object)[t.group]
    return path_rate(np.broadcast_to(rate, len(t.path)).astype(float), t.path, frameworks, OP, curves.rate)


def decode_path_params(rows: pd.DataFrame) -> list[str]:
    """``rate.<engine>/generation_attention/<path>`` of each decode side kernel ``rows`` run (fitted figures)."""
    fws = rows["framework"].astype(str).to_numpy()
    return sorted({f"rate.{path_key(f, OP, p)}" for f, p in zip(fws, decode_paths(rows), strict=True) if p})


def side_rate(name: str) -> bool:
    """Whether figure ``name`` is a decode side kernel's rate (not pooled in ``generic``: :func:`.generic.pooled`)."""
    parts = name.split("/")
    names = {n for _, n in DECODE_PATHS}
    return name.startswith("rate.") and len(parts) == 3 and parts[1] == OP and parts[2] in names


def fp8_rate(name: str) -> bool:
    """Whether figure ``name`` is an engine's fp8-KV decode kernel's rate (``rate.<engine>/generation_attention/fp8``,
    ``.../fp8/mha``): each architecture's is another kernel (TensorRT-LLM's 0.8 of its bf16 kernel's on Ada, 1.1 on
    Blackwell, 3.8 on Hopper), with no architecture-free value, so not pooled in ``generic``."""
    return name.startswith("rate.") and name.split("/", 2)[1:] in ([OP, "fp8"], [OP, "fp8/mha"])


def xqa_falls_back(rows: pd.DataFrame, device: Device) -> np.ndarray:
    """bool per decode row: TensorRT-LLM runs its masked-MHA kernel, not XQA, because XQA's CTAs would not fill the
    SMs: ``B · H_kv · max(1, floor(L / 128)) · 4 < SMs`` (its ``mayHavePerfGain``)."""
    if "framework" not in rows or not xqa_device(device):
        return np.zeros(len(rows), dtype=bool)
    num = {c: pd.to_numeric(rows[c], errors="coerce").fillna(0.0).to_numpy(dtype=float) for c in
           ("batch_size", "num_key_value_heads", "isl", "step")}  # fmt: skip
    chunks = np.maximum(1.0, np.floor((num["isl"] + num["step"]) / XQA_SPLIT_TOKENS))
    blocks = num["batch_size"] * num["num_key_value_heads"] * chunks * XQA_MIN_BLOCK_FACTOR
    return (rows["framework"].astype(str).to_numpy() == "trtllm") & (blocks < float(device.sm_count or 0))


def xqa_device(device: Device) -> bool:
    """Whether TensorRT-LLM's decode runs its XQA kernels on ``device`` (not on sm_100 Blackwell: trtllm-gen's
    there; ``attentionOp.h``: ``mUseTllmGen = mSM >= 100 && mSM != 120 && mSM != 121``, so sm_120 runs XQA's
    ``mha.cu``, built for sm_86/89/120/121): by the device's kernel architecture (``Device.curves_architecture``),
    so a device file naming ``kernel_architecture = "ada"`` runs XQA."""
    return device.curves_architecture != "blackwell"


def trtllm_gen(rows: pd.DataFrame, device: Device) -> np.ndarray:
    """bool per decode row: the trtllm-gen decode kernel runs -- TensorRT-LLM's own kernel where it runs no XQA
    (:func:`xqa_device`: ``XqaDispatcher``'s ``mUseTllmGen`` on sm100), and vLLM's FlashInfer ``trtllm`` decode (its
    ``kernel_source``; FlashInfer's ``trtllm_batch_decode_with_kv_cache`` launches the same trtllm-gen cubins)."""
    if "framework" not in rows:
        return np.zeros(len(rows), dtype=bool)
    fw = rows["framework"].astype(str).to_numpy()
    src = rows["kernel_source"].astype(str).str.lower() if "kernel_source" in rows else pd.Series([""] * len(rows))
    own = decode_paths(rows) == ""  # TensorRT-LLM's side kernels (FlashInfer for d = 256, 512) are not trtllm-gen
    vllm_gen = (fw == "vllm") & src.str.contains(GEN_SOURCE, regex=False).to_numpy()
    return vllm_gen | ((fw == "trtllm") & own & (not xqa_device(device)))


def qgmma(rows: pd.DataFrame, device: Device) -> np.ndarray:
    """bool per decode row: TensorRT-LLM's XQA runs its Hopper warp-specialised kernel (``mha_sm90``;
    ``supportConfigQGMMA``: sm90, an fp8 KV cache, head dim <= :data:`QGMMA_MAX_DIM`, at most :data:`QGMMA_MAX_GROUP`
    query heads a KV head), which applies RoPE and appends the new token's K and V itself (``applyRoPEInXqaKernel``):
    no separate ``invokeQKVPreprocessing`` kernel before it (:func:`fused_rope`)."""
    if "framework" not in rows or device.architecture != QGMMA_ARCH:
        return np.zeros(len(rows), dtype=bool)
    num = {c: pd.to_numeric(rows[c], errors="coerce").fillna(0.0).to_numpy(dtype=float) for c in (*HEADS, "head_dim")}
    group = num["num_heads"] / np.maximum(num["num_key_value_heads"], 1.0)
    fp8 = rows["kv_cache_dtype"].astype(str).isin(FP8_KV).to_numpy() if "kv_cache_dtype" in rows else False
    trt = rows["framework"].astype(str).to_numpy() == "trtllm"
    return trt & fp8 & (num["head_dim"] <= QGMMA_MAX_DIM) & (group > 1.0) & (group <= QGMMA_MAX_GROUP)


def warp_specialised(rows: pd.DataFrame, device: Device) -> np.ndarray:
    """bool per decode row: one of NVIDIA's warp-specialised TMA decode kernels runs (:func:`trtllm_gen`,
    :func:`qgmma`; a producer warp streams the page table, K and V by TMA under the MMA and softmax warps): a wave of
    its CTAs costs ``decode_ws_tile_s`` (~3k SM cycles, fitted per architecture: H100's fp8-KV XQA, B200's
    trtllm-gen), not the other decode kernels' ``decode_tile_s`` (7-9k: XQA before Hopper and on a bf16 cache,
    FlashAttention-2 and -3)."""
    return trtllm_gen(rows, device) | qgmma(rows, device)


def fused_rope(rows: pd.DataFrame, device: Device) -> np.ndarray:
    """bool per decode row: the op runs one kernel, not two -- TensorRT-LLM's Hopper XQA kernel applies RoPE itself
    (:func:`qgmma`), where every other TensorRT-LLM decode path runs ``invokeQKVPreprocessing`` first: its fixed
    time is one ``kernel_s`` less (:func:`.attention.seconds`)."""
    return qgmma(rows, device)


def ws_params(rows: pd.DataFrame) -> tuple[str, ...]:
    """``decode_ws_tile_s`` where ``rows`` may run a warp-specialised kernel (vLLM's FlashInfer trtllm-gen decode,
    TensorRT-LLM's fp8-KV rows); the rows of a GPU without one leave it unfitted (0: ``decode_tile_s``)."""
    if "kernel_source" not in rows or "framework" not in rows:
        return ()
    fw = rows["framework"].astype(str)
    gen = rows["kernel_source"].astype(str).str.lower().str.contains(GEN_SOURCE, regex=False) & (fw == "vllm")
    trt8 = (fw == "trtllm") & rows["kv_cache_dtype"].astype(str).isin(FP8_KV) if "kv_cache_dtype" in rows else False
    return ("decode_ws_tile_s",) if bool((gen | trt8).any()) else ()


def masked_mha(rows: pd.DataFrame) -> np.ndarray:
    """bool per decode row: TensorRT-LLM runs its masked-MHA kernel (one CTA per query head), where XQA does not
    apply -- one query head per KV head, or more than :data:`XQA_MAX_GROUP` of them."""
    if "framework" not in rows:
        return np.zeros(len(rows), dtype=bool)
    num = {c: pd.to_numeric(rows[c], errors="coerce").fillna(0.0).to_numpy(dtype=float) for c in HEADS}
    group = num["num_heads"] / np.maximum(num["num_key_value_heads"], 1.0)
    return (rows["framework"].astype(str).to_numpy() == "trtllm") & ((group <= 1.0) | (group > XQA_MAX_GROUP))
