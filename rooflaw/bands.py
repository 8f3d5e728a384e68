"""Latency error bands: how far a predicted latency may fall from a measured one, from held-out published
rows (the 80 % band every latency carries, quantiles for ``--confidence``).

A namespace of the public API (names load on first use): ``from rooflaw.bands import NAME``. The top of
``rooflaw`` keeps solving, evaluating and loading; :data:`rooflaw.api.GROUPS` lists every group.
"""

from __future__ import annotations

from typing import Any

from .api import group_attr, group_names

__all__ = group_names("bands")


def __getattr__(name: str) -> Any:
    value = group_attr("bands", name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
