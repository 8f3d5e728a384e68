"""Budgets as first-class objects: what a :class:`~rooflaw.solver.problem.Problem` constrains, in SI units.

Each constraint knows the cost column it bounds, its bound, its sense (``upper``: value ≤ bound; a floor has
``upper = False``) and how far a table of values is from meeting it (:meth:`Constraint.violation`, like cvxpy's
``Constraint.violation``). Every solver reads these objects (``problem.constraints``); the discrete searches
through :meth:`~Constraint.satisfied` / :meth:`~Constraint.ratio`, the numba scan through
:meth:`~Constraint.as_upper`, the closed form and the GP through :meth:`~Constraint.relaxed` (the budget in the
theory model's terms: a phase latency, memory or energy). Adding a kind is one class here.

Budgets accept SI numbers or unit strings (``LatencyBudget("decode", "20ms")``, ``TPOTBudget("20ms")``,
``MemoryBudget("8GB")``, ``EnergyBudget("5J")``). One definition of the per-token figures, the layouts' own
(:mod:`rooflaw.constraints.parallel.serving`): TTFT is the prefill time (the engine's pass included; the
``prefill_s`` column), TPOT the decode time over the output tokens (``tpot_s`` = ``decode_s`` / S_out).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np

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


class Relaxed(NamedTuple):
    """A budget in the continuous relaxation's terms: ``kind`` latency | memory | energy, the latency ``phase``
    (None otherwise) and the ``bound`` (SI) that the theory model's expression of that kind must meet; ``scale``:
    relaxation value = ``scale`` × the constraint's ceiling column (:meth:`Constraint.as_upper`; S_out for TPOT)."""

    kind: str
    phase: str | None
    bound: float
    scale: float = 1.0


def relaxation(constraints: Any, workload: Any) -> dict[str, tuple[Relaxed, Constraint]]:
    """The constraints as the continuous relaxation takes them: relaxed kind (memory, latency, energy, in that
    order) -> (:class:`Relaxed`, the constraint it comes from). Latency budgets of one phase (a decode latency and
    a TPOT budget) keep the tightest; of different phases the relaxation cannot take them together."""
    from ..errors import RooflawError

    out: dict[str, tuple[Relaxed, Constraint]] = {}
    for c in constraints:
        r = c.relaxed(workload)
        have = out.get(r.kind)
        if have is not None and have[0].phase != r.phase:
            raise RooflawError(f"the relaxation takes one latency phase; {have[1].describe()} and {c.describe()} "
                               "bound two (use --method exhaustive or optuna)")  # fmt: skip
        if have is None or r.bound < have[0].bound:
            out[r.kind] = (r, c)
    return {k: out[k] for k in ("memory", "latency", "energy") if k in out}


#: Budget kinds a ``confidence`` quantile applies to (the latency-type ones).
TIMED = ("latency", "tpot", "ttft")


def _check_confidence(c: Any) -> None:
    """Validate a latency-type budget's ``confidence`` (and that its phase has a shipped band)."""
    if c.confidence is not None:
        from ..constraints.bands import check_confidence

        object.__setattr__(c, "confidence", check_confidence(c.confidence))
        c.factor  # noqa: B018 -- a phase without a shipped band fails here, naming confidence


def _factor(phase: str, q: float | None) -> float:
    """measured/predicted at quantile ``q`` of ``phase``'s held-out band (1 for ``None``): latency · factor ≤ budget
    is the budget met at that quantile, so the bound the solvers see is budget / factor (one factor per phase keeps
    the closed form, the GP and the kernels exact)."""
    if q is None:
        return 1.0
    from ..constraints.bands import confidence_factor

    return confidence_factor(phase, q)


def _at_quantile(c: Any) -> str:
    if c.confidence is None:
        return ""
    return f" ({c.human(c.seconds)} at the {c.confidence:.0%} quantile: prediction × {c.factor:.3g})"


