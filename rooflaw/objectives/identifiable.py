"""Can a law's parameters be fitted from these points at all? Refuse data that cannot tell them
apart (fewer distinct points than parameters, a variable that never changes) instead of reporting
an arbitrary "converged" optimum."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..errors import RooflawError


def check_identifiable(law_name: str, params: tuple[str, ...], x: Mapping[str, np.ndarray]) -> None:
    """Raise a one-line :class:`RooflawError` when ``x`` (variable -> values) cannot identify ``params``."""
    if not params:
        raise RooflawError(f"law {law_name} has no parameters to fit")
    cols = [np.asarray(v, dtype=float).ravel() for v in x.values()]
    n = len(cols[0]) if cols else 0
    for name, v in zip(x, cols, strict=True):
        if n > 1 and np.all(v == v[0]):
            raise RooflawError(
                f"not identifiable: variable {name} is {v[0]:.6g} in all {n} rows, so the parameters of its "
                "terms cannot be fitted; use data where it varies"
            )
    distinct = len(np.unique(np.stack(cols, axis=1), axis=0)) if cols and n else 0
    if distinct < len(params) and distinct < n:  # (n < len(params) alone: the fitter says so itself)
        raise RooflawError(
            f"not identifiable: {distinct} distinct data point(s) for {len(params)} parameters "
            f"({', '.join(params)}) of law {law_name}; need at least {len(params)}"
        )
