"""What the numpy and the numba scans of the joint space share: its objective columns and the numpy evaluation of
one chunk of architectures under a list of (precision, batch, option) combinations."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .pareto import pareto_mask
from .scan_parts import ARCH, PATTERN, VALUES

#: Objective name -> (column, sign): the frontier minimises sign·column (throughput is maximised).
JOINT_OBJECTIVES = {"loss": ("loss", 1.0), "latency": ("latency_s", 1.0), "memory": ("memory_bytes", 1.0),
                    "energy": ("energy_j", 1.0), "throughput": ("tokens_per_s", -1.0)}  # fmt: skip
#: Cost columns every option returns (per architecture; memory per device).
COSTS = tuple(k for k in VALUES if k not in ("loss", "latency_s"))
#: Serving columns every option reports (the one-device option derives them from the decode time).
SERVING = ("tokens_per_s", "tokens_per_s_per_user")
#: What a joint frontier row keeps (numeric): architecture, costs, serving figures and the combination index.
JOINT_KEEP = ARCH + VALUES + PATTERN + SERVING + ("combo",)


def objective_matrix(d: Mapping[str, np.ndarray], objectives: tuple[str, ...], idx: Any = slice(None)) -> np.ndarray:
    cols = (JOINT_OBJECTIVES[o] for o in objectives)
    return np.column_stack([s * np.asarray(d[c], dtype=float)[idx] for c, s in cols])


def filter_joint_front(front: dict[str, np.ndarray], objectives: tuple[str, ...]) -> dict[str, np.ndarray]:
    if not len(front["loss"]):
        return front
    m = pareto_mask(objective_matrix(front, objectives))
    return {k: v[m] for k, v in front.items()}


def evaluate_chunk(combos: Sequence[Any], cols: Mapping[str, np.ndarray], extra: tuple[str, ...] = ()):
    """For each combination: ``(combo, v, n)`` with ``v`` its evaluated columns (:data:`JOINT_KEEP` + ``extra``,
    ``feasible``, ``finite``) and ``n`` the architectures of the chunk. Parameter counts and the law inputs are
    computed once per chunk; architectures outside the law's fitted domain (which can be neither feasible nor part
    of the diagnostics) are left out of ``v`` before the cost model runs (``v`` is None when none is left)."""
    from ...objectives import law_inputs

    base = combos[0].problem
    n_all = len(cols["layers"])
    inputs = law_inputs(cols, tokens=base.tokens)
    if not base.allow_extrapolation:
        inside = np.broadcast_to(np.asarray(base.law.in_domain(inputs), dtype=bool), (n_all,))
        if not inside.all():
            idx = np.flatnonzero(inside)
            cols = {k: np.asarray(v)[idx] if np.ndim(v) else v for k, v in cols.items()}
            inputs = {k: np.asarray(v)[idx] if np.ndim(v) else v for k, v in inputs.items()}
    n = len(cols["layers"])
    if n == 0:
        for c in combos:
            yield c, None, n_all
        return
    losses: dict[str, np.ndarray] = {}
    for c in combos:
        q = c.problem
        if c.precision not in losses:
            losses[c.precision] = np.broadcast_to(q.law.evaluate(inputs), (n,))
        res = c.option.evaluate(cols, q)
        v = {k: np.asarray(res[k], dtype=float) for k in COSTS + SERVING}
        v |= {k: np.broadcast_to(np.asarray(res.get(k, np.nan), dtype=float), (n,)) for k in extra}
        v["loss"] = losses[c.precision]
        v["latency_s"] = np.asarray(res[q.latency_column], dtype=float)
        valid = np.broadcast_to(np.asarray(res.get("valid", True), dtype=bool), (n,))
        finite = np.isfinite(v["loss"]) & valid
        feas = finite & q.feasible(v)
        for k in ARCH:
            v[k] = cols[k]
        for k in PATTERN:
            v[k] = cols[k] if k in cols else np.zeros(n)
        v["combo"] = np.full(n, float(c.index))
        v["finite"], v["feasible"] = finite, feas
        yield c, v, n_all
