"""The routed-expert MoE layer as one grouped GEMM, priced from the GEMM curves and the fitted ``moe`` fraction.

A layer of ``E`` experts, top-``K`` routing, hidden size ``d`` and expert width ``inter``, run on one GPU of an
``ep``-way expert-parallel × ``tp``-way tensor-parallel group, for ``T`` tokens (all the tokens entering the
layer): the GPU holds ``E/ep`` experts of width ``inter/tp`` and computes the rows routed to them. Under
skewed routing the GPU to price is the one whose experts got the most rows (what the kernel tables measure:
their generator swaps the heaviest expert group to rank 0), so the figures below are of that group.

From the routing law (:func:`expected_load`, once per shape): ``rows`` (token-expert pairs routed to the
group), ``touched`` (distinct experts of the group with ≥ 1 row), ``padded`` (rows rounded up per expert to the
kernel's tile height, :func:`tile_rows`) and ``max_load`` (rows of the most loaded expert). Uniform routing
touches ``E·(1 − (1 − K/E)^T)`` experts in all -- the coverage of rooflaw's own MoE operators
(:data:`rooflaw.constraints.operators.EXPERTS_TOUCHED`), so the assembly can use the same figure.

Time (seconds) of the layer, with ``m`` = 3 weight matrices per expert (gate, up, down; 2 when not gated: a
``..._nongated`` kernel, or a model shape of :data:`NONGATED_SHAPES`) and ``i = inter/tp``::

    flops = 2 · padded · m · d · i
    weights = touched · m · d · i · b_w                      (the touched experts' weights, streamed once)
    gemm_io = (rows · (2·d + m·i) + foreign · ((m − 1)·i + d)) · 2
            (bf16: GEMM1 reads d, writes (m − 1)·i; GEMM2 reads i, writes d, per own row; a foreign row's outputs are
             written as zeros)
    elementwise = (rows · (d + m·i) + foreign · m·i + (2·T + moved + moe_slot · others) · d) · 2
            (the gather writes each own row's d, the activation reads (m − 1)·i and writes i of every moved row,
             the final reduction reads each moved row's d; the layer's input and output; foreign = moved − rows;
             others = T·K − moved, the routed slots of other GPUs' experts)
    t_c = flops / (peak(dtype) · compute[dtype] · moe · moe_compute[dtype] · e · i/(i + moe_half_inter · 2/b_a))
    s = h / max(bw, SMs · l2_sm_gbps) + (1 − h) / bw,     bw = bandwidth · memory · moe_memory   (seconds per byte)
    reread = moe_reread · (padded/tile − touched) · m · d · i · b_w · (1 − l2_hits(m · d · i · b_w / L2))
    t_m = (weights + gemm_io) · s + reread / bw
    t = ((t_c^(1/q) + t_m^(1/q))^q + elementwise · s) / rate + (KERNELS · kernel_s + moe_s) · z,  q = x/(x + h)
    (x: the device's DRAM GB/s per SM, h = moe_serial_gbps; :mod:`.moe_blend`)

``reread``: a grouped GEMM walks each token tile (``tile`` rows, :func:`tile_rows`) across its expert's whole
weight matrices, so an expert too large for the L2 is streamed from DRAM again by each of its tiles beyond the
first (at ≥ 4k tokens, an expert of more than the L2's bytes ran 1.3-2x slower than predicted on B200's
TensorRT-LLM-gen and H100's vLLM kernels; an expert well inside the L2 showed no such loss).
The grouped GEMMs' own activation reads and writes overlap their math (inside the blend); the element-wise kernels
(gather, activation, final reduction) run between them, each streaming on its own, so their bytes add.
``z = clock_mhz / f`` (:func:`.gemm.cycle_scale`, ``f`` the device's boost clock): ``kernel_s`` and ``moe_s`` are
GPU-side fixed times -- cycles of the SM clock written as seconds at the curves' ``clock_mhz``, as the GEMM family
counts its own (a held-out or sibling GPU with another clock takes as many cycles, not as many seconds).

``moved`` is ``rows``, or T·K for vLLM's own Triton and Marlin kernels and its block-FP8 TensorRT-LLM-gen ones
(:data:`ALL_ROWS_FRAMEWORKS`, :data:`LOCAL_ROWS_KERNELS`, :data:`ALL_ROWS_KERNELS`), whose ``foreign`` rows (the other
GPUs' experts') are only activated and reduced.
``h`` is the share of the bytes a benchmark re-running the layer finds in L2
(:func:`.gemm.l2_hits` over the whole L2, :data:`L2_SHARE`, read at the GEMM family's ``l2_sm_gbps``: a small
expert set on a GPU with a large L2 and slow DRAM -- Ada -- streams from L2). ``b_a`` is the bytes per element of
the dtype's operands (:data:`ACT_BYTES`: a main-loop step covers a fixed number of bytes of K). ``rate`` is 1 for
the reference engine (:data:`REFERENCE`, TensorRT-LLM) and ``rate["<framework>/moe_<moe_dtype>/<library>"]`` for
another (:func:`rate_key`, the library the table's ``kernel_source`` names, :data:`KERNEL_PATHS`; vLLM hands the
layer to different kernels per dtype, architecture and model: FlashInfer's CUTLASS FP8 on Hopper streams 4× slower
than its Triton path), and ``e`` = ``engine_compute`` of the same key that kernel's compute rate on top (1 for the
reference engine: Blackwell's block-FP8 TensorRT-LLM-gen kernels stream as fast as the others and compute at half
their rate; times :func:`.warp_mma.warp_share` for Marlin's ``mma.sync`` kernels); that library's own fixed seconds
``launch`` of the same key stand in for ``moe_s``. A power-law batch of T·K ≤ E/:data:`SPREAD` routed pairs puts each
pair on its own expert (as the tables' layers cost).

``compute``, ``memory``, ``kernel_s``, ``l2_sm_gbps`` are the GEMM figures of the device's architecture (fitted before
this family); this family fits ``moe`` (the achieved fraction of the GEMM rate inside a grouped MoE kernel, bf16),
``moe_memory`` (its streaming rate relative to a dense GEMM's), ``moe_s`` (fixed seconds per layer beyond the launches:
routing, permutation, the scatter-reduce's tail), ``moe_serial_gbps`` (the bandwidth per SM at which the blend's q -- 0
the hard max of compute and streaming, 1 their sum -- is 1/2), ``moe_half_inter`` (the bf16 expert width per GPU at
which the grouped GEMMs' rate halves: the down projection's short K loop and the up projection's narrow N tiles amortise
each CTA's prologue and epilogue over little work -- at ≥ 4k tokens H100's layers ran 1.3-1.8× slower than predicted at
i = 32-128), ``moe_slot`` (share of the other GPUs' routed slots the final reduction reads under EP), ``moe_reread``
(share of the beyond-first token tiles that re-stream an L2-missing expert's weights), ``moe_compute[key]`` (the grouped
kernel's rate per compute key relative to bf16's, for the reference engine) and the other engines' ``rate`` and
``engine_compute``.
``KERNELS`` = 5: routing/alignment, two grouped GEMMs, the activation, the final scatter-reduce (TensorRT-LLM's MoE
flow and vLLM's fused_moe both launch five), each at the GEMM family's fixed ``kernel_s``; four where the first
grouped GEMM applies the activation itself (TensorRT-LLM-gen's MoE, :mod:`.moe_fused`). With every figure at
its default (1, 1, 0, 0, 0, 0, 0, none, none) the layer is the one-fraction model.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from ...devices.device import Device
from ...errors import bad
from . import KernelCurves, register
from .collectives import family
from .gemm import cycle_scale, l2_hits
from .moe_blend import blend, fit_serial, serial
from .moe_fused import fused_activation, launches
from .warp_mma import warp_share

#: Kernel launches per MoE layer, each costing the GEMM family's ``kernel_s`` (see the module docstring).
KERNELS = 5
#: Frameworks whose MoE layer moves the activations of every routed token-expert pair (T·K rows) on each GPU of an
#: expert-parallel group, its own experts' or not: vLLM's own fused MoE (the Triton kernels) permutes, activates
#: and reduces buffers over all T·K rows, masking the other GPUs' experts' GEMM tiles only (its measured layers keep
#: their time per routed row as EP grows at large T, where TensorRT-LLM's CUTLASS path does not) ...
ALL_ROWS_FRAMEWORKS = ("vllm",)
#: ... except the kernels it hands the layer to that route inside and skip the other GPUs' rows (FlashInfer's
#: CUTLASS and TensorRT-LLM-gen MoE, the OpenAI Triton MXFP4 kernels): named in ``kernel_source``. (vLLM's Marlin
#: MoE runs its flow over all T·K rows like the Triton kernels: priced as local, its layers ran 2.7x slower than
#: predicted at EP 128 on H100 and L40S, and flat in EP once its other GPUs' rows were activated and reduced.)
LOCAL_ROWS_KERNELS = ("flashinfer", "oaitriton")
#: ... and, of those, the ones whose ``kernel_source`` starts with these move all T·K rows after all: vLLM's
#: block-FP8 MoE on FlashInfer's TensorRT-LLM-gen kernels (priced local, B200's layers at ≥ 2k tokens ran 1.2 -> 2.1x
#: slower than predicted as EP grew 4 -> 256, on every model; all-rows, flat in EP but DeepSeek-V3's shape; its
#: per-tensor FP8, bf16 and NVFP4 siblings stay flat as local).
ALL_ROWS_KERNELS = ("vllm_fp8moe_flashinfer_trtllm",)
#: Share of the L2 a re-run MoE layer's bytes (its touched experts' weights, mostly) can fill and still be found there
#: (:func:`.gemm.l2_hits`: half of them at a full L2). Not fitted: where the L2 outruns DRAM (Ampere, Ada) the tables
#: put it at 1 (a free share fitted 1.00 on A100 and L40S); elsewhere no share is seen.
L2_SHARE = 1.0
#: Bytes per element of each roof dtype's operands: a grouped GEMM's main-loop step covers a fixed number of bytes of
#: K, so the expert width at which its rate halves is ``moe_half_inter`` (bf16) × 2 / these bytes
ACT_BYTES = {"fp16": 2.0, "fp8": 1.0, "fp4": 0.5}
#: A power-law batch of at most E/SPREAD routed token-expert pairs costs as many experts as pairs: its layers ran
#: as long as the ``balanced`` ones (one pair per expert) on every GPU, engine and kernel of the tables, up to
#: T·K = E/4 exactly (B200 4096/2048/256/8 at 8 tokens: 0.452 vs 0.453 ms; 0.67 vs 0.89 ms at 16), where the
#: rounded law puts up to 2 rows on an expert and touches ~60 % as many (H100: 1.3-1.6x under-predicted at 4 tokens)
SPREAD = 4
#: Monte Carlo draws per shape for a random routing law (seeded by the shape).
DRAWS = 64
#: Tile heights a grouped GEMM picks from: the smallest power of two ≥ the mean rows per touched expert,
#: within these bounds (Triton's fused_moe BLOCK_SIZE_M and CUTLASS's grouped tiles span 16-128).
TILE_MIN, TILE_MAX = 16, 128
#: moe_dtype -> (weight bytes per element incl. scales, roof dtype of the activations, ``compute`` key).
#: ``mixed``: a weight-only quantised GEMM, as a fraction of the activation dtype's peak.
DTYPES: dict[str, tuple[float, str, str]] = {
    "bfloat16": (2.0, "fp16", "fp16"),
    "float16": (2.0, "fp16", "fp16"),
    "fp8": (1.0, "fp8", "fp8"),
    "fp8_block": (1.0 + 4 / (128 * 128), "fp8", "fp8_block"),  # one fp32 scale per 128x128 block
    "nvfp4": (0.5 + 1 / 16, "fp4", "fp4"),  # one fp8 scale per 16 values
    "w4a16_mxfp4": (0.5 + 1 / 32, "fp16", "mixed"),  # one e8m0 scale per 32 values
    "int4_wo": (0.5 + 2 / 128, "fp16", "mixed"),  # one fp16 scale per group of 128
    "w4a8_mxfp4_mxfp8": (0.5 + 1 / 32, "fp8", "mixed"),
}
_POWER = re.compile(r"power_law_(\d+(?:\.\d+)?)$")
#: (hidden_size, inter_size, num_experts, topk) of the published MoE models whose experts are not gated (two weight
#: matrices, ReLU² between them: the Nemotron-H / Nemotron 3 family). TensorRT-LLM's tables name their kernel
#: ``..._nongated``; vLLM's do not, so a vLLM row of these shapes is priced non-gated from its shape.
NONGATED_SHAPES = frozenset({(1024, 2688, 512, 22), (2048, 5120, 512, 22), (2688, 1856, 128, 6), (8192, 5120, 512, 22)})
#: ``kernel_source`` of the kernels that run every shape gated (3 matrices), a non-gated model's too: vLLM 0.14's
#: ``fused_moe`` (A100's tables), whose non-gated Nemotron-H rows ran 1.45x (≈ 3/2) the non-gated price at every token
#: count, TP and EP, where vLLM 0.24's kernels on the other GPUs run the same shapes non-gated (within ±0.07 in log)
GATED_KERNELS = ("vllm_fused_moe",)
#: The engine whose MoE kernels the curves' ``moe``/``moe_memory`` describe; another engine's layer runs at
#: ``rate["<framework>/moe_<moe_dtype>"]`` times that (:func:`rate_key`; 1 where the curves do not name it).
REFERENCE = "trtllm"


#: (substring of a table's ``kernel_source``, name) of the kernel libraries an engine hands its MoE layer to, first
#: match wins: vLLM runs FlashInfer's CUTLASS or its TensorRT-LLM-gen kernels, Marlin, OpenAI's Triton MXFP4 or its own
#: Triton kernels, and for one ``moe_dtype`` more than one of them (Blackwell bf16/fp8/nvfp4: CUTLASS or TRT-LLM-gen
#: by model; Hopper block-FP8: CUTLASS or Triton), whose rates differ (B200's CUTLASS layers ran 1.4-2.3x slower)
KERNEL_PATHS = (("flashinfer_cutlass", "cutlass"), ("flashinfer_trtllm", "trtllm"), ("marlin", "marlin"),
                ("oaitriton", "oaitriton"), ("triton", "triton"))  # fmt: skip


def kernel_path(kernel_source: str) -> str:
    """Name of the :data:`KERNEL_PATHS` library ``kernel_source`` names ('' for none)."""
    src = str(kernel_source).lower()
    return next((name for sub, name in KERNEL_PATHS if sub in src), "")


def rate_key(framework: str, dtype: str, path: str = "") -> str:
    """The :attr:`KernelCurves.rate` (and ``engine_compute``) key of an engine's MoE kernel for ``moe_dtype``
    ``dtype``, run by kernel library ``path`` (:func:`kernel_path`; '' when the table does not say)."""
    return f"{framework}/moe_{dtype}" + (f"/{path}" if path else "")


def reread_key(framework: str, path: str = "") -> str:
    """The :attr:`KernelCurves.moe_reread_lib` key of an engine's MoE kernel library (:func:`kernel_path`)."""
    return f"{framework}/{path}" if path else framework


