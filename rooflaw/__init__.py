"""rooflaw: which LLM architecture gives the lowest loss that meets a latency/memory/energy budget on a device.

Loss laws (``rooflaw.objectives``) + a roofline cost model (``rooflaw.constraints``) over a device
catalog (``rooflaw.devices``), solved in closed form and by search (``rooflaw.solver``). The top (``__all__``) is
solving and evaluating -- :func:`solve`, :class:`Problem`, :func:`evaluate`, :func:`frontier`, :func:`search`,
budgets, devices, architectures, spaces, laws; the rest is grouped (:data:`rooflaw.api.GROUPS`):
``rooflaw.units``, ``rooflaw.bands``, ``rooflaw.speculative``, ``rooflaw.parallel``, ``rooflaw.fitting``,
``rooflaw.explain``, ``rooflaw.plots``, ``rooflaw.report``; :mod:`rooflaw.api` holds every name, flat (what the
command line uses). Names load on first use, so ``import rooflaw`` is cheap. A grouped name spelled at the top
(``rooflaw.value_band``) still works and warns (DeprecationWarning) with its new spelling.
"""

from __future__ import annotations

import importlib
import time as _time
import warnings
from typing import Any

from . import api as _api
from .errors import Infeasible, RooflawError  # noqa: F401

#: when this process imported rooflaw (ns since the epoch; the cost model's modules load later, on first use): a
#: deriving source changed after it may not be the code this process runs, so :mod:`rooflaw.cache` neither stores
#: nor serves entries then
_IMPORTED_NS = _time.time_ns()

__version__ = "0.1.0"
__all__ = list(_api.TOP)


def __getattr__(name: str) -> Any:
    if name in _api.GROUPS:  # rooflaw.bands, rooflaw.units, ...: the group's module
        return importlib.import_module(f"{__name__}.{name}")
    group = _api.GROUP_OF.get(name) or ("api" if name in _api.CLI_HELPERS else None)
    if group is not None:
        warnings.warn(f"rooflaw.{name} is rooflaw.{group}.{name} now (the top of rooflaw keeps solving, evaluating "
                      "and loading)", DeprecationWarning, stacklevel=2)  # fmt: skip
        return getattr(_api, name)
    if name not in _api.TOP:
        raise AttributeError(f"module 'rooflaw' has no attribute {name!r}")
    value = getattr(_api, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | set(_api.GROUPS))
