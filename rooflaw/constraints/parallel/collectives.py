"""Collectives as α–β costs (seconds), vectorised over the message size.

n ranks, per-GPU link bandwidth ``bw`` each way (bytes/s), per-step latency ``alpha`` (s). ``nbytes`` is the
size of the buffer each rank holds: the vector being all-reduced, the gathered result of an all-gather, the
input of a reduce-scatter, everything one rank sends (to all peers) in an all-to-all.

- ring all-reduce: 2(n−1) steps, each rank sends and receives 2(n−1)/n·S: 2(n−1)·α + 2(n−1)/n·S/bw
- tree all-reduce (pipelined reduce + broadcast, NCCL's double binary tree): 2⌈log2 n⌉·α + 2·S/bw
- all-gather / reduce-scatter (ring): (n−1)·α + (n−1)/n·S/bw
- all-to-all over a switch: every peer's share is posted at once (NCCL / DeepEP): α + (n−1)/n·S/bw
- point-to-point: α + S/bw

When the group spans nodes (n > node_size) the collectives are hierarchical: the scale-up part runs on the
node's links and the scale-out part on the network (each GPU with its own NIC): all-reduce = reduce-scatter in
the node, all-reduce of S/local across nodes, all-gather in the node; all-to-all sends the on-node share over
the links and the off-node share over the network, one after the other.

Fitted curves: where the system's devices have kernel curves (:mod:`..kernels`: their architecture's, fitted to
measured collectives) with a curve for the collective on the system's link kind, the in-node collectives of
:func:`all_reduce` (``algorithm="auto"``, what engines run: TensorRT-LLM's custom all-reduce) and
:func:`all_to_all_sys` are priced by it as the kernel tables are (:func:`..kernels.collectives.seconds` given the
devices' architecture: NCCL's collectives in the protocol NCCL's tuner picks, the rest the cheapest of the curve's
protocols), each α + bytes/β with fitted latencies for α (NCCL's in SM cycles of the device's clock) and the link's
datasheet bandwidth × a fitted efficiency (× the link kind's contention, :mod:`..kernels.collectives`) for β.
The scale-out parts, point-to-point sends, explicit ``ring``/``tree`` and systems of devices without curves keep
the α–β figures of the system file.

Link energy (``*_j``): the bits each rank sends, times the system's energy per bit of the tier they cross
(``link_pj_per_bit`` inside a node, ``scale_out_pj_per_bit`` between nodes); latency terms carry no energy.
Bytes sent per rank: ring all-reduce 2(n−1)/n·S, tree all-reduce 2·S (the algorithm ``auto`` picks at that size),
all-gather / reduce-scatter (n−1)/n·S, all-to-all (n−1)/n·S, point-to-point S; across nodes the same split as the
time (reduce-scatter + all-gather in the node on the links, the all-reduce of S/local on the network).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...devices.system import System
from ..kernels import KernelCurves
from ..kernels import collectives as K

ALGORITHMS = ("ring", "tree", "auto")


def _steps(n: int) -> int:
    return max(0, int(n) - 1)


def ring_all_reduce(nbytes: Any, n: int, bw: float, alpha: float) -> Any:
    if n <= 1:
        return np.zeros_like(np.asarray(nbytes, dtype=float))
    return 2 * (n - 1) * alpha + 2 * (n - 1) / n * np.asarray(nbytes, dtype=float) / bw


def tree_all_reduce(nbytes: Any, n: int, bw: float, alpha: float) -> Any:
    if n <= 1:
        return np.zeros_like(np.asarray(nbytes, dtype=float))
    return 2 * math.ceil(math.log2(n)) * alpha + 2 * np.asarray(nbytes, dtype=float) / bw


def all_gather(nbytes: Any, n: int, bw: float, alpha: float) -> Any:
    if n <= 1:
        return np.zeros_like(np.asarray(nbytes, dtype=float))
    return _steps(n) * alpha + (n - 1) / n * np.asarray(nbytes, dtype=float) / bw


reduce_scatter = all_gather  # the same traffic, reversed


def all_to_all(nbytes: Any, n: int, bw: float, alpha: float) -> Any:
    if n <= 1:
        return np.zeros_like(np.asarray(nbytes, dtype=float))
    return alpha + (n - 1) / n * np.asarray(nbytes, dtype=float) / bw


def point_to_point(nbytes: Any, bw: float, alpha: float) -> Any:
    return alpha + np.asarray(nbytes, dtype=float) / bw


def flat_all_reduce(nbytes: Any, n: int, bw: float, alpha: float, algorithm: str = "auto") -> Any:
    """Ring, tree, or (``auto``) the faster of the two at each size, as NCCL's tuner picks."""
    if algorithm == "ring":
        return ring_all_reduce(nbytes, n, bw, alpha)
    if algorithm == "tree":
        return tree_all_reduce(nbytes, n, bw, alpha)
    return np.minimum(ring_all_reduce(nbytes, n, bw, alpha), tree_all_reduce(nbytes, n, bw, alpha))


