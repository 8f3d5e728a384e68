"""The theorems of the continuous relaxation as sympy expressions, with the symbols they are written in.

:func:`derive_theorems` is the public door to :func:`rooflaw.solver.relaxation.kkt.theorems`: everything is derived
from the law's own expression and the theory-mode cost model (no formula of the paper is typed in).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import sympy as sp

from . import kkt as K


@dataclass(frozen=True)
class DerivedTheorems:
    """Theorem 5.1–5.3 and Table 22 of arXiv:2602.10377, derived for one law.

    ``theorems`` holds the expressions (``rho_latency_at_min``, ``dL_drho``, ``rho_memory``, ``rho_memory_bound``,
    ``rho_dual[phase]``, ``l_star[constraint]``); ``variables`` maps l, d, r, rho, gqa to their symbols; ``budgets``
    maps latency (s), memory (bytes) and energy (J) to the budget symbols; ``constants`` maps B, S_in, S_out, b_w,
    b_kv, pi (FLOP/s), beta (B/s), P_idle, e_F, e_B to theirs.
    """

    theorems: Any
    variables: Mapping[str, sp.Symbol]
    budgets: Mapping[str, sp.Symbol]
    constants: Mapping[str, sp.Symbol]


def derive_theorems(law: Any) -> DerivedTheorems:
    """Derive (or load from the cache) the relaxation's theorems for ``law`` (a :class:`LossLaw` or its name)."""
    if isinstance(law, str):
        from ...objectives import get_law

        law = get_law(law)
    return DerivedTheorems(
        theorems=K.theorems(law),
        variables=dict(K.X),
        budgets=dict(K.BUDGET),
        constants={s.name: s for s in K.CONSTS},
    )


__all__ = ["DerivedTheorems", "derive_theorems"]
