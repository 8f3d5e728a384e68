"""``Result``: what every solver method returns."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..arch.architecture import Architecture


@dataclass
class Result:
    """The answer to a :class:`~rooflaw.solver.problem.Problem`. SI units.

    ``architecture`` is the discrete, hardware-aligned choice; ``continuous`` the relaxed optimum
    (l, d, r, rho, gqa) where the method has one; ``binding`` names the constraint that binds
    (``latency``, ``memory``, ``energy``, ``capacity`` or ``none``) and ``slack`` gives, per
    constraint, (budget − value)/budget of the chosen architecture. ``frontier`` is a Pareto
    table where the method builds one. ``timings`` are seconds per stage.
    """

    method: str
    architecture: Architecture | None
    loss: float
    latency_s: dict[str, float]
    memory_bytes: float
    energy_j: float
    binding: str = "none"
    slack: dict[str, float] = field(default_factory=dict)
    regime: str | None = None
    continuous: dict[str, float] | None = None
    continuous_loss: float | None = None
    frontier: pd.DataFrame | None = None
    timings: dict[str, float] = field(default_factory=dict)
    explain: str | None = None
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def perplexity(self) -> float:
        return math.exp(self.loss)

    @property
    def seconds(self) -> float:
        return float(sum(self.timings.values()))

    def to_dict(self) -> dict[str, Any]:
        a = self.architecture
        arch = None
        if a is not None:
            arch = {
                k: getattr(a, k)
                for k in ("layers", "d_model", "heads", "kv_heads", "head_dim", "ffn", "experts", "top_k")
            }
            arch.update(r=a.r, rho=a.rho, gqa=a.gqa, params_total=a.params_total, params_active=a.params_active)
            if not a.uniform:
                arch.update(layer_pattern=a.pattern, layer_types=list(a.layer_types), window=a.window)
        out = {
            "method": self.method,
            "regime": self.regime,
            "binding": self.binding,
            "continuous": self.continuous,
            "continuous_loss": self.continuous_loss,
            "architecture": arch,
            "loss": self.loss,
            "perplexity": self.perplexity,
            "latency_s": self.latency_s,
            "memory_bytes": self.memory_bytes,
            "energy_j": self.energy_j,
            "slack": self.slack,
            "seconds": self.seconds,
            "timings": self.timings,
            "notes": self.notes,
        }
        out.update(self.extra)
        if self.explain is not None:
            out["explain"] = self.explain
        return out
