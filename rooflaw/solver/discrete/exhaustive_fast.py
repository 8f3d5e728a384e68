"""The exhaustive frontier on the numba backend: the generated scan kernel over flat indices, on threads.

The kernel (:mod:`rooflaw.constraints.scan_source`) writes out the indices that can still reach the frontier with
their objective values (bit-identical to numpy's); :func:`pareto_mask` filters them exactly, and only the frontier,
the best points and the diagnostics are evaluated again by the numpy reference (:func:`evaluate_lean`).
"""

from __future__ import annotations

import functools
import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...constraints import backend_numba as bn
from ...constraints.backends import fallback, resolve
from ...errors import RooflawError
from ..problem import Problem
from .pareto import pareto_mask
from .scan_parts import KEEP, OBJECTIVES, Accumulator, evaluate_lean, n_jobs_for, row_at, take_rows

PIECE = 1 << 21  # indices per kernel call (a thread takes pieces from a shared counter)
OUT_CAP = 1 << 18  # survivors buffer per call (the kernel stops early and resumes when it fills)
NBINS = 1 << 13  # loss bins of the 2-objective staircase
REDUCE_AT = 1 << 20  # survivors held per thread before an exact intermediate filter
MAX_BUDGETS = 3  # constraints the kernel tracks (stats slots 8..10 hold the smallest value of each)
#: A space where every axis of the index has two values: probing it tells along which axis each completed column
#: varies (the scan reads such a column from that axis's table; a column constant in a space is a fixed one).
_PROBE = {"name": "probe", "layers": [2, 3], "d_model": [512, 1024], "head_dim": [64, 128], "kv_heads": [1, "heads"],
          "moe": [(1, 1), (8, 2)], "r_single": [1.0, 2.0], "vocab": [1000, 2000], "tied": [False, True]}  # fmt: skip


@functools.cache
def _axes() -> tuple[tuple[str, ...], ...]:
    """The completed columns that vary along each of the first four axes of a space's index."""
    from ...arch import Space
    from ...constraints.roofline import complete_columns

    tabs = [complete_columns(t) for t in Space(**_PROBE).index_tables()[:4]]
    return tuple(tuple(c for c, v in t.items() if np.any(v != v[0])) for t in tabs)


def _setup(problem: Problem) -> tuple[Any, ...] | str:
    """Kernels, per-axis tables, constants, scalars and radix of a scan, if they reproduce the numpy inputs
    (else why not)."""
    from ...constraints import assembly as A
    from ...constraints.compile import compile_preset
    from ...constraints.roofline import complete_columns, model_call, stack_kinds

    space = problem.space
    if len(problem.constraints) > MAX_BUDGETS:
        return f"the scan kernel takes at most {MAX_BUDGETS} constraints"
    if not hasattr(space, "index_tables"):
        return f"space {space.name!r} has no index tables"
    raw = space.index_tables()
    if len(raw) != 5 or len(raw[4]["layers"]) != 1:  # the kernel has no loop over layer patterns
        return f"space {space.name!r} searches layer patterns, which the kernel does not decode"
    shape = tuple(len(t["layers"]) for t in raw)
    idx = np.unique(np.concatenate([[0, space.size - 1], np.random.default_rng(1).integers(0, space.size, 512)]))
    cc = complete_columns(space.columns_at(idx, np.float64))
    kinds = stack_kinds(cc) if A.get_preset(problem.preset).kinds else frozenset()
    k = bn.kernels(problem.preset, problem.law, kinds, _axes())
    tabs = []
    for names, t, digit in zip(k.axes, raw, np.unravel_index(idx, shape), strict=False):
        t = complete_columns(t)
        tabs.append(np.zeros((len(t["layers"]), max(1, len(names)))))
        for j, name in enumerate(names):
            tabs[-1][:, j] = t[name]
            if not np.array_equal(tabs[-1][digit, j], cc[name]):  # the table row at the point's digit
                return f"column {name!r} of space {space.name!r} does not follow one axis of its index"
    for name in k.fixed:
        if not np.all(cc[name] == cc[name][0]):
            return f"column {name!r} varies in space {space.name!r}; the kernel takes it as a constant"
    fx = np.array([cc[name][0] for name in k.fixed], dtype=np.float64)
    tokens = float(problem.tokens) if problem.tokens is not None else 0.0
    call = model_call(cc, problem.scenario, compile_preset(problem.preset, kinds))
    w = bn.scalars(k, problem.scenario, call, tokens, _bounds(problem, k.domain))
    return k, (*tabs, fx, w), np.array([shape[3], shape[2], shape[1]], dtype=np.int64)


