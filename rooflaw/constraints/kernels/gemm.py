"""The ``gemm`` kernel family: one GEMM C[M×N] = A[M×K]·B[K×N] priced on the kernel curves.

``t = max(2MNK / (peak_roof · compute[key] · tile·wave · M/(M + half_rows)), bytes / (bandwidth · memory))
+ quant_bytes / (bandwidth · memory) + kernel_s + launch["<framework>/<key>"]`` where
``bytes = M·K·b_a + K·N·b_w + 2·M·N`` (bf16 output) and ``quant_bytes = M·K·(2 + b_a)`` for a GEMM whose
activations the engine quantises from bf16 first (fp8, block fp8, nvfp4, int8 W8A8; 0 for bf16 and weight-only).
Tile and wave quantisation reuse :func:`rooflaw.constraints.tiles.tile_efficiency`; the kernel library picks
the output tile of :data:`TILE_MENU` that wastes least (tiles × waves over the device's SMs), as cuBLAS and
CUTLASS heuristics do, so a GEMM of few output tiles is not charged a whole wave of the largest tile.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd

from ...devices.device import Device
from ..tiles import tile_efficiency
from . import Family, KernelCurves, register

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
#: fitted without nvfp4 rows runs at the fp8 fraction of its own fp4 peak, and so on down to fp16).
COMPUTE_KEYS = ("fp16", "fp8", "fp8_block", "fp4", "int8", "mixed")
FALLBACK = {"fp8": "fp16", "fp8_block": "fp8", "fp4": "fp8", "int8": "fp16", "mixed": "fp16"}
#: output tiles (rows, cols) a GEMM library chooses from (CUTLASS/cuBLAS tile shapes on Ampere to Blackwell).
TILE_MENU = ((64, 64), (64, 128), (128, 64), (128, 128), (128, 256), (256, 128))
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
    gets the smallest extra any framework shows for ``op``; an op with none, its :data:`FALLBACK`'s."""
    while True:
        extra = {k.split("/", 1)[0]: v for k, v in curves.launch.items() if k.split("/", 1)[-1] == op}
        if extra or op not in FALLBACK:
            break
        op = FALLBACK[op]
    if framework in extra:
        return curves.kernel_s + float(extra[framework])
    return curves.kernel_s + (min(extra.values()) if extra else 0.0)


def tile_wave(M: Any, N: Any, groups: Any, device: Device) -> tuple[np.ndarray, np.ndarray]:
    """(tile, wave) efficiency of the :data:`TILE_MENU` tile whose product is best for ``groups`` M×N GEMMs."""
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


def rows_ramp(M: Any, half_rows: float) -> np.ndarray:
    """Fraction of the large-M rate an M-row GEMM reaches: M/(M + half_rows) (1 for ``half_rows`` = 0)."""
    M = np.asarray(M, dtype=np.float64)
    return M / (M + float(half_rows)) if half_rows else np.ones_like(M)


@dataclasses.dataclass(frozen=True)
class GemmTerms:
    """Curve-independent terms of each row: FLOPs, bytes, peak of its roof (FLOP/s), tile·wave, compute key."""

    m: np.ndarray
    flops: np.ndarray
    bytes: np.ndarray
    peak: np.ndarray
    eff: np.ndarray
    quant_bytes: np.ndarray  #: bytes of the activation-quantise kernel (0 where activations stay bf16)
    group: np.ndarray  #: index into ``labels`` per row
    labels: tuple[tuple[str, str], ...]  #: (compute key, framework) of each group; key "" where not modelled


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
    return GemmTerms(
        m=M,
        flops=2.0 * M * N * K,
        bytes=M * K * ba + K * N * bw + M * N * OUT_BYTES,
        peak=peak,
        eff=tile_wave_efficiency(M, N, 1, device),
        quant_bytes=np.where([k in QUANTISED_ACTIVATIONS for k in key], M * K * (2.0 + ba), 0.0),
        group=np.asarray(group),
        labels=tuple((str(k), str(f)) for k, f in labels),
    )


def seconds(t: GemmTerms, device: Device, curves: KernelCurves) -> np.ndarray:
    """Seconds of each row of ``t`` on ``device`` with ``curves`` (NaN where its dtype is not modelled)."""
    c = np.array([compute_fraction(curves, k) if k else np.nan for k, _ in t.labels] or [np.nan])[t.group]
    lat = np.array([launch_s(curves, k, f) if k else np.nan for k, f in t.labels] or [np.nan])[t.group]
    tc = t.flops / (t.peak * c * t.eff * rows_ramp(t.m, curves.half_rows))
    bw = device.memory_bandwidth * curves.memory
    return np.maximum(tc, t.bytes / bw) + t.quant_bytes / bw + lat


def predict(rows: pd.DataFrame, device: Device, curves: KernelCurves) -> np.ndarray:
    """Predicted milliseconds of each row of a ``gemm_perf`` table."""
    return seconds(terms(rows, device), device, curves) * 1e3


def used_params(rows: pd.DataFrame) -> tuple[str, ...]:
    """Figures the rows of a ``gemm_perf`` table determine: the compute keys present, ``memory``, ``half_rows``,
    ``kernel_s`` and one extra latency per (framework, non-bf16 key) present."""
    spec = rows["gemm_dtype"].astype(str).map(lambda d: GEMM_DTYPES.get(d, (None, None))[1])
    keys = [k for k in COMPUTE_KEYS if (spec == k).any()]
    fw_keys = sorted(
        {f"{f}/{k}" for f, k in zip(rows["framework"].astype(str), spec, strict=True) if k and k != "fp16"}
    )
    return (*(f"compute.{k}" for k in keys), "memory", "half_rows", "kernel_s", *(f"launch.{p}" for p in fw_keys))


FAMILY = register(
    Family(
        name="gemm",
        tables=("gemm_perf",),
        params=(*(f"compute.{k}" for k in COMPUTE_KEYS), "memory", "half_rows", "kernel_s"),
        predict=predict,
        used=used_params,
        prepare=terms,
        evaluate=seconds,
    )
)
