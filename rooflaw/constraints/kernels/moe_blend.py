"""How much of an MoE layer's grouped-GEMM compute and weight streaming overlap: the blend's q per device.

The MoE family (:mod:`.moe`) blends the grouped GEMMs' compute time ``t_c`` and streaming time ``t_m`` as
``(t_c^(1/q) + t_m^(1/q))^q`` (:func:`blend`: q = 0 the hard max, fully overlapped; 1 their sum). With
``moe_serial_gbps`` = ``h`` > 0 the curves give q per device from its DRAM bandwidth per SM, ``x`` (GB/s)::

    q = x / (x + h)

A grouped GEMM overlaps its loads with its math only while each SM keeps enough bytes in flight to cover the DRAM
latency (Little's law: ``x`` × latency bytes per SM, out of a shared memory of 100-228 KB); the faster the DRAM per
SM, the larger the share of its pipeline stages a K step's loads take, and the less of them hides behind the math.
(Each GPU's own q, fitted on its own rows of the aiconfigurator tables, rose with x: L40S 6.1 GB/s per SM 0.23,
A100 18.9 0.33, H100 25.4 0.65, B200 52 1.0 -- a sibling GPU of other bandwidth per SM gets its own q.) With
``moe_serial_gbps`` = 0 (curves fitted before it) q is the curves' constant ``moe_serial``. A family fit of
``moe_serial_gbps`` writes ``moe_serial`` as the q of the GPUs it fitted (:func:`fit_serial`), the figure the
efficiency fit holds per architecture (:func:`.curves_applied.curve_figures`, which has no device).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ...devices.device import Device
from . import KernelCurves


def bandwidth_per_sm(device: Device) -> float:
    """The device's DRAM bandwidth per SM (GB/s); 0 where it gives no SM count."""
    sms = float(device.sm_count or 0)
    return float(device.memory_bandwidth) / 1e9 / sms if sms > 0 else 0.0


def serial(curves: KernelCurves, device: Device | None) -> float:
    """q of the MoE layer's blend on ``device`` (module docstring): ``x/(x + moe_serial_gbps)``, or the curves'
    ``moe_serial`` where ``moe_serial_gbps`` is 0 or the device gives no bandwidth per SM (or none is given)."""
    h = float(getattr(curves, "moe_serial_gbps", 0.0))
    x = bandwidth_per_sm(device) if device is not None and h > 0 else 0.0
    return x / (x + h) if x > 0 else float(curves.moe_serial)


def blend(t_c: Any, t_m: Any, q: float) -> Any:
    """``(t_c^(1/q) + t_m^(1/q))^q``: the hard max at q = 0, the sum at q = 1 (computed relative to the max, so a
    small q does not overflow)."""
    t_c, t_m = np.asarray(t_c, dtype=float), np.asarray(t_m, dtype=float)
    hi = np.maximum(t_c, t_m)
    if q <= 0:
        return hi
    lo = np.minimum(t_c, t_m) / np.where(hi > 0, hi, 1.0)
    return hi * (1.0 + lo ** (1.0 / q)) ** q


def fit_serial(fam: Any, data: Any, curves: KernelCurves, fit_one: Any) -> KernelCurves:
    """The family's one joint fit (``fit_one``, :func:`.fit.fit_family`), then ``moe_serial`` set to the q of the
    fitted GPUs' geometric-mean bandwidth per SM (``Family.fit`` hook; ``data``: :class:`.fit.Prepared`)."""
    out = fit_one(dataclasses.replace(fam, fit=None), data, curves)
    xs = [bandwidth_per_sm(p.gpu.device) for p in data]
    if out.moe_serial_gbps <= 0 or not xs or min(xs) <= 0:
        return out
    x = float(np.exp(np.mean(np.log(xs))))
    return dataclasses.replace(out, moe_serial=x / (x + out.moe_serial_gbps))


__all__ = ["bandwidth_per_sm", "blend", "fit_serial", "serial"]
