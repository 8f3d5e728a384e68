"""The exhaustive frontier on the numba backend: the generated scan kernel over flat indices, on threads.

The kernel (see :mod:`rooflaw.constraints.scan_source`) evaluates cost model and loss law per index, keeps the
feasibility statistics and writes out only the indices that can still reach the frontier. The survivors are then
evaluated again by the numpy reference (:func:`evaluate_lean`, bit-identical values) and filtered exactly, so the
frontier rows, best points and diagnostics are built by the same code as the numpy path.
"""

from __future__ import annotations

import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...constraints import backend_numba as bn
from ...errors import RooflawError
from ..problem import Problem
from .pareto import pareto_mask
from .scan_parts import _KEEP, OBJECTIVES, _Acc, _n_jobs, _row, _take, evaluate_lean

PIECE = 1 << 21  # indices per kernel call (a thread takes pieces from a shared counter)
OUT_CAP = 1 << 18  # survivors buffer per call (the kernel stops early and resumes when it fills)
NBINS = 1 << 13  # loss bins of the 2-objective staircase
REDUCE_AT = 1 << 20  # survivors held per thread before an exact intermediate filter
_WIDTH = ("d_model", "head_dim", "heads", "kv_heads", "ffn")


def _decode(idx: np.ndarray, tw, tm, tl, tv, fixed: dict[str, float]) -> dict[str, np.ndarray]:
    """The kernel's index decoding (``backend_numba._DECODE``), in numpy, to check it against the space."""
    nv, nl, nm = len(tv), len(tl), len(tm)
    rest, iv = np.divmod(idx, nv)
    rest, il = np.divmod(rest, nl)
    iw, im = np.divmod(rest, nm)
    out = {k: tw[iw, j].astype(float) for j, k in enumerate(_WIDTH)}
    out |= {"layers": tl[il].astype(float), "shared_ffn": tw[iw, 4].astype(float)}
    out |= {"experts": tm[im, 0].astype(float), "top_k": tm[im, 1].astype(float)}
    out |= {"moe": (tm[im, 0] > 1).astype(float), "vocab": tv[iv, 0].astype(float), "tied": tv[iv, 1].astype(float)}
    if "mla_layers" in fixed:
        out["attn_layers"] = out["layers"] - fixed["mla_layers"] - fixed["mixer_layers"]
        out["ffn_layers"] = out["layers"] - fixed["dense_layers"]
    return out


def _setup(problem: Problem, need: tuple[int, ...]) -> tuple[Any, ...] | None:
    """Kernels, lookup tables and constants of a scan, if the kernel's decoding reproduces the numpy inputs."""
    from ...constraints import assembly as A
    from ...constraints.roofline import complete_columns, stack_kinds

    space = problem.space
    try:
        tw, tm, tl, tv = space._width, space._moe, space._layers, space._vt
        radix = tuple(space._radix)
    except AttributeError:
        return None
    if radix[4:] not in ((), (1,)):  # a space searching layer patterns: not decoded by the kernel (numpy path)
        return None
    if radix[:4] != (len(tw), len(tm), len(tl), len(tv)) or tw.ndim != 2 or tw.shape[1] != 5:
        return None
    size = space.size
    rng = np.random.default_rng(1)
    idx = np.unique(np.concatenate([[0, size - 1], rng.integers(0, size, 512)]))
    cc = complete_columns(space.columns_at(idx, np.float64))
    kinds = stack_kinds(cc) if A.get_preset(problem.preset).kinds else frozenset()
    k = bn.kernels(problem.preset, problem.law, kinds, need, _domain(problem))
    vals = bn.call_values(cc, problem.device, problem.workload, problem.precision, k, _applied(problem))
    fixed = {}
    for name in k.fixed:
        v = np.asarray(vals[name], dtype=np.float64)
        if v.ndim and not np.all(v == v.flat[0]):
            return None  # a column the kernel takes as constant varies in this space
        fixed[name] = float(v.flat[0])
    dec = _decode(idx, tw, tm, tl, tv, fixed)
    if any(name not in dec or not np.array_equal(dec[name], vals[name]) for name in k.per_row if name not in fixed):
        return None
    w = np.array([float(vals[a]) for a in k.scalars])
    tabs = [np.ascontiguousarray(t, dtype=np.int64) for t in (tw, tm, tl, tv)]
    fx = np.array([fixed[a] for a in k.fixed])
    return k, (*tabs, fx, w), np.array([len(tv), len(tl), len(tm)], dtype=np.int64)


def _domain(problem: Problem) -> tuple[tuple[str, float, float], ...]:
    """The law's fitted domain as the kernel checks it (none when the problem extrapolates; ``D`` only when
    the problem gives tokens, as ``law_inputs`` computes D only then)."""
    if problem.allow_extrapolation:
        return ()
    return tuple((v, float(lo), float(hi)) for v, (lo, hi) in problem.law.domain.items()
                 if v != "D" or problem.tokens is not None)  # fmt: skip


