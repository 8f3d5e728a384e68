"""The ``gemm`` kernel family: one GEMM C[M×N] = A[M×K]·B[K×N] priced on the kernel curves.

``t = blend(t_c, t_m) + quant_passes[framework] · quant_bytes / (bandwidth · memory) + t_token + kernel_s · z
+ launch["<framework>/<key>"]`` (``launch["<framework>/<key>/<library>"]`` for an engine whose fixed time
follows the kernel library it picks: :mod:`.gemm_library`) with ``z = clock_mhz / f`` (:func:`cycle_scale`,
``f`` the device's boost clock):
the GPU-side fixed times ``kernel_s``, ``kstep_s`` and ``split_s`` are cycles of the SM clock, written as seconds
at the curves' ``clock_mhz`` (a kernel's prologue, pipeline fill and epilogue take as many cycles on a 2.5 GHz Ada
part as on a 1.4 GHz A100); the framework's ``launch`` extra (host work, its own quantise kernels) stays seconds;

* ``t_c`` the compute time of the best (tile, split-K) the kernel library can pick over the output tiles of
  :data:`TILE_MENU` and the K splits of :data:`SPLITS` (each split keeping at least :data:`MIN_SPLIT_K` of K):
  ``min max(2MNK / (peak_roof · c · tile·wave · r/(r + half_rows)), waves · ⌈K/(split·K_STEP)⌉ · kstep_s · z)
  + [split > 1] · split_s · z`` -- ``c = compute[key]``, times ``engine_compute["<framework>/<key>"]`` for an engine
  whose kernels are not the reference's (TensorRT-LLM's); ``tile·wave`` the tile and wave efficiency of the
  ``tiles × split`` CTAs over the device's SMs; ``r = max(M, 8)`` (a tile's rate rises with the rows that share
  each loaded B tile; a GEMV runs an 8-row tile); ``kstep_s`` the least time one main-loop iteration takes (a
  CTA's K loop is latency-bound when there are too few CTAs to hide it); ``split_s`` the reduction of the
  partial sums a split-K GEMM adds;
* ``t_m = bytes · (h / max(bandwidth · memory, SMs · l2_sm_gbps GB/s) + (1 − h) / (bandwidth · memory))``,
  ``bytes = M·K·b_a + K·N·b_w + 2·M·N`` (bf16 output), ``h`` the share of the bytes a benchmark re-running the
  GEMM finds in L2 (:func:`l2_hits`: all while the operands are well within ``l2_share`` of the L2, none well
  beyond). L2 bandwidth grows with the SMs, so it is a GPU with slow DRAM and a large L2 -- Ada's GDDR6 -- that
  gains;
* ``blend(a, b) = (a^p + b^p)^(1/p)``, ``p = gemm_blend`` (0: the hard ``max``): the roofline's corner is round --
  a kernel near its ridge neither streams at full bandwidth nor computes at the full rate;
* ``quant_bytes = M·K·(2 + b_a)``: the kernel that quantises bf16 activations first (fp8, block fp8, nvfp4, int8
  W8A8; 0 for bf16 and weight-only), ``quant_passes`` how many such passes the engine's quantiser makes
  (per-token scales: a max reduction, then the cast);
* ``t_token = M · (token_us[e] + token_us[e/chunk] · ⌈K/2048⌉) µs · z / SMs`` for the engines' kernels of
  :data:`PER_TOKEN_QUANT` (``e = "<framework>/<key>"``; 0 for the others): a dynamic per-token quantiser runs one
  CTA per token that walks its K in chunks of :data:`QUANT_CHUNK` elements, each a dependent round trip to
  memory, so its time grows with the tokens over the SMs, not with the bytes -- SM cycles, written as µs at the
  curves' ``clock_mhz``.

Tile and wave quantisation reuse :func:`rooflaw.constraints.tiles.tile_rows`; the library picks the (tile,
split) that is fastest, as cuBLAS/CUTLASS heuristics and stream-K do, so a GEMM of few output tiles and a long K
is not charged one wave of the largest tile -- except for the engines' kernels of :data:`NO_SPLIT_K`, which never
split K (vLLM's CUTLASS per-tensor fp8 / int8, TensorRT-LLM's block-scaled fp8 and nvfp4): their pick is over the
tiles alone; the :data:`OWN_KSTEP` kernels' main-loop step is their own ``token_us["<framework>/<key>/kstep"]``
(SM cycles, as µs at ``clock_mhz``) in place of ``kstep_s``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd

from ...devices.device import Device
from ..tiles import rows_ramp, tile_efficiency, tile_rows
from . import Family, KernelCurves, register
from .gemm_library import fit_with_libraries, library_extra, library_key, row_libraries

#: measured ``gemm_dtype`` -> (device roof dtype, ``KernelCurves.compute`` key, activation bytes, weight bytes);
#: bytes per element include scales (fp8_block: an fp32 scale per 1×128 of A and per 128×128 of B; nvfp4: an
#: fp8 scale per 16; int4 weight-only: an fp16 scale per group of 128; smooth-quant ``sq``: int8 W8A8).
GEMM_DTYPES: dict[str, tuple[str, str, float, float]] = {
    "bfloat16": ("fp16", "fp16", 2.0, 2.0),
    "float16": ("fp16", "fp16", 2.0, 2.0),
    "fp8": ("fp8", "fp8", 1.0, 1.0),
    "fp8_block": ("fp8", "fp8_block", 1.0 + 4 / 128, 1.0 + 4 / 128**2),
    "nvfp4": ("fp4", "fp4", 0.5 + 1 / 16, 0.5 + 1 / 16),
    "sq": ("int8", "int8", 1.0, 1.0),
    "int8": ("int8", "int8", 1.0, 1.0),
    "int8_wo": ("fp16", "mixed", 2.0, 1.0),
    "int4_wo": ("fp16", "mixed", 2.0, 0.5 + 2 / 128),
}
#: compute keys in fit order; a key an architecture has no figure for takes its fallback's (nvfp4 on a GPU
#: fitted without nvfp4 rows runs at the fp8 fraction of its own fp4 peak, and so on down to fp16). An int8 W8A8
#: GEMM falls back to per-tensor fp8's figures: the same 8-bit operands at the 8-bit peak behind the same
#: activation-quantise kernel (and its launch extra), not bf16's.
COMPUTE_KEYS = ("fp16", "fp8", "fp8_block", "fp4", "int8", "mixed")
FALLBACK = {"fp8": "fp16", "fp8_block": "fp8", "fp4": "fp8", "int8": "fp8", "mixed": "fp16"}
#: output tiles (rows, cols) a GEMM library chooses from (CUTLASS/cuBLAS tile shapes on Ampere to Blackwell).
TILE_MENU = ((64, 64), (64, 128), (128, 64), (128, 128), (128, 256), (256, 128))
#: K splits a library may run (split-K / stream-K), each split keeping at least ``MIN_SPLIT_K`` of the K dimension
SPLITS = (1, 2, 4, 8, 16, 32)
MIN_SPLIT_K = 128
#: (compute key, engine) GEMMs whose kernels walk all of K in each CTA at a main-loop step of their own: TensorRT-LLM's
#: block-scaled fp8 (1×128 / 128×128 scales; on sm89 the hand-rolled ``ada_blockwise_gemm``) and nvfp4. At M = 16,
#: N ≤ 512 (one wave) their time grows linearly in K whatever N: 3.1 / 1.10 / 0.73 ns per element of K on L40S /
#: H100 / B200 (fp8), 1.8 ns on B200 (nvfp4) -- 90-500 SM cycles a 64-deep step, against 8-20 for the engine's
#: per-tensor fp8 and bf16, which split K (``benchmarks/bench_gemm_kwalk.py``): the per-block scale loads and
#: promotion set the step (``token_us["<engine>/<key>/kstep"]``, :func:`kstep_seconds`). TensorRT-LLM's SmoothQuant
#: (int8 W8A8) and weight-only (int4/int8, per-group scales) CUTLASS GEMMs on A100 show the same walk: 185 / 104
#: cycles a step at M = 16, read 0.15-0.5x measured at N <= 512, K >= 8,192 with split-K allowed
OWN_KSTEP = frozenset({("fp8_block", "trtllm"), ("fp4", "trtllm"), ("int8", "trtllm"), ("mixed", "trtllm")})
#: (compute key, engine) GEMMs whose kernels never split K: vLLM's CUTLASS ``cutlass_scaled_mm`` (per-tensor fp8;
#: int8 W8A8) launches one K split at every shape -- its CUTLASS 2.x caller (sm75/80/89) passes batch count 1 in
#: ``kGemmSplitKParallel`` mode, its 3.x kernels (``c3x/scaled_mm.cuh``) take ``PersistentScheduler`` (sm90) or the
#: default tile scheduler (sm100), not stream-K (vllm-project/vllm ``csrc/quantization/cutlass_w8a8``) -- so a
#: few-CTA GEMM with a long K walks all of K in each CTA; the library's pick is over the tiles alone (so for
#: the :data:`OWN_KSTEP` kernels)
NO_SPLIT_K = frozenset({("fp8", "vllm"), ("int8", "vllm")}) | OWN_KSTEP
#: (compute key, engine) GEMMs whose activations a dynamic per-token quantiser casts first, one CTA per token:
#: vLLM's ``scaled_fp8_quant`` / ``scaled_int8_quant`` with per-token scales ahead of ``cutlass_scaled_mm``
#: (the same kernels as :data:`NO_SPLIT_K`). In the measured tables their time at K ≤ 2,048 grows by ~1,850 SM
#: cycles a token on B200, H100 and L40S alike (6.3 / 7.1 / 5.7 ns a token over 148 / 132 / 142 SMs), in steps of
#: ~1,100-1,400 cycles per further 2,048 of K; TensorRT-LLM's static per-tensor fp8 shows ~60-120.
PER_TOKEN_QUANT = frozenset({("fp8", "vllm"), ("int8", "vllm")})
#: elements of K a per-token quantiser CTA covers in one pass (the steps of its time in K)
QUANT_CHUNK = 2048
#: K depth of one main-loop iteration of a CTA (``kstep_s`` is the least time one takes)
K_STEP = 64
#: how sharply the L2 hits of a re-run GEMM fall as its operands outgrow ``KernelCurves.l2_share`` of the L2
L2_STEEPNESS = 4.0
OUT_BYTES = 2.0  # bf16 output
#: compute keys whose activations the engine quantises on the fly from bf16 (a kernel of its own before the GEMM:
#: read M·K bf16, write M·K in the GEMM's activation format); weight-only and bf16 GEMMs read bf16 as they are.
QUANTISED_ACTIVATIONS = frozenset({"fp8", "fp8_block", "fp4", "int8"})


def compute_fraction(curves: KernelCurves, key: str) -> float:
    """``curves.compute[key]``, else its :data:`FALLBACK` chain's, else 1 (the datasheet peak)."""
    while key not in curves.compute and key in FALLBACK:
        key = FALLBACK[key]
    return float(curves.compute.get(key, 1.0))


