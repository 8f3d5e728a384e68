"""What the numpy and the numba scans of the exhaustive solver share: the objective columns, the lean
evaluation of a chunk of candidates, the running accumulator and its small helpers, the worker count."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...constraints import evaluate_columns
from ...errors import bad
from ..problem import Problem
from .pareto import pareto_mask

#: Objective name -> column.
OBJECTIVES = {"loss": "loss", "latency": "latency_s", "memory": "memory_bytes", "energy": "energy_j"}
#: Columns of a frontier table (CSV), in order.
FRONTIER_COLUMNS = (
    "layers", "d_model", "heads", "kv_heads", "head_dim", "ffn", "experts", "top_k", "r", "rho", "gqa",
    "loss", "latency_s", "prefill_s", "decode_s", "memory_bytes", "energy_j",
)  # fmt: skip
ARCH = ("layers", "d_model", "heads", "kv_heads", "head_dim", "ffn", "experts", "top_k", "vocab", "tied")
VALUES = ("loss", "latency_s", "prefill_s", "decode_s", "total_s", "tpot_s", "memory_bytes", "energy_j",
           "params_total", "params_active")  # fmt: skip
#: Layer-pattern columns kept for every point (zero for uniform spaces).
PATTERN = ("local_layers", "window")
KEEP = ARCH + VALUES + PATTERN
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


def evaluate_lean(problem: Problem, cols: dict[str, np.ndarray], backend: str = "auto") -> dict[str, np.ndarray]:
    """Loss, the cost columns in :data:`VALUES` and ``feasible`` for a table of columns (no DataFrame).

    Same semantics as :meth:`Problem.evaluate`: feasible = finite loss and every constraint of ``problem.constraints``.
    """
    from ...objectives import law_inputs

    res = evaluate_columns(cols, problem.scenario, backend=backend)
    out = {k: res[k] for k in VALUES if k in res}
    inputs = law_inputs(cols, tokens=problem.tokens)
    out["loss"] = problem.law.evaluate(inputs)
    out["latency_s"] = res[problem.latency_column]
    # outside the law's fitted domain counts as no loss at all (unless the problem allows extrapolation)
    out["in_domain"] = np.broadcast_to(
        True if problem.allow_extrapolation else problem.law.in_domain(inputs), out["loss"].shape
    )
    feasible = np.isfinite(out["loss"]) & out["in_domain"]
    out["feasible"] = feasible & problem.feasible(res)
    for k in ARCH:
        out[k] = cols[k]
    for k in PATTERN:
        out[k] = cols[k] if k in cols else np.zeros(len(feasible))
    return out


def track(
    constraints: Any,
    v: Mapping[str, np.ndarray],
    fi: np.ndarray,
    minimum: dict[str, float],
    closest: tuple[float, dict[str, float]] | None,
    diagnose: bool,
) -> tuple[float, dict[str, float]] | None:
    """Fold the finite-loss rows ``fi`` of ``v`` into the per-constraint ``minimum`` (kind -> smallest value seen of
    its ceiling form, :meth:`Constraint.as_upper`), and, while nothing is feasible (``diagnose``), into ``closest``:
    (max ratio to its bound, kind -> ratio and ``kind_value``) of the row nearest to meeting every constraint.
    Returns the new ``closest``."""
    ratio, ratios, vals = None, {}, {}
    for c in constraints:
        col, bound = c.as_upper()  # diagnostics in the ceiling form (smallest is best), read by Constraint.from_ceiling
        vals[c.kind] = np.asarray(v[col], dtype=float)[fi]
        minimum[c.kind] = min(minimum.get(c.kind, math.inf), float(vals[c.kind].min()))
        if diagnose:
            ratios[c.kind] = vals[c.kind] / bound
            ratio = ratios[c.kind] if ratio is None else np.maximum(ratio, ratios[c.kind])
    if ratio is not None:
        j = int(np.argmin(ratio))
        if closest is None or ratio[j] < closest[0]:
            closest = (float(ratio[j]), {k: float(r[j]) for k, r in ratios.items()}
                       | {f"{k}_value": float(x[j]) for k, x in vals.items()})  # fmt: skip
    return closest


@dataclass
class Accumulator:
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


def absorb(acc: Accumulator, p: Accumulator, better: Any) -> None:
    """Add range ``p``'s report to ``acc`` (counts, best points chosen by ``better``, minima, least violation,
    frontier and cloud rows concatenated: the caller filters the union once)."""
    acc.evaluated += p.evaluated
    acc.feasible += p.feasible
    acc.best = better(acc.best, p.best)
    acc.best_any = better(acc.best_any, p.best_any)
    for k, m in p.minimum.items():
        acc.minimum[k] = min(acc.minimum.get(k, math.inf), m)
    if p.closest is not None and (acc.closest is None or p.closest[0] < acc.closest[0]):
        acc.closest = p.closest
    if p.front is not None:
        acc.front = concat_rows(acc.front, p.front)
    if p.cloud is not None:
        acc.cloud = concat_rows(acc.cloud, p.cloud)
    acc.eval_s += p.eval_s
    acc.pareto_s += p.pareto_s


def take_rows(d: dict[str, np.ndarray], idx: Any) -> dict[str, np.ndarray]:
    return {k: np.asarray(v)[idx] for k, v in d.items()}


def concat_rows(a: dict[str, np.ndarray] | None, b: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    if a is None:
        return b
    return {k: np.concatenate([a[k], b[k]]) for k in a}


def filter_front(front: dict[str, np.ndarray], cols: tuple[str, ...]) -> dict[str, np.ndarray]:
    if not len(front["loss"]):
        return front
    m = pareto_mask(np.column_stack([front[c] for c in cols]))
    return take_rows(front, m)


def row_at(d: dict[str, np.ndarray], i: int) -> dict[str, float]:
    return {k: float(d[k][i]) for k in KEEP}


def argbest(v: dict[str, np.ndarray], idx: np.ndarray) -> int:
    """Index (into v) of the lowest loss among ``idx``; ties: lowest latency, then lowest index."""
    loss = v["loss"][idx]
    tie = idx[loss == loss.min()]
    return int(tie[np.argmin(v["latency_s"][tie])])


def better(a: dict[str, float] | None, b: dict[str, float] | None) -> dict[str, float] | None:
    if a is None:
        return b
    if b is None:
        return a
    return a if (a["loss"], a["latency_s"]) <= (b["loss"], b["latency_s"]) else b


def n_jobs_for(n_jobs: int | None, size: int) -> int:
    from ..jobs import resolve_jobs  # refuses 0 and more than the CPU count (exit 2), never clips

    jobs = resolve_jobs(n_jobs)
    return 1 if size < PARALLEL_MIN else jobs
