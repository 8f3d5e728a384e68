"""Layouts across chips (TP, EP, PP, DP, Helix), batch sweeps, disaggregated prefill/decode, and the worker
counts of the parallel scans.

A namespace of the public API (names load on first use): ``from rooflaw.parallel import NAME``. The top of
``rooflaw`` keeps solving, evaluating and loading; :data:`rooflaw.api.GROUPS` lists every group.
"""

from __future__ import annotations

from typing import Any

from .api import group_attr, group_names

__all__ = group_names("parallel")


def __getattr__(name: str) -> Any:
    value = group_attr("parallel", name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