@dataclass(frozen=True)
class Constraint:
    """Base of every constraint: ``kind`` names it (one per problem), ``column`` is the cost column it bounds,
    ``bound`` (SI), ``upper`` its sense (value ≤ bound, or ≥ for a floor), ``field`` the keyword that sets it."""

    kind: ClassVar[str] = ""
    upper: ClassVar[bool] = True
    field: ClassVar[str] = ""
    unit: ClassVar[str] = "s"  # how values are printed: s (as ms), B (as GB), J

    @property
    def column(self) -> str:  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    @property
    def bound(self) -> float:  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    @property
    def label(self) -> str:
        """The name results and errors give the constraint (``binding``, ``slack`` keys)."""
        return self.kind

    @property
    def quantity(self) -> str:
        """What it bounds, in words (``decode latency``, ``TPOT``, ``memory``)."""
        return self.kind

    def value(self, values: Mapping[str, Any]) -> Any:
        """The constrained quantity of a table (or row) of evaluated columns."""
        return values[self.column]

    def satisfied(self, values: Mapping[str, Any]) -> Any:
        """value ≤ bound (≥ for a floor), elementwise."""
        v = self.value(values)
        return v <= self.bound if self.upper else v >= self.bound

    def violation(self, values: Mapping[str, Any]) -> Any:
        """How far past the bound, in the quantity's unit (0 where met), elementwise."""
        v = np.asarray(self.value(values), dtype=float)
        return np.maximum(v - self.bound, 0.0) if self.upper else np.maximum(self.bound - v, 0.0)

    def ratio(self, values: Mapping[str, Any]) -> Any:
        """value / bound for a ceiling, bound / value for a floor: ≤ 1 exactly where met."""
        v = np.asarray(self.value(values), dtype=float)
        return v / self.bound if self.upper else self.bound / v

    def slack(self, values: Mapping[str, Any]) -> Any:
        """Relative room left (bound − value)/bound, negative when violated (sign flipped for a floor)."""
        v = np.asarray(self.value(values), dtype=float)
        return (self.bound - v) / self.bound if self.upper else (v - self.bound) / self.bound

    def as_upper(self) -> tuple[str, float]:
        """(column, bound) of the equivalent ceiling ``column ≤ bound``: what the numba scan takes, and the form
        the searches track their diagnostics in (smallest value, closest point; :meth:`from_ceiling` reads them)."""
        if not self.upper:  # pragma: no cover - a floor overrides it
            raise NotImplementedError
        return self.column, self.bound

    def from_ceiling(self, x: float) -> float:
        """The constrained quantity of a value ``x`` of the :meth:`as_upper` column (itself for a ceiling)."""
        return x

    def relaxed(self, workload: Any) -> Relaxed:  # pragma: no cover - every subclass overrides
        """The budget in the continuous relaxation's terms (closed form, GP)."""
        raise NotImplementedError

    def human(self, value: float) -> str:
        """A value of the quantity in the unit people read it in (ms, GB, J)."""
        if self.unit == "s":
            return f"{value * 1e3:.4g} ms"
        if self.unit == "B":
            return f"{value / 1e9:.4g} GB"
        if self.unit == "tok/s":
            return f"{value:.4g} tokens/s"
        return f"{value:.4g} J"

    def describe(self) -> str:
        return f"{self.quantity} {'≤' if self.upper else '≥'} {self.human(self.bound)}"


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
    field: ClassVar[str] = "latency_budget"

    def __post_init__(self) -> None:
        from ..units import parse_time

        if self.phase not in PHASES:
            raise bad("phase", self.phase, f"must be one of {', '.join(PHASES)}")
        object.__setattr__(self, "seconds", _si(self.seconds, self.field, parse_time))
        _check_confidence(self)

    @property
    def factor(self) -> float:
        """measured/predicted at the ``confidence`` quantile of this phase's band (1 without a confidence)."""
        return _factor(self.phase, self.confidence)

    @property
    def column(self) -> str:
        return PHASE_COLUMN[self.phase]

    @property
    def bound(self) -> float:
        return self.seconds / self.factor

    @property
    def quantity(self) -> str:
        return f"{self.phase} latency"

    def relaxed(self, workload: Any) -> Relaxed:
        return Relaxed("latency", self.phase, self.bound)

    def describe(self) -> str:
        return super().describe() + _at_quantile(self)


@dataclass(frozen=True)
class _PhaseTime(Constraint):
    """A per-token-kind time budget of one phase (``budget_phase``): ``seconds`` (a number in s, or ``"20ms"``), met
    at the ``confidence`` quantile of that phase's band when one is given (as :class:`LatencyBudget`)."""

    seconds: float
    confidence: float | None = None

    budget_phase: ClassVar[str] = ""

    def __post_init__(self) -> None:
        from ..units import parse_time

        object.__setattr__(self, "seconds", _si(self.seconds, self.field, parse_time))
        _check_confidence(self)

    @property
    def factor(self) -> float:
        return _factor(self.budget_phase, self.confidence)

    @property
    def bound(self) -> float:
        return self.seconds / self.factor

    def describe(self) -> str:
        return super().describe() + _at_quantile(self)


#: The latency-type budget classes (the :data:`TIMED` kinds): each has ``seconds`` and ``confidence``.
TIMED_TYPES = (LatencyBudget, _PhaseTime)


@dataclass(frozen=True)
class TPOTBudget(_PhaseTime):
    """Time per output token ≤ ``seconds``: the decode time of all S_out steps over S_out (``tpot_s``).

    The relaxation sees it as a decode budget of ``seconds`` × S_out (the theory model's decode sum)."""

    kind: ClassVar[str] = "tpot"
    field: ClassVar[str] = "tpot_budget"
    budget_phase: ClassVar[str] = "decode"

    @property
    def column(self) -> str:
        return "tpot_s"

    @property
    def quantity(self) -> str:
        return "TPOT"

    def relaxed(self, workload: Any) -> Relaxed:
        return Relaxed("latency", "decode", self.bound * workload.output_tokens, float(workload.output_tokens))