def reread_share(curves: KernelCurves, framework: str, path: str = "") -> float:
    """``moe_reread`` of an engine's kernel library: its own figure, else the curves' (the reference engine's)."""
    if framework == REFERENCE:
        return float(curves.moe_reread)
    return float(curves.moe_reread_lib.get(reread_key(framework, path), curves.moe_reread))


def engine_rates(curves: KernelCurves, framework: str, dtype: str, path: str = "") -> tuple[float, float, float]:
    """(``rate``, ``engine_compute``, fixed seconds beyond the launches) of an engine's MoE kernel: the kernel
    library's own figures, else the engine's for the dtype (curves fitted before kernel paths were keyed), else the
    reference engine's (1, 1, ``moe_s``). The fixed seconds are ``launch[key]``: a library's own routing, permute
    and finalize work (FlashInfer's fused TensorRT-LLM-gen layers on B200 take 15-20 µs in all at one token)."""
    if framework == REFERENCE:
        return 1.0, 1.0, float(curves.moe_s)
    keys = (rate_key(framework, dtype, path), rate_key(framework, dtype))
    key = next((k for k in keys if k in curves.rate or k in curves.engine_compute or k in curves.launch), keys[-1])
    fixed = float(curves.launch.get(key, curves.moe_s))
    return float(curves.rate.get(key, 1.0)), float(curves.engine_compute.get(key, 1.0)), fixed