def launch_s(curves: KernelCurves, op: str, framework: str | None = None) -> float:
    """Fixed seconds of one ``op`` call (a compute key or an attention op): ``kernel_s`` plus the extra the
    curves hold for ``"<framework>/<op>"`` (host work and quantise kernels that run with it); an unknown framework
    gets the smallest extra any framework shows for ``op``; an op with none, its :data:`FALLBACK`'s; a non-bf16
    GEMM key whose chain has none, each framework's median over its non-bf16 keys (:func:`quantised_extras`)."""
    first = op
    while True:
        extra = {k.split("/", 1)[0]: v for k, v in curves.launch.items() if k.split("/", 1)[-1] == op}
        if extra or op not in FALLBACK:
            break
        op = FALLBACK[op]
    if not extra and first in COMPUTE_KEYS and first != "fp16":
        extra = quantised_extras(curves)
    if framework in extra:
        return curves.kernel_s + float(extra[framework])
    return curves.kernel_s + (min(extra.values()) if extra else 0.0)


def quantised_extras(curves: KernelCurves) -> dict[str, float]:
    """Framework -> median of its ``launch["<framework>/<key>"]`` over the non-bf16 GEMM keys: the per-call host
    work of an engine's quantised GEMM ops, for a key the curves have no figure of (A100's weight-only GEMM priced
    by curves fitted on GPUs without one: not bf16's cuBLAS call, which has no extra)."""
    by: dict[str, list[float]] = {}
    for name, v in curves.launch.items():
        fw, _, key = name.partition("/")
        if key in COMPUTE_KEYS and key != "fp16":
            by.setdefault(fw, []).append(float(v))
    return {fw: float(np.median(v)) for fw, v in by.items()}


