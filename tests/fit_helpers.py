"""A check shared by the assembly tests: the efficiency fit's flat arrays, its per-case predictor and ``predict``
price a set of published cases alike."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest


def assert_flat_fit_matches(pick: Sequence[Any], feats: Sequence[Any], seed: int,
                            rel: Callable[[Any], float] = lambda c: 1e-9,
                            adjust: Callable[[np.ndarray, list], None] | None = None) -> None:  # fmt: skip
    """Random figures (seeded; ``adjust(x, names)`` may set some): :class:`FlatCases` equals the per-case predictor
    to 1e-12, and ``predict`` with those figures as a fit result equals it to ``rel(case)``."""
    from rooflaw.constraints import fit_efficiency as fe
    from rooflaw.constraints.fit_arrays import FlatCases

    pick2, P = fe.params_for(list(pick), list(feats))
    x = np.log(np.random.default_rng(seed).uniform(0.05, 0.95, len(P.names)))
    if adjust is not None:
        adjust(x, P.names)
    want = [fe._predict(x, P, c, f) for c, f in zip(pick2, feats, strict=True)]
    assert FlatCases(P, pick2, feats).predict(x) == pytest.approx(want, rel=1e-12)
    engs: dict = {}
    prompts: dict = {}
    for (scope, owner, key), v in zip(P.names, np.exp(x), strict=True):
        (prompts if scope == "prompts" else engs.setdefault(owner, {}))[key] = float(v)
    res = fe.FitResult({}, engs, {}, 0.0, prompts=prompts)
    for c, w in zip(pick, want, strict=True):
        assert w == pytest.approx(fe.predict(c, res), rel=rel(c)), c.row_id