def _bounds(problem: Problem, names: tuple[str, ...]) -> tuple[tuple[float, float], ...]:
    """The fitted range of each domain variable, or NaN where it is not judged, as on the numpy path: the problem
    extrapolates, or ``D`` without tokens."""
    judged = [not problem.allow_extrapolation and (v != "D" or problem.tokens is not None) for v in names]
    return tuple(problem.law.domain[v] if j else (np.nan, np.nan) for v, j in zip(names, judged, strict=True))


def _loss_range(problem: Problem) -> np.ndarray:
    """Bin range of the staircase: the loss range of feasible points in a seeded sample (any range is exact)."""
    size = problem.space.size
    v = _lean(problem, np.unique(np.random.default_rng(0).integers(0, size, min(size, 8192))))
    loss = v["loss"][v["feasible"]] if v["feasible"].any() else v["loss"][np.isfinite(v["loss"])]
    return np.array([loss.min(), loss.max()] if len(loss) else [0.0, 1.0], dtype=np.float64)


class Reducer:
    """Survivors of one thread (indices and the kernel's objective values), cut down to their exact frontier with
    :func:`pareto_mask` whenever they pile up; only the final frontier is evaluated again by numpy."""

    def __init__(self) -> None:
        self.idx: list[np.ndarray] = []
        self.val: list[np.ndarray] = []
        self.n, self.seconds, self.survivors = 0, 0.0, 0  # survivors: indices the kernel wrote out

    def add(self, idx: np.ndarray, val: np.ndarray) -> None:
        self.idx.append(idx.copy())
        self.val.append(val.copy())
        self.n += len(idx)
        self.survivors += len(idx)
        if self.n > REDUCE_AT:
            self.reduce()

    def absorb(self, other: Reducer) -> None:
        self.idx, self.val, self.n = self.idx + other.idx, self.val + other.val, self.n + other.n

    def reduce(self) -> np.ndarray:
        """The indices of the non-dominated survivors, ascending (the numpy path's order)."""
        t0 = time.thread_time()
        if not self.idx:
            return np.empty(0, dtype=np.int64)
        idx, val = np.concatenate(self.idx), np.concatenate(self.val)
        m = pareto_mask(val)
        order = np.argsort(idx[m], kind="stable")
        self.idx, self.val, self.n = [idx[m][order]], [val[m][order]], int(m.sum())
        self.seconds += time.thread_time() - t0  # CPU: reductions run on the scan's threads
        return self.idx[0]


def _merge(s: np.ndarray, t: np.ndarray) -> None:
    """Fold the statistics ``t`` of one call into ``s`` (same layout as the kernel's ``stats``)."""
    s[0:2] += t[0:2]
    for a in (2, 5):  # (index, loss, latency): lower loss, then lower latency, then lower index
        if t[a] >= 0 and (s[a] < 0 or (t[a + 1], t[a + 2], t[a]) < (s[a + 1], s[a + 2], s[a])):
            s[a : a + 3] = t[a : a + 3]
    s[8:11] = np.minimum(s[8:11], t[8:11])
    if t[12] >= 0 and (s[12] < 0 or (t[11], t[12]) < (s[11], s[12])):
        s[11:13] = t[11:13]


