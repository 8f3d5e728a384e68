"""The one infeasibility report: every solver raises :class:`Infeasible` through :func:`report`.

The message names the binding constraint, the smallest value any architecture of the searched set reaches and
the bound, in human units: ``decode latency ≥ 31.2 ms for every architecture in space 'paper' (budget 20 ms)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import Infeasible


def quantity(problem: Any, kind: str) -> str:
    """What the problem's constraint of ``kind`` bounds, in words (``decode latency``, ``TPOT``, ``memory``)."""
    c = problem.constraint(kind)
    return c.quantity if c is not None else kind


def report(
    problem: Any,
    smallest: Mapping[str, float],
    where: str,
    closest: Mapping[str, float] | None = None,
) -> Infeasible:
    """The :class:`Infeasible` for a problem whose constraints nothing in ``where`` meets.

    ``smallest``: per constraint kind (of ``problem.constraints``), the smallest value reached of its ceiling form
    (:meth:`~rooflaw.solver.budgets.Constraint.as_upper`: the quantity itself for every budget, 1/TPOT's column for
    a throughput floor); ``where`` says what was searched (``in space 'paper'``, ``of the continuous relaxation of
    space 'paper' (theory model)``). The binding constraint is the one furthest past its bound. When each bound
    alone can be met but not all together, ``closest`` (kind -> the least-violating candidate's value, same form)
    names the constraint it misses most. Messages and ``Infeasible.smallest`` give the quantity itself.
    """
    cons = [c for c in problem.constraints if c.kind in smallest]
    over = {c.kind: smallest[c.kind] / c.as_upper()[1] for c in cons if smallest[c.kind] > c.as_upper()[1]}
    if over:
        c = problem.constraint(max(over, key=lambda k: over[k]))
        best = c.from_ceiling(smallest[c.kind])
        what = "device capacity" if c.label == "capacity" else "budget"
        return Infeasible(
            f"{c.quantity} {'≥' if c.upper else '≤'} {c.human(best)} for every architecture {where} "
            f"({what} {c.human(c.bound)}{_at_confidence(c)})",
            binding=c.label,
            smallest=float(best),
            budget=float(c.bound),
        )
    names = " and ".join(c.label for c in cons)
    near = [c for c in cons if closest and c.kind in closest]
    if near:
        assert closest is not None
        c = max(near, key=lambda c: closest[c.kind] / c.as_upper()[1])
        got = c.from_ceiling(closest[c.kind])
        return Infeasible(
            f"no architecture {where} meets {names} together; the closest needs {c.quantity} "
            f"{c.human(got)} (budget {c.human(c.bound)})",
            binding=c.label,
            smallest=float(got),
            budget=float(c.bound),
        )
    return Infeasible(f"no architecture {where} meets {names} together", binding="+".join(c.kind for c in cons))


def relaxed_report(problem: Any, smallest: Mapping[str, float], where: str) -> Infeasible:
    """:func:`report` for a relaxation: ``smallest`` per relaxed kind (latency, memory, energy) in the relaxation's
    terms, mapped back to the ceiling form of the constraints they come from (a TPOT budget's decode sum / S_out)."""
    from .budgets import relaxation

    rel = relaxation(problem.constraints, problem.workload)
    return report(problem, {c.kind: smallest[k] / r.scale for k, (r, c) in rel.items() if k in smallest}, where)


def _at_confidence(c: Any) -> str:
    """``: 20 ms met at the 90 % quantile, prediction × 1.48`` when a latency-type bound carries a confidence."""
    if getattr(c, "confidence", None) is None:
        return ""
    return f": {c.human(c.seconds)} met at the {c.confidence:.0%} quantile, prediction × {c.factor:.3g}"


def no_finite_loss(problem: Any, where: str) -> Infeasible:
    """The law gives no finite loss anywhere in ``where``."""
    return Infeasible(f"the loss law gives no finite loss for any architecture {where}", binding="loss")


def space_name(problem: Any) -> str:
    return getattr(problem.space, "name", "space")


__all__ = ["no_finite_loss", "quantity", "relaxed_report", "report", "space_name"]
