"""Solvers: a typed :class:`Problem`, one :class:`Result`, and the methods that produce it.

``relaxation/`` (closed form, geometric programs), ``discrete/`` (rounding, exhaustive enumeration, Pareto),
``search/`` (Optuna); :func:`solve` dispatches through the method registry (:data:`METHODS`).
"""

from .adaptive import AdaptiveResult, adaptive_search
from .budgets import (
    PHASES,
    Capacity,
    Constraint,
    EnergyBudget,
    LatencyBudget,
    MemoryBudget,
    ThroughputFloor,
    TPOTBudget,  # fmt: skip
    TTFTBudget,
)
from .discrete.exhaustive import FRONTIER_COLUMNS, FrontierResult, frontier, solve_exhaustive
from .discrete.pareto import hypervolume, pareto_mask
from .discrete.rounding import round_solution
from .problem import Problem
from .relaxation.closed_form import ClosedForm, budget_ratios, closed_form
from .relaxation.geometric import solve_gp
from .relaxation.result import RelaxationResult
from .relaxation.theorems import DerivedTheorems, derive_theorems
from .result import Result
from .search.study import SAMPLERS, SearchResult, search, solve_optuna
from .solve import METHODS, explain, explain_closed_form, register_method, solve

__all__ = [
    "AdaptiveResult",
    "adaptive_search",
    "FRONTIER_COLUMNS",
    "METHODS",
    "PHASES",
    "SAMPLERS",
    "Capacity",
    "ClosedForm",
    "Constraint",
    "DerivedTheorems",
    "EnergyBudget",
    "FrontierResult",
    "LatencyBudget",
    "MemoryBudget",
    "Problem",
    "RelaxationResult",
    "Result",
    "SearchResult",
    "TPOTBudget",
    "TTFTBudget",
    "ThroughputFloor",
    "budget_ratios",
    "closed_form",
    "derive_theorems",
    "explain",
    "explain_closed_form",
    "frontier",
    "hypervolume",
    "pareto_mask",
    "register_method",
    "round_solution",
    "search",
    "solve",
    "solve_exhaustive",
    "solve_gp",
    "solve_optuna",
]
