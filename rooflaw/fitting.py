"""Measure and fit: kernel curves, engine efficiencies against published rows, device calibration, and the
training-run tables loss laws are fitted on.

A namespace of the public API (names load on first use): ``from rooflaw.fitting import NAME``. The top of
``rooflaw`` keeps solving, evaluating and loading; :data:`rooflaw.api.GROUPS` lists every group.
"""

from __future__ import annotations

from typing import Any

from .api import group_attr, group_names

__all__ = group_names("fitting")


def __getattr__(name: str) -> Any:
    value = group_attr("fitting", name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
