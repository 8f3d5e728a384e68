"""A hypervolume reference point fixed by the problem (not by one run's frontier), so search runs compare."""

from __future__ import annotations

import math

import numpy as np

from .discrete.exhaustive import OBJECTIVES, evaluate_lean
from .problem import Problem

#: Points of the fixed sample that sets a space's hypervolume reference (seed 0).
REFERENCE_SAMPLE = 4096


def space_reference(problem: Problem, objectives: tuple[str, ...], backend: str = "auto") -> list[float]:
    """A hypervolume reference point fixed by the problem, not by a run, so that runs can be compared: each
    budget where the problem sets one (latency, memory capacity, energy), otherwise 1.1 × the maximum over a fixed
    sample of :data:`REFERENCE_SAMPLE` points of the space (seed 0; finite loss, inside the law's domain)."""
    size = problem.space.size
    rng = np.random.default_rng(0)
    idx = np.unique(rng.integers(0, size, min(REFERENCE_SAMPLE, size), dtype=np.int64)) if size else np.array([0])
    v = evaluate_lean(problem, problem.space.columns_at(idx, np.float64), backend)
    ok = np.isfinite(v["loss"]) & v["in_domain"]
    out = []
    for o in objectives:
        col = OBJECTIVES[o]
        c = problem.constraint(o)
        if c is not None:  # memory is always there: the capacity, or a tighter budget
            out.append(float(c.bound))
        else:
            vals = v[col][ok]
            out.append(1.1 * float(vals.max()) if len(vals) else math.nan)
    return out


__all__ = ["REFERENCE_SAMPLE", "space_reference"]