def finish_diagnostics(acc: Any, problem: Problem, stats: np.ndarray, evaluate: Any) -> None:
    """The per-constraint minima (from the kernel's stats) and, when nothing is feasible, the closest point
    (evaluated by ``evaluate(index)`` with numpy) of one scan, into ``acc``."""
    cons = problem.constraints
    if stats[5] >= 0:
        acc.minimum = {c.kind: float(stats[8 + j]) for j, c in enumerate(cons)}
    if acc.feasible == 0 and stats[12] >= 0:
        v = evaluate(int(stats[12]))
        up = {c.kind: c.as_upper() for c in cons}  # the ceiling form the kernel tracks
        ratios = {k: float(v[col][0] / b) for k, (col, b) in up.items()}
        acc.closest = (max(ratios.values()), ratios | {f"{k}_value": float(v[col][0]) for k, (col, _) in up.items()})


def new_stats() -> np.ndarray:
    return np.array([0, 0, -1, np.inf, np.inf, -1, np.inf, np.inf, np.inf, np.inf, np.inf, np.inf, -1, 0, 0.0])


@dataclass(frozen=True)
class Plan:
    """Everything one scan passes to the kernel for one problem (built in the process that runs it)."""

    kernels: Any
    tabs: tuple[np.ndarray, ...]  # the four axis tables, the fixed columns, the scalars
    radix: np.ndarray
    obj: np.ndarray  # output codes of the objectives (the loss: len(kernels.outputs))
    latc: int
    bcol: np.ndarray
    bval: np.ndarray
    lohi: np.ndarray

    @property
    def block(self) -> int:
        """Points per (width, experts) block: the kernel's unit of work."""
        return int(self.radix[0] * self.radix[1])

    def scan(self, pos: int, stop: int, stair: np.ndarray, out: np.ndarray, val: np.ndarray, stats: np.ndarray):
        """Scan blocks ``pos … stop-1``: survivors' indices into ``out``, their objectives into the rows of ``val``
        (it stops early when ``out`` fills: ``stats[13]`` is where to resume, ``stats[14]`` how many)."""
        need = np.zeros(len(self.kernels.outputs) + 1, dtype=np.int64)  # the outputs this scan reads
        need[[*self.obj.tolist(), *self.bcol.tolist(), self.latc]] = 1
        self.kernels.scan(pos, stop, *self.tabs, self.radix, self.obj, need, self.latc, self.bcol, self.bval,
                          self.lohi, stair, out, val, stats)  # fmt: skip


def kernel_plan(problem: Problem, columns: tuple[str, ...], strict: bool = False, lohi: Any = None) -> Plan | None:
    """The scan kernel's arguments for ``problem`` with objective ``columns`` (``loss`` or cost columns), or None
    when the kernel cannot price it and the numpy path should run (with ``strict`` this raises instead, naming
    why). ``lohi``: the staircase's loss range (any range is exact; default: from a sample of feasible points)."""
    ceilings = [c.as_upper() for c in problem.constraints]
    try:
        setup = _setup(problem)
    except bn.Unsupported as e:
        setup = f"the generated kernel cannot express this problem ({e})"
    if isinstance(setup, str):
        if strict:
            raise RooflawError(f"backend='numba': {setup}")
        fallback(setup)
        return None
    k, tabs, radix = setup
    if "D" in problem.law.variables and problem.tokens is None:
        return None  # the numpy path raises the law's own error message
    code = {c: j for j, c in enumerate(k.outputs)} | {"loss": len(k.outputs)}
    return Plan(k, tabs, radix, np.array([code[c] for c in columns], dtype=np.int64), code[problem.latency_column],
                np.array([code[c] for c, _ in ceilings], dtype=np.int64), np.array([b for _, b in ceilings]),
                _loss_range(problem) if lohi is None else lohi)  # fmt: skip


