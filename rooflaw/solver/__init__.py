"""Solvers: closed form, geometric program, exhaustive enumeration, Optuna search."""

from .adaptive import AdaptiveResult, adaptive_search
from .closed_form import ClosedForm, budget_ratios, closed_form
from .exhaustive import FRONTIER_COLUMNS, FrontierResult, frontier, solve_exhaustive
from .gp import solve_gp
from .kkt_theorems import (
    depth_width_exponent,
    l_star,
    regime,
    rho_star_dual,
    rho_star_memory,
    rho_star_prefill_memory_eta,
    rho_star_table,
    width_sparsity_exponent,
    worked_example,
)
from .pareto import hypervolume, pareto_mask
from .problem import PHASES, Problem
from .result import Result
from .rounding import round_solution
from .search import SAMPLERS, SearchResult, search, solve_optuna
from .solve import METHODS, explain, solve

__all__ = [
    "AdaptiveResult",
    "adaptive_search",
    "FRONTIER_COLUMNS",
    "FrontierResult",
    "SAMPLERS",
    "SearchResult",
    "frontier",
    "hypervolume",
    "pareto_mask",
    "search",
    "solve_exhaustive",
    "solve_optuna",
    "PHASES",
    "Problem",
    "Result",
    "ClosedForm",
    "METHODS",
    "budget_ratios",
    "closed_form",
    "depth_width_exponent",
    "explain",
    "l_star",
    "regime",
    "rho_star_dual",
    "rho_star_memory",
    "rho_star_prefill_memory_eta",
    "rho_star_table",
    "round_solution",
    "solve",
    "solve_gp",
    "width_sparsity_exponent",
    "worked_example",
]
