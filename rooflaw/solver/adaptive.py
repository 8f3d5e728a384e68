"""The paper's frontier search (§4.3.1): a Latin-hypercube initial sample, then adaptive refinement around the
current Pareto set until it stabilises.

1. Draw a seeded Latin hypercube (``scipy.stats.qmc.LatinHypercube``) over the space's per-dimension choices
   (:meth:`Space.choices`); each coordinate picks one of that dimension's values, and :meth:`Space.point` maps
   the choice to the nearest valid architecture.
2. Evaluate (vectorised), keep the feasible points, take their (loss, latency) Pareto set.
3. Refine: the neighbours of every Pareto point (one dimension moved one step), and random points between the
   two ends of the widest gaps along the frontier (in loss and log-latency, normalised) -- the paper's "sparsely
   covered frontier regions and local neighbourhoods of Pareto points".
4. Stop when the Pareto set has not changed for ``patience`` rounds, when no unevaluated candidate is left, or
   when ``budget`` evaluations are spent.

Deterministic for a given ``seed``. It is a heuristic: :func:`rooflaw.solver.frontier` gives the exact frontier
of spaces small enough to enumerate, and is what this method is measured against.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..errors import bad
from .discrete.pareto import pareto_mask

__all__ = ["AdaptiveResult", "adaptive_search"]


@dataclass
class AdaptiveResult:
    """What :func:`adaptive_search` found: ``evaluated`` (every evaluated point in evaluation order, with the
    round it was drawn in), ``frontier`` (the feasible (loss, latency) Pareto set of those, sorted by latency),
    ``history`` (per round: evaluations so far and frontier size), why it ``stopped``, and ``seconds``."""

    evaluated: pd.DataFrame
    frontier: pd.DataFrame
    history: list[dict[str, Any]] = field(default_factory=list)
    stopped: str = ""
    seconds: float = 0.0

    @property
    def evaluations(self) -> int:
        return len(self.evaluated)


def _front(df: pd.DataFrame) -> pd.DataFrame:
    ok = df[df["feasible"]]
    if ok.empty:
        return ok
    m = pareto_mask(ok[["loss", "latency_s"]].to_numpy(dtype=float))
    return ok[m].sort_values(["latency_s", "loss"])


def adaptive_search(
    problem: Any,
    budget: int = 1500,
    initial: int | None = None,
    batch: int | None = None,
    patience: int = 3,
    gaps: int = 8,
    per_gap: int = 4,
    seed: int = 0,
) -> AdaptiveResult:
    """Latin-hypercube sample + adaptive refinement of the (loss, latency) frontier of ``problem``.

    ``budget``: most evaluations in all; ``initial``: size of the Latin hypercube (default ``budget // 4``);
    ``batch``: most new points per refinement round (default ``initial // 2``); ``gaps`` widest frontier gaps
    refined per round with ``per_gap`` points each.
    """
    from scipy.stats import qmc

    for key, v, lo in (("budget", budget, 2), ("patience", patience, 1), ("gaps", gaps, 0), ("per_gap", per_gap, 0)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise bad(key, v, f"must be an integer ≥ {lo}")
    initial = max(2, budget // 4) if initial is None else initial
    batch = max(1, initial // 2) if batch is None else batch
    for key, v in (("initial", initial), ("batch", batch)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise bad(key, v, "must be a positive integer")
    t0 = time.perf_counter()
    problem = problem.on_aligned_space()  # only aligned points, like every solver
    space = problem.space
    choices = space.choices()
    names = list(choices)
    sizes = np.array([len(choices[n]) for n in names])
    rng = np.random.default_rng(seed)
    seen: dict[int, np.ndarray] = {}  # flat index -> the choice vector that produced it
    frames: list[pd.DataFrame] = []

    def to_point(vec: np.ndarray) -> int:
        return int(space.point({n: choices[n][int(i)] for n, i in zip(names, vec, strict=True)})["index"])

    def evaluate(vecs: list[np.ndarray], rnd: int, room: int) -> int:
        new: list[int] = []
        for v in vecs:
            if len(new) >= room:
                break
            idx = to_point(v)
            if idx not in seen:
                seen[idx] = v
                new.append(idx)
        if new:
            cols = space.columns_at(np.array(new, dtype=np.int64), np.float64)
            df = problem.evaluate(cols)
            df["index"], df["round"] = new, rnd
            frames.append(df)
        return len(new)

    lhs = qmc.LatinHypercube(d=len(names), seed=seed).random(min(initial, budget))
    evaluate([np.minimum((u * sizes).astype(int), sizes - 1) for u in lhs], 0, budget)
    history, stopped, stable, rnd = [], "budget", 0, 0
    prev: set[int] = set()
    while True:
        allv = pd.concat(frames, ignore_index=True)
        front = _front(allv)
        cur = set(front["index"].astype(int))
        history.append({"round": rnd, "evaluations": len(allv), "frontier_points": len(cur)})
        stable = stable + 1 if cur == prev else 0
        prev = cur
        if stable >= patience:
            stopped = f"frontier unchanged for {patience} rounds"
            break
        room = budget - len(allv)
        if room <= 0:
            break
        rnd += 1
        cands: list[np.ndarray] = []
        # sparsely covered frontier regions: random points between the ends of the widest gaps
        if len(front) >= 2 and gaps:
            f = np.column_stack([front["loss"].to_numpy(float), np.log(front["latency_s"].to_numpy(float))])
            span = np.ptp(f, axis=0)
            f = f / np.where(span > 0, span, 1.0)
            gap = np.hypot(*np.diff(f, axis=0).T)
            ends = front["index"].astype(int).to_numpy()
            for g in np.argsort(gap)[::-1][:gaps]:
                a, b = seen[ends[g]], seen[ends[g + 1]]
                lo, hi = np.minimum(a, b), np.maximum(a, b)
                cands += [rng.integers(lo, hi + 1) for _ in range(per_gap)]
        # local neighbourhoods of Pareto points: one dimension one step
        local = []
        for idx in front["index"].astype(int):
            base = seen[idx]
            for j in range(len(names)):
                for step in (-1, 1):
                    w = base.copy()
                    w[j] += step
                    if 0 <= w[j] < sizes[j]:
                        local.append(w)
        cands += [local[i] for i in rng.permutation(len(local))]
        if not evaluate(cands, rnd, min(room, batch)):
            stopped = "no unevaluated candidate left"
            break
    allv = pd.concat(frames, ignore_index=True)
    return AdaptiveResult(allv, _front(allv).reset_index(drop=True), history, stopped, time.perf_counter() - t0)
