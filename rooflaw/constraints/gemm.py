"""One GEMM on the roofline: FLOPs, bytes (A, B and the C write), arithmetic intensity, tile/wave efficiency."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ..devices.device import Device
from ..devices.precision import Precision
from ..errors import bad
from .tiles import CALIBRATION_ROWS, rows_efficiency, tile_efficiency, tile_rows  # noqa: F401  (re-exported)

#: Inner dimension of the cold GEMV whose weight-streaming rate ``calibrate`` stores as the bandwidth.
CALIBRATION_K = 1024.0


def gemv_inverse_rate(M, K, weight_bytes: float, inv_beta: float, half_k: float, flat: bool = False):
    """s/FLOP of a one-token GEMV (M ≤ 1) streaming weights of ``weight_bytes`` each at the calibrated bandwidth
    (``inv_beta`` s/byte, measured at K = 1024) scaled by the K curve (K/(K + half_k))/(1024/(1024 + half_k)),
    capped at 1: 2 FLOPs per weight. 0 for M > 1, or for ``half_k`` = 0 (the plain roofline then applies) unless
    ``flat``: then ``inv_beta`` is a GEMV roof of its own (the 16-bit GEMV's) with a flat curve."""
    M, K = np.asarray(M, dtype=np.float64), np.asarray(K, dtype=np.float64)
    if not half_k and not flat:
        return np.zeros(np.broadcast(M, K).shape)
    h, ref = float(half_k), CALIBRATION_K
    with np.errstate(divide="ignore", invalid="ignore"):
        eff = np.minimum(1.0, K * (ref + h) / (ref * (K + h)))
        inv = weight_bytes * inv_beta / (2.0 * eff)
    return np.where((M <= 1.0) & (K > 0), inv, 0.0)


@dataclass
class GemmCost:
    """C[M×N] = A[M×K]·B[K×N]. SI units; efficiencies in (0, 1]."""

    m: int
    n: int
    k: int
    dtype: str
    flops: float
    bytes: float
    arithmetic_intensity: float
    bound: str
    seconds: float
    compute_seconds: float
    memory_seconds: float
    tile_efficiency: float
    wave_efficiency: float
    ridge: float
    device: str
    #: the kernel curves that priced it (``"hopper"``, ``"generic"``), or ``""``: the pure roofline
    curves: str = ""
    #: seconds beside the roofline: the curves' ``kernel_s``, the dtype's extra and the activation-quantise kernel
    #: (0 on the pure roofline)
    kernel_seconds: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


#: GEMM element formats -> the measured kernel dtype whose curves price them (``kernels.gemm.GEMM_DTYPES``)
KERNEL_DTYPES = {"bf16": "bfloat16", "fp16": "bfloat16", "fp8": "fp8", "nvfp4": "nvfp4", "int8": "int8",
                 "int8wo": "int8_wo", "int4": "int4_wo", "awq": "int4_wo", "gptq": "int4_wo"}  # fmt: skip


def gemm(
    m: int, n: int, k: int, device: Device, dtype: str = "fp32", tiles: bool = True, curves: str = "auto"
) -> GemmCost:
    """Cost of one GEMM with all three matrices in ``dtype``.

    ``curves="auto"``: priced on the device's kernel curves (:func:`rooflaw.constraints.kernels.curves_for`) when it
    has them and the format has a measured kernel (bf16/fp16, fp8, nvfp4, int8, weight-only int4/int8): the achieved
    fraction of the dtype's peak with the library's best tile, split-K and wave quantisation, achieved bandwidth,
    the round roofline corner and a fixed per-kernel latency (:mod:`rooflaw.constraints.kernels.gemm`; bytes as
    that kernel moves them, scales included, bf16 output; ``tile_efficiency``/``wave_efficiency`` report the best
    M×N tile without split-K). ``curves="ideal"`` (or a device or format without curves): the pure roofline --
    bytes = (M·K + K·N + M·N)·b, the output write counted (the seed documents' sample omits it, which is why it
    prints wrong intensities), compute time divided by the tile and wave efficiency of the device's GEMM tile
    over its SMs when ``tiles`` is set (see :func:`tile_efficiency`).
    """
    for key, v in (("m", m), ("n", n), ("k", k)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
            raise bad(key, v, "must be a positive integer")
        if v > 2**53:  # beyond 2⁵³ the float64 FLOP and byte counts would silently round it
            raise bad(key, v, f"must be at most 2**53 = {2**53:,}")
    if curves not in ("auto", "ideal"):
        raise bad("curves", curves, "use auto (the device's kernel curves) or ideal (the pure roofline)")
    fmt = Precision.parse(dtype).weights
    if curves == "auto" and fmt.name in KERNEL_DTYPES:
        from .kernels import curves_for

        c = curves_for(device)
        if c is not None:
            return _gemm_on_curves(m, n, k, device, fmt.name, c)
    flops = 2.0 * m * n * k
    byts = (m * k + k * n + m * n) * fmt.bytes
    dt, peak = device.roof(fmt.dtype)
    tile_eff, wave_eff = (float(x) for x in tile_efficiency(m, n, 1, device))
    eff = tile_eff * wave_eff if tiles else 1.0
    tc = flops / (peak * device.compute_efficiency * eff)
    tmem = byts / (device.memory_bandwidth * device.memory_efficiency)
    return GemmCost(
        m,
        n,
        k,
        fmt.name,
        flops,
        byts,
        flops / byts,
        "compute" if tc >= tmem else "memory",
        max(tc, tmem),
        tc,
        tmem,
        tile_eff,
        wave_eff,
        peak / device.memory_bandwidth,
        device.id,
    )


def _gemm_on_curves(m: int, n: int, k: int, device: Device, fmt: str, c) -> GemmCost:
    import pandas as pd

    from .kernels import gemm as kg

    rows = pd.DataFrame({"m": [m], "n": [n], "k": [k], "gemm_dtype": [KERNEL_DTYPES[fmt]], "framework": [""]})
    t = kg.terms(rows, device)
    tcs, tms, fixed = kg.parts(t, device, c)
    tc, tmem, lat = float(tcs[0]), float(tms[0]), float(fixed[0])
    te, we = (float(x) for x in kg.tile_wave(m, n, 1, device))
    return GemmCost(
        m,
        n,
        k,
        fmt,
        float(t.flops[0]),
        float(t.bytes[0]),
        float(t.flops[0] / t.bytes[0]),
        "compute" if tc >= tmem else "memory",
        float(kg.blend(tcs, tms, c.gemm_blend)[0]) + lat,
        tc,
        tmem,
        te,
        we,
        float(t.peak[0]) / device.memory_bandwidth,
        device.id,
        c.architecture,
        lat,
    )
