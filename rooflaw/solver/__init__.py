"""Solvers: closed form, geometric program, exhaustive enumeration, Optuna search."""

from .problem import PHASES, Problem
from .result import Result

__all__ = ["PHASES", "Problem", "Result"]
