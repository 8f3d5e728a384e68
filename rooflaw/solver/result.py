"""``Result``: what every solver method returns (attribute and mapping access, as scipy's ``OptimizeResult``)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..arch.architecture import Architecture

if TYPE_CHECKING:
    import pandas as pd

#: Architecture fields a result row carries.
ARCH_FIELDS = ("layers", "d_model", "heads", "kv_heads", "head_dim", "ffn", "experts", "top_k")


class MappingAccess(Mapping):
    """``res["loss"]`` as well as ``res.loss``; ``keys()`` are the dataclass fields plus ``extra_keys``."""

    extra_keys: tuple[str, ...] = ()

    def keys(self):  # a list (indexable), not the KeysView Mapping.keys returns; unannotated so mypy lets it differ
        return [f.name for f in dataclasses.fields(self)] + list(self.extra_keys)

    def __getitem__(self, key: str) -> Any:
        if key not in self.keys():
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())

    # identity, not field-by-field (fields hold DataFrames)
    __eq__ = object.__eq__
    __hash__ = object.__hash__


class FrontierView(MappingAccess):
    """What every frontier-bearing result shares: ``frontier_size`` and ``to_frame()`` (the frontier)."""

    extra_keys = ("frontier_size",)
    frontier: Any  # a DataFrame: a field of every subclass (a plain annotation here, not a dataclass field)

    @property
    def frontier_size(self) -> int:
        return len(self.frontier)

    def to_frame(self) -> Any:
        """The Pareto frontier (a copy), one row per architecture, SI units."""
        return self.frontier.copy()


@dataclass(eq=False)
class Result(MappingAccess):
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
    frontier: pd.DataFrame | None = None  # noqa: F821
    timings: dict[str, float] = field(default_factory=dict)
    explain: str | None = None
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    extra_keys = ("perplexity", "seconds")

    @property
    def perplexity(self) -> float:
        """``exp(loss)``; ``inf`` when that overflows a double (loss > ~709)."""
        return math.exp(self.loss) if self.loss < 709.78 else math.inf

    @property
    def seconds(self) -> float:
        return float(sum(self.timings.values()))

    def to_dict(self) -> dict[str, Any]:
        a = self.architecture
        arch = None
        if a is not None:
            arch = {k: getattr(a, k) for k in ARCH_FIELDS}
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

    def to_frame(self) -> pd.DataFrame:
        """One row: method, the architecture (fields, r, rho, gqa, params), loss, latencies (s), memory (B), energy (J),
        the binding constraint and each slack (``slack_<constraint>``)."""
        import pandas as pd

        row: dict[str, Any] = {"method": self.method}
        a = self.architecture
        if a is not None:
            row.update({k: getattr(a, k) for k in ARCH_FIELDS})
            row.update(r=a.r, rho=a.rho, gqa=a.gqa, params_total=a.params_total, params_active=a.params_active)
        row.update(loss=self.loss, perplexity=self.perplexity)
        row.update({f"{k}_s": v for k, v in self.latency_s.items()})
        row.update(memory_bytes=self.memory_bytes, energy_j=self.energy_j, binding=self.binding, regime=self.regime)
        row.update({f"slack_{k}": v for k, v in self.slack.items()})
        return pd.DataFrame([row])


__all__ = ["ARCH_FIELDS", "MappingAccess", "Result"]
