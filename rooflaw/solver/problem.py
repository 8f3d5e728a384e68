"""``Problem``: minimise a loss law subject to latency / memory / energy budgets on a device."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..constraints import Precision, Workload, evaluate_columns
from ..devices.device import Device
from ..errors import bad

PHASES = ("prefill", "decode", "total")
PHASE_COLUMN = {"prefill": "prefill_s", "decode": "decode_s", "total": "total_s"}


@dataclass
class Problem:
    """min loss(arch) s.t. latency(phase) ≤ latency_budget, memory ≤ memory_budget, energy ≤ energy_budget.

    Memory always has to fit the device's capacity (a hard constraint); ``memory_budget`` can
    only tighten it. Budgets are in SI units (s, bytes, J); ``None`` means unconstrained.
    ``space`` is a :class:`~rooflaw.arch.space.Space` (or its name); ``tokens`` is the training
    token count D for laws that use it. ``preset`` is the cost model that judges feasibility.
    Architectures outside the domain the law was fitted on are infeasible unless ``allow_extrapolation``.
    """

    law: Any
    device: Device
    space: Any = "paper"
    workload: Workload = field(default_factory=Workload)
    precision: str | Precision = "fp16"
    latency_budget: float | None = None
    phase: str = "decode"
    memory_budget: float | None = None
    energy_budget: float | None = None
    preset: str = "full"
    align: int = 128
    tokens: float | None = None
    allow_extrapolation: bool = False

    def __post_init__(self) -> None:
        from ..objectives import get_law

        if isinstance(self.law, str):
            self.law = get_law(self.law)
        if self.phase not in PHASES:
            raise bad("phase", self.phase, f"must be one of {', '.join(PHASES)}")
        for key in ("latency_budget", "memory_budget", "energy_budget"):
            v = getattr(self, key)
            if v is not None and not (isinstance(v, (int, float)) and np.isfinite(v) and v > 0):
                raise bad(key, v, "must be a positive, finite number")
        if not isinstance(self.align, int) or self.align <= 0:
            raise bad("align", self.align, "must be a positive integer")
        self.precision = Precision.parse(self.precision)
        if self.tokens is not None and not self.allow_extrapolation:
            out = self.law.outside({"D": self.tokens})
            if out:
                raise bad("tokens", self.tokens, f"outside the domain law {self.law.name} was fitted on: {out[0]}; "
                          "allow_extrapolation (--allow-extrapolation) to use it anyway")  # fmt: skip
        if isinstance(self.space, str):
            from ..arch.space import get_space

            self.space = get_space(self.space)

    @property
    def latency_column(self) -> str:
        return PHASE_COLUMN[self.phase]

    @property
    def capacity(self) -> float:
        """Effective memory limit in bytes: the device capacity, or the budget if tighter."""
        cap = float(self.device.memory_capacity)
        return min(cap, self.memory_budget) if self.memory_budget is not None else cap

    def budgets(self) -> dict[str, tuple[str, float]]:
        """Active constraints: name -> (column, bound)."""
        out = {"memory": ("memory_bytes", self.capacity)}
        if self.latency_budget is not None:
            out["latency"] = (self.latency_column, float(self.latency_budget))
        if self.energy_budget is not None:
            out["energy"] = ("energy_j", float(self.energy_budget))
        return out

    def evaluate(self, columns: Mapping[str, Any]) -> pd.DataFrame:
        """Loss, every cost column, ``feasible`` and ``latency_s`` (of the problem's phase), vectorised."""
        from ..objectives import law_inputs

        res = evaluate_columns(columns, self.device, self.workload, self.precision, self.preset)
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
        parts = [f"law {self.law.name}", f"device {self.device.id}", f"precision {self.precision.name}"]
        if self.latency_budget is not None:
            parts.append(f"{self.phase} latency ≤ {self.latency_budget * 1e3:.4g} ms")
        if self.memory_budget is not None:
            parts.append(f"memory ≤ {self.memory_budget / 1e9:.4g} GB")
        if self.energy_budget is not None:
            parts.append(f"energy ≤ {self.energy_budget:.4g} J")
        return ", ".join(parts)