def tile_rows(mean_rows: Any) -> Any:
    """Tile height (rows) of a grouped GEMM whose experts get ``mean_rows`` rows on average."""
    m = np.maximum(np.asarray(mean_rows, dtype=float), 1.0)
    return np.clip(2.0 ** np.ceil(np.log2(m)), TILE_MIN, TILE_MAX)


def _balanced_loads(T: int, E: int, K: int) -> np.ndarray:
    """Rows per expert of the tables' ``balanced`` routing: token i's j-th expert is (i + j·⌈E/K⌉) mod E, or,
    with fewer tokens than that stride, (⌊i·stride/T⌋ + j·stride) mod E (spread over the experts)."""
    stride = math.ceil(E / K)
    i = np.arange(T, dtype=np.int64)[:, None]
    j = np.arange(K, dtype=np.int64)[None, :]
    first = i if stride <= T else (i * stride) // T
    return np.bincount(((first + j * stride) % E).ravel(), minlength=E)[None, :]


def _power_law_loads(T: int, E: int, K: int, alpha: float, rng: np.random.Generator) -> np.ndarray:
    """Rows per expert, (DRAWS, E), of the tables' ``power_law_<alpha>`` routing: each expert's weight drawn from
    p(x) ∝ x^−alpha on [1, 0.8·T] (on [0.01, 2] when T·K ≤ E), scaled to T·K rows, rounded, the rounding's
    excess taken from (or its shortfall given to) the largest experts, ties in a random order; a batch of
    T·K ≤ E / :data:`SPREAD` routed pairs puts each pair on its own expert, drawn at random."""
    if T * K * SPREAD <= E:
        pick = np.argsort(rng.random((DRAWS, E)), axis=1)[:, : T * K]
        loads = np.zeros((DRAWS, E), dtype=np.int64)
        np.put_along_axis(loads, pick, 1, axis=1)
        return loads
    lo, hi = (1.0, 0.8 * T) if T * K > E else (0.01, 2.0)
    u = rng.random((DRAWS, E))
    a1 = 1.0 - alpha
    w = ((hi**a1 - lo**a1) * u + lo**a1) ** (1.0 / a1)
    loads = np.rint(w / w.sum(axis=1, keepdims=True) * (T * K)).astype(np.int64)
    delta = T * K - loads.sum(axis=1)
    # 0 = largest; the generator's sort is not stable, so equal loads (all zero when T·K is small next to E) are
    # ranked in an arbitrary order: a random one here, which spreads those rows over the expert groups
    order = np.lexsort((rng.random((DRAWS, E)), -loads), axis=1)
    rank = np.argsort(order, axis=1)
    loads = loads + np.sign(delta)[:, None] * (rank < np.abs(delta)[:, None])
    return np.maximum(loads, 0)


