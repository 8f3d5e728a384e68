"""Conic solver selection for the geometric programs: Clarabel first (with a ladder of settings),
then the other exponential-cone solvers installed with cvxpy (SCS, ECOS). When every one fails the
error says what was tried (exit 4: a failure of the numerical solvers, not of the user's input)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from ...errors import ExternalError

#: Exponential-cone solvers tried after the requested one, in order (those installed).
FALLBACKS = ("CLARABEL", "SCS", "ECOS")
#: Settings per fallback solver (SCS: tighter than its defaults, with room to converge).
_SETTINGS: dict[str, tuple[dict[str, Any], ...]] = {
    "SCS": ({"eps_abs": 1e-9, "eps_rel": 1e-9, "max_iters": 200_000}, {}),
    "ECOS": ({"abstol": 1e-9, "reltol": 1e-9, "max_iters": 500}, {}),
}


def solve_with_fallback(
    prob: Any, solver: str | None, clarabel_ladder: Sequence[dict[str, Any]] = ({},), gp: bool = True
) -> str:
    """Solve ``prob`` (a DGP, or with ``gp=False`` a DCP program); returns its status (``optimal``,
    ``infeasible``, ``optimal_inaccurate``).

    ``solver`` None or ``CLARABEL``: Clarabel over ``clarabel_ladder``, then SCS and ECOS if installed.
    Another named solver is used alone. Raises :class:`ExternalError` naming every solver tried.
    """
    import cvxpy as cp

    installed = set(cp.installed_solvers())
    order: list[str | None] = [solver] if solver not in (None, "CLARABEL") else [s for s in FALLBACKS if s in installed]
    if not order:
        order = [None]  # cvxpy's own choice
    tried: list[str] = []
    best = None
    for name in order:
        ladder = clarabel_ladder if name == "CLARABEL" else _SETTINGS.get(name or "", ({},))
        why = "no solution"
        for opts in ladder:
            kw = {"solver": name, **opts} if name else {}
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    prob.solve(gp=gp, **kw)
            except (cp.error.SolverError, ValueError, ArithmeticError) as e:
                why = str(e).splitlines()[0][:120] if str(e) else type(e).__name__
                continue
            if prob.status in ("optimal", "infeasible"):
                return prob.status
            why = f"status {prob.status}"
            if prob.status == "optimal_inaccurate" and best is None:
                best = prob.status
        tried.append(f"{name or 'default'} ({why})")
    if best is not None:
        return best
    raise ExternalError(f"every GP solver failed: {'; '.join(tried)}; try --method closed-form or exhaustive")