#: the engine whose GEMM kernels ``compute`` describes; another engine's differ by ``engine_compute["<engine>/<key>"]``
REFERENCE_ENGINE = "trtllm"


def engine_factor(curves: KernelCurves, key: str, framework: str | None = None) -> float:
    """How much faster than the reference engine's (:data:`REFERENCE_ENGINE`) the ``key`` GEMM kernel of
    ``framework`` runs at a given shape: ``curves.engine_compute["<framework>/<key>"]``, else 1."""
    return float(curves.engine_compute.get(f"{framework}/{key}", 1.0))


def quant_passes(curves: KernelCurves, framework: str | None = None) -> float:
    """Passes over the activations an engine's quantise step makes (``curves.quant_passes[framework]``; an unknown
    framework: the fewest any shows; none fitted: 1)."""
    q = curves.quant_passes
    if framework in q:
        return float(q[framework])
    return float(min(q.values())) if q else 1.0


def cycle_scale(curves: KernelCurves, device: Device) -> float:
    """``curves.clock_mhz / device's boost clock``: the factor on the GEMM's GPU-side fixed times (``kernel_s``,
    ``kstep_s``, ``split_s``), which are cycles of the SM clock written as seconds at ``clock_mhz``; 1 where the
    curves or the device give no clock."""
    if not curves.clock_mhz or not device.clock:
        return 1.0
    return curves.clock_mhz * 1e6 / float(device.clock)