def system_curves(system: System) -> KernelCurves | None:
    """The kernel curves of the system's devices (their architecture's), or ``None`` (none fitted, or no
    architecture): the one place the layouts look them up."""
    from .. import kernels

    lookup = getattr(kernels, "curves_for", None)  # written with the fitted catalog (kernels/__init__.py)
    return None if lookup is None else lookup(system.device)


def fitted(system: System, collective: str) -> tuple[str, K.CollectiveCurve] | None:
    """(link kind, curve) pricing ``collective`` inside a node of ``system``, or ``None`` (today's α–β figures)."""
    kind = K.link_kind(system.link)
    if kind is None:
        return None
    c = K.curve(system_curves(system), collective, kind, system.device)  # NCCL's fixed times on the device's clock
    return None if c is None else (kind, c)


def _arch(system: System) -> str | None:
    """The devices' architecture (NCCL's protocol choice and LL rate, :mod:`..kernels.nccl_tuner`), or ``None``."""
    return system.device.architecture or None


def _split(system: System, n: int) -> tuple[int, int]:
    """(ranks per node, nodes) of a group of ``n`` ranks packed onto whole nodes."""
    local = min(n, system.node_size)
    return local, math.ceil(n / local)


def all_reduce(nbytes: Any, n: int, system: System, algorithm: str = "auto") -> Any:
    """All-reduce of ``nbytes`` over ``n`` ranks of ``system`` (hierarchical across nodes)."""
    local, nodes = _split(system, n)
    fit = fitted(system, "allreduce") if algorithm == "auto" and n > 1 else None
    if nodes == 1:
        if fit is not None:
            return K.seconds(
                "allreduce", n, nbytes, system.link_bw, fit[0], fit[1], system.link_contention, _arch(system)
            )
        return flat_all_reduce(nbytes, n, system.link_bw, system.link_latency, algorithm)
    s = np.asarray(nbytes, dtype=float)
    inter = flat_all_reduce(s / local, nodes, system.scale_out_bw, system.scale_out_latency, algorithm)
    return inter + _in_node(s, local, system, "reducescatter") + _in_node(s, local, system, "allgather")


def _in_node(s: np.ndarray, local: int, system: System, collective: str) -> Any:
    """An all-gather or reduce-scatter of ``s`` bytes over the ``local`` ranks of one node."""
    fit = fitted(system, collective) if local > 1 else None
    if fit is not None:
        return K.seconds(collective, local, s, system.link_bw, fit[0], fit[1], system.link_contention, _arch(system))
    return all_gather(s, local, system.link_bw, system.link_latency)


def all_to_all_sys(nbytes: Any, n: int, system: System) -> Any:
    """All-to-all where each rank sends ``nbytes`` in total (its share to itself stays put)."""
    local, nodes = _split(system, n)
    fit = fitted(system, "alltoall") if n > 1 else None
    if nodes == 1:
        if fit is not None:
            return K.seconds(
                "alltoall", n, nbytes, system.link_bw, fit[0], fit[1], system.link_contention, _arch(system)
            )
        return all_to_all(nbytes, n, system.link_bw, system.link_latency)
    s = np.asarray(nbytes, dtype=float)
    if fit is not None:  # the on-node share ((local-1)/n of s) at the fitted curve, the off-node share on the network
        on = K.seconds(
            "alltoall", local, s * local / n, system.link_bw, fit[0], fit[1], system.link_contention, _arch(system)
        )
    else:
        on = system.link_latency + (local - 1) / n * s / system.link_bw
    off = system.scale_out_latency + (n - local) / n * s / system.scale_out_bw
    return on + off


