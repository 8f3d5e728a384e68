"""Exhaustive, exact solutions over a discrete :class:`~rooflaw.arch.space.Space`.

Every valid point is evaluated (cost model + loss law, vectorised, in chunks generated from flat indices, so
memory stays bounded whatever the space size), infeasible points are dropped, and each chunk keeps only its own
Pareto set; the union of the chunk frontiers is filtered once more, which is exact (a dominated point is
dominated by a member of the global frontier, and that member survives in its own chunk). Ranges of indices are
spread over processes with joblib (loky).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..arch.space import add_paper_variables
from ..constraints import evaluate_columns
from ..errors import Infeasible, bad
from .pareto import pareto_mask
from .problem import Problem
from .result import Result

#: Objective name -> column.
OBJECTIVES = {"loss": "loss", "latency": "latency_s", "memory": "memory_bytes", "energy": "energy_j"}
#: Columns of a frontier table (CSV), in order.
FRONTIER_COLUMNS = (
    "layers", "d_model", "heads", "kv_heads", "head_dim", "ffn", "experts", "top_k", "r", "rho", "gqa",
    "loss", "latency_s", "prefill_s", "decode_s", "memory_bytes", "energy_j",
)  # fmt: skip
_ARCH = ("layers", "d_model", "heads", "kv_heads", "head_dim", "ffn", "experts", "top_k", "vocab", "tied")
_VALUES = ("loss", "latency_s", "prefill_s", "decode_s", "total_s", "tpot_s", "memory_bytes", "energy_j",
           "params_total", "params_active")  # fmt: skip
#: Layer-pattern columns kept for every point (zero for uniform spaces).
_PATTERN = ("local_layers", "window")
_KEEP = _ARCH + _VALUES + _PATTERN
SUB_CHUNK = 1 << 16
#: Spaces smaller than this are evaluated in-process (process start-up costs more than it saves).
PARALLEL_MIN = 200_000


def check_objectives(objectives: Any) -> tuple[str, ...]:
    if isinstance(objectives, str):
        objectives = [o.strip() for o in objectives.split(",") if o.strip()]
    objs = tuple(objectives)
    if not objs or objs[0] != "loss" or len(set(objs)) != len(objs) or any(o not in OBJECTIVES for o in objs):
        raise bad("objectives", ",".join(objs), "must start with loss, then distinct ones of latency, memory, energy")
    return objs


def evaluate_lean(problem: Problem, cols: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Loss, the cost columns in :data:`_VALUES` and ``feasible`` for a table of columns (no DataFrame).

    Same semantics as :meth:`Problem.evaluate`: feasible = finite loss and every budget of ``problem.budgets()``.
    """
    from ..objectives import law_inputs

    res = evaluate_columns(cols, problem.device, problem.workload, problem.precision, problem.preset)
    out = {k: res[k] for k in _VALUES if k in res}
    out["loss"] = problem.law.evaluate(law_inputs(cols, tokens=problem.tokens))
    out["latency_s"] = res[problem.latency_column]
    feasible = np.isfinite(out["loss"])
    for col, bound in problem.budgets().values():
        feasible &= res[col] <= bound
    out["feasible"] = feasible
    for k in _ARCH:
        out[k] = cols[k]
    for k in _PATTERN:
        out[k] = cols[k] if k in cols else np.zeros(len(feasible))
    return out


@dataclass
class _Acc:
    """What one range of indices reports back: small, whatever the range size."""

    evaluated: int = 0
    feasible: int = 0
    front: dict[str, np.ndarray] | None = None
    best: dict[str, float] | None = None  # min loss among feasible (tie: lower latency)
    best_any: dict[str, float] | None = None  # min loss among finite-loss points, ignoring budgets
    minimum: dict[str, float] = field(default_factory=dict)  # per constraint, min value over finite-loss points
    closest: tuple[float, dict[str, float]] | None = None  # (max ratio value/bound, ratios) least violating
    cloud: dict[str, np.ndarray] | None = None
    eval_s: float = 0.0
    pareto_s: float = 0.0


def _take(d: dict[str, np.ndarray], idx: Any) -> dict[str, np.ndarray]:
    return {k: np.asarray(v)[idx] for k, v in d.items()}