def tile_wave(M: Any, N: Any, groups: Any, device: Device) -> tuple[np.ndarray, np.ndarray]:
    """(tile, wave) efficiency of the :data:`TILE_MENU` tile whose product is best for ``groups`` M×N GEMMs
    (no split-K: the tile model the assembly prices its GEMMs with)."""
    dev = dataclasses.replace(device, gemm_half_rows=0.0)
    shape = np.broadcast(np.asarray(M), np.asarray(N), np.asarray(groups)).shape
    best_t, best_w = np.zeros(shape), np.ones(shape)
    for tile in TILE_MENU:
        te, we = tile_efficiency(M, N, groups, dataclasses.replace(dev, tile=tile))
        better = te * we > best_t * best_w
        best_t, best_w = np.where(better, te, best_t), np.where(better, we, best_w)
    return best_t, best_w


def tile_wave_efficiency(M: Any, N: Any, groups: Any, device: Device) -> np.ndarray:
    """Best tile × wave efficiency over :data:`TILE_MENU` of ``groups`` M×N GEMMs on ``device`` (arrays)."""
    te, we = tile_wave(M, N, groups, device)
    return te * we


@dataclasses.dataclass(frozen=True)
class GemmTerms:
    """Curve-independent terms of each row: FLOPs, bytes, peak of its roof (FLOP/s), the (tile, split) candidates,
    compute key and framework."""

    m: np.ndarray
    flops: np.ndarray
    bytes: np.ndarray
    peak: np.ndarray
    eff: np.ndarray  #: best tile·wave over :data:`TILE_MENU` without split-K (reported, not priced)
    quant_bytes: np.ndarray  #: bytes of the activation-quantise kernel (0 where activations stay bf16)
    group: np.ndarray  #: index into ``labels`` per row
    labels: tuple[tuple[str, str], ...]  #: (compute key, framework) of each group; key "" where not modelled
    l2_fill: np.ndarray  #: bytes / the device's L2 bytes (inf without an L2 figure)
    cand_eff: np.ndarray  #: (candidates, rows): tile·wave efficiency of each (tile, split)
    cand_steps: np.ndarray  #: (candidates, rows): waves × main-loop iterations of a CTA
    cand_split: np.ndarray  #: (candidates,): True where the candidate splits K
    chunks: np.ndarray  #: ⌈K / QUANT_CHUNK⌉: the passes of a per-token quantiser CTA over a token
    fixed_group: np.ndarray  #: index into ``fixed_labels`` per row
    #: (compute key, framework, kernel library) of each row's fixed seconds (:mod:`.gemm_library`; library ''
    #: where the engine's figure applies)
    fixed_labels: tuple[tuple[str, str, str], ...]


