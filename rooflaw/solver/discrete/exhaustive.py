"""Exhaustive, exact solutions over a discrete :class:`~rooflaw.arch.space.Space`.

Every valid point is evaluated (cost model + loss law, vectorised, in chunks generated from flat indices, so
memory stays bounded whatever the space size), infeasible points are dropped, and each chunk keeps only its own
Pareto set; the union of the chunk frontiers is filtered once more, which is exact (a dominated point is
dominated by a member of the global frontier, and that member survives in its own chunk). Ranges of indices are
spread over processes with joblib (loky).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, NoReturn

import numpy as np
import pandas as pd

from ...arch.space import add_paper_variables
from ...errors import bad
from ..infeasible import no_finite_loss, report
from ..problem import Problem
from ..result import FrontierView, Result
from .pareto import pareto_mask
from .scan_parts import (  # noqa: F401 (re-exported: the search and the numba scan share them)
    ARCH,
    FRONTIER_COLUMNS,
    KEEP,
    OBJECTIVES,
    PARALLEL_MIN,
    PATTERN,
    SUB_CHUNK,
    VALUES,
    Accumulator,
    absorb,
    argbest,
    better,
    check_objectives,
    concat_rows,
    evaluate_lean,
    filter_front,
    n_jobs_for,
    row_at,
    take_rows,
    track,
)  # fmt: skip


def _scan(
    problem: Problem, start: int, stop: int, objectives: tuple[str, ...], cloud: int, sub_chunk: int
) -> Accumulator:
    acc = Accumulator()
    space = problem.space
    ocols = tuple(OBJECTIVES[o] for o in objectives)
    total = max(1, space.size)
    rng = np.random.default_rng(start)
    for s in range(start, stop, sub_chunk):
        t0 = time.perf_counter()
        cols = space.columns_at(np.arange(s, min(s + sub_chunk, stop), dtype=np.int64), np.float64)
        v = evaluate_lean(problem, cols)
        n = len(v["loss"])
        acc.evaluated += n
        finite = np.isfinite(v["loss"]) & v["in_domain"]
        feas = v["feasible"]
        acc.feasible += int(feas.sum())
        if finite.any():
            fi = np.flatnonzero(finite)
            acc.best_any = better(acc.best_any, row_at(v, argbest(v, fi)))
            acc.closest = track(problem.constraints, v, fi, acc.minimum, acc.closest, acc.feasible == 0)
        acc.eval_s += time.perf_counter() - t0
        if not feas.any():
            continue
        t0 = time.perf_counter()
        fidx = np.flatnonzero(feas)
        acc.best = better(acc.best, row_at(v, argbest(v, fidx)))
        m = pareto_mask(np.column_stack([v[c][fidx] for c in ocols]))
        acc.front = concat_rows(acc.front, take_rows({k: v[k] for k in KEEP}, fidx[m]))
        if len(acc.front["loss"]) > 20_000:
            acc.front = filter_front(acc.front, ocols)
        if cloud:
            k = min(len(fidx), max(1, int(math.ceil(cloud * n / total))))
            pick = np.sort(rng.choice(len(fidx), size=k, replace=False))
            acc.cloud = concat_rows(acc.cloud, take_rows({k2: v[k2] for k2 in KEEP}, fidx[pick]))
        acc.pareto_s += time.perf_counter() - t0
    if acc.front is not None:
        t0 = time.perf_counter()
        acc.front = filter_front(acc.front, ocols)
        acc.pareto_s += time.perf_counter() - t0
    return acc


def index_ranges(size: int, n_jobs: int, sub_chunk: int) -> list[tuple[int, int]]:
    # several tasks per worker for load balance, each a multiple of sub_chunk
    tasks = max(1, n_jobs * 4) if n_jobs > 1 else 1
    step = max(sub_chunk, int(math.ceil(size / tasks / sub_chunk)) * sub_chunk)
    return [(s, min(s + step, size)) for s in range(0, size, step)]


#: Most points the exhaustive solver enumerates (a larger space: use the Optuna search).
EXHAUSTIVE_MAX = 10**10
#: CPU seconds per point on the fastest frontier path (numba, docs/benchmarks.md: 17.7 ns) and bytes of one point's
#: 17 cost outputs (float64): what the refusal of a larger space quotes as its least time and its memory at once.
SECONDS_PER_POINT = 17.7e-9
BYTES_PER_POINT = 17 * 8


def check_enumerable(size: int, name: str, parts: str = "") -> None:
    """Refuse (exit 2) a space of more than :data:`EXHAUSTIVE_MAX` points, saying its size (``parts``: how it is
    made up), the least CPU time enumerating it would take and the memory of its cost outputs at once."""
    if size <= EXHAUSTIVE_MAX:
        return
    cpu = size * SECONDS_PER_POINT
    hours = f"{cpu / 3600:,.1f} CPU-hours" if cpu >= 3600 else f"{cpu:,.0f} CPU-s"
    mem = size * BYTES_PER_POINT
    why = (f"has {size:,} points{parts}; exhaustive enumerates at most {EXHAUSTIVE_MAX:,} (it would take at "
           f"least {hours} at {1e-6 / SECONDS_PER_POINT:.0f} M points per CPU-s, and {mem / 1e12:,.1f} TB to hold "
           "its cost outputs at once); narrow the space or use rooflaw search")  # fmt: skip
    raise bad("space", name, why)


def _run(problem: Problem, objectives: tuple[str, ...], n_jobs: int | None, cloud: int, sub_chunk: int,
         backend: str = "auto"):  # fmt: skip
    problem = problem.on_aligned_space()  # every solver answers among aligned points only
    size = problem.space.size
    check_enumerable(size, problem.space.name)
    if backend != "numpy":
        from .exhaustive_fast import run_numba  # the generated kernel; None: stay on numpy

        fast = run_numba(problem, objectives, n_jobs, cloud, backend)
        if fast is not None:
            return fast
    jobs = n_jobs_for(n_jobs, size)
    ranges = index_ranges(size, jobs, sub_chunk)
    t0 = time.perf_counter()
    if jobs == 1:
        parts = [_scan(problem, a, b, objectives, cloud, sub_chunk) for a, b in ranges]
    else:
        from ..jobs import run_parallel

        parts = run_parallel(jobs, _scan, [(problem, a, b, objectives, cloud, sub_chunk) for a, b in ranges])
    eval_wall = time.perf_counter() - t0
    t1 = time.perf_counter()
    acc = Accumulator()
    ocols = tuple(OBJECTIVES[o] for o in objectives)
    for p in parts:
        absorb(acc, p, better)
    if acc.front is not None:
        acc.front = filter_front(acc.front, ocols)
    merge = time.perf_counter() - t1
    timings = {"eval_seconds": eval_wall, "pareto_seconds": merge, "eval_cpu_seconds": acc.eval_s,
               "pareto_cpu_seconds": acc.pareto_s, "n_jobs": jobs}  # fmt: skip
    return acc, timings


def _where(problem: Problem) -> str:
    """``in space 'x'``, naming the alignment when it removed points."""
    where = f"in space {problem.space.name!r}"
    if problem.align is not None and problem.on_aligned_space() is not problem:
        where += f" with d_model and ffn multiples of {problem.align}"
    return where


def _aligned_note(problem: Problem) -> list[str]:
    aligned = problem.on_aligned_space()
    if aligned is problem:
        return []
    n, m = problem.space.size, aligned.space.size
    return [f"align {problem.align}: {m:,} of the space's {n:,} points have d_model and ffn multiples of it"]


def raise_infeasible(problem: Problem, acc: Accumulator) -> NoReturn:
    where = _where(problem)
    if not acc.minimum:
        dom = (
            ""
            if problem.allow_extrapolation
            else ", ".join(f"{k} {a:.4g}–{b:.4g}" for k, (a, b) in problem.law.domain.items())
        )
        if dom:
            where += f" inside the domain the law was fitted on ({dom}; --allow-extrapolation to go outside)"
        raise no_finite_loss(problem, where)
    ratios = acc.closest[1] if acc.closest else {}
    closest = {c.kind: ratios[f"{c.kind}_value"] for c in problem.constraints if f"{c.kind}_value" in ratios}
    raise report(problem, acc.minimum, where, closest)


@dataclass(eq=False)
class FrontierResult(FrontierView):
    """An exact Pareto frontier over a space. ``frontier`` has :data:`FRONTIER_COLUMNS` (+ vocab, tied, total_s,
    params) sorted by latency (then loss); ``cloud`` a uniform sample of feasible points for plots."""

    frontier: pd.DataFrame
    objectives: tuple[str, ...]
    evaluated: int
    feasible: int
    eval_seconds: float
    pareto_seconds: float
    space: str
    phase: str
    cloud: pd.DataFrame | None = None
    timings: dict[str, float] = field(default_factory=dict)

    def table(self) -> pd.DataFrame:
        """The frontier restricted to the CSV columns (and the layer pattern, when the space searches one)."""
        extra = [k for k in PATTERN if k in self.frontier and self.frontier[k].any()]
        return self.frontier[list(FRONTIER_COLUMNS) + extra]

    def to_dict(self) -> dict[str, Any]:
        return {
            "space": self.space, "phase": self.phase, "objectives": list(self.objectives),
            "evaluated": self.evaluated, "feasible": self.feasible, "frontier_size": self.frontier_size,
            "eval_seconds": self.eval_seconds, "pareto_seconds": self.pareto_seconds,
        }  # fmt: skip


def frame(d: dict[str, np.ndarray] | None, sort: tuple[str, ...] = ("latency_s", "loss")) -> pd.DataFrame:
    if d is None:
        d = {k: np.empty(0) for k in KEEP}
    df = pd.DataFrame({k: d[k] for k in KEEP})
    for k in ARCH + PATTERN:
        df[k] = df[k].astype(np.int64)
    df = add_paper_variables(df)
    cols = list(FRONTIER_COLUMNS) + [c for c in df.columns if c not in FRONTIER_COLUMNS]
    return df[cols].sort_values(list(sort), kind="stable").reset_index(drop=True)


def frontier(
    problem: Problem,
    objectives: Any = ("loss", "latency"),
    n_jobs: int | None = None,
    cloud: int = 20_000,
    chunk: int = SUB_CHUNK,
    backend: str = "auto",
) -> FrontierResult:
    """The exact Pareto frontier of ``problem.space`` over ``objectives`` (loss first; latency of the problem's
    phase, memory, energy), among feasible points only. ``n_jobs`` processes (default: all cores; spaces under
    200,000 points run in-process). ``backend``: ``numpy``, ``numba`` (the generated scan kernel on threads, with
    in-kernel feasibility and a non-dominated pre-filter; same frontier) or ``auto`` (numba for spaces of at least
    10⁵ points when installed). Raises :class:`Infeasible` when no point is feasible.

    Example: loss against decode latency over a 16-point space (pure roofline)::

        >>> import rooflaw as rl
        >>> tiny = rl.Space.from_mapping({"layers": [4, 8], "d_model": [768, 1024], "head_dim": [128],
        ...                               "kv_heads": [1, 2], "moe": [[1, 1]], "r_single": [2, 4]}, name="tiny")
        >>> problem = rl.Problem(device="jetson-agx-orin-64gb", latency_budget="10ms", space=tiny, engine="ideal")
        >>> f = rl.frontier(problem, ("loss", "latency"))
        >>> f.evaluated, f.feasible, len(f.frontier)
        (16, 4, 4)
        >>> f.frontier[["layers", "d_model", "loss"]].round(3).to_dict("list")
        {'layers': [4, 4, 4, 4], 'd_model': [768, 768, 768, 768], 'loss': [4.68, 4.674, 4.574, 4.568]}
    """
    objs = check_objectives(objectives)
    acc, t = _run(problem, objs, n_jobs, cloud, chunk, backend)
    if acc.feasible == 0:
        raise_infeasible(problem, acc)
    return FrontierResult(
        frontier=frame(acc.front),
        objectives=objs,
        evaluated=acc.evaluated,
        feasible=acc.feasible,
        eval_seconds=t["eval_seconds"],
        pareto_seconds=t["pareto_seconds"],
        space=problem.space.name,
        phase=problem.phase,
        cloud=frame(acc.cloud) if acc.cloud is not None else None,
        timings=t,
    )


def result_from_row(problem: Problem, row: dict[str, float], method: str, best_any: dict[str, float] | None = None,
                    **kw: Any) -> Result:  # fmt: skip
    """A :class:`Result` for one evaluated point (a dict with :data:`KEEP` keys)."""
    arch = problem.space.architecture(row) if hasattr(problem.space, "architecture") else None
    slack = {c.label: float(c.slack(row)) for c in problem.constraints}
    binding = "none"
    if best_any is not None and best_any["loss"] < row["loss"]:
        # the unconstrained optimum is infeasible: the tightest constraint binds
        violated = [c.label for c in problem.constraints if not c.satisfied(best_any)]
        if violated:
            binding = min(violated, key=lambda k: slack[k])
    return Result(
        method=method,
        architecture=arch,
        loss=row["loss"],
        latency_s={
            "prefill": row["prefill_s"],
            "decode": row["decode_s"],
            "total": row["total_s"],
            "ttft": row["prefill_s"],
            "tpot": row["tpot_s"],
        },  # fmt: skip
        memory_bytes=row["memory_bytes"],
        energy_j=row["energy_j"],
        binding=binding,
        slack=slack,
        **kw,
    )


def solve_exhaustive(problem: Problem, n_jobs: int | None = None, backend: str = "auto") -> Result:
    """The lowest-loss feasible point of the space (ties: lower latency), with the loss–latency frontier.

    Raises :class:`Infeasible` naming the binding constraint and its smallest achievable value over the space.
    """
    acc, t = _run(problem, ("loss", "latency"), n_jobs, 0, SUB_CHUNK, backend)
    if acc.feasible == 0 or acc.best is None:
        raise_infeasible(problem, acc)
    assert acc.best is not None
    res = result_from_row(
        problem,
        acc.best,
        "exhaustive",
        acc.best_any,
        frontier=frame(acc.front)[list(FRONTIER_COLUMNS)],
        timings={"evaluate": t["eval_seconds"], "pareto": t["pareto_seconds"]},
        notes=[
            f"{acc.evaluated:,} points of space {problem.space.name!r} evaluated, {acc.feasible:,} feasible",
            *_aligned_note(problem),
        ],
        extra={"evaluated": acc.evaluated, "feasible": acc.feasible, "space": problem.space.name},
    )
    return res
