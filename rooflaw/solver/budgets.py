"""Budgets as first-class objects: what a :class:`~rooflaw.solver.problem.Problem` constrains, in SI units.

Each constraint names the cost column it bounds and its bound; budgets accept SI numbers or unit strings
(``LatencyBudget("decode", "20ms")``, ``MemoryBudget("8GB")``, ``EnergyBudget("5J")``). All are upper bounds
(``value ≤ bound``); a lower bound (a throughput floor) would add ``upper = False``, which the feasibility test
already honours.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from ..errors import bad

PHASES = ("prefill", "decode", "total")
#: Latency phase -> the cost column that holds it.
PHASE_COLUMN = {"prefill": "prefill_s", "decode": "decode_s", "total": "total_s"}


def _si(value: Any, field: str, parse: Any) -> float:
    """A positive, finite SI number from a number or a unit string (``parse``: a :mod:`rooflaw.units` parser)."""
    if isinstance(value, bool):
        raise bad(field, value, "must be a positive, finite number or a string with a unit")
    if isinstance(value, (int, float)) or type(value).__module__ == "numpy":
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise bad(field, value, "must be a positive, finite number or a string with a unit") from None
        if not (math.isfinite(v) and v > 0):
            raise bad(field, value, "must be a positive, finite number (SI units)")
        return v
    if isinstance(value, str):
        v = parse(value, field)
        if not (math.isfinite(v) and v > 0):
            raise bad(field, value, "must be a positive, finite number")
        return v
    raise bad(field, value, "must be a positive, finite number or a string with a unit")


@dataclass(frozen=True)
class Constraint:
    """Base of every constraint: ``kind`` names it, ``column`` is the cost column it bounds, ``bound`` (SI)."""

    kind: ClassVar[str] = ""
    upper: ClassVar[bool] = True

    @property
    def column(self) -> str:  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    @property
    def bound(self) -> float:  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - every subclass overrides
        raise NotImplementedError


@dataclass(frozen=True)
class LatencyBudget(Constraint):
    """``phase`` latency (prefill | decode | total) ≤ ``seconds`` (a number in s, or ``"20ms"``).

    ``confidence`` q (0.05–0.95, ``None``: the prediction itself): the budget is met at the q quantile of the
    phase's held-out error band (:mod:`rooflaw.constraints.bands`), i.e. latency · r(q) ≤ seconds with r(q) the
    measured/predicted ratio at q: the bound the solvers see is ``seconds / r(q)`` (:attr:`factor`), one factor
    per phase, so every solver stays exact."""

    phase: str
    seconds: float
    confidence: float | None = None

    kind: ClassVar[str] = "latency"

    def __post_init__(self) -> None:
        from ..units import parse_time

        if self.phase not in PHASES:
            raise bad("phase", self.phase, f"must be one of {', '.join(PHASES)}")
        object.__setattr__(self, "seconds", _si(self.seconds, "latency_budget", parse_time))
        if self.confidence is not None:
            from ..constraints.bands import check_confidence

            object.__setattr__(self, "confidence", check_confidence(self.confidence))
            self.factor  # noqa: B018 -- a phase without a shipped band fails here, naming confidence

    @property
    def factor(self) -> float:
        """measured/predicted at the ``confidence`` quantile of this phase (1 without a confidence)."""
        from ..constraints.bands import confidence_factor

        return confidence_factor(self.phase, self.confidence)

    @property
    def column(self) -> str:
        return PHASE_COLUMN[self.phase]

    @property
    def bound(self) -> float:
        return self.seconds / self.factor

    def describe(self) -> str:
        text = f"{self.phase} latency ≤ {self.seconds * 1e3:.4g} ms"
        if self.confidence is not None:
            text += f" at the {self.confidence:.0%} quantile (prediction × {self.factor:.3g})"
        return text


@dataclass(frozen=True)
class MemoryBudget(Constraint):
    """Memory (weights + KV cache + activations) ≤ ``bytes`` (a number in bytes, or ``"8GB"``).

    The device capacity always applies; this budget can only tighten it."""

    bytes: float

    kind: ClassVar[str] = "memory"

    def __post_init__(self) -> None:
        from ..units import parse_bytes

        object.__setattr__(self, "bytes", _si(self.bytes, "memory_budget", parse_bytes))

    @property
    def column(self) -> str:
        return "memory_bytes"

    @property
    def bound(self) -> float:
        return self.bytes

    def describe(self) -> str:
        return f"memory ≤ {self.bytes / 1e9:.4g} GB"


@dataclass(frozen=True)
class EnergyBudget(Constraint):
    """Energy of one request (prefill + every decode step) ≤ ``joules`` (a number in J, or ``"5J"``)."""

    joules: float

    kind: ClassVar[str] = "energy"

    def __post_init__(self) -> None:
        from ..units import parse_energy

        object.__setattr__(self, "joules", _si(self.joules, "energy_budget", parse_energy))

    @property
    def column(self) -> str:
        return "energy_j"

    @property
    def bound(self) -> float:
        return self.joules

    def describe(self) -> str:
        return f"energy ≤ {self.joules:.4g} J"


__all__ = ["PHASES", "PHASE_COLUMN", "Constraint", "EnergyBudget", "LatencyBudget", "MemoryBudget"]
