"""``Problem``: minimise a loss law subject to budgets (latency, memory, energy) on a device, over a space."""

from __future__ import annotations

import copy
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import RooflawError, bad
from .budgets import PHASE_COLUMN, PHASES, Constraint, EnergyBudget, LatencyBudget, MemoryBudget

#: The CLI's defaults (``rooflaw solve --help``), shared by the API.
DEFAULT_LAW = "paper-2602.10377"
DEFAULT_SPACE = "paper"
DEFAULT_PRECISION = "fp16"
DEFAULT_PRESET = "full"


class _DefaultWorkload:
    """Marks the default workload, so that an explicit ``workload=None`` is refused rather than replaced."""

    def __repr__(self) -> str:
        return "Workload()"


_DEFAULT = _DefaultWorkload()
_LEGACY = {"latency": "latency_budget", "memory": "memory_budget", "energy": "energy_budget"}


@dataclass(frozen=True)
class Problem:
    """min loss(arch) over ``space`` s.t. every constraint of ``constraints`` and the device's memory capacity.

    Every field is validated (and normalised) on construction; bad input raises :class:`RooflawError` naming the
    field and the value. Accepted forms:

    - ``law``: a :class:`LossLaw`, a built-in name or a law expression (default: the paper's law);
    - ``device``: a :class:`Device`, a catalog id (``"jetson-agx-orin-64gb"``, ``id@mode``) or a device file path;
    - ``space``: a :class:`Space`, a built-in name or a space TOML path; ``workload``: a :class:`Workload` or a
      mapping of its fields; ``precision``: a :class:`Precision` or its text (``fp16``, ``w4a16kv8``);
    - ``constraints``: :class:`LatencyBudget`, :class:`MemoryBudget`, :class:`EnergyBudget` objects; or the
      keywords ``latency_budget`` (s or ``"20ms"``) with ``phase``, ``memory_budget`` (bytes or ``"8GB"``),
      ``energy_budget`` (J or ``"5J"``), which build the same objects. The memory capacity of the device always
      applies; a memory budget can only tighten it.

    ``preset`` is the cost model that judges feasibility and ``engine`` the serving stack's profile it applies
    (``tensorrt-llm``, ``vllm``, ``llama.cpp``, ``gpt-fast``, ``torch-eager``, ``ideal`` = pure roofline, ``device``;
    default: the device's own, as ``rooflaw evaluate`` without ``--engine``; the ``paper`` presets apply none);
    ``align`` the multiple every answer's d_model and FFN size must be (every solver searches only those points,
    see :meth:`on_aligned_space`; None: the space as declared);
    ``tokens`` the training token count D for laws that use it. After construction the keyword attributes
    (``latency_budget``, ``phase``, ``memory_budget``, ``energy_budget``) and ``constraints`` agree; budgets are SI.
    Architectures outside the domain the law was fitted on are infeasible unless ``allow_extrapolation``.
    """

    law: Any = DEFAULT_LAW
    device: Any = None
    space: Any = DEFAULT_SPACE
    workload: Any = _DEFAULT
    precision: Any = DEFAULT_PRECISION
    latency_budget: float | str | None = None
    phase: str | None = None
    memory_budget: float | str | None = None
    energy_budget: float | str | None = None
    preset: str = DEFAULT_PRESET
    align: int | None = None
    tokens: float | None = None
    constraints: tuple[Constraint, ...] = ()
    allow_extrapolation: bool = False
    engine: str | None = None
    #: meet the latency budget at this quantile of the phase's held-out error band (``None``: the prediction)
    confidence: float | None = None

    def __post_init__(self) -> None:
        from ..arch.space import Space, get_space
        from ..constraints import PRESETS, Precision, Workload
        from ..devices import Device, get_device
        from ..objectives import LossLaw, get_law

        put = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        # law
        if isinstance(self.law, str):
            put("law", get_law(self.law))
        elif not isinstance(self.law, LossLaw):
            raise bad("law", self.law, "expected a LossLaw, a built-in law name or a law expression")
        # device
        if self.device is None:
            raise bad("device", None, "a device is required (a Device, a catalog id or a device file)")
        if isinstance(self.device, (str, os.PathLike)):
            put("device", get_device(self.device))
        elif not isinstance(self.device, Device):
            raise bad("device", self.device, "expected a Device, a catalog id or a path to a device file")
        # space
        if isinstance(self.space, (str, os.PathLike)):
            put("space", get_space(os.fspath(self.space)))
        elif not isinstance(self.space, Space):
            raise bad("space", self.space, "expected a Space, a built-in space name or a space file")
        # workload
        if self.workload is _DEFAULT:
            put("workload", Workload())
        elif isinstance(self.workload, Mapping):
            try:
                put("workload", Workload(**dict(self.workload)))
            except TypeError as e:
                raise bad("workload", dict(self.workload), str(e)) from None
        elif not isinstance(self.workload, Workload):
            raise bad("workload", self.workload, "expected a Workload or a mapping of its fields")
        # precision
        if not isinstance(self.precision, (str, Precision)):
            raise bad("precision", self.precision, "expected a precision such as fp16, int8 or w4a16kv8")
        put("precision", Precision.parse(self.precision))
        if not isinstance(self.preset, str) or self.preset not in PRESETS:
            raise bad("preset", self.preset, f"must be one of {', '.join(PRESETS)}")
        from ..constraints.engines import ENGINE_NAMES, default_engine

        if self.engine is None:
            put("engine", default_engine(self.device))
        elif not isinstance(self.engine, str) or self.engine not in ENGINE_NAMES:
            raise bad("engine", self.engine, f"unknown engine profile; use one of {', '.join(ENGINE_NAMES)}")
        if self.align is not None and (isinstance(self.align, bool) or not isinstance(self.align, int)
                                       or self.align <= 0):  # fmt: skip
            raise bad("align", self.align, "must be a positive integer (or None: the space's own values)")
        if self.tokens is not None:
            if isinstance(self.tokens, bool) or not isinstance(self.tokens, (int, float)):
                raise bad("tokens", self.tokens, "must be a positive, finite number of training tokens")
            if not (math.isfinite(self.tokens) and self.tokens > 0):
                raise bad("tokens", self.tokens, "must be a positive, finite number of training tokens")
        if self.tokens is not None and not self.allow_extrapolation:
            out = self.law.outside({"D": self.tokens})
            if out:
                raise bad("tokens", self.tokens, f"outside the domain law {self.law.name} was fitted on: {out[0]}; "
                          "allow_extrapolation (--allow-extrapolation) to use it anyway")  # fmt: skip
        if not isinstance(self.allow_extrapolation, bool):
            raise bad("allow_extrapolation", self.allow_extrapolation, "must be True or False")
        from ..objectives.precision_law import bind_precision

        # a precision-aware law (P_w/P_a/P_kv bits) takes its bits from this problem's precision
        put("law", bind_precision(self.law, self.precision, self.allow_extrapolation))
        self._merge_constraints()

    def _merge_constraints(self) -> None:
        """Make ``constraints`` and the keyword budgets two views of the same objects."""
        put = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        given = self.constraints
        if isinstance(given, Constraint):
            given = (given,)
        if not isinstance(given, Iterable) or isinstance(given, (str, bytes, Mapping)):
            raise bad("constraints", given, "expected LatencyBudget / MemoryBudget / EnergyBudget objects")
        objs: dict[str, Constraint] = {}
        for c in given:
            if not isinstance(c, Constraint):
                raise bad("constraints", c, "expected LatencyBudget / MemoryBudget / EnergyBudget objects")
            if c.kind in objs:
                raise bad("constraints", c, f"a second {c.kind} budget; give one per kind")
            objs[c.kind] = c
        if self.phase is not None and self.phase not in PHASES:
            raise bad("phase", self.phase, f"must be one of {', '.join(PHASES)}")
        kw = {"latency": self.latency_budget, "memory": self.memory_budget, "energy": self.energy_budget}
        for kind, value in kw.items():
            if value is None:
                continue
            if kind in objs:
                raise bad(_LEGACY[kind], value, f"given twice (also as {objs[kind]!r} in constraints)")
            if kind == "latency":
                objs[kind] = LatencyBudget(self.phase or "decode", value, self.confidence)
            elif kind == "memory":
                objs[kind] = MemoryBudget(value)
            else:
                objs[kind] = EnergyBudget(value)
        lat = objs.get("latency")
        if self.confidence is not None:
            from ..constraints.bands import check_confidence

            put("confidence", check_confidence(self.confidence))
            if lat is not None and lat.confidence is None:
                objs["latency"] = lat = LatencyBudget(lat.phase, lat.seconds, self.confidence)
        if lat is not None and self.phase is not None and lat.phase != self.phase:
            raise bad("phase", self.phase, f"differs from the latency budget's phase {lat.phase!r}")
        put("constraints", tuple(objs[k] for k in ("latency", "memory", "energy") if k in objs))
        put("phase", lat.phase if lat is not None else (self.phase or "decode"))
        put("latency_budget", lat.seconds if lat is not None else None)
        put("memory_budget", objs["memory"].bound if "memory" in objs else None)
        put("energy_budget", objs["energy"].bound if "energy" in objs else None)
        if "energy" in objs and hasattr(self.device, "has_energy") and not self.device.has_energy:
            raise bad(
                "energy_budget", objs["energy"].bound,
                f"device {self.device.id} has no power_peak_w (nor energy_per_flop_pj and energy_per_byte_pj): "
                "its energy is n/a; add them to the device file, or calibrate with --power",
            )  # fmt: skip

    # ---- views used by the solvers -------------------------------------------------------------------------
    @property
    def latency_bound(self) -> float | None:
        """The latency bound the solvers meet: the budget, divided by the confidence factor when one is set."""
        lat = next((c for c in self.constraints if c.kind == "latency"), None)
        return float(lat.bound) if lat is not None else None

    @property
    def latency_column(self) -> str:
        """The cost column of the latency phase (``prefill_s``, ``decode_s`` or ``total_s``)."""
        return PHASE_COLUMN[self.phase]

    @property
    def capacity(self) -> float:
        """Effective memory limit in bytes: the device capacity, or the memory budget if tighter."""
        cap = float(self.device.memory_capacity)
        return min(cap, self.memory_budget) if self.memory_budget is not None else cap

    def budgets(self) -> dict[str, tuple[str, float]]:
        """Active constraints: kind -> (cost column, bound in SI). Memory is always there (the capacity)."""
        out = {"memory": ("memory_bytes", self.capacity)}
        for c in self.constraints:
            if c.kind != "memory":
                out[c.kind] = (c.column, float(c.bound))
        return out

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

    def constraint_label(self, kind: str) -> str:
        """``capacity`` for the memory constraint when the device's capacity (not a budget) binds, else ``kind``."""
        if kind == "memory":
            cap = float(self.device.memory_capacity)
            return "memory" if self.memory_budget is not None and self.memory_budget < cap else "capacity"
        return kind

    def evaluate(self, columns: Mapping[str, Any]) -> Any:
        """Loss, every cost column, ``feasible`` and ``latency_s`` (of the problem's phase) as a DataFrame."""
        import numpy as np
        import pandas as pd

        from ..constraints import evaluate_columns
        from ..objectives import law_inputs

        res = evaluate_columns(columns, self.device, self.workload, self.precision, self.preset, engine=self.engine)
        df = pd.DataFrame({k: np.asarray(v) for k, v in columns.items()})
        for k, v in res.items():
            df[k] = v
        from ..constraints import complete_columns

        # every architecture column (defaults filled), so laws over parameter counts (N, N_active, ...) evaluate
        inputs = law_inputs(complete_columns(columns), tokens=self.tokens)
        df["loss"] = self.law.evaluate(inputs)
        df["latency_s"] = df[self.latency_column]
        df["in_domain"] = np.broadcast_to(self.law.in_domain(inputs), (len(df),))
        feasible = np.isfinite(df["loss"].to_numpy())
        if not self.allow_extrapolation:
            feasible &= df["in_domain"].to_numpy()
        for col, bound in self.budgets().values():
            feasible &= df[col].to_numpy() <= bound
        df["feasible"] = feasible
        return df

    def describe(self) -> str:
        """One line: law, device, precision and the budgets, in human units."""
        parts = [f"law {self.law.name}", f"device {self.device.id}", f"precision {self.precision.name}",
                 f"engine {self.engine}"]  # fmt: skip
        parts += [c.describe() for c in self.constraints]
        return ", ".join(parts)


__all__ = ["DEFAULT_LAW", "PHASES", "PHASE_COLUMN", "Problem", "RooflawError"]