def _cat(a: dict[str, np.ndarray] | None, b: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    if a is None:
        return b
    return {k: np.concatenate([a[k], b[k]]) for k in a}


def _filter(front: dict[str, np.ndarray], cols: tuple[str, ...]) -> dict[str, np.ndarray]:
    if not len(front["loss"]):
        return front
    m = pareto_mask(np.column_stack([front[c] for c in cols]))
    return _take(front, m)


def _row(d: dict[str, np.ndarray], i: int) -> dict[str, float]:
    return {k: float(d[k][i]) for k in _KEEP}


def _argbest(v: dict[str, np.ndarray], idx: np.ndarray) -> int:
    """Index (into v) of the lowest loss among ``idx``; ties: lowest latency, then lowest index."""
    loss = v["loss"][idx]
    tie = idx[loss == loss.min()]
    return int(tie[np.argmin(v["latency_s"][tie])])


def _better(a: dict[str, float] | None, b: dict[str, float] | None) -> dict[str, float] | None:
    if a is None:
        return b
    if b is None:
        return a
    return a if (a["loss"], a["latency_s"]) <= (b["loss"], b["latency_s"]) else b


def _scan(problem: Problem, start: int, stop: int, objectives: tuple[str, ...], cloud: int, sub_chunk: int) -> _Acc:
    acc = _Acc()
    space = problem.space
    ocols = tuple(OBJECTIVES[o] for o in objectives)
    budgets = problem.budgets()
    total = max(1, space.size)
    rng = np.random.default_rng(start)
    for s in range(start, stop, sub_chunk):
        t0 = time.perf_counter()
        cols = space.columns_at(np.arange(s, min(s + sub_chunk, stop), dtype=np.int64), np.float64)
        v = evaluate_lean(problem, cols)
        n = len(v["loss"])
        acc.evaluated += n
        finite = np.isfinite(v["loss"])
        feas = v["feasible"]
        acc.feasible += int(feas.sum())
        if finite.any():
            fi = np.flatnonzero(finite)
            acc.best_any = _better(acc.best_any, _row(v, _argbest(v, fi)))
            ratio = None
            ratios = {}
            for name, (col, bound) in budgets.items():
                vals = v[col][fi]
                acc.minimum[name] = min(acc.minimum.get(name, math.inf), float(vals.min()))
                if acc.feasible == 0:  # diagnostics only matter while nothing is feasible
                    ratios[name] = vals / bound
                    ratio = ratios[name] if ratio is None else np.maximum(ratio, ratios[name])
            if ratio is not None:
                j = int(np.argmin(ratio))
                if acc.closest is None or ratio[j] < acc.closest[0]:
                    acc.closest = (
                        float(ratio[j]),
                        {name: float(r[j]) for name, r in ratios.items()}
                        | {f"{name}_value": float(v[budgets[name][0]][fi[j]]) for name in budgets},
                    )
        acc.eval_s += time.perf_counter() - t0
        if not feas.any():
            continue
        t0 = time.perf_counter()
        fidx = np.flatnonzero(feas)
        acc.best = _better(acc.best, _row(v, _argbest(v, fidx)))
        m = pareto_mask(np.column_stack([v[c][fidx] for c in ocols]))
        acc.front = _cat(acc.front, _take({k: v[k] for k in _KEEP}, fidx[m]))
        if len(acc.front["loss"]) > 20_000:
            acc.front = _filter(acc.front, ocols)
        if cloud:
            k = min(len(fidx), max(1, int(math.ceil(cloud * n / total))))
            pick = np.sort(rng.choice(len(fidx), size=k, replace=False))
            acc.cloud = _cat(acc.cloud, _take({k2: v[k2] for k2 in _KEEP}, fidx[pick]))
        acc.pareto_s += time.perf_counter() - t0
    if acc.front is not None:
        t0 = time.perf_counter()
        acc.front = _filter(acc.front, ocols)
        acc.pareto_s += time.perf_counter() - t0
    return acc


def _ranges(size: int, n_jobs: int, sub_chunk: int) -> list[tuple[int, int]]:
    # several tasks per worker for load balance, each a multiple of sub_chunk
    tasks = max(1, n_jobs * 4) if n_jobs > 1 else 1
    step = max(sub_chunk, int(math.ceil(size / tasks / sub_chunk)) * sub_chunk)
    return [(s, min(s + step, size)) for s in range(0, size, step)]


def _n_jobs(n_jobs: int | None, size: int) -> int:
    if n_jobs is None:
        n_jobs = -1
    if n_jobs < 0:
        n_jobs = max(1, (os.cpu_count() or 1) + 1 + n_jobs)
    return 1 if size < PARALLEL_MIN else max(1, int(n_jobs))


def _run(problem: Problem, objectives: tuple[str, ...], n_jobs: int | None, cloud: int, sub_chunk: int,
         backend: str = "auto"):  # fmt: skip
    if backend != "numpy":
        from .exhaustive_fast import run_numba  # the generated kernel; None: stay on numpy

        fast = run_numba(problem, objectives, n_jobs, cloud, backend)
        if fast is not None:
            return fast
    size = problem.space.size
    jobs = _n_jobs(n_jobs, size)
    ranges = _ranges(size, jobs, sub_chunk)
    t0 = time.perf_counter()
    if jobs == 1:
        parts = [_scan(problem, a, b, objectives, cloud, sub_chunk) for a, b in ranges]
    else:
        from joblib import Parallel, delayed

        parts = Parallel(n_jobs=jobs, backend="loky")(
            delayed(_scan)(problem, a, b, objectives, cloud, sub_chunk) for a, b in ranges
        )
    eval_wall = time.perf_counter() - t0
    t1 = time.perf_counter()
    acc = _Acc()
    ocols = tuple(OBJECTIVES[o] for o in objectives)
    for p in parts:
        acc.evaluated += p.evaluated
        acc.feasible += p.feasible
        acc.best = _better(acc.best, p.best)
        acc.best_any = _better(acc.best_any, p.best_any)
        for k, m in p.minimum.items():
            acc.minimum[k] = min(acc.minimum.get(k, math.inf), m)
        if p.closest is not None and (acc.closest is None or p.closest[0] < acc.closest[0]):
            acc.closest = p.closest
        if p.front is not None:
            acc.front = _cat(acc.front, p.front)
        if p.cloud is not None:
            acc.cloud = _cat(acc.cloud, p.cloud)
        acc.eval_s += p.eval_s
        acc.pareto_s += p.pareto_s
    if acc.front is not None:
        acc.front = _filter(acc.front, ocols)
    merge = time.perf_counter() - t1
    timings = {"eval_seconds": eval_wall, "pareto_seconds": merge, "eval_cpu_seconds": acc.eval_s,
               "pareto_cpu_seconds": acc.pareto_s, "n_jobs": jobs}  # fmt: skip
    return acc, timings


def _constraint_label(problem: Problem, name: str) -> str:
    if name == "memory":
        cap = float(problem.device.memory_capacity)
        return "memory" if problem.memory_budget is not None and problem.memory_budget < cap else "capacity"
    return name


def _fmt(name: str, value: float, problem: Problem) -> str:
    if name == "latency":
        return f"{problem.phase} latency {value * 1e3:.4g} ms"
    if name == "memory":
        return f"memory {value / 1e9:.4g} GB"
    return f"energy {value:.4g} J"


def _raise_infeasible(problem: Problem, acc: _Acc) -> None:
    space = problem.space.name
    budgets = problem.budgets()
    if not acc.minimum:
        raise Infeasible(f"the loss law gives no finite loss for any architecture in space {space!r}", "loss")
    worst = max(budgets, key=lambda k: acc.minimum[k] / budgets[k][1])
    smallest, bound = acc.minimum[worst], budgets[worst][1]
    label = _constraint_label(problem, worst)
    what = "device capacity" if label == "capacity" else "budget"
    if smallest > bound:
        msg = _smallest_message(problem, worst, smallest, bound, space, what)
        raise Infeasible(msg, binding=label, smallest=smallest, budget=bound)
    ratios = acc.closest[1] if acc.closest else {}
    bind = max(budgets, key=lambda k: ratios.get(k, 0.0))
    value = ratios.get(f"{bind}_value", math.nan)
    names = " and ".join(_constraint_label(problem, k) for k in budgets)
    raise Infeasible(
        f"no architecture in space {space!r} meets {names} together; the closest needs "
        f"{_fmt(bind, value, problem)} (budget {_unit(bind, budgets[bind][1])})",
        binding=_constraint_label(problem, bind),
        smallest=value,
        budget=budgets[bind][1],
    )


def _unit(name: str, v: float) -> str:
    return {"latency": f"{v * 1e3:.4g} ms", "memory": f"{v / 1e9:.4g} GB", "energy": f"{v:.4g} J"}[name]


def _smallest_message(problem: Problem, name: str, smallest: float, bound: float, space: str, what: str) -> str:
    quantity = {"latency": f"{problem.phase} latency", "memory": "memory", "energy": "energy"}[name]
    return (
        f"{quantity} ≥ {_unit(name, smallest)} for every architecture in space {space!r} ({what} {_unit(name, bound)})"
    )


@dataclass
class FrontierResult:
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

    @property
    def frontier_size(self) -> int:
        return len(self.frontier)

    def table(self) -> pd.DataFrame:
        """The frontier restricted to the CSV columns (and the layer pattern, when the space searches one)."""
        extra = [k for k in _PATTERN if k in self.frontier and self.frontier[k].any()]
        return self.frontier[list(FRONTIER_COLUMNS) + extra]

    def to_dict(self) -> dict[str, Any]:
        return {
            "space": self.space, "phase": self.phase, "objectives": list(self.objectives),
            "evaluated": self.evaluated, "feasible": self.feasible, "frontier_size": self.frontier_size,
            "eval_seconds": self.eval_seconds, "pareto_seconds": self.pareto_seconds,
        }  # fmt: skip


def _frame(d: dict[str, np.ndarray] | None, sort: tuple[str, ...] = ("latency_s", "loss")) -> pd.DataFrame:
    if d is None:
        d = {k: np.empty(0) for k in _KEEP}
    df = pd.DataFrame({k: d[k] for k in _KEEP})
    for k in _ARCH + _PATTERN:
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
    10⁵ points when installed). Raises :class:`Infeasible` when no point is feasible."""
    objs = check_objectives(objectives)
    acc, t = _run(problem, objs, n_jobs, cloud, chunk, backend)
    if acc.feasible == 0:
        _raise_infeasible(problem, acc)
    return FrontierResult(
        frontier=_frame(acc.front),
        objectives=objs,
        evaluated=acc.evaluated,
        feasible=acc.feasible,
        eval_seconds=t["eval_seconds"],
        pareto_seconds=t["pareto_seconds"],
        space=problem.space.name,
        phase=problem.phase,
        cloud=_frame(acc.cloud) if acc.cloud is not None else None,
        timings=t,
    )


def result_from_row(problem: Problem, row: dict[str, float], method: str, best_any: dict[str, float] | None = None,
                    **kw: Any) -> Result:  # fmt: skip
    """A :class:`Result` for one evaluated point (a dict with :data:`_KEEP` keys)."""
    arch = problem.space.architecture(row) if hasattr(problem.space, "architecture") else None
    budgets = problem.budgets()
    slack = {_constraint_label(problem, k): (b - row[c]) / b for k, (c, b) in budgets.items()}
    binding = "none"
    if best_any is not None and best_any["loss"] < row["loss"]:
        # the unconstrained optimum is infeasible: the tightest constraint binds
        violated = [k for k, (c, b) in budgets.items() if best_any[c] > b]
        if violated:
            binding = min((_constraint_label(problem, k) for k in violated), key=lambda k: slack[k])
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
        _raise_infeasible(problem, acc)
    assert acc.best is not None
    res = result_from_row(
        problem,
        acc.best,
        "exhaustive",
        acc.best_any,
        frontier=_frame(acc.front)[list(FRONTIER_COLUMNS)],
        timings={"evaluate": t["eval_seconds"], "pareto": t["pareto_seconds"]},
        notes=[f"{acc.evaluated:,} points of space {problem.space.name!r} evaluated, {acc.feasible:,} feasible"],
        extra={"evaluated": acc.evaluated, "feasible": acc.feasible, "space": problem.space.name},
    )
    return res