def _uniform_loads(T: int, E: int, K: int, rng: np.random.Generator) -> np.ndarray:
    """Rows per expert, (DRAWS, E), each token picking K distinct experts uniformly at random: each expert's rows
    are Binomial(T, K/E) (its exact marginal; the weak negative correlation between experts is dropped), so the
    expected coverage is E·(1 − (1 − K/E)^T) exactly."""
    return rng.binomial(T, K / E, size=(DRAWS, E))


def parse_distribution(distribution: str) -> tuple[str, float]:
    """(``balanced`` | ``uniform`` | ``power_law``, alpha) of a table's ``distribution``."""
    d = str(distribution).strip().lower()
    if d in ("balanced", "uniform"):
        return d, 0.0
    m = _POWER.match(d)
    if m and float(m.group(1)) > 0 and float(m.group(1)) != 1.0:
        return "power_law", float(m.group(1))
    raise bad("distribution", distribution, "must be balanced, uniform or power_law_<alpha> (alpha > 0, not 1)")


@lru_cache(maxsize=1 << 15)
def expected_load(T: int, E: int, K: int, ep: int, distribution: str) -> tuple[float, float, float, float]:
    """Expected (rows, touched, padded, max_load) of the most loaded of the ``ep`` expert groups (``E/ep`` experts
    each) for ``T`` tokens routed top-``K`` under ``distribution`` (see the module docstring). Seeded per shape."""
    for name, v in (("num_tokens", T), ("num_experts", E), ("topk", K), ("moe_ep_size", ep)):
        if int(v) != v or v < 1:
            raise bad(name, v, "must be a positive integer")
    if K > E or E % ep:
        raise bad("topk" if K > E else "moe_ep_size", K if K > E else ep, f"does not fit {E} experts")
    kind, alpha = parse_distribution(distribution)
    rng = np.random.default_rng([T, E, K, ep, int(round(alpha * 1000))])
    if kind == "balanced":
        loads = _balanced_loads(T, E, K)
    elif kind == "uniform":
        loads = _uniform_loads(T, E, K, rng)
    else:
        loads = _power_law_loads(T, E, K, alpha, rng)
    groups = loads.reshape(len(loads), ep, E // ep)
    heavy = groups[np.arange(len(loads)), groups.sum(axis=2).argmax(axis=1) if kind != "balanced" else 0]
    rows = heavy.sum(axis=1).astype(float)
    touched = (heavy > 0).sum(axis=1).astype(float)
    tile = tile_rows(rows.mean() / max(touched.mean(), 1.0))
    padded = (np.ceil(heavy / tile) * tile).sum(axis=1)
    return float(rows.mean()), float(touched.mean()), float(padded.mean()), float(heavy.max(axis=1).mean())


def uniform_touched(T: Any, E: Any, K: Any) -> Any:
    """Expected distinct experts touched by ``T`` tokens routed uniformly top-``K`` of ``E``: E·(1 − (1 − K/E)^T)."""
    E = np.asarray(E, dtype=float)
    return E * (1.0 - (1.0 - np.asarray(K, dtype=float) / E) ** np.asarray(T, dtype=float))


def _fraction(curves: KernelCurves, key: str, roof: str) -> float:
    c = curves.compute
    if key == "mixed":
        return float(c.get("mixed", c.get(roof, 1.0)))
    return float(c.get(key, c.get(roof, 1.0)))


def layer_seconds(
    device: Device,
    curves: KernelCurves,
    dtype: str,
    T: Any,
    d: Any,
    inter: Any,
    rows: Any,
    touched: Any,
    padded: Any,
    tp: Any = 1,
    gated: Any = True,
    act_rows: Any = None,
    rate: Any = 1.0,
    topk: Any = 0,
    engine_compute: Any = 1.0,
    moe_s: Any = None,
    reread: Any = None,
    fused: Any = False,
) -> Any:
    """Seconds of one MoE layer on one GPU (module docstring), vectorised over the shape arrays; ``act_rows``: the
    token-expert rows whose activations move (default ``rows``; :data:`ALL_ROWS_FRAMEWORKS`); ``rate``: the engine's
    kernel rate relative to the reference engine's (:data:`REFERENCE`; it divides the roofline part); ``topk``: the
    experts per token: the final reduction reads ``moe_slot`` of the T·K routed slots that are not this GPU's (0:
    none); ``reread``: the kernel's share of re-read tiles (default ``moe_reread``, :func:`_reread_bytes`);
    ``fused``: the activation fused into the first grouped GEMM, one launch fewer (:mod:`.moe_fused`)."""
    if dtype not in DTYPES:
        raise bad("moe_dtype", dtype, f"one of {', '.join(DTYPES)}")
    b_w, roof, key = DTYPES[dtype]
    peak = device.roof(roof)[1]
    i_loc = np.asarray(inter, dtype=float) / np.asarray(tp, dtype=float)
    m = np.where(np.asarray(gated, dtype=bool), 3.0, 2.0)
    d = np.asarray(d, dtype=float)
    rows = np.asarray(rows, dtype=float)
    flops = 2.0 * np.asarray(padded, dtype=float) * m * d * i_loc
    weights = np.asarray(touched, dtype=float) * m * d * i_loc * b_w
    moved = rows if act_rows is None else np.asarray(act_rows, dtype=float)
    T = np.asarray(T, dtype=float)
    others = np.maximum(T * np.asarray(topk, dtype=float) - moved, 0.0)  # routed slots of the other GPUs' experts
    slots = moved + curves.moe_slot * others
    # bf16 activations: the grouped GEMMs' own reads and writes (GEMM1 reads d and writes (m-1)·i per row, GEMM2 reads
    # i and writes d), and the element-wise kernels' (the gather writes each row's d from the layer's input, the
    # activation reads (m-1)·i and writes i, the final reduction reads each routed slot's d and writes the output)
    # (a row routed to another GPU's expert, moved only by the all-rows kernels, is never gathered nor multiplied:
    # the GEMMs write its zero outputs, (m-1)·i and d, and the activation and the reduction read it like the others)
    foreign = np.maximum(moved - rows, 0.0)
    own = moved - foreign
    gemm_io = (own * (2 * d + m * i_loc) + foreign * ((m - 1) * i_loc + d)) * 2.0
    elementwise = (own * (d + m * i_loc) + foreign * m * i_loc + (2 * T + slots) * d) * 2.0
    # a main-loop step covers a fixed number of bytes of K (64 bf16 values, 128 fp8, 256 fp4): ``moe_half_inter`` is a
    # bf16 layer's width, and 2x that in elements is an fp8 layer's
    narrow = i_loc / (i_loc + curves.moe_half_inter * 2.0 / ACT_BYTES.get(roof, 2.0))
    frac = _fraction(curves, key, roof) * curves.moe * curves.moe_compute.get(key, 1.0) * np.asarray(engine_compute)
    t_c = flops / (peak * frac * narrow)
    bw = device.memory_bandwidth * curves.memory * curves.moe_memory
    per_byte: float | np.ndarray = 1.0 / bw
    if device.l2_bytes and curves.l2_sm_gbps > 0:  # bytes a re-run layer finds in L2, at the GEMM's L2 rate
        l2 = max(bw, float(device.sm_count or 0) * curves.l2_sm_gbps * 1e9)
        hit = l2_hits((weights + gemm_io + elementwise) / float(device.l2_bytes), L2_SHARE)
        per_byte = hit / l2 + (1.0 - hit) / bw
    share = curves.moe_reread if reread is None else reread
    reread_b = _reread_bytes(device, share, padded, rows, touched, m * d * i_loc * b_w)  # DRAM only
    t_m = (weights + gemm_io) * per_byte + reread_b / bw
    extra = curves.moe_s if moe_s is None else np.asarray(moe_s, dtype=float)  # the engine's own (launch[key])
    fixed = (launches(KERNELS, fused) * curves.kernel_s + extra) * cycle_scale(curves, device)  # SM cycles at clock_mhz
    return (blend(t_c, t_m, serial(curves, device)) + elementwise * per_byte) / np.asarray(rate, dtype=float) + fixed


def _reread_bytes(device: Device, share: Any, padded: Any, rows: Any, touched: Any, expert: Any) -> Any:
    """DRAM bytes of the experts' weights streamed again by their token tiles beyond the first (``share`` of them)
    when an expert's ``expert`` bytes do not fit in L2 (the missed share ``1 − l2_hits(expert/L2)``)."""
    if not np.any(share) or not device.l2_bytes:
        return 0.0
    touched = np.asarray(touched, dtype=float)
    tiles = np.asarray(padded, dtype=float) / tile_rows(np.asarray(rows, dtype=float) / np.maximum(touched, 1.0))
    miss = 1.0 - l2_hits(np.asarray(expert, dtype=float) / float(device.l2_bytes), L2_SHARE)
    return np.asarray(share, dtype=float) * np.maximum(tiles - touched, 0.0) * expert * miss


@dataclass(frozen=True)
class Terms:
    """The curve-independent part of a ``moe_perf`` table: each row's shape and expected routing loads."""

    dtype: np.ndarray  #: moe_dtype ('' where not modelled)
    T: np.ndarray
    d: np.ndarray
    inter: np.ndarray
    tp: np.ndarray
    gated: np.ndarray
    rows: np.ndarray  #: expected rows of the heaviest expert group (NaN where the routing is not modelled)
    touched: np.ndarray
    padded: np.ndarray
    act_rows: np.ndarray | None = None  #: rows whose activations move (None: ``rows``)
    framework: np.ndarray | None = None  #: engine of each row, lower case (None: the reference engine)
    topk: np.ndarray | None = None  #: experts per token (None: 0, see :func:`layer_seconds`)
    path: np.ndarray | None = None  #: kernel library of each row (:func:`kernel_path`; None: '')
    fused: np.ndarray | None = None  #: activation fused into GEMM1 (:func:`.moe_fused.fused_activation`)


def prepare(rows, device: Device | None = None) -> Terms:
    """:class:`Terms` of the rows of a ``moe_perf`` table (the routing law evaluated once per shape)."""
    rows = rows.reset_index(drop=True)
    shape = rows[["num_tokens", "num_experts", "topk", "moe_ep_size", "distribution"]]
    loads = np.full((len(rows), 3), np.nan)
    for idx, pos in shape.groupby(list(shape.columns), sort=False).indices.items():
        T, E, K, ep, dist = idx
        try:
            loads[pos] = expected_load(int(T), int(E), int(K), int(ep), str(dist))[:3]
        except (ValueError, TypeError):  # a shape or routing law the model does not cover stays NaN
            continue
    dtype = rows["moe_dtype"].astype(str).to_numpy()
    num = lambda c: rows[c].to_numpy(dtype=float)  # noqa: E731
    fw = rows["framework"].astype(str).str.lower().to_numpy() if "framework" in rows else np.full(len(rows), "")
    source = rows["kernel_source"].astype(str).str.lower() if "kernel_source" in rows else pd.Series([""] * len(rows))
    local = source.str.contains("|".join(LOCAL_ROWS_KERNELS)).to_numpy()
    path = np.array([kernel_path(v) for v in source], dtype=object)
    all_rows = np.isin(fw, ALL_ROWS_FRAMEWORKS) & (~local | source.str.startswith(ALL_ROWS_KERNELS).to_numpy())
    act_rows = np.where(all_rows, num("num_tokens") * num("topk"), loads[:, 0])
    shapes = zip(num("hidden_size"), num("inter_size"), num("num_experts"), num("topk"), strict=True)
    nongated = np.fromiter((tuple(int(v) for v in s) in NONGATED_SHAPES for s in shapes), bool, len(rows))
    nongated &= ~source.isin(GATED_KERNELS).to_numpy()
    nongated |= source.str.contains("nongated").to_numpy()
    return Terms(np.where(np.isin(dtype, list(DTYPES)), dtype, ""), num("num_tokens"), num("hidden_size"),
                 num("inter_size"), num("moe_tp_size"), ~nongated, loads[:, 0], loads[:, 1], loads[:, 2],
                 act_rows, fw, num("topk"), path, fused_activation(source))  # fmt: skip


def evaluate(terms: Terms, device: Device, curves: KernelCurves) -> np.ndarray:
    """Seconds of each prepared row (NaN where its dtype or routing is not modelled)."""
    out = np.full(len(terms.T), np.nan)
    for dtype in np.unique(terms.dtype):
        if not dtype:
            continue
        m = terms.dtype == dtype
        act = None if terms.act_rows is None else terms.act_rows[m]
        rate: float | np.ndarray = 1.0
        ecomp: float | np.ndarray = 1.0
        fixed: float | np.ndarray = curves.moe_s
        share: float | np.ndarray = curves.moe_reread
        if terms.framework is not None:
            fws = terms.framework[m]
            paths = terms.path[m] if terms.path is not None else np.full(len(fws), "", dtype=object)
            rates, ecomps, fixed = np.ones(len(fws)), np.ones(len(fws)), np.full(len(fws), curves.moe_s)
            share = np.full(len(fws), curves.moe_reread)
            for fw, path in {(str(f), str(p)) for f, p in zip(fws, paths, strict=True)}:
                at = (fws == fw) & (paths == path)
                rates[at], ecomps[at], fixed[at] = engine_rates(curves, fw, str(dtype), path)
                ecomps[at] *= warp_share(device, path)  # an mma.sync library on a wgmma/tcgen05 GPU (warp_mma)
                share[at] = reread_share(curves, fw, path)
            rate, ecomp = rates, ecomps
        fused = False if terms.fused is None else terms.fused[m]
        out[m] = layer_seconds(device, curves, str(dtype), terms.T[m], terms.d[m], terms.inter[m], terms.rows[m],
                               terms.touched[m], terms.padded[m], terms.tp[m], terms.gated[m], act, rate,
                               0 if terms.topk is None else terms.topk[m], ecomp, fixed, share, fused)  # fmt: skip
    return out


def predict(rows, device: Device, curves: KernelCurves | None) -> np.ndarray:
    """ms of each ``moe_perf`` row (NaN where its dtype or routing is not modelled)."""
    if curves is None or len(rows) == 0:
        return np.full(len(rows), np.nan)
    return evaluate(prepare(rows, device), device, curves) * 1e3


#: The scalar figures this family fits (the module docstring), the GEMM figures held fixed.
FIGURES = ("moe", "moe_memory", "moe_s", "moe_serial_gbps", "moe_half_inter", "moe_slot", "moe_reread")
#: (start, lower bound, upper bound, scale) of each figure the fit moves (``fit._BOUNDS``; per-key dicts by their head)
BOUNDS = {"moe": (0.7, 0.01, 1.5, 1.0), "moe_memory": (1.0, 0.05, 2.0, 1.0), "moe_s": (1e-5, 0.0, 1e-3, 1e-5),
          "moe_serial": (0.5, 0.0, 1.0, 0.1), "moe_serial_gbps": (20.0, 0.5, 500.0, 10.0),
          "moe_compute": (1.0, 0.1, 3.0, 1.0),
          "moe_half_inter": (32.0, 0.0, 2048.0, 32.0), "moe_slot": (0.5, 0.0, 1.0, 0.1),
          "moe_reread": (0.5, 0.0, 1.0, 0.1), "moe_reread_lib": (0.5, 0.0, 1.0, 0.1)}  # fmt: skip
#: the figures whose fit starts from the ``BOUNDS`` start (at their default 0 the fit may not leave the bound)
FRESH = frozenset({"moe_s", "moe_serial_gbps", "moe_half_inter", "moe_slot", "moe_reread", "moe_reread_lib"})


def used_params(rows) -> tuple[str, ...]:
    """The figures a ``moe_perf`` table's rows determine: :data:`FIGURES`; ``moe_compute.<key>`` for each non-bf16
    compute key the reference engine's rows run, when they run bf16 too (bf16 is the reference, 1); and
    ``rate.<framework>/moe_<dtype>`` and ``engine_compute.<framework>/moe_<dtype>`` (:func:`rate_key`) for each
    other engine and dtype."""
    fw = rows["framework"].astype(str).str.lower() if "framework" in rows else pd.Series([REFERENCE] * len(rows))
    dtypes = rows["moe_dtype"].astype(str)
    ref = {DTYPES[d][2] for d in dtypes[fw == REFERENCE].unique() if d in DTYPES}
    keys = sorted(ref - {"fp16"}) if "fp16" in ref else []
    source = rows["kernel_source"].astype(str) if "kernel_source" in rows else pd.Series([""] * len(rows))
    paths = [kernel_path(v) for v in source]
    other = [(f, d, p) for f, d, p in zip(fw, dtypes, paths, strict=True) if f != REFERENCE and d in DTYPES]
    pairs, libs = sorted({rate_key(f, d, p) for f, d, p in other}), sorted({reread_key(f, p) for f, _, p in other})
    return (FIGURES + tuple(f"moe_compute.{k}" for k in keys) + tuple(f"rate.{k}" for k in pairs)
            + tuple(f"engine_compute.{k}" for k in pairs) + tuple(f"launch.{k}" for k in pairs)
            + tuple(f"moe_reread_lib.{k}" for k in libs))  # fmt: skip


#: The routed-expert layer. (``prepare``/``evaluate`` split :func:`predict` so a fit evaluates the routing law once.)
MOE = register(family("moe", ("moe_perf",), FIGURES, predict, used=used_params, prepare=prepare,
                      evaluate=evaluate, fit=fit_serial))  # fmt: skip

__all__ = ["ALL_ROWS_FRAMEWORKS", "ALL_ROWS_KERNELS", "DTYPES", "FIGURES", "GATED_KERNELS", "KERNELS", "KERNEL_PATHS",
           "LOCAL_ROWS_KERNELS", "MOE", "NONGATED_SHAPES", "REFERENCE", "Terms", "blend", "engine_rates", "evaluate",
           "expected_load", "kernel_path", "layer_seconds", "parse_distribution", "predict", "prepare", "rate_key",
           "reread_key", "reread_share", "tile_rows", "uniform_touched", "used_params"]  # fmt: skip