def scan_range(pl: Plan, a: int, b: int, stats: np.ndarray, red: Reducer, stair: np.ndarray) -> None:
    """Blocks ``[a, b)`` through the kernel, at most :data:`PIECE` points a call: its statistics folded into
    ``stats``, its survivors into ``red`` (``stair``: the staircase, carried from call to call)."""
    cap = max(OUT_CAP, 4 * (8192 + 2 * pl.block))
    out, val = np.empty(cap, dtype=np.int64), np.empty((cap, len(pl.obj)))
    while a < b:
        t = new_stats()
        pl.scan(a, min(b, a + max(1, PIECE // pl.block)), stair, out, val, t)
        _merge(stats, t)
        red.add(out[: int(t[14])], val[: int(t[14])])
        a = int(t[13])


def run_numba(problem: Problem, objectives: tuple[str, ...], n_jobs: int | None, cloud: int, backend: str):
    """``(acc, timings)`` like ``exhaustive._run``, or None when the numpy path should run instead."""
    size = problem.space.size
    if resolve(backend, size) == "numpy":
        return None
    cols = {**OBJECTIVES, "latency": problem.latency_column}
    pl = kernel_plan(problem, tuple(cols[o] for o in objectives), backend == "numba")
    if pl is None:
        return None
    jobs = max(1, n_jobs_for(n_jobs, max(size, 1 << 30)))
    lock, nxt = threading.Lock(), [0]
    blocks, piece = size // pl.block, max(1, PIECE // pl.block)

    def work() -> tuple[np.ndarray, Reducer]:
        stats, red, stair = new_stats(), Reducer(), np.full(NBINS, np.inf)
        while True:
            with lock:
                a = nxt[0]
                nxt[0] = min(blocks, a + piece)
            if a >= blocks:
                red.reduce()  # each thread filters its own survivors, in parallel (moocore releases the GIL)
                return stats, red
            scan_range(pl, a, min(blocks, a + piece), stats, red, stair)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(jobs) as ex:
        parts = [f.result() for f in [ex.submit(work) for _ in range(jobs)]]
    eval_wall, t1 = time.perf_counter() - t0, time.perf_counter()
    stats, red = new_stats(), Reducer()
    for st, r in parts:
        _merge(stats, st)
        red.absorb(r)
    acc = Accumulator(evaluated=int(stats[0]), feasible=int(stats[1]))
    idx = red.reduce()
    if len(idx):  # the frontier's rows from the numpy reference, filtered again on its values (the same ones)
        v = evaluate_lean(problem, problem.space.columns_at(idx, np.float64))
        ocols = [OBJECTIVES[o] for o in objectives]
        acc.front = take_rows({k: v[k] for k in KEEP}, pareto_mask(np.column_stack([v[c] for c in ocols])))
    acc.best, acc.best_any = _point(problem, stats[2]), _point(problem, stats[5])
    finish_diagnostics(acc, problem, stats, lambda i: _lean(problem, np.array([i])))
    if cloud and acc.feasible:
        acc.cloud = _cloud(problem, cloud, acc.feasible / max(1, acc.evaluated))
    merge = time.perf_counter() - t1
    timings = {"eval_seconds": eval_wall, "pareto_seconds": merge, "eval_cpu_seconds": eval_wall * jobs,
               "pareto_cpu_seconds": merge + sum(r.seconds for _, r in parts), "n_jobs": jobs,
               "backend": "numba", "survivors": sum(r.survivors for _, r in parts)}  # fmt: skip
    return acc, timings


def _lean(problem: Problem, idx: np.ndarray) -> dict[str, np.ndarray]:
    return evaluate_lean(problem, problem.space.columns_at(idx, np.float64))


def _point(problem: Problem, index: float) -> dict[str, float] | None:
    return None if index < 0 else row_at(_lean(problem, np.array([int(index)])), 0)


def _cloud(problem: Problem, n: int, rate: float) -> dict[str, np.ndarray]:
    """A uniform sample of about ``n`` feasible points (seeded), drawn by index and evaluated with numpy."""
    rng = np.random.default_rng(0)
    size = problem.space.size
    v = _lean(problem, np.unique(rng.integers(0, size, min(size, int(math.ceil(1.2 * n / max(rate, 1e-9))), 50 * n))))
    keep = np.flatnonzero(v["feasible"])
    if len(keep) > n:
        keep = np.sort(rng.choice(keep, n, replace=False))
    return take_rows({k2: v[k2] for k2 in KEEP}, keep)
