"""``RelaxationResult``: what a geometric-program relaxation returns (theory-mode or full-preset), typed."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RelaxationResult:
    """The continuous optimum of a relaxation solved as a GP.

    ``x``: the optimum (l, d, r, rho, gqa); ``loss`` there; ``active``: the relaxed constraints (latency, memory,
    energy) at their bound; ``values`` / ``budgets``: each relaxed constraint's value at ``x`` and its bound (SI);
    ``duals``: their multipliers; ``constant``: the law's constant term; ``status`` / ``solver``: cvxpy's; ``preset``:
    the cost model relaxed (``full`` or ``paper``); ``seconds`` (of which ``build_seconds`` and ``solve_seconds``);
    ``notes``. Full preset only: ``branch`` (the best of ``branches``: loss or status per dense/MoE branch) and
    ``all_values`` (every cost column at ``x``).
    """

    x: dict[str, float]
    loss: float
    active: tuple[str, ...]
    values: dict[str, float]
    budgets: dict[str, float]
    status: str
    solver: str
    duals: dict[str, float]
    constant: float
    preset: str
    seconds: float
    build_seconds: float
    solve_seconds: float
    notes: list[str] = field(default_factory=list)
    branch: str | None = None
    branches: dict[str, Any] = field(default_factory=dict)
    all_values: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Every field, JSON-ready (``active`` as a list)."""
        out = dataclasses.asdict(self)
        out["active"] = list(self.active)
        return out


__all__ = ["RelaxationResult"]