@dataclass(frozen=True)
class TTFTBudget(_PhaseTime):
    """Time to first token ≤ ``seconds``: the prefill time, the engine's pass included (``prefill_s``)."""

    kind: ClassVar[str] = "ttft"
    field: ClassVar[str] = "ttft_budget"
    budget_phase: ClassVar[str] = "prefill"

    @property
    def column(self) -> str:
        return "prefill_s"

    @property
    def quantity(self) -> str:
        return "TTFT"

    def relaxed(self, workload: Any) -> Relaxed:
        return Relaxed("latency", "prefill", self.bound)


@dataclass(frozen=True)
class MemoryBudget(Constraint):
    """Memory (weights + KV cache + activations) ≤ ``bytes`` (a number in bytes, or ``"8GB"``).

    The device capacity always applies; this budget can only tighten it."""

    bytes: float

    kind: ClassVar[str] = "memory"
    field: ClassVar[str] = "memory_budget"
    unit: ClassVar[str] = "B"

    def __post_init__(self) -> None:
        from ..units import parse_bytes

        object.__setattr__(self, "bytes", _si(self.bytes, self.field, parse_bytes))

    @property
    def column(self) -> str:
        return "memory_bytes"

    @property
    def bound(self) -> float:
        return self.bytes

    @property
    def quantity(self) -> str:
        return "memory"

    def relaxed(self, workload: Any) -> Relaxed:
        return Relaxed("memory", None, self.bytes)


@dataclass(frozen=True)
class Capacity(MemoryBudget):
    """The device's memory capacity, which every problem enforces (``Problem`` adds it; a :class:`MemoryBudget`
    tighter than it takes its place). ``budget``: a looser memory budget the user gave, kept so that the problem
    on another device still has it."""

    budget: float | None = None

    @property
    def label(self) -> str:
        return "capacity"

    def describe(self) -> str:
        return f"memory ≤ {self.human(self.bytes)} (device capacity)"


@dataclass(frozen=True)
class EnergyBudget(Constraint):
    """Energy of one request (prefill + every decode step) ≤ ``joules`` (a number in J, or ``"5J"``)."""

    joules: float

    kind: ClassVar[str] = "energy"
    field: ClassVar[str] = "energy_budget"
    unit: ClassVar[str] = "J"

    def __post_init__(self) -> None:
        from ..units import parse_energy

        object.__setattr__(self, "joules", _si(self.joules, self.field, parse_energy))

    @property
    def column(self) -> str:
        return "energy_j"

    @property
    def bound(self) -> float:
        return self.joules

    @property
    def quantity(self) -> str:
        return "energy"

    def relaxed(self, workload: Any) -> Relaxed:
        return Relaxed("energy", None, self.joules)


@dataclass(frozen=True)
class ThroughputFloor(Constraint):
    """Tokens per second each request decodes ≥ ``tokens_per_s`` (a floor: ``upper = False``): S_out over the
    decode time, i.e. 1 / TPOT. Its ceiling form is ``tpot_s ≤ 1 / tokens_per_s``; the relaxation takes it as a
    decode budget of S_out / ``tokens_per_s``."""

    tokens_per_s: float

    kind: ClassVar[str] = "throughput"
    upper: ClassVar[bool] = False
    field: ClassVar[str] = "min_tokens_per_s"
    unit: ClassVar[str] = "tok/s"

    def __post_init__(self) -> None:
        object.__setattr__(self, "tokens_per_s", _si(self.tokens_per_s, self.field, _no_unit(self.field)))

    @property
    def column(self) -> str:
        return "tpot_s"

    @property
    def bound(self) -> float:
        return self.tokens_per_s

    @property
    def quantity(self) -> str:
        return "decode tokens/s per request"

    def value(self, values: Mapping[str, Any]) -> Any:
        with np.errstate(divide="ignore"):
            return 1.0 / np.asarray(values["tpot_s"], dtype=float)

    def as_upper(self) -> tuple[str, float]:
        return "tpot_s", 1.0 / self.tokens_per_s

    def from_ceiling(self, x: float) -> float:
        return 1.0 / x if x > 0 else math.inf

    def relaxed(self, workload: Any) -> Relaxed:
        n = float(workload.output_tokens)
        return Relaxed("latency", "decode", n / self.tokens_per_s, n)


def _no_unit(field: str) -> Any:
    """A parser for a plain number given as text (``"50"``)."""

    def parse(text: str, _: str) -> float:
        try:
            return float(text)
        except ValueError:
            raise bad(field, text, "must be a number (tokens per second)") from None

    return parse


#: Constraint kinds in the order problems list them.
KINDS = {c.kind: c for c in (LatencyBudget, TPOTBudget, TTFTBudget, ThroughputFloor, MemoryBudget, EnergyBudget)}


__all__ = ["KINDS", "PHASES", "PHASE_COLUMN", "Capacity", "Constraint", "EnergyBudget", "LatencyBudget",
           "MemoryBudget", "Relaxed", "TPOTBudget", "TTFTBudget", "ThroughputFloor", "relaxation"]  # fmt: skip
