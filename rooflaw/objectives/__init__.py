"""Loss laws: sympy expressions over architecture/data variables with fitted parameters, and the fitter.

The fitter (pandas, scipy) and its plots (matplotlib) load on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from .builtins import get_law, list_laws
from .law import LossLaw, parse_law
from .variables import SYMBOLS, VARIABLES, law_inputs, symbol

_LAZY = {
    "FitResult": ".fit",
    "fit_law": ".fit",
    "gemstones": ".fit",
    "load_table": ".fit",
    "plot_fit": ".fit_plot",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    globals()[name] = value
    return value


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
