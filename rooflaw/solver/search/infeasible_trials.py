"""The one-line report of a search whose trials meet no budget (exit 3, like every solver)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...errors import Infeasible
from ..infeasible import no_finite_loss, report
from ..problem import Problem


def infeasible_from_trials(problem: Problem, trials: pd.DataFrame) -> Infeasible:
    """The :class:`Infeasible` error for a search whose trials meet no budget (one report, as every solver):
    the smallest value of each constraint seen, and the trial closest to meeting all of them."""
    t = trials[np.isfinite(trials["loss"].to_numpy(dtype=float))] if len(trials) else trials
    where = f"among the {len(trials)} trials of the search on space {problem.space.name!r}"
    if not len(t):
        return no_finite_loss(problem, where)
    up = {c.kind: c.as_upper() for c in problem.constraints}  # the ceiling form report() reads
    smallest = {k: float(t[col].min()) for k, (col, _) in up.items()}
    ratio = np.max([t[col].to_numpy(dtype=float) / b for col, b in up.values()], axis=0)
    j = int(np.argmin(ratio))
    closest = {k: float(t[col].iloc[j]) for k, (col, _) in up.items()}
    return report(problem, smallest, where, closest)


__all__ = ["infeasible_from_trials"]