def _loss_range(problem: Problem) -> np.ndarray:
    """Bin range of the staircase: the loss range of feasible points in a seeded sample (any range is exact)."""
    size = problem.space.size
    idx = np.unique(np.random.default_rng(0).integers(0, size, min(size, 8192)))
    v = evaluate_lean(problem, problem.space.columns_at(idx, np.float64))
    loss = v["loss"][v["feasible"]]
    if not len(loss):
        loss = v["loss"][np.isfinite(v["loss"])]
    lo, hi = (float(loss.min()), float(loss.max())) if len(loss) else (0.0, 1.0)
    return np.array([lo, hi])


class _Reducer:
    """Survivor indices of one thread, cut down to their exact frontier whenever they pile up."""

    def __init__(self, problem: Problem, ocols: tuple[str, ...]):
        self.problem, self.ocols, self.parts, self.n = problem, ocols, [], 0
        self.seconds = 0.0
        self.survivors = 0  # indices the kernel wrote out (could reach the frontier)

    def add(self, idx: np.ndarray) -> None:
        self.parts.append(idx.copy())
        self.n += len(idx)
        self.survivors += len(idx)
        if self.n > REDUCE_AT:
            self.reduce()

    def reduce(self) -> dict[str, np.ndarray] | None:
        t0 = time.perf_counter()
        idx = np.concatenate(self.parts) if self.parts else np.empty(0, dtype=np.int64)
        front = None
        if len(idx):
            v = evaluate_lean(self.problem, self.problem.space.columns_at(idx, np.float64))
            m = pareto_mask(np.column_stack([v[c] for c in self.ocols]))
            front = _take({k: v[k] for k in _KEEP}, m)
            idx = idx[m]
        self.parts, self.n = [idx], len(idx)
        self.seconds += time.perf_counter() - t0
        return front


def _merge(s: np.ndarray, t: np.ndarray) -> None:
    """Fold the statistics ``t`` of one call into ``s`` (same layout as the kernel's ``stats``)."""
    s[0] += t[0]
    s[1] += t[1]
    for a in (2, 5):  # (index, loss, latency): lower loss, then lower latency, then lower index
        if t[a] >= 0 and (s[a] < 0 or (t[a + 1], t[a + 2], t[a]) < (s[a + 1], s[a + 2], s[a])):
            s[a : a + 3] = t[a : a + 3]
    s[8:11] = np.minimum(s[8:11], t[8:11])
    if t[12] >= 0 and (s[12] < 0 or (t[11], t[12]) < (s[11], s[12])):
        s[11:13] = t[11:13]


#: Constraints the scan kernel tracks (stats slots 8..10 hold the smallest value of each).
MAX_BUDGETS = 3


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


def _new_stats() -> np.ndarray:
    return np.array([0, 0, -1, np.inf, np.inf, -1, np.inf, np.inf, np.inf, np.inf, np.inf, np.inf, -1, 0, 0.0])


def _applied(problem: Problem) -> Any:
    """The engine profile the numpy backend applies to ``problem`` (its scenario's)."""
    return problem.scenario.applied


@dataclass(frozen=True)
class Plan:
    """Everything one scan passes to the kernel for one problem (built in the process that runs it)."""

    kernels: Any
    tabs: tuple[np.ndarray, ...]
    radix: np.ndarray
    params: np.ndarray
    tokens: float
    obj: np.ndarray
    latc: int
    bcol: np.ndarray
    bval: np.ndarray
    lohi: np.ndarray

    @property
    def block(self) -> int:
        """Points per (width, experts) block: the kernel's unit of work."""
        return int(self.radix[0] * self.radix[1])


def kernel_plan(problem: Problem, obj: np.ndarray, strict: bool = False, lohi: np.ndarray | None = None) -> Plan | None:
    """The scan kernel's arguments for ``problem`` with objective output codes ``obj`` (16 = loss), or None when
    the kernel cannot price it and the numpy path should run (with ``strict`` this raises instead, naming why).
    ``lohi``: the staircase's loss range (any range is exact; default: from a sample of feasible points)."""
    ceilings = [c.as_upper() for c in problem.constraints]
    if len(ceilings) > MAX_BUDGETS:  # the kernel keeps the smallest value of each in 3 slots of its stats
        if strict:
            raise RooflawError(f"backend='numba': the scan kernel takes at most {MAX_BUDGETS} constraints; this "
                               f"problem has {len(ceilings)}")  # fmt: skip
        return None
    bcol = np.array([bn.OUTPUTS.index(c) for c, _ in ceilings], dtype=np.int64)
    bval = np.array([b for _, b in ceilings], dtype=np.float64)
    latc = bn.OUTPUTS.index(problem.latency_column)
    need = tuple(sorted({int(c) for c in (*obj.tolist(), *bcol.tolist(), latc) if c != 16}))
    try:
        setup = _setup(problem, need)
    except bn.Unsupported as e:
        if strict:
            raise RooflawError(f"backend='numba': the generated kernel cannot express this problem ({e})") from None
        return None
    if setup is None:
        if strict:
            raise RooflawError(f"backend='numba': space {problem.space.name!r} has no index tables the kernel reads")
        return None
    k, tabs, radix = setup
    if "D" in k.law_vars and problem.tokens is None:
        return None  # the numpy path raises the law's own error message
    tokens = float(problem.tokens) if problem.tokens is not None else 0.0
    p = bn.params(problem.device, problem.workload, problem.precision)
    return Plan(k, tabs, radix, p, tokens, obj, latc, bcol, bval, _loss_range(problem) if lohi is None else lohi)


