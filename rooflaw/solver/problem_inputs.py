"""Coercion of :class:`~rooflaw.solver.problem.Problem`'s inputs to their final types, one small function per field.

The public constructor ``Problem(device="jetson-agx-orin-64gb", latency_budget="20ms", ...)`` routes through
:func:`coerce`; ``Problem``'s fields then hold only final types (a :class:`LossLaw`, a :class:`Scenario`, a
:class:`Space`, a tuple of :class:`Constraint` objects). Every bad input raises ``RooflawError`` naming its field.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import bad
from .budgets import (
    KINDS,
    PHASES,
    TIMED,
    TIMED_TYPES,
    Capacity,
    Constraint,
    EnergyBudget,
    LatencyBudget,
    MemoryBudget,
    TPOTBudget,
    TTFTBudget,  # fmt: skip
)


class Unset:
    """Marks an argument left out, so that an explicit ``None`` is refused (or a scenario's value is kept)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


#: The budget keywords and the constraint each builds (``latency_budget`` also takes ``phase``).
KEYWORDS: dict[str, Any] = {"latency_budget": LatencyBudget, "tpot_budget": TPOTBudget, "ttft_budget": TTFTBudget,
                             "memory_budget": MemoryBudget, "energy_budget": EnergyBudget}  # fmt: skip


def law(value: Any) -> Any:
    from ..objectives import LossLaw, get_law

    if isinstance(value, str):
        return get_law(value)
    if not isinstance(value, LossLaw):
        raise bad("law", value, "expected a LossLaw, a built-in law name or a law expression")
    return value


def device(value: Any) -> Any:
    from ..devices import Device, get_device

    if value is None:
        raise bad("device", None, "a device is required (a Device, a catalog id or a device file)")
    if isinstance(value, (str, os.PathLike)):
        return get_device(value)
    if not isinstance(value, Device):
        raise bad("device", value, "expected a Device, a catalog id or a path to a device file")
    return value


def space(value: Any) -> Any:
    from ..arch.space import Space, get_space

    if isinstance(value, (str, os.PathLike)):
        return get_space(os.fspath(value))
    if not isinstance(value, Space):
        raise bad("space", value, "expected a Space, a built-in space name or a space file")
    return value


def workload(value: Any) -> Any:
    from ..constraints import Workload

    if isinstance(value, Unset):
        return Workload()
    if isinstance(value, Mapping):
        try:
            return Workload(**dict(value))
        except TypeError as e:
            raise bad("workload", dict(value), str(e)) from None
    if not isinstance(value, Workload):
        raise bad("workload", value, "expected a Workload or a mapping of its fields")
    return value


def precision(value: Any) -> Any:
    from ..constraints import Precision

    if not isinstance(value, (str, Precision)):
        raise bad("precision", value, "expected a precision such as fp16, int8 or w4a16kv8")
    return Precision.parse(value)


def preset(value: Any) -> str:
    from ..constraints import PRESETS

    if not isinstance(value, str) or value not in PRESETS:
        raise bad("preset", value, f"must be one of {', '.join(PRESETS)}")
    return value


def engine(value: Any, dev: Any) -> str:
    from ..constraints.engines import ENGINE_NAMES, default_engine

    if value is None:
        return default_engine(dev)
    if not isinstance(value, str) or value not in ENGINE_NAMES:
        raise bad("engine", value, f"unknown engine profile; use one of {', '.join(ENGINE_NAMES)}")
    return value


def align(value: Any) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
        raise bad("align", value, "must be a positive integer (or None: the space's own values)")
    return value


def tokens(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
        raise bad("tokens", value, "must be a positive, finite number of training tokens")
    return value


def given_constraints(value: Any) -> dict[str, Constraint]:
    """The ``constraints`` argument as kind -> object (a :class:`Capacity` gives back the looser budget it kept:
    the problem adds its own device's capacity)."""
    if isinstance(value, Constraint):
        value = (value,)
    if not isinstance(value, Iterable) or isinstance(value, (str, bytes, Mapping)):
        raise bad("constraints", value, "expected LatencyBudget / MemoryBudget / EnergyBudget objects")
    objs: dict[str, Constraint] = {}
    for c in value:
        if isinstance(c, Capacity):
            if c.budget is None:
                continue
            c = MemoryBudget(c.budget)
        if not isinstance(c, Constraint):
            raise bad("constraints", c, "expected LatencyBudget / MemoryBudget / EnergyBudget objects")
        if c.kind in objs:
            raise bad("constraints", c, f"a second {c.kind} budget; give one per kind")
        objs[c.kind] = c
    return objs


def constraints(
    given: Any, budgets: Mapping[str, Any], phase: Any, capacity: float, confidence: Any = None
) -> tuple[tuple, str]:
    """(the enforced constraints, the latency phase): the objects of ``given`` and of the keyword ``budgets``
    (``latency_budget`` ..., None when absent), the memory one tightened to the device ``capacity`` (in the
    :data:`KINDS` order), and the phase of the latency budget (else ``phase``, else decode). ``confidence``: the
    quantile every latency-type budget without its own is met at."""
    objs = given_constraints(given)
    if phase is not None and phase not in PHASES:
        raise bad("phase", phase, f"must be one of {', '.join(PHASES)}")
    for field, v in budgets.items():
        if v is None:
            continue
        cls = KEYWORDS[field]
        if cls.kind in objs:
            raise bad(field, v, f"given twice (also as {objs[cls.kind]!r} in constraints)")
        objs[cls.kind] = (
            LatencyBudget(phase or "decode", v, confidence)
            if cls is LatencyBudget
            else (cls(v, confidence) if cls.kind in TIMED else cls(v))
        )
    if confidence is not None:
        for k, c in list(objs.items()):
            if isinstance(c, TIMED_TYPES) and c.confidence is None:
                objs[k] = dataclasses.replace(c, confidence=confidence)
    lat = objs.get("latency")
    if isinstance(lat, LatencyBudget) and phase is not None and lat.phase != phase:
        raise bad("phase", phase, f"differs from the latency budget's phase {lat.phase!r}")
    mem = objs.get("memory")
    if mem is None or mem.bound >= capacity:
        objs["memory"] = Capacity(capacity, None if mem is None else mem.bound)
    out = tuple(objs[k] for k in KINDS if k in objs)
    return out, lat.phase if isinstance(lat, LatencyBudget) else (phase or "decode")


def energy_figures(cons: tuple[Constraint, ...], dev: Any) -> None:
    """An energy budget on a device with no power figures is refused up front, naming the missing field."""
    energy = next((c for c in cons if c.kind == "energy"), None)
    if energy is not None and hasattr(dev, "has_energy") and not dev.has_energy:
        raise bad(
            "energy_budget", energy.bound,
            f"device {dev.id} has no power_peak_w (nor energy_per_flop_pj and energy_per_byte_pj): "
            "its energy is n/a; add them to the device file, or calibrate with --power",
        )  # fmt: skip


__all__ = ["KEYWORDS", "Unset", "constraints", "energy_figures"]
