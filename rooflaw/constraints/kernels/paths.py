"""Figures of :class:`KernelCurves` as dotted paths: ``memory``, ``compute.fp8``, ``collectives.<curve>.latency``."""

from __future__ import annotations

import dataclasses
from typing import Any

from . import CollectiveCurve, KernelCurves


def get_param(c: KernelCurves, path: str) -> float | None:
    head, _, rest = path.partition(".")
    v = getattr(c, head)
    if not rest:
        return float(v)
    if head == "collectives":
        name, _, attr = rest.rpartition(".")
        return float(getattr(v[name], attr)) if name in v else None
    return float(v[rest]) if rest in v else None


def with_params(c: KernelCurves, values: dict[str, float]) -> KernelCurves:
    """``c`` with the figures at the dotted ``values`` paths replaced (dicts copied, never mutated)."""
    changes: dict[str, Any] = {}
    for path, v in values.items():
        head, _, rest = path.partition(".")
        if not rest:
            changes[head] = float(v)
        elif head == "collectives":
            name, _, attr = rest.rpartition(".")
            coll = dict(changes.get("collectives", c.collectives))
            old = coll.get(name, CollectiveCurve(0.0, 1.0))
            coll[name] = dataclasses.replace(old, **{attr: float(v)})
            changes["collectives"] = coll
        else:
            d = dict(changes.get(head, getattr(c, head)))
            d[rest] = float(v)
            changes[head] = d
    return dataclasses.replace(c, **changes)
