"""Which protocol NCCL runs: its own tuner's cost model with its published constants (single node, ring).

NCCL (BSD-3-Clause) picks, per call, the algorithm and protocol its tuner (``src/graph/tuning.cc``) predicts
cheapest: ``time = latency + bytes / bandwidth``, with a base latency per protocol plus a hardware latency per ring
step per link kind, and a bus bandwidth per protocol from its topology's link bandwidth and per-architecture caps.
The constants below are NCCL 2.28.3's (``ncclTunerConstantsDefaults``; the tables here were collected with 2.27.3
and 2.29.2, which bracket it). The tuner predicts *which* protocol runs, not how long it takes: the measured
tables jump where NCCL switches from LL to Simple (A100 all-reduce at 2 GPUs: 19 µs at 512 KB with LL, 41 µs at
1 MB with Simple; the tuner's switch: 1.0 MB), so the kernel curves price the protocol the tuner picks with the
protocol's own fitted figures (:func:`.collectives.seconds`). Its LL rate (:func:`ll_bandwidth`) is the unit of the
LL protocol's fitted efficiency: the fitted LL rates were NCCL's per-architecture caps over NVLink and half its
link share over PCIe (docs/kernels-moe-collectives.md, session 13).

Simplifications, each named: ring only (single-node trees cost what rings do in the tuner's latency and never
more in bandwidth); no NVLink SHARP (NVLS; Hopper and later on NVSwitch, above 2 GPUs: its 25 µs latency only
competes with Simple, which prices it); LL128's per-channel cap not applied (it binds above the 0.92 × link it
already gets at NCCL's channel counts); the bus bandwidth is the datasheet link bandwidth times NCCL's own
per-link figure over the datasheet's (NVLink 20.0 of 25 GB/s per link on SM80, 20.6 on SM90, 40.1 of 50 on
SM100: 0.80-0.82; PCIe Gen4 x16 24 of 32 GB/s: 0.75).
"""

from __future__ import annotations

from typing import Any

import numpy as np

PROTOCOLS = ("LL", "LL128", "Simple")
#: base latency of a ring call per protocol, µs (``baseLatencies[RING]``)
BASE_US = (6.6, 14.0, 8.4)
#: hardware latency per ring step per protocol, µs, by link kind (``hwLatencies[NVLINK|PCI][RING]``)
HOP_US = {"nvlink": (0.6, 1.9, 3.4), "pcie": (1.0, 2.5, 5.7)}
#: LL's bus-bandwidth cap on one node, GB/s (``llMaxBws[...][0]``; Ada, sm89, takes Ampere's row)
LL_MAX_GBS = {"ampere": 87.7, "ada": 87.7, "hopper": 141.0, "blackwell": 282.0}
#: NCCL's own bandwidth of a link over its datasheet figure (see the module docstring)
LINK_SHARE = {"nvlink": 0.8, "pcie": 0.75}
#: collectives NCCL's collective tuner prices (the all-to-all is point-to-point sends, not tuned this way)
TUNED = ("nccl_allreduce", "allgather", "reducescatter")


def ring_steps(collective: str, n: Any) -> Any:
    """Ring steps of one call: 2(n-1) for an all-reduce, n-1 for an all-gather or reduce-scatter."""
    n = np.asarray(n, dtype=float)
    return 2 * (n - 1) if collective == "nccl_allreduce" else n - 1


def tuner_us(collective: str, n: Any, nbytes: Any, link_bw: float, kind: str, architecture: str) -> np.ndarray:
    """NCCL's predicted µs of each protocol (:data:`PROTOCOLS`, last axis) for ``collective`` of ``nbytes`` (the
    whole buffer) over ``n`` GPUs on one node; ``inf`` where the protocol is off (LL128 off PCIe)."""
    n = np.maximum(np.asarray(n, dtype=float), 2.0)
    s = np.asarray(nbytes, dtype=float)
    steps = ring_steps(collective, n)
    bus = LINK_SHARE[kind] * link_bw / 1e9  # GB/s
    ll_cap = LL_MAX_GBS.get(architecture, LL_MAX_GBS["ampere"])
    bw = (np.minimum(ll_cap, 0.5 * bus), 0.92 * bus if kind == "nvlink" else 0.0, bus)
    out = []
    for base, hop, b in zip(BASE_US, HOP_US[kind], bw, strict=True):
        alg = b * n / steps  # bus -> algorithm bandwidth of a ring
        out.append(np.where(b > 0, base + steps * hop + s / (1e3 * np.where(b > 0, alg, 1.0)), np.inf))
    return np.stack(np.broadcast_arrays(*out), axis=-1)


def ll_bandwidth(rank_bw: Any, kind: str, architecture: str | None) -> Any:
    """NCCL's LL bus bandwidth, bytes/s, on a link of ``rank_bw`` bytes/s per rank each way: half of NCCL's share of
    the link (LL sends a flag with every 8 data bytes) capped by the architecture's LL rate (:data:`LL_MAX_GBS`; no
    cap without an architecture)."""
    half = 0.5 * LINK_SHARE[kind] * np.asarray(rank_bw, dtype=float)
    return half if architecture is None else np.minimum(LL_MAX_GBS.get(architecture, LL_MAX_GBS["ampere"]) * 1e9, half)


def protocol(collective: str, n: Any, nbytes: Any, link_bw: float, kind: str, architecture: str,
             offered: tuple[bool, bool, bool] = (True, True, True)) -> np.ndarray:  # fmt: skip
    """Index into :data:`PROTOCOLS` of the protocol NCCL's tuner picks, among those ``offered`` (a curve without
    fitted LL128 figures offers LL and Simple)."""
    t = tuner_us(collective, n, nbytes, link_bw, kind, architecture)
    t = np.where(np.asarray(offered, dtype=bool), t, np.inf)
    return np.argmin(t, axis=-1)


__all__ = ["BASE_US", "HOP_US", "LINK_SHARE", "LL_MAX_GBS", "PROTOCOLS", "TUNED", "ll_bandwidth", "protocol",
           "ring_steps", "tuner_us"]  # fmt: skip
