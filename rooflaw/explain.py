"""Explanations and breakdowns: the derived theorems, why an answer was chosen (slacks, rounding, runner-ups),
per-operator and per-decode-step tables.

A namespace of the public API (names load on first use): ``from rooflaw.explain import NAME``. The top of
``rooflaw`` keeps solving, evaluating and loading; :data:`rooflaw.api.GROUPS` lists every group.
"""

from __future__ import annotations

from typing import Any

from .api import group_attr, group_names

__all__ = group_names("explain")


def __getattr__(name: str) -> Any:
    value = group_attr("explain", name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
