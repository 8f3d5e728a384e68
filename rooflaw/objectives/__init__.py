"""Loss laws: sympy expressions over architecture/data variables with fitted parameters, and the fitter.

Names load on first use: listing the built-in laws needs no sympy, the fitter (pandas, scipy) and its plots
(matplotlib) load only when called.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "builtin_laws": ".builtins",
    "get_law": ".builtins",
    "list_laws": ".builtins",
    "LossLaw": ".law",
    "parse_law": ".law",
    "SYMBOLS": ".variables",
    "VARIABLES": ".variables",
    "law_inputs": ".variables",
    "symbol": ".variables",
    "FitResult": ".fit",
    "fit_law": ".fit",
    "gemstones": ".fit",
    "load_table": ".table",
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
    "builtin_laws",
    "get_law",
    "law_inputs",
    "list_laws",
    "parse_law",
    "symbol",
]
