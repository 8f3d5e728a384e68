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
    budgets = {k: b for k, (_, b) in problem.budgets().items()}
    cols = {k: c for k, (c, _) in problem.budgets().items()}
    smallest = {k: float(t[cols[k]].min()) for k in budgets}
    ratio = np.max([t[cols[k]].to_numpy(dtype=float) / budgets[k] for k in budgets], axis=0)
    j = int(np.argmin(ratio))
    closest = {k: float(t[cols[k]].iloc[j]) for k in budgets}
    return report(problem, smallest, budgets, where, closest)


__all__ = ["infeasible_from_trials"]
