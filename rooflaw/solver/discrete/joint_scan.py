"""The joint space's single-device combinations on the numba scan kernel.

Each (precision, batch) combination of the one-device option is a :class:`~rooflaw.solver.problem.Problem` of its
own (:func:`.joint.combination_problem`), which the exhaustive solver's scan kernel (:mod:`.exhaustive_fast`) prices
at its single-device speed. Its pre-filter gets, per joint objective, the cost column that decides it *inside a
combination*: loss, the phase's latency, memory, energy and, for throughput (``batch · S_out / decode_s``,
maximised), ``decode_s`` (batch and ``S_out`` are constants there). A point the kernel drops (or, with more columns,
one dominated on the kernel's columns) is beaten by a feasible point of the same combination on every joint
objective, hence never on the joint frontier. The survivors are evaluated again by the joint space's numpy
reference (:func:`.joint_eval.evaluate_chunk`) and filtered on the joint objectives, so rows, best points and
diagnostics are built by the same code as there; :func:`.joint.merge` filters the union over tasks once more.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...constraints.backends import resolve
from ...errors import RooflawError
from ..problem import Problem
from .exhaustive import index_ranges
from .exhaustive_fast import NBINS, Plan, Reducer, finish_diagnostics, kernel_plan, new_stats, scan_range
from .joint_eval import JOINT_KEEP, evaluate_chunk, filter_joint_front
from .scan_parts import Accumulator

#: Joint objective -> the cost column that orders it inside one combination (None: the problem's latency phase).
KERNEL_COLUMN = {"loss": "loss", "latency": None, "memory": "memory_bytes", "energy": "energy_j",
                 "throughput": "decode_s"}  # fmt: skip


def plan(q: Problem, objectives: Sequence[str], strict: bool = False, lohi: np.ndarray | None = None) -> Plan | None:
    """The kernel's arguments for combination problem ``q`` (:func:`.exhaustive_fast.kernel_plan` with the columns
    that order ``objectives`` inside the combination, each once, loss first), or None when numpy runs it."""
    return kernel_plan(q, tuple(dict.fromkeys(KERNEL_COLUMN[o] or q.latency_column for o in objectives)), strict, lohi)


def scan_blocks(
    combo: Any, pl: Plan, a: int, b: int, objectives: tuple[str, ...], keep: tuple[str, ...]
) -> Accumulator:
    """Blocks ``[a, b)`` of one combination through the kernel: counts, best points, budget minima, least
    violating point and the non-dominated rows (:data:`.joint_eval.JOINT_KEEP` + ``keep``'s extra columns)."""
    c0 = time.thread_time()
    stats, red = new_stats(), Reducer()
    scan_range(pl, a, b, stats, red, np.full(NBINS, np.inf))
    acc = Accumulator(int(stats[0]), int(stats[1]), _front(combo, red.reduce(), objectives, keep),
                      _point(combo, stats[2], keep), _point(combo, stats[5], keep))  # fmt: skip
    finish_diagnostics(acc, combo.problem, stats, lambda i: _evaluate(combo, np.array([i]), keep))
    acc.eval_s = time.thread_time() - c0
    return acc


def _evaluate(combo: Any, idx: np.ndarray, keep: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The numpy joint evaluation of architecture indices ``idx`` (all inside the law's domain)."""
    cols = combo.problem.space.columns_at(idx, np.float64)
    extra = tuple(x for x in keep if x not in JOINT_KEEP)
    ((_, v, _),) = list(evaluate_chunk([combo], cols, extra))
    if v is None or len(v["loss"]) != len(idx):
        raise RooflawError("numba joint scan: a survivor lies outside the law's domain")  # kernel/numpy disagree
    return v


def _front(combo: Any, idx: np.ndarray, objectives: tuple[str, ...], keep: tuple[str, ...]) -> dict | None:
    """The rows of the survivors ``idx`` (non-dominated on the kernel's columns inside the combination), cut to
    their non-dominated rows on the joint objectives."""
    if not len(idx):
        return None
    v = _evaluate(combo, idx, keep)
    if not v["feasible"].all():
        raise RooflawError("numba joint scan: a survivor is infeasible under numpy")  # kernel/numpy disagree
    return filter_joint_front({x: np.asarray(v[x]) for x in keep}, objectives)


def _point(combo: Any, index: float, keep: tuple[str, ...]) -> dict[str, float] | None:
    v = None if index < 0 else _evaluate(combo, np.array([int(index)]), keep)
    return None if v is None else {x: float(v[x][0]) for x in keep}


def block_ranges(blocks: int, parts: int) -> list[tuple[int, int]]:
    """``[0, blocks)`` cut into ``parts`` contiguous ranges of near-equal size (none empty)."""
    parts = max(1, min(parts, blocks))
    step = math.ceil(blocks / parts)
    return [(s, min(s + step, blocks)) for s in range(0, blocks, step)]


def kernel_combinations(problem: Problem, combos: Sequence[Any], objectives: tuple[str, ...], backend: str,
                        size: int) -> dict[int, tuple[int, Any]]:  # fmt: skip
    """Combination index -> (kernel blocks, loss range of the staircase) for the single-device combinations the
    numba scan runs (``auto``: numba when installed, the joint space is large and the kernel can express the
    problem; ``numba``: raises where it cannot). Whether the kernel applies, and the loss range (any range is
    exact), are settled once per precision: batch sizes change only the kernel's scalar arguments."""
    if resolve(backend, size) == "numpy":
        return {}
    out, by_precision = {}, {}
    for c in combos:
        if c.option.columns is not None:
            continue  # a layout: its cost columns come from numpy (constraints.parallel)
        if c.precision not in by_precision:
            pl = plan(c.problem, objectives, strict=backend == "numba")
            by_precision[c.precision] = None if pl is None else (problem.space.size // pl.block, pl.lohi)
        if (bp := by_precision[c.precision]) is not None:
            out[c.index] = bp
    return out


def tasks_of(problem: Problem, combos: Sequence[Any], fast: dict[int, tuple[int, Any]], workers: int,
             chunk: int) -> list[tuple]:  # fmt: skip
    """numpy tasks (architecture ranges × the other combinations), then numba tasks (combinations × block ranges,
    at least two per worker in all)."""
    rest = tuple(c.index for c in combos if c.index not in fast)
    out: list[tuple] = []
    if rest:
        out += [("numpy", rest, a, b) for a, b in index_ranges(problem.space.size, workers, chunk)]
    per = math.ceil(2 * workers / len(fast)) if fast else 0
    for ci, (blocks, lohi) in fast.items():
        out += [("numba", ci, a, b, lohi) for a, b in block_ranges(blocks, per)]
    return out
