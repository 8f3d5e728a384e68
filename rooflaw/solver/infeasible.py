"""The one infeasibility report: every solver raises :class:`Infeasible` through :func:`report`.

The message names the binding constraint, the smallest value any architecture of the searched set reaches and
the bound, in human units: ``decode latency ≥ 31.2 ms for every architecture in space 'paper' (budget 20 ms)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import Infeasible

ORDER = ("latency", "memory", "energy")


def quantity(problem: Any, kind: str) -> str:
    """What a constraint bounds, in words (``decode latency``, ``memory``, ``energy``)."""
    return {"latency": f"{problem.phase} latency", "memory": "memory", "energy": "energy"}.get(kind, kind)


def human(kind: str, value: float) -> str:
    """A constraint value in the unit people read it in (ms, GB, J)."""
    if kind == "latency":
        return f"{value * 1e3:.4g} ms"
    if kind == "memory":
        return f"{value / 1e9:.4g} GB"
    return f"{value:.4g} J"


def report(
    problem: Any,
    smallest: Mapping[str, float],
    budgets: Mapping[str, float],
    where: str,
    closest: Mapping[str, float] | None = None,
) -> Infeasible:
    """The :class:`Infeasible` for a problem whose budgets nothing in ``where`` meets.

    ``smallest``: per constraint kind, the smallest value reached (SI); ``budgets``: kind -> bound (SI); ``where``
    says what was searched (``in space 'paper'``, ``of the continuous relaxation of space 'paper' (theory model)``).
    The binding constraint is the one furthest above its bound. When each bound alone can be met but not all
    together, ``closest`` (kind -> the value of the least-violating candidate) names the constraint it misses most.
    """
    over = {k: smallest[k] / budgets[k] for k in budgets if k in smallest and smallest[k] > budgets[k]}
    if over:
        k = max(over, key=over.get)
        label = problem.constraint_label(k)
        what = "device capacity" if label == "capacity" else "budget"
        return Infeasible(
            f"{quantity(problem, k)} ≥ {human(k, smallest[k])} for every architecture {where} "
            f"({what} {human(k, budgets[k])}{_at_confidence(problem, k)})",
            binding=label,
            smallest=float(smallest[k]),
            budget=float(budgets[k]),
        )
    kinds = [k for k in ORDER if k in budgets]
    names = " and ".join(problem.constraint_label(k) for k in kinds)
    if closest:
        k = max((k for k in kinds if k in closest), key=lambda k: closest[k] / budgets[k])
        return Infeasible(
            f"no architecture {where} meets {names} together; the closest needs {quantity(problem, k)} "
            f"{human(k, closest[k])} (budget {human(k, budgets[k])})",
            binding=problem.constraint_label(k),
            smallest=float(closest[k]),
            budget=float(budgets[k]),
        )
    return Infeasible(f"no architecture {where} meets {names} together", binding="+".join(kinds))


def _at_confidence(problem: Any, kind: str) -> str:
    """``: 20 ms at the 90 % quantile, × 1.48`` when a latency bound carries a confidence factor."""
    lat = next((c for c in getattr(problem, "constraints", ()) if c.kind == "latency"), None)
    if kind != "latency" or lat is None or getattr(lat, "confidence", None) is None:
        return ""
    return f": {human(kind, lat.seconds)} met at the {lat.confidence:.0%} quantile, prediction × {lat.factor:.3g}"


def no_finite_loss(problem: Any, where: str) -> Infeasible:
    """The law gives no finite loss anywhere in ``where``."""
    return Infeasible(f"the loss law gives no finite loss for any architecture {where}", binding="loss")


def space_name(problem: Any) -> str:
    return getattr(problem.space, "name", "space")


__all__ = ["human", "no_finite_loss", "quantity", "report", "space_name"]