def p2p_sys(nbytes: Any, system: System, across_nodes: bool) -> Any:
    if across_nodes:
        return point_to_point(nbytes, system.scale_out_bw, system.scale_out_latency)
    return point_to_point(nbytes, system.link_bw, system.link_latency)


# ---- link energy: joules per rank ------------------------------------------------------------------
def _joules(nbytes: Any, pj_per_bit: float) -> Any:
    return np.asarray(nbytes, dtype=float) * 8.0 * pj_per_bit * 1e-12


def _flat_all_reduce_bytes(s: np.ndarray, n: int, bw: float, alpha: float, algorithm: str) -> Any:
    ring, tree = 2 * (n - 1) / n * s, 2 * s
    if algorithm == "ring":
        return ring
    if algorithm == "tree":
        return tree
    return np.where(ring_all_reduce(s, n, bw, alpha) <= tree_all_reduce(s, n, bw, alpha), ring, tree)


def all_reduce_j(nbytes: Any, n: int, system: System, algorithm: str = "auto") -> Any:
    """Link energy (J) one rank spends sending its share of an all-reduce of ``nbytes`` over ``n`` ranks."""
    s = np.asarray(nbytes, dtype=float)
    if n <= 1:
        return np.zeros_like(s)
    local, nodes = _split(system, n)
    if nodes == 1:
        return _joules(_flat_all_reduce_bytes(s, n, system.link_bw, system.link_latency, algorithm),
                       system.link_pj_per_bit)  # fmt: skip
    intra = 2 * (local - 1) / local * s  # reduce-scatter + all-gather inside the node
    inter = _flat_all_reduce_bytes(s / local, nodes, system.scale_out_bw, system.scale_out_latency, algorithm)
    return _joules(intra, system.link_pj_per_bit) + _joules(inter, system.scale_out_pj_per_bit)


def all_to_all_j(nbytes: Any, n: int, system: System) -> Any:
    """Link energy (J) of one rank's all-to-all sending ``nbytes`` in total (its own share stays put)."""
    s = np.asarray(nbytes, dtype=float)
    if n <= 1:
        return np.zeros_like(s)
    local, nodes = _split(system, n)
    if nodes == 1:
        return _joules((n - 1) / n * s, system.link_pj_per_bit)
    return _joules((local - 1) / n * s, system.link_pj_per_bit) + _joules((n - local) / n * s,
                                                                           system.scale_out_pj_per_bit)  # fmt: skip


def p2p_j(nbytes: Any, system: System, across_nodes: bool) -> Any:
    """Link energy (J) of one point-to-point send of ``nbytes``."""
    return _joules(nbytes, system.scale_out_pj_per_bit if across_nodes else system.link_pj_per_bit)


@dataclass(frozen=True)
class Costs:
    """The collectives one cost is priced by: seconds (:data:`TIME`) or a rank's link joules (:data:`ENERGY`)."""

    all_reduce: Callable[..., Any]
    all_to_all: Callable[..., Any]
    p2p: Callable[..., Any]


TIME = Costs(all_reduce, all_to_all_sys, p2p_sys)
ENERGY = Costs(all_reduce_j, all_to_all_j, p2p_j)


__all__ = [
    "ALGORITHMS", "ENERGY", "TIME", "Costs", "all_gather", "all_reduce_j", "all_to_all_j", "fitted", "p2p_j",
    "all_reduce", "all_to_all", "all_to_all_sys", "flat_all_reduce", "p2p_sys",
    "point_to_point", "reduce_scatter", "ring_all_reduce", "system_curves", "tree_all_reduce",
]  # fmt: skip
