"""Loss laws: sympy expressions over architecture/data variables with fitted parameters, and the fitter."""

from __future__ import annotations

from .builtins import get_law, list_laws
from .fit import FitResult, fit_law, gemstones, load_table, plot_fit
from .law import LossLaw, parse_law
from .variables import SYMBOLS, VARIABLES, law_inputs, symbol

__all__ = [
    "FitResult",
    "fit_law",
    "gemstones",
    "load_table",
    "plot_fit",
    "LossLaw",
    "SYMBOLS",
    "VARIABLES",
    "get_law",
    "law_inputs",
    "list_laws",
    "parse_law",
    "symbol",
]
