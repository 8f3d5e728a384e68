"""The joint space: architecture × precision × batch × option, enumerated exactly.

A :class:`JointSpace` crosses a problem's architecture space with a list of precisions, of batch sizes and of
*options* — how an architecture is run (one device by default; multi-device layouts plug in here as
:class:`Option` objects whose ``columns`` callable returns the cost columns of a layout). For every architecture
chunk, each (precision, batch, option) combination is evaluated by the one cost assembly
(:func:`~rooflaw.constraints.evaluate_columns`, vectorised) and the problem's loss law (bound to that precision,
so a precision-aware law trades bits for effective parameters); each chunk keeps only its non-dominated rows and
the union is filtered once more, which is exact. With ``backend="numba"`` (or ``auto`` on large spaces) the
single-device combinations run on the generated scan kernel instead (:mod:`.joint_scan`), one combination per
task. Tasks run in-process, on joblib processes / threads or on Dask (:mod:`.distributed`, ``scheduler="local:N"``
or ``"tcp://host:8786"``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import bad
from ..problem import Problem
from .exhaustive import FrontierResult, frame, raise_infeasible, result_from_row
from .joint_eval import (
    COSTS,
    JOINT_KEEP,
    JOINT_OBJECTIVES,
    SERVING,
    evaluate_chunk,
    filter_joint_front,
    objective_matrix,
)
from .pareto import pareto_mask
from .scan_parts import (
    ARCH,
    FRONTIER_COLUMNS,
    PATTERN,
    SUB_CHUNK,
    VALUES,
    Accumulator,
    absorb,
    concat_rows,
    n_jobs_for,
    track,
)


@dataclass(frozen=True)
class Option:
    """One value of the joint space's ``option`` dimension: how an architecture is run.

    ``columns(cols, problem) -> {column: array}`` returns, for architecture columns ``cols`` under ``problem``
    (its device, workload with the combination's batch, precision and preset), at least the cost columns
    ``prefill_s, decode_s, total_s, tpot_s, memory_bytes`` (per device), ``energy_j, params_total,
    params_active``; optionally ``valid`` (bool: the option applies to that architecture, e.g. a layout that
    divides its heads), ``tokens_per_s`` / ``tokens_per_s_per_user`` (else derived from the decode time) and the
    ``extra`` columns, which the frontier carries. ``columns=None`` is the single-device model. ``name`` labels
    frontier rows (e.g. ``tp=8``); ``meta`` is free data for the option's owner.
    """

    name: str = "1 device"
    columns: Callable[[Mapping[str, np.ndarray], Problem], Mapping[str, Any]] | None = None
    extra: tuple[str, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)

    def evaluate(self, cols: Mapping[str, np.ndarray], problem: Problem) -> dict[str, np.ndarray]:
        """Cost columns (+ ``valid``, serving and ``extra`` columns) of ``cols`` under ``problem``."""
        if self.columns is None:
            from ...constraints import evaluate_columns

            res = dict(evaluate_columns(cols, problem.scenario))
        else:
            res = dict(self.columns(cols, problem))
        missing = [k for k in COSTS if k not in res]
        if missing:
            raise bad("option", self.name, f"returned no {', '.join(missing)}")
        w = problem.workload
        with np.errstate(divide="ignore", invalid="ignore"):
            if "tokens_per_s_per_user" not in res:
                res["tokens_per_s_per_user"] = w.output_tokens / np.asarray(res["decode_s"], dtype=float)
            if "tokens_per_s" not in res:
                res["tokens_per_s"] = w.batch * np.asarray(res["tokens_per_s_per_user"], dtype=float)
        return res


@dataclass(frozen=True)
class Combo:
    """One (precision, batch, option) combination and the problem variant that evaluates it."""

    index: int
    precision: str
    batch: int
    option: Option
    problem: Problem


@dataclass(frozen=True)
class JointSpace:
    """Precisions × batches × options to cross with a problem's architecture space.

    Empty ``precisions`` / ``batches`` mean the problem's own; ``options`` defaults to the single device.
    Precisions are texts or :class:`~rooflaw.constraints.Precision` objects (``bf16``, ``fp8``, ``nvfp4``,
    ``w4a16kv8``…), batches positive integers.
    """

    precisions: tuple[Any, ...] = ()
    batches: tuple[int, ...] = ()
    options: tuple[Option, ...] = (Option(),)

    def __post_init__(self) -> None:
        from ...constraints import Precision

        put = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        put("precisions", tuple(Precision.parse(p) for p in _seq(self.precisions, "precisions")))
        bs = _seq(self.batches, "batches")
        for b in bs:
            if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or b <= 0:
                raise bad("batches", b, "must be positive integers")
        put("batches", tuple(int(b) for b in bs))
        opts = _seq(self.options, "options")
        if not opts or not all(isinstance(o, Option) for o in opts):
            raise bad("options", self.options, "expected one or more Option objects")
        names = [o.name for o in opts]
        if len(set(names)) != len(names):
            raise bad("options", ",".join(names), "option names must be distinct")
        put("options", opts)
        if len({p.name for p in self.precisions}) != len(self.precisions):
            raise bad("precisions", ",".join(p.name for p in self.precisions), "given twice")
        if len(set(self.batches)) != len(self.batches):
            raise bad("batches", ",".join(map(str, self.batches)), "given twice")

    def combos(self, problem: Problem) -> list[Combo]:
        """Every (precision, batch, option) with its problem variant, precision-major then batch then option."""
        precs = self.precisions or (problem.precision,)
        batches = self.batches or (problem.workload.batch,)
        out: list[Combo] = []
        for p in precs:
            first = combination_problem(problem, p, batches[0])  # the law bound once per precision (compiled once)
            for b in batches:
                q = first if b == batches[0] else _with_batch(first, b)
                for o in self.options:
                    out.append(Combo(len(out), p.name, b, o, q))
        return out

    def size(self, problem: Problem) -> int:
        """Joint points: architectures × combinations."""
        n = max(1, len(self.precisions)) * max(1, len(self.batches)) * len(self.options)
        return problem.space.size * n


def check_joint_size(problem: Problem, joint: JointSpace) -> None:
    """The plain space's limit on the joint product (architectures × precisions × batches × layouts), checked
    before any combination is built."""
    from .exhaustive import check_enumerable

    arch = problem.on_aligned_space().space.size
    n_p, n_b, n_o = max(1, len(joint.precisions)), max(1, len(joint.batches)), len(joint.options)
    check_enumerable(arch * n_p * n_b * n_o, f"{problem.space.name} x {n_p * n_b * n_o} combinations",
                     f" ({arch:,} architectures × {n_p} precisions × {n_b} batches × {n_o} layouts)")  # fmt: skip


def _seq(v: Any, name: str) -> tuple[Any, ...]:
    if isinstance(v, (str, bytes)) or not isinstance(v, Sequence):
        raise bad(name, v, "expected a list")
    return tuple(v)


def combination_problem(problem: Problem, precision: Any, batch: int) -> Problem:
    """``problem`` at another precision and batch: same law (bound again to the precision's bits), space,
    device and budgets."""
    from ...constraints import Precision

    sc = problem.scenario
    return problem.with_scenario(
        dataclasses.replace(
            sc, precision=Precision.parse(precision), workload=dataclasses.replace(sc.workload, batch=int(batch))
        )  # fmt: skip
    )


def _with_batch(q: Problem, batch: int) -> Problem:
    """``q`` at another batch (same law object, so its compiled function is shared)."""
    return q.with_scenario(q.scenario.with_workload(dataclasses.replace(q.workload, batch=int(batch))))


def check_joint_objectives(objectives: Any) -> tuple[str, ...]:
    """Objective names (``loss`` first, then distinct ones of latency, memory, energy, throughput)."""
    if isinstance(objectives, str):
        objectives = [o.strip() for o in objectives.split(",") if o.strip()]
    objs = tuple(objectives)
    if not objs or objs[0] != "loss" or len(set(objs)) != len(objs) or any(o not in JOINT_OBJECTIVES for o in objs):
        raise bad("objectives", ",".join(objs), "must start with loss, then distinct ones of latency, memory, "
                  "energy, throughput")  # fmt: skip
    return objs


def _account(acc: Accumulator, q: Problem, v: dict[str, np.ndarray] | None, n: int, objectives: tuple[str, ...],
             keep: tuple[str, ...]) -> None:  # fmt: skip
    """Add one combination of a chunk of ``n`` architectures to ``acc`` (counts, best points, diagnostics,
    frontier); ``v`` holds the evaluated ones (None: none was inside the law's domain)."""
    acc.evaluated += n
    if v is None:
        return
    fi = np.flatnonzero(v["finite"])
    feas = np.flatnonzero(v["feasible"])
    acc.feasible += len(feas)
    if len(fi):
        acc.best_any = _better_joint(acc.best_any, _row(v, argbest_joint(v, fi), keep))
        acc.closest = track(q.constraints, v, fi, acc.minimum, acc.closest, acc.feasible == 0)
    if not len(feas):
        return
    acc.best = _better_joint(acc.best, _row(v, argbest_joint(v, feas), keep))
    m = pareto_mask(objective_matrix(v, objectives, feas))
    acc.front = concat_rows(acc.front, {k: np.asarray(v[k])[feas[m]] for k in keep})
    if len(acc.front["loss"]) > 20_000:
        acc.front = filter_joint_front(acc.front, objectives)


def _row(v: Mapping[str, np.ndarray], i: int, keep: tuple[str, ...]) -> dict[str, float]:
    return {k: float(v[k][i]) for k in keep}


def argbest_joint(v: Mapping[str, np.ndarray], idx: np.ndarray) -> int:
    loss = v["loss"][idx]
    tie = idx[loss == loss.min()]
    lat = v["latency_s"][tie]
    tie = tie[lat == lat.min()]
    return int(tie[np.argmin(v["combo"][tie])])


def scan_range(problem: Problem, joint: JointSpace, start: int, stop: int, objectives: tuple[str, ...],
               sub_chunk: int = SUB_CHUNK, only: Sequence[int] | None = None) -> Accumulator:  # fmt: skip
    """Architecture indices ``[start, stop)`` × every combination (or the combinations numbered ``only``): an
    accumulator holding only non-dominated rows (the numpy unit of work of the in-process, joblib and Dask runs)."""
    combos = joint.combos(problem)
    if only is not None:
        combos = [combos[i] for i in only]
    extra = tuple(dict.fromkeys(k for o in joint.options for k in o.extra))
    keep = JOINT_KEEP + extra
    acc = Accumulator()
    for s in range(start, stop, sub_chunk):
        t0 = time.process_time()
        cols = problem.space.columns_at(np.arange(s, min(s + sub_chunk, stop), dtype=np.int64), np.float64)
        for c, v, n in evaluate_chunk(combos, cols, extra):
            _account(acc, c.problem, v, n, objectives, keep)
        acc.eval_s += time.process_time() - t0  # CPU seconds of the worker
    if acc.front is not None:
        acc.front = filter_joint_front(acc.front, objectives)
    return acc


def run_task(problem: Problem, joint: JointSpace, task: tuple, objectives: tuple[str, ...],
             sub_chunk: int = SUB_CHUNK) -> Accumulator:  # fmt: skip
    """One unit of work: ``("numpy", combos, start, stop)`` (architecture indices × those combinations, numpy) or
    ``("numba", combo, first_block, stop_block, loss_range)`` (one single-device combination on the scan kernel)."""
    kind, which, a, b = task[:4]
    if kind == "numpy":
        return scan_range(problem, joint, a, b, objectives, sub_chunk, which)
    from .joint_scan import plan, scan_blocks

    combo = joint.combos(problem)[which]
    pl = plan(combo.problem, objectives, strict=True, lohi=task[4])
    assert pl is not None  # numba tasks are made only for combinations kernel_combinations planned
    keep = JOINT_KEEP + tuple(dict.fromkeys(k for o in joint.options for k in o.extra))
    return scan_blocks(combo, pl, a, b, objectives, keep)


def merge(parts: Sequence[Accumulator], objectives: tuple[str, ...]) -> Accumulator:
    """The exact union of per-range accumulators (parts in range order)."""
    acc = Accumulator()
    for p in parts:
        absorb(acc, p, _better_joint)
    if acc.front is not None:
        acc.front = filter_joint_front(acc.front, objectives)
    return acc


def _better_joint(a: dict[str, float] | None, b: dict[str, float] | None) -> dict[str, float] | None:
    if a is None or b is None:
        return a if b is None else b
    return a if (a["loss"], a["latency_s"], a["combo"]) <= (b["loss"], b["latency_s"], b["combo"]) else b


def run(problem: Problem, joint: JointSpace, objectives: tuple[str, ...], n_jobs: int | None = None,
        scheduler: str | None = None, chunk: int = SUB_CHUNK,
        backend: str = "auto") -> tuple[Accumulator, dict[str, Any]]:  # fmt: skip
    """Scan the joint space: in-process, on ``n_jobs`` joblib processes (numba tasks: threads), or on Dask when
    ``scheduler`` is given; single-device combinations on the numba scan kernel per ``backend``."""
    check_joint_size(problem, joint)
    size = problem.space.size
    combos = joint.combos(problem)
    t0 = time.perf_counter()
    from .joint_scan import kernel_combinations, tasks_of

    fast = kernel_combinations(problem, combos, objectives, backend, size * len(combos))
    setup = time.perf_counter() - t0
    if scheduler is not None:
        from .distributed import map_tasks, parse_scheduler

        sched = parse_scheduler(scheduler)
        tasks = tasks_of(problem, combos, fast, max(2, sched.workers or 2) * (1 if fast else 2), chunk)
        parts, jobs = map_tasks(sched, run_task, problem, joint, tasks, objectives, chunk)
    else:
        jobs = n_jobs_for(n_jobs, size * len(combos))
        tasks = tasks_of(problem, combos, fast, jobs, chunk)
        slow = [t for t in tasks if t[0] == "numpy"]
        if jobs == 1 or len(slow) <= 1:
            parts = [run_task(problem, joint, t, objectives, chunk) for t in slow]
        else:
            from ..jobs import run_parallel

            parts = run_parallel(jobs, run_task, [(problem, joint, t, objectives, chunk) for t in slow])
        quick = [t for t in tasks if t[0] == "numba"]
        if quick:
            from concurrent.futures import ThreadPoolExecutor  # the kernel releases the GIL

            with ThreadPoolExecutor(jobs) as ex:
                parts += list(ex.map(lambda t: run_task(problem, joint, t, objectives, chunk), quick))
    wall = time.perf_counter() - t0
    t1 = time.perf_counter()
    acc = merge(parts, objectives)
    timings = {"eval_seconds": wall, "pareto_seconds": time.perf_counter() - t1, "eval_cpu_seconds": acc.eval_s,
               "n_jobs": jobs, "tasks": len(tasks), "kernel_combinations": len(fast), "setup_seconds": setup,
               "backend": "numba" if len(fast) == len(combos) else "numpy" if not fast else "numba+numpy"}  # fmt: skip
    return acc, timings


def _joint_frame(problem: Problem, joint: JointSpace, d: dict[str, np.ndarray] | None) -> Any:
    """The frontier table: :data:`FRONTIER_COLUMNS`, then precision, batch, option, the serving columns and the
    options' extra columns; sorted by latency, loss, combination and architecture (deterministic)."""
    combos = joint.combos(problem)
    extra = tuple(dict.fromkeys(k for o in joint.options for k in o.extra))
    if d is None:
        d = {k: np.empty(0) for k in JOINT_KEEP + extra}
    import pandas as pd

    # sorted on the full key first, so that the rows do not depend on how the work was split

    raw = pd.DataFrame({k: d[k] for k in JOINT_KEEP + extra})
    order = ["latency_s", "loss", "combo", *ARCH, *PATTERN]
    raw = raw.sort_values(order, kind="stable").reset_index(drop=True)
    df = frame({k: raw[k].to_numpy() for k in ARCH + VALUES + PATTERN}, sort=("latency_s",))  # stable: kept
    idx = raw["combo"].to_numpy().astype(np.int64)
    df["precision"] = [combos[i].precision for i in idx]
    df["batch"] = np.array([combos[i].batch for i in idx], dtype=np.int64)
    df["option"] = [combos[i].option.name for i in idx]
    for k in SERVING + extra:
        df[k] = raw[k].to_numpy()
    lead = list(FRONTIER_COLUMNS) + ["precision", "batch", "option", *SERVING, *extra]
    return df[lead + [c for c in df.columns if c not in lead]]


@dataclasses.dataclass(eq=False)
class JointFrontierResult(FrontierResult):
    """A :class:`FrontierResult` over a joint space; ``frontier`` rows say their precision, batch and option."""

    combinations: int = 1
    architectures: int = 0

    def table(self) -> Any:
        extra = [k for k in PATTERN if k in self.frontier and self.frontier[k].any()]
        cols = list(FRONTIER_COLUMNS) + ["precision", "batch", "option", *SERVING] + extra
        cols += [c for c in self.frontier.columns if c not in cols and c not in ("vocab", "tied", "total_s",
                 "tpot_s", "params_total", "params_active", "local_layers", "window", "d_m")]  # fmt: skip
        return self.frontier[[c for c in cols if c in self.frontier]]

    def to_dict(self) -> dict[str, Any]:
        return super().to_dict() | {"combinations": self.combinations, "architectures": self.architectures}


def joint_frontier(problem: Problem, joint: JointSpace | None = None, objectives: Any = ("loss", "latency"),
                   n_jobs: int | None = None, scheduler: str | None = None, chunk: int = SUB_CHUNK,
                   backend: str = "auto") -> JointFrontierResult:  # fmt: skip
    """The exact Pareto frontier of ``problem.space`` × ``joint`` over ``objectives`` (loss first; latency of the
    problem's phase, memory, energy, throughput = aggregate tokens/s, maximised), feasible points only.
    ``scheduler``: ``local:N`` (a Dask LocalCluster of N worker processes) or a Dask scheduler address
    (``tcp://host:8786``); else ``n_jobs`` joblib processes. ``backend``: ``numba`` runs every single-device
    combination on the generated scan kernel (:mod:`.joint_scan`; layouts stay on numpy), ``numpy`` none,
    ``auto`` the kernel when numba is installed and the joint space has at least 10⁵ points; the frontier is the
    same. Raises :class:`Infeasible` when nothing is feasible."""
    joint = JointSpace() if joint is None else joint
    objs = check_joint_objectives(objectives)
    acc, t = run(problem, joint, objs, n_jobs, scheduler, chunk, backend)
    if acc.feasible == 0:
        raise_infeasible(problem, acc)
    combos = len(joint.combos(problem))
    return JointFrontierResult(
        frontier=_joint_frame(problem, joint, acc.front), objectives=objs, evaluated=acc.evaluated,
        feasible=acc.feasible, eval_seconds=t["eval_seconds"], pareto_seconds=t["pareto_seconds"],
        space=f"{problem.space.name} x {combos} combinations", phase=problem.phase, timings=t,
        combinations=combos, architectures=problem.space.size,
    )  # fmt: skip


def solve_joint(problem: Problem, joint: JointSpace | None = None, n_jobs: int | None = None,
                scheduler: str | None = None, backend: str = "auto") -> Any:  # fmt: skip
    """The lowest-loss feasible point of the joint space (ties: lower latency, then the earlier combination), with
    its precision, batch and option in ``extra`` and the loss–latency frontier."""
    joint = JointSpace() if joint is None else joint
    acc, t = run(problem, joint, ("loss", "latency"), n_jobs, scheduler, backend=backend)
    if acc.feasible == 0 or acc.best is None:
        raise_infeasible(problem, acc)
    combos = joint.combos(problem)
    c = combos[int(acc.best["combo"])]
    res = result_from_row(
        c.problem, acc.best, "exhaustive", acc.best_any,
        frontier=_joint_frame(problem, joint, acc.front),
        timings={"evaluate": t["eval_seconds"], "pareto": t["pareto_seconds"]},
        notes=[f"{acc.evaluated:,} joint points ({problem.space.size:,} architectures x {len(combos)} precision/"
               f"batch/option combinations) evaluated, {acc.feasible:,} feasible; best at precision {c.precision}, "
               f"batch {c.batch}, option {c.option.name}"],
        extra={"evaluated": acc.evaluated, "feasible": acc.feasible, "space": problem.space.name,
               "precision": c.precision, "batch": c.batch, "option": c.option.name},
    )  # fmt: skip
    return res
