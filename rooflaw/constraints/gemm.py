"""One GEMM on the roofline: FLOPs, bytes (A, B and the C write), arithmetic intensity, tile/wave efficiency."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ..devices.device import Device
from ..errors import bad
from .precision import Precision


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

    def to_dict(self) -> dict:
        return asdict(self)


def gemm(m: int, n: int, k: int, device: Device, dtype: str = "fp32", tiles: bool = True) -> GemmCost:
    """Roofline cost of one GEMM with all three matrices in ``dtype``.

    bytes = (M·K + K·N + M·N)·b -- the output write counts (the seed documents' sample omits
    it, which is why it prints wrong intensities). Compute time is divided by the tile and wave
    efficiency of the device's GEMM tile over its SMs when ``tiles`` is set.
    """
    for key, v in (("m", m), ("n", n), ("k", k)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
            raise bad(key, v, "must be a positive integer")
    fmt = Precision.parse(dtype).weights
    flops = 2.0 * m * n * k
    byts = (m * k + k * n + m * n) * fmt.bytes
    dt, peak = device.roof(fmt.dtype)
    tm, tn = device.tile
    tiles_m, tiles_n = -(-m // tm), -(-n // tn)
    tile_eff = (m * n) / (tiles_m * tm * tiles_n * tn)
    if device.sm_count:
        total = tiles_m * tiles_n
        waves = -(-total // device.sm_count)
        wave_eff = total / (waves * device.sm_count)
    else:
        wave_eff = 1.0
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