def run_numba(problem: Problem, objectives: tuple[str, ...], n_jobs: int | None, cloud: int, backend: str):
    """``(acc, timings)`` like ``exhaustive._run``, or None when the numpy path should run instead."""
    size = problem.space.size
    if bn.resolve(backend, size) == "numpy":
        return None
    out_code = {"loss": 16, "latency": bn.OUTPUTS.index(problem.latency_column)}
    out_code |= {o: bn.OUTPUTS.index(c) for o, c in OBJECTIVES.items() if o not in out_code}
    pl = kernel_plan(problem, np.array([out_code[o] for o in objectives], dtype=np.int64), backend == "numba")
    if pl is None:
        return None
    k, tabs, radix, p, tokens = pl.kernels, pl.tabs, pl.radix, pl.params, pl.tokens
    obj, latc, bcol, bval, lohi = pl.obj, pl.latc, pl.bcol, pl.bval, pl.lohi
    ocols = tuple(OBJECTIVES[o] for o in objectives)
    jobs = max(1, _n_jobs(n_jobs, max(size, 1 << 30)))
    lock, nxt = threading.Lock(), [0]
    blk = int(radix[0] * radix[1])  # points per (width, experts) block: the kernel's unit of work
    blocks, piece, cap = size // blk, max(1, PIECE // blk), max(OUT_CAP, 4 * (8192 + 2 * blk))

    def work() -> tuple[np.ndarray, _Reducer]:
        stats, red = _new_stats(), _Reducer(problem, ocols)
        stair = np.full(NBINS, np.inf)
        out = np.empty(cap, dtype=np.int64)
        while True:
            with lock:
                a = nxt[0]
                nxt[0] = min(blocks, a + piece)
            if a >= blocks:
                return stats, red
            b, pos = min(blocks, a + piece), a
            while pos < b:
                t = _new_stats()
                k.scan(pos, b, *tabs, p, tokens, radix, obj, latc, bcol, bval, lohi, stair, out, t)
                _merge(stats, t)
                red.add(out[: int(t[14])])
                pos = int(t[13])

    t0 = time.perf_counter()
    with ThreadPoolExecutor(jobs) as ex:
        parts = [f.result() for f in [ex.submit(work) for _ in range(jobs)]]
    eval_wall = time.perf_counter() - t0
    t1 = time.perf_counter()
    stats = _new_stats()
    for st, _ in parts:
        _merge(stats, st)
    red = _Reducer(problem, ocols)
    for _, r in parts:
        red.parts += r.parts
    acc = _Acc(evaluated=int(stats[0]), feasible=int(stats[1]))
    acc.front = red.reduce()
    acc.best = _point(problem, stats[2])
    acc.best_any = _point(problem, stats[5])
    finish_diagnostics(
        acc, problem, stats, lambda i: evaluate_lean(problem, problem.space.columns_at(np.array([i]), np.float64))
    )
    if cloud and acc.feasible:
        acc.cloud = _cloud(problem, cloud, acc.feasible / max(1, acc.evaluated))
    merge = time.perf_counter() - t1
    timings = {"eval_seconds": eval_wall, "pareto_seconds": merge, "eval_cpu_seconds": eval_wall * jobs,
               "pareto_cpu_seconds": merge + sum(r.seconds for _, r in parts), "n_jobs": jobs,
               "backend": "numba", "survivors": sum(r.survivors for _, r in parts)}  # fmt: skip
    return acc, timings


def _point(problem: Problem, index: float) -> dict[str, float] | None:
    if index < 0:
        return None
    v = evaluate_lean(problem, problem.space.columns_at(np.array([int(index)]), np.float64))
    return _row(v, 0)


def _cloud(problem: Problem, n: int, rate: float) -> dict[str, np.ndarray]:
    """A uniform sample of about ``n`` feasible points (seeded), drawn by index and evaluated with numpy."""
    rng = np.random.default_rng(0)
    size = problem.space.size
    draw = min(size, int(math.ceil(1.2 * n / max(rate, 1e-9))), 50 * n)
    idx = np.unique(rng.integers(0, size, draw))
    v = evaluate_lean(problem, problem.space.columns_at(idx, np.float64))
    keep = np.flatnonzero(v["feasible"])
    if len(keep) > n:
        keep = np.sort(rng.choice(keep, n, replace=False))
    return _take({k2: v[k2] for k2 in _KEEP}, keep)