def candidates(M: np.ndarray, N: np.ndarray, K: np.ndarray, sms: int | None):
    """(eff, steps, split) of every (tile of :data:`TILE_MENU`, split of :data:`SPLITS`) for M×N×K GEMMs
    on ``sms`` SMs; a split leaving less than :data:`MIN_SPLIT_K` of K gets efficiency 0 (never picked)."""
    effs, steps, split = [], [], []
    for tm, tn in TILE_MENU:
        rows = tile_rows(M, tm)
        tiles_m, tiles_n = np.ceil(M / rows), np.ceil(N / tn)
        te = M * N / (tiles_m * rows * tiles_n * tn)
        for s in SPLITS:
            units = tiles_m * tiles_n * s
            waves = np.ceil(units / sms) if sms else np.ones_like(units)
            we = units / (waves * sms) if sms else np.ones_like(units)
            ok = (s * MIN_SPLIT_K <= K) | (s == 1)
            effs.append(np.where(ok, te * we, 0.0))
            steps.append(waves * np.ceil(K / (s * K_STEP)))
            split.append(s > 1)
    return np.array(effs), np.array(steps), np.array(split)


def terms(rows: pd.DataFrame, device: Device) -> GemmTerms:
    """:class:`GemmTerms` of a ``gemm_perf`` table (columns ``m``, ``n``, ``k``, ``gemm_dtype``)."""
    M, N, K = (rows[c].to_numpy(dtype=np.float64) for c in ("m", "n", "k"))
    dt = rows["gemm_dtype"].astype(str).to_numpy()
    spec = [GEMM_DTYPES.get(d) for d in dt]
    key = np.array([s[1] if s else "" for s in spec], dtype=object)
    ba = np.array([s[2] if s else np.nan for s in spec])
    bw = np.array([s[3] if s else np.nan for s in spec])
    roofs = {s[0] for s in spec if s}
    peak_of = {r: device.roof(r)[1] for r in roofs}
    peak = np.array([peak_of[s[0]] if s else np.nan for s in spec])
    fw = rows["framework"].astype(str).to_numpy() if "framework" in rows else np.full(len(rows), "", dtype=object)
    pairs = pd.MultiIndex.from_arrays([key, fw])
    group, labels = pd.factorize(pairs)
    byts = M * K * ba + K * N * bw + M * N * OUT_BYTES
    ce, cs, sp = candidates(M, N, K, device.sm_count)
    whole_k = np.array([(str(k), str(f)) in NO_SPLIT_K for k, f in labels], dtype=bool)[np.asarray(group)]
    ce = np.where(sp[:, None] & whole_k[None, :], 0.0, ce)  # those engines' kernels: no split-K candidate
    libs = row_libraries(rows, key, fw)
    fixed_group, fixed_labels = pd.factorize(pd.MultiIndex.from_arrays([key, fw, libs]))
    return GemmTerms(
        m=M,
        flops=2.0 * M * N * K,
        bytes=byts,
        peak=peak,
        eff=tile_wave_efficiency(M, N, 1, device),
        quant_bytes=np.where([k in QUANTISED_ACTIVATIONS for k in key], M * K * (2.0 + ba), 0.0),
        group=np.asarray(group),
        labels=tuple((str(k), str(f)) for k, f in labels),
        l2_fill=byts / float(device.l2_bytes) if device.l2_bytes else np.full(len(byts), np.inf),
        cand_eff=ce,
        cand_steps=cs,
        cand_split=sp,
        chunks=np.ceil(K / QUANT_CHUNK),
        fixed_group=np.asarray(fixed_group),
        fixed_labels=tuple((str(k), str(f), str(b)) for k, f, b in fixed_labels),
    )


