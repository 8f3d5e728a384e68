"""``solve_gp``: the continuous relaxation as a geometric program, over the problem's cost-model preset.

``full`` builds one GP per branch from the full cost model (:mod:`.gp_full`); ``paper`` the theory-mode GP
(:mod:`.gp`), the relaxation the closed form solves. Dependencies run one way: this module → gp_full → gp.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...errors import RooflawError
from .result import RelaxationResult

GP_PRESETS = ("full", "paper")


def solve_gp(
    problem: Any, fix: Mapping[str, float] | None = None, solver: str | None = None, preset: str | None = None
) -> RelaxationResult:
    """Solve ``problem``'s relaxation as a GP (cvxpy DGP): a certified global optimum of the relaxation.

    Returns a :class:`~.result.RelaxationResult` (``x`` = l, d, r, rho, gqa, ``loss``, ``active`` constraints,
    ``values``, ``budgets``, ``status``, ``solver``, ``seconds``, ``preset``, ``notes``); raises
    :class:`~rooflaw.errors.Infeasible` when the GP is.
    ``fix`` pins variables; ``solver`` names a cvxpy solver; ``preset`` (default ``problem.preset``) is ``full``
    (the full cost model's roofline) or ``paper`` (theory mode).
    """
    preset = preset or problem.preset
    if preset not in GP_PRESETS:
        raise RooflawError(f"preset={preset!r}: the GP relaxation exists for {' and '.join(GP_PRESETS)}")
    if preset == "full":
        from .gp_full import solve_gp_full

        return solve_gp_full(problem, fix=fix, solver=solver)
    from .gp import solve_gp_theory

    return solve_gp_theory(problem, fix=fix, solver=solver)


__all__ = ["GP_PRESETS", "solve_gp"]
