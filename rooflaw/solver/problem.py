"""``Problem``: minimise a loss law subject to constraints (latency, TPOT, TTFT, memory, energy) in a scenario
(device, workload, precision, preset, engine), over a space."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..constraints.scenario import Scenario
from ..errors import RooflawError, bad
from . import problem_inputs as I
from .budgets import PHASE_COLUMN, PHASES, TIMED_TYPES, Capacity, Constraint, LatencyBudget

#: The CLI's defaults (``rooflaw solve --help``), shared by the API.
DEFAULT_LAW = "paper-2602.10377"
DEFAULT_SPACE = "paper"
DEFAULT_PRECISION = "fp16"
DEFAULT_PRESET = "full"

_WORKLOAD = I.Unset("Workload()")
_PRECISION = I.Unset(repr(DEFAULT_PRECISION))
_PRESET = I.Unset(repr(DEFAULT_PRESET))


@dataclass(frozen=True, init=False)
class Problem:
    """min loss(arch) over ``space`` s.t. every constraint of ``constraints``, in ``scenario``.

    Fields hold final types: ``law`` a :class:`LossLaw`, ``scenario`` a :class:`Scenario` (device, workload,
    precision, preset, engine), ``space`` a :class:`Space`, ``constraints`` the :class:`Constraint` objects every
    solver enforces -- the device's memory :class:`Capacity` always among them (a tighter :class:`MemoryBudget`
    takes its place) -- and ``phase`` the latency phase of the ``latency`` objective.

    The constructor takes loose inputs and coerces them (:mod:`.problem_inputs`); bad input raises
    :class:`RooflawError` naming the field and the value:

    - ``law``: a :class:`LossLaw`, a built-in name or a law expression (default: the paper's law);
    - ``device``: a :class:`Device`, a catalog id (``"jetson-agx-orin-64gb"``, ``id@mode``) or a device file path;
    - ``space``: a :class:`Space`, a built-in name or a space TOML path; ``workload``: a :class:`Workload` or a
      mapping of its fields; ``precision``: a :class:`Precision` or its text (``fp16``, ``w4a16kv8``);
    - ``constraints``: :class:`LatencyBudget`, :class:`TPOTBudget`, :class:`TTFTBudget`, :class:`MemoryBudget`,
      :class:`EnergyBudget` objects; or the keywords ``latency_budget`` (s or ``"20ms"``) with ``phase``,
      ``tpot_budget`` / ``ttft_budget`` (s per output token / to the first token), ``memory_budget`` (bytes or
      ``"8GB"``), ``energy_budget`` (J or ``"5J"``), which build the same objects;
    - ``scenario``: a :class:`Scenario` instead of ``device``/``workload``/``precision``/``preset``/``engine``
      (any of those given beside it replaces the scenario's).

    ``preset`` is the cost model that judges feasibility and ``engine`` the serving stack's profile it applies
    (``tensorrt-llm``, ``vllm``, ``llama.cpp``, ``gpt-fast``, ``torch-eager``, ``ideal`` = pure roofline, ``device``;
    default: the device's own, as ``rooflaw evaluate`` without ``--engine``; the ``paper`` presets apply none);
    ``align`` the multiple every answer's d_model and FFN size must be (every solver searches only those points,
    see :meth:`on_aligned_space`; None: the space as declared);
    ``tokens`` the training token count D for laws that use it.
    Architectures outside the domain the law was fitted on are infeasible unless ``allow_extrapolation``.
    Example::

        >>> import rooflaw as rl
        >>> p = rl.Problem(device="jetson-agx-orin-64gb", latency_budget="20ms", memory_budget="4GB")
        >>> p.constraints
        (LatencyBudget(phase='decode', seconds=0.02, confidence=None), MemoryBudget(bytes=4000000000.0))
        >>> p.law.name, p.space.name, p.phase
        ('paper-2602.10377', 'paper', 'decode')
    """

    law: Any
    scenario: Scenario
    space: Any
    constraints: tuple[Constraint, ...]
    phase: str
    align: int | None
    tokens: float | None
    allow_extrapolation: bool

    def __init__(
        self,
        law: Any = DEFAULT_LAW,
        device: Any = None,
        space: Any = DEFAULT_SPACE,
        workload: Any = _WORKLOAD,
        precision: Any = _PRECISION,
        latency_budget: float | str | None = None,
        phase: str | None = None,
        memory_budget: float | str | None = None,
        energy_budget: float | str | None = None,
        preset: Any = _PRESET,
        align: int | None = None,
        tokens: float | None = None,
        constraints: Any = (),
        allow_extrapolation: bool = False,
        engine: str | None = None,
        *,
        tpot_budget: float | str | None = None,
        ttft_budget: float | str | None = None,
        scenario: Scenario | None = None,
        confidence: float | None = None,
    ) -> None:
        sc = scenario
        if sc is not None and not isinstance(sc, Scenario):
            raise bad("scenario", sc, "expected a Scenario")
        dev = I.device(device if device is not None or sc is None else sc.device)
        wl = I.workload(sc.workload if isinstance(workload, I.Unset) and sc is not None else workload)
        if isinstance(precision, I.Unset):
            precision = DEFAULT_PRECISION if sc is None else sc.precision
        if isinstance(preset, I.Unset):
            preset = DEFAULT_PRESET if sc is None else sc.preset
        prec, pre = I.precision(precision), I.preset(preset)
        eng = I.engine(engine if engine is not None or sc is None or sc.device is not dev else sc.engine, dev)
        budgets = {"latency_budget": latency_budget, "tpot_budget": tpot_budget, "ttft_budget": ttft_budget,
                   "memory_budget": memory_budget, "energy_budget": energy_budget}  # fmt: skip
        cons, ph = I.constraints(constraints, budgets, phase, float(dev.memory_capacity), confidence)
        I.energy_figures(cons, dev)
        self._set(I.law(law), Scenario(dev, wl, prec, pre, eng), I.space(space), cons, ph, I.align(align),
                  I.tokens(tokens), allow_extrapolation)  # fmt: skip

    def _set(self, law: Any, scenario: Scenario, space: Any, constraints: tuple[Constraint, ...], phase: str,
             align: int | None, tokens: float | None, allow_extrapolation: bool) -> None:  # fmt: skip
        """Set the final fields (the law bound to the precision) after the checks that need several of them."""
        from ..objectives.precision_law import bind_precision

        if not isinstance(allow_extrapolation, bool):
            raise bad("allow_extrapolation", allow_extrapolation, "must be True or False")
        if tokens is not None and not allow_extrapolation:
            out = law.outside({"D": tokens})
            if out:
                raise bad("tokens", tokens, f"outside the domain law {law.name} was fitted on: {out[0]}; "
                          "allow_extrapolation (--allow-extrapolation) to use it anyway")  # fmt: skip
        put = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        # a precision-aware law (P_w/P_a/P_kv bits) takes its bits from this problem's precision
        put("law", bind_precision(law, scenario.precision, allow_extrapolation))
        put("scenario", scenario)
        put("space", space)
        put("constraints", constraints)
        put("phase", phase)
        put("align", align)
        put("tokens", tokens)
        put("allow_extrapolation", allow_extrapolation)

    @classmethod
    def from_inputs(cls, **inputs: Any) -> Problem:
        """The problem of loose inputs (the constructor's keywords): ids, text and unit strings coerced."""
        return cls(**inputs)

    def replace(self, **changes: Any) -> Problem:
        """This problem with some inputs changed: any constructor keyword (``latency_budget=None`` drops the latency
        budget, ``phase="prefill"`` moves it, ``workload=...`` keeps the rest of the scenario)."""
        changes = dict(changes)
        lat = self.constraint("latency")
        if "phase" in changes and isinstance(lat, LatencyBudget) and "latency_budget" not in changes:
            changes["latency_budget"] = lat.seconds
        drop = {I.KEYWORDS[k].kind for k in changes if k in I.KEYWORDS}
        keep = tuple(c for c in self.constraints if c.kind not in drop)
        base = {
            "law": self.law,
            "space": self.space,
            "constraints": keep,
            "phase": self.phase,
            "align": self.align,
            "tokens": self.tokens,
            "allow_extrapolation": self.allow_extrapolation,
            "scenario": self.scenario,
        }
        return Problem(**{**base, **changes})

    # ---- the scenario's and the constraints' fields, for readers -----------------------------------------------------
    @property
    def device(self) -> Any:
        """The device (:class:`Device`)."""
        return self.scenario.device

    @property
    def workload(self) -> Any:
        return self.scenario.workload

    @property
    def precision(self) -> Any:
        return self.scenario.precision

    @property
    def preset(self) -> str:
        return self.scenario.preset

    @property
    def engine(self) -> str:
        """The engine profile's name (the device's default when none was given)."""
        return str(self.scenario.engine)

    def constraint(self, kind: str) -> Constraint | None:
        """The constraint of ``kind`` (``latency``, ``tpot``, ``ttft``, ``memory``, ``energy``), or None."""
        return next((c for c in self.constraints if c.kind == kind), None)

    def _bound(self, kind: str) -> float | None:
        """The budget of ``kind`` as the user stated it (a latency-type one before its confidence factor)."""
        c = self.constraint(kind)
        if c is None or isinstance(c, Capacity):
            return None
        return float(c.seconds) if isinstance(c, TIMED_TYPES) else float(c.bound)

    @property
    def latency_bound(self) -> float | None:
        """The latency bound the solvers meet: the latency budget divided by its confidence factor (if any)."""
        c = self.constraint("latency")
        return None if c is None else float(c.bound)

    @property
    def confidence(self) -> float | None:
        """The quantile the latency-type budgets are met at (``None``: the prediction itself)."""
        timed = (c for c in self.constraints if isinstance(c, TIMED_TYPES))
        return next((c.confidence for c in timed if c.confidence is not None), None)

    @property
    def latency_budget(self) -> float | None:
        """The ``phase`` latency budget (s), or None."""
        return self._bound("latency")

    @property
    def tpot_budget(self) -> float | None:
        return self._bound("tpot")

    @property
    def ttft_budget(self) -> float | None:
        return self._bound("ttft")

    @property
    def memory_budget(self) -> float | None:
        """The memory budget the user gave (bytes; may be looser than the capacity), or None."""
        c = self.constraint("memory")
        return c.budget if isinstance(c, Capacity) else None if c is None else float(c.bound)

    @property
    def energy_budget(self) -> float | None:
        return self._bound("energy")

    @property
    def latency_column(self) -> str:
        """The cost column of the latency phase (``prefill_s``, ``decode_s`` or ``total_s``)."""
        return PHASE_COLUMN[self.phase]

    @property
    def capacity(self) -> float:
        """Effective memory limit in bytes: the device capacity, or the memory budget if tighter."""
        c = self.constraint("memory")
        return float(c.bound) if c is not None else float(self.device.memory_capacity)

    def budgets(self) -> dict[str, tuple[str, float]]:
        """The constraints as kind -> (cost column, ceiling in SI) (:meth:`Constraint.as_upper`); memory is always
        there (the capacity)."""
        return {c.kind: c.as_upper() for c in self.constraints}

    def feasible(self, values: Mapping[str, Any]) -> Any:
        """Where every constraint holds, elementwise over evaluated columns ``values``."""
        import numpy as np

        ok = np.ones(np.shape(values[self.constraints[0].column]), dtype=bool)
        for c in self.constraints:
            ok &= c.satisfied(values)
        return ok

    def on_aligned_space(self) -> Problem:
        """This problem with ``space`` cut down to the points ``align`` admits (``self`` when that is all of them):
        what the exhaustive, frontier, search and rounding solvers enumerate. Raises ``RooflawError`` (field
        ``align``) when no point is aligned."""
        if self.align is None:
            return self
        space = self.space.aligned(self.align)
        if space is self.space:
            return self
        out = copy.copy(self)
        object.__setattr__(out, "space", space)
        return out

    def with_scenario(self, scenario: Scenario) -> Problem:
        """This problem in another scenario (same law object rebound to its precision, space and budgets; the
        capacity is the new device's)."""
        if scenario.device is self.device:
            out = copy.copy(self)
            from ..objectives.precision_law import bind_precision

            if scenario.precision != self.precision:
                object.__setattr__(out, "law", bind_precision(self.law, scenario.precision, self.allow_extrapolation))
            object.__setattr__(out, "scenario", scenario)
            return out
        return self.replace(scenario=scenario, device=scenario.device)

    def constraint_label(self, kind: str) -> str:
        """``capacity`` for the memory constraint when the device's capacity (not a budget) binds, else ``kind``."""
        c = self.constraint(kind)
        return c.label if c is not None else kind

    def evaluate(self, columns: Mapping[str, Any]) -> Any:
        """Loss, every cost column, ``feasible`` and ``latency_s`` (of the problem's phase) as a DataFrame."""
        import numpy as np
        import pandas as pd

        from ..constraints import complete_columns, evaluate_columns
        from ..objectives import law_inputs

        res = evaluate_columns(columns, self.scenario)
        df = pd.DataFrame({k: np.asarray(v) for k, v in columns.items()})
        for k, v in res.items():
            df[k] = v
        # every architecture column (defaults filled), so laws over parameter counts (N, N_active, ...) evaluate
        inputs = law_inputs(complete_columns(columns), tokens=self.tokens)
        df["loss"] = self.law.evaluate(inputs)
        df["latency_s"] = df[self.latency_column]
        df["in_domain"] = np.broadcast_to(self.law.in_domain(inputs), (len(df),))
        feasible = np.isfinite(df["loss"].to_numpy())
        if not self.allow_extrapolation:
            feasible &= df["in_domain"].to_numpy()
        df["feasible"] = feasible & self.feasible({c.column: df[c.column].to_numpy() for c in self.constraints})
        return df

    def describe(self) -> str:
        """One line: law, device, precision and the budgets, in human units."""
        parts = [f"law {self.law.name}", f"device {self.device.id}", f"precision {self.precision.name}",
                 f"engine {self.engine}"]  # fmt: skip
        parts += [c.describe() for c in self.constraints if not isinstance(c, Capacity)]
        return ", ".join(parts)


__all__ = ["DEFAULT_LAW", "PHASES", "PHASE_COLUMN", "Problem", "RooflawError"]
