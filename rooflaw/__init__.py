"""rooflaw: which LLM architecture gives the lowest loss that meets a latency/memory/energy budget on a device.

Loss laws (``rooflaw.objectives``) + a roofline cost model (``rooflaw.constraints``) over a device
catalog (``rooflaw.devices``), solved in closed form and by search (``rooflaw.solver``). ``__all__`` is the
whole public API (:mod:`rooflaw.api`); names load on first use, so ``import rooflaw`` is cheap.
"""

from __future__ import annotations

from typing import Any

from . import api as _api
from .api import __all__  # noqa: F401
from .errors import Infeasible, RooflawError  # noqa: F401

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    value = getattr(_api, name)  # AttributeError names the missing attribute
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