def parts(t: GemmTerms, device: Device, curves: KernelCurves) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(compute seconds ``t_c``, memory seconds ``t_m``, fixed + quantise seconds) of each row of ``t``."""
    c = np.array(
        [compute_fraction(curves, k) * engine_factor(curves, k, f) if k else np.nan for k, f in t.labels] or [np.nan]
    )[t.group]
    cyc = cycle_scale(curves, device)
    lat = np.array([fixed_s(curves, k, f, b) for k, f, b in t.fixed_labels] or [np.nan])[t.fixed_group]
    lat = lat + (cyc - 1.0) * curves.kernel_s  # kernel_s in cycles, the framework's extra in seconds
    qp = np.array([quant_passes(curves, f) for _, f in t.labels] or [1.0])[t.group]
    base = t.flops / (t.peak * c * rows_ramp(t.m, curves.half_rows))
    with np.errstate(divide="ignore", invalid="ignore"):
        tcs = np.maximum(base / t.cand_eff, t.cand_steps * kstep_seconds(t, curves) * cyc)
    tcs = tcs + np.where(t.cand_split, curves.split_s * cyc, 0.0)[:, None]
    tc = tcs.min(axis=0)
    bw = device.memory_bandwidth * curves.memory
    l2 = max(bw, float(device.sm_count or 0) * curves.l2_sm_gbps * 1e9)
    hit = l2_hits(t.l2_fill, curves.l2_share)
    tm = t.bytes * (hit / l2 + (1.0 - hit) / bw)
    return tc, tm, qp * t.quant_bytes / bw + token_seconds(t, device, curves) + lat


def kstep_seconds(t: GemmTerms, curves: KernelCurves) -> np.ndarray:
    """Least seconds (at the curves' clock) one :data:`K_STEP` main-loop iteration of each row's kernel takes:
    ``token_us["<framework>/<key>/kstep"]`` µs for the :data:`OWN_KSTEP` kernels (their per-block scale loads
    and promotion), ``kstep_s`` for the others and where the curves have no such figure."""
    steps = [curves.token_us.get(f"{f}/{k}/kstep") if (k, f) in OWN_KSTEP else None for k, f in t.labels]
    return np.array([curves.kstep_s if v is None else v * 1e-6 for v in steps] or [np.nan])[t.group]


def fixed_s(curves: KernelCurves, key: str, framework: str, library: str = "") -> float:
    """Fixed seconds of a ``framework`` ``key`` GEMM run by kernel ``library`` (:mod:`.gemm_library`):
    ``kernel_s`` plus that library's figure, else :func:`launch_s` (NaN for a dtype not modelled)."""
    if not key:
        return float("nan")
    extra = library_extra(curves, key, framework, library)
    return launch_s(curves, key, framework) if extra is None else curves.kernel_s + extra


def token_name(curves: KernelCurves, key: str, framework: str) -> str:
    """The ``token_us`` entry that prices ``framework``'s ``key`` GEMM: ``"<framework>/<key>"``, else its
    :data:`FALLBACK` chain's within :data:`PER_TOKEN_QUANT` (vLLM int8 W8A8 without rows of its own: its fp8
    figures, the same per-token quantiser design); "" where none applies."""
    while (key, framework) in PER_TOKEN_QUANT:
        if f"{framework}/{key}" in curves.token_us or key not in FALLBACK:
            return f"{framework}/{key}"
        key = FALLBACK[key]
    return ""


def token_seconds(t: GemmTerms, device: Device, curves: KernelCurves) -> np.ndarray:
    """Seconds of the per-token activation quantiser of the rows of :data:`PER_TOKEN_QUANT` engines (0 elsewhere):
    ``M · (token_us[e] + token_us[e/chunk] · chunks) · 1e-6 · z / SMs``, ``z`` the :func:`cycle_scale`."""
    names = [token_name(curves, k, f) for k, f in t.labels]
    base = np.array([curves.token_us.get(n, 0.0) if n else 0.0 for n in names] or [0.0])[t.group]
    chunk = np.array([curves.token_us.get(f"{n}/chunk", 0.0) if n else 0.0 for n in names] or [0.0])[t.group]
    sms = float(device.sm_count or 1)
    return t.m * (base + chunk * t.chunks) * 1e-6 * cycle_scale(curves, device) / sms


def l2_hits(fill: np.ndarray, share: float) -> np.ndarray:
    """Share of a re-run GEMM's operand bytes found in L2: ``1 / (1 + (fill/share)^L2_STEEPNESS)``, ``fill`` the
    operands over the L2's bytes -- all of them well below ``share`` of the L2, none well above it (0 for
    ``share`` = 0)."""
    if not share:
        return np.zeros_like(fill)
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + (fill / share) ** L2_STEEPNESS)


def blend(tc: np.ndarray, tm: np.ndarray, p: float) -> np.ndarray:
    """``(tc^p + tm^p)^(1/p)`` (the hard ``max`` for ``p`` = 0), computed without overflow."""
    if not p:
        return np.maximum(tc, tm)
    hi = np.maximum(tc, tm)
    with np.errstate(divide="ignore", invalid="ignore"):
        return hi * ((tc / hi) ** p + (tm / hi) ** p) ** (1.0 / p)


