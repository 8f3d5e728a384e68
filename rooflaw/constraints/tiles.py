"""Tile and wave efficiency of a GEMM on a device: the tiling helpers both :mod:`.gemm` and the kernel families
(:mod:`.kernels`) price with, below both (no import cycle)."""

from __future__ import annotations

import numpy as np

from ..devices.device import Device

#: The narrowest tile a GEMM kernel runs (rows): one tensor-core MMA's height.
MIN_TILE_ROWS = 8.0


def rows_ramp(M, half_rows: float) -> np.ndarray:
    """Fraction of the large-M rate an M-row GEMM reaches: r/(r + half_rows) with r = max(M, 8) the rows of its
    narrowest tile (:data:`MIN_TILE_ROWS`: a GEMV runs an 8-row tile, and is not charged as a one-row one); 1 for
    ``half_rows`` = 0. The kernel fit's GEMM family and the assembly share it."""
    M = np.maximum(np.asarray(M, dtype=np.float64), MIN_TILE_ROWS)
    return M / (M + float(half_rows)) if half_rows else np.ones_like(M)


def tile_rows(M, tile_m: int):
    """Tile height a GEMM kernel uses for M output rows: the smallest power of two ≥ M, at least
    :data:`MIN_TILE_ROWS` and at most the device tile. Decode GEMMs (M = batch) run GEMV-like narrow tiles, not
    128 rows."""
    M = np.maximum(np.asarray(M, dtype=np.float64), 1.0)
    return np.minimum(float(tile_m), np.maximum(MIN_TILE_ROWS, 2.0 ** np.ceil(np.log2(M))))


def whole_tiles(M, tile_max: int = 128):
    """M rounded up to whole tiles: the smallest power of two ≥ M (≥ :data:`MIN_TILE_ROWS`) up to ``tile_max``
    rows, beyond that a multiple of ``tile_max`` -- a row count every tile height of a kernel's menu up to
    ``tile_max`` divides (a routed expert's rows already padded, :mod:`.moe_padding`)."""
    rows = np.asarray(M, dtype=np.float64)
    return np.where(rows <= tile_max, tile_rows(rows, tile_max), np.ceil(rows / tile_max) * tile_max)


#: Rows of the GEMM a calibrated roof is measured at (``devices.calibrate``: a 128-token chunk).
CALIBRATION_ROWS = 128.0


def rows_efficiency(M, half_rows: float):
    """Rate of an M-row GEMM relative to the 128-row rate the roof was measured at, on a rate curve
    r(M) ∝ M/(M + half_rows) (blocking and packing amortised over M rows; ``Device.gemm_half_rows``);
    capped at 1. M ≤ 1 (a GEMV: a memory-bound kernel of its own) and ``half_rows`` = 0 give 1."""
    M = np.asarray(M, dtype=np.float64)
    if not half_rows:
        return np.ones_like(M)
    h, ref = float(half_rows), CALIBRATION_ROWS
    with np.errstate(divide="ignore", invalid="ignore"):
        eff = np.minimum(1.0, M * (ref + h) / (ref * (M + h)))
    return np.where(M > 1.0, eff, 1.0)


def tile_efficiency(M, N, groups, device: Device):
    """(tile efficiency, wave efficiency) of ``groups`` independent GEMMs with an M×N output each.

    Output tiles are (tile rows, device.tile[1]); a partial tile does a full tile's work, and tiles
    run in waves of ``device.sm_count``; the tile efficiency includes the device's rate curve in M
    (:func:`rows_efficiency`). Works on scalars and numpy arrays.
    """
    tm, tn = device.tile
    M = np.maximum(np.asarray(M, dtype=np.float64), 1e-12)
    N = np.maximum(np.asarray(N, dtype=np.float64), 1e-12)  # a dense model's router has N = 0 (no GEMM)
    rows = tile_rows(M, tm)
    tiles_m, tiles_n = np.ceil(M / rows), np.ceil(N / tn)
    tile = (M * N) / (tiles_m * rows * tiles_n * tn) * rows_efficiency(M, getattr(device, "gemm_half_rows", 0.0))
    if not device.sm_count:
        return tile, np.ones_like(tile)
    tiles = tiles_m * tiles_n * np.ceil(np.maximum(groups, 1))
    waves = np.ceil(tiles / device.sm_count)
    return tile, tiles / (waves * device.sm_count)