def seconds(t: GemmTerms, device: Device, curves: KernelCurves) -> np.ndarray:
    """Seconds of each row of ``t`` on ``device`` with ``curves`` (NaN where its dtype is not modelled)."""
    tc, tm, fixed = parts(t, device, curves)
    return blend(tc, tm, curves.gemm_blend) + fixed


def plain_curves(curves: KernelCurves) -> KernelCurves:
    """``curves`` with the GEMM shape figures off -- the hard max, no split-K (an infinite ``split_s``), no K-loop
    bound, no L2 path, one quantise pass and no per-token quantiser, every engine's kernels the reference's
    (``kernel_s`` still in cycles of the curves' clock, as the assembly charges it:
    :func:`.curves_applied.applied_fields`): the plain roofline of the same fractions, as the assembly prices a
    GEMM."""
    return dataclasses.replace(curves, gemm_blend=0.0, split_s=float("inf"), kstep_s=0.0, l2_sm_gbps=0.0,
                               l2_share=0.0, quant_passes={}, token_us={}, engine_compute={})  # fmt: skip


def predict(rows: pd.DataFrame, device: Device, curves: KernelCurves) -> np.ndarray:
    """Predicted milliseconds of each row of a ``gemm_perf`` table."""
    return seconds(terms(rows, device), device, curves) * 1e3


#: scalar figures the GEMM family fits beside ``compute.*``, ``memory``, ``half_rows``, ``kernel_s``
SHAPE_PARAMS = ("gemm_blend", "split_s", "kstep_s", "l2_sm_gbps", "l2_share")


def used_params(rows: pd.DataFrame) -> tuple[str, ...]:
    """Figures the rows of a ``gemm_perf`` table determine: the compute keys present, ``memory``, ``half_rows``,
    ``kernel_s``, the shape figures (:data:`SHAPE_PARAMS`), one extra latency per (framework, non-bf16 key)
    present (per kernel library for the pairs of :data:`.gemm_library.LIBRARY_FIXED`), one quantise pass count
    per framework with quantised activations, and the per-token quantiser's two figures per
    :data:`PER_TOKEN_QUANT` pair present, the main-loop step of each :data:`OWN_KSTEP` pair present."""
    spec = rows["gemm_dtype"].astype(str).map(lambda d: GEMM_DTYPES.get(d, (None, None))[1])
    keys = [k for k in COMPUTE_KEYS if (spec == k).any()]
    fws = rows["framework"].astype(str)
    libs = row_libraries(rows, spec.to_numpy(dtype=object), fws.to_numpy(dtype=object))
    fw_keys = sorted({library_key(f, k, b) if b else f"{f}/{k}"
                      for f, k, b in zip(fws, spec, libs, strict=True) if k and k != "fp16"})  # fmt: skip
    quant = sorted({f for f, k in zip(fws, spec, strict=True) if k in QUANTISED_ACTIVATIONS})
    engine = sorted({f"{f}/{k}" for f, k in zip(fws, spec, strict=True) if k and f != REFERENCE_ENGINE})
    token = sorted({f"{f}/{k}" for f, k in zip(fws, spec, strict=True) if (k, f) in PER_TOKEN_QUANT})
    kstep = sorted({f"{f}/{k}/kstep" for f, k in zip(fws, spec, strict=True) if (k, f) in OWN_KSTEP})
    return (
        *(f"compute.{k}" for k in keys),
        "memory",
        "half_rows",
        "kernel_s",
        *SHAPE_PARAMS,
        *(f"launch.{p}" for p in fw_keys),
        *(f"quant_passes.{f}" for f in quant),
        *(f"engine_compute.{p}" for p in engine),
        *(f"token_us.{p}{s}" for p in token for s in ("", "/chunk")),
        *(f"token_us.{p}" for p in kstep),
    )


FAMILY = register(
    Family(
        name="gemm",
        tables=("gemm_perf",),
        params=(*(f"compute.{k}" for k in COMPUTE_KEYS), "memory", "half_rows", "kernel_s", *SHAPE_PARAMS),
        predict=predict,
        used=used_params,
        prepare=terms,
        evaluate=seconds,
        fit=fit_with_libraries,
    )
)
