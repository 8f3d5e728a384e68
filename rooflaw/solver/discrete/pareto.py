"""Exact Pareto utilities (minimisation): non-dominated masks and hypervolume.

A point ``a`` dominates ``b`` when ``a ≤ b`` in every objective and ``a < b`` in at least one. Duplicates
(identical objective vectors) do not dominate each other, so **all copies of a non-dominated vector are kept**.
Rows containing NaN are never on the frontier (and never dominate anything).
"""

from __future__ import annotations

import numpy as np

from ...errors import bad

_BLOCK = 2048
#: Use moocore (the ``fast`` extra) where it measured faster: non-dominated sorting for k ≥ 3 (50-90x) and the
#: hypervolume (10-700x); the sort-based k = 2 code here is faster than moocore's for large n (docs/benchmarks.md).
USE_MOOCORE = True


def _moocore():
    if not USE_MOOCORE:
        return None
    try:
        import moocore
    except ImportError:
        return None
    return moocore


def _pareto_2d(v: np.ndarray) -> np.ndarray:
    """O(n log n): sort by f1; a point survives iff it has the minimal f2 of its group of equal f1 and that f2 is
    strictly below the minimum f2 of every point with a strictly smaller f1."""
    n = len(v)
    order = np.argsort(v[:, 0])
    f1, f2 = v[order, 0], v[order, 1]
    new_group = np.ones(n, dtype=bool)
    new_group[1:] = f1[1:] != f1[:-1]
    starts = np.flatnonzero(new_group)
    gid = np.cumsum(new_group) - 1
    group_min = np.minimum.reduceat(f2, starts)
    prev = np.full(len(starts), np.inf)
    prev[1:] = np.minimum.accumulate(group_min)[:-1]
    keep_sorted = (f2 == group_min[gid]) & (f2 < prev[gid])
    out = np.zeros(n, dtype=bool)
    out[order] = keep_sorted
    return out


def _dominated_by(cand: np.ndarray, front: np.ndarray) -> np.ndarray:
    """For each row of ``cand``, whether some row of ``front`` dominates it (blocked; one 2-D pass per objective)."""
    n, k = cand.shape
    dom = np.zeros(n, dtype=bool)
    if not len(front) or not n:
        return dom
    step = max(1, (1 << 21) // max(1, n))
    for s in range(0, len(front), step):
        live = np.flatnonzero(~dom)
        if not len(live):
            break
        c = cand[live]
        f = front[s : s + step]
        le = f[None, :, 0] <= c[:, 0, None]
        lt = f[None, :, 0] < c[:, 0, None]
        for j in range(1, k):
            le &= f[None, :, j] <= c[:, j, None]
            lt |= f[None, :, j] < c[:, j, None]
        dom[live] = np.any(le & lt, axis=1)
    return dom


def _pareto_kd(v: np.ndarray) -> np.ndarray:
    """Exact for any k: in lexicographic order a point can only be dominated by earlier points, so scan blocks
    against the growing frontier (which never loses members), then within the block."""
    n = len(v)
    order = np.lexsort(tuple(v[:, j] for j in range(v.shape[1] - 1, -1, -1)))
    sv = v[order]
    keep = np.zeros(n, dtype=bool)
    front = np.empty((0, v.shape[1]))
    for s in range(0, n, _BLOCK):
        blk = sv[s : s + _BLOCK]
        alive = ~_dominated_by(blk, front)
        idx = np.flatnonzero(alive)
        if len(idx):
            sub = blk[idx]
            alive_sub = ~_dominated_by(sub, sub)
            idx = idx[alive_sub]
            keep[s + idx] = True
            front = np.concatenate([front, blk[idx]])
    out = np.zeros(n, dtype=bool)
    out[order] = keep
    return out


def pareto_mask(values: np.ndarray) -> np.ndarray:
    """Boolean mask of the non-dominated rows of ``values`` (n × k, minimise every column). Exact.

    k = 1: every row equal to the minimum. k = 2: sort-based, O(n log n). k ≥ 3: moocore's ``is_nondominated``
    when installed, else blocks in lexicographic order are checked against the growing frontier
    (O(n·|front|·k) time, O(block·|front|) memory). Duplicates of a
    non-dominated vector are all kept; rows with NaN are dropped.
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim == 1:
        v = v[:, None]
    if v.ndim != 2 or v.shape[1] < 1:
        raise bad("values", v.shape, "must be an n × k array")
    n, k = v.shape
    ok = ~np.isnan(v).any(axis=1)
    mask = np.zeros(n, dtype=bool)
    if not ok.any():
        return mask
    idx = np.flatnonzero(ok)
    w = v[idx]
    if k == 1:
        sub = w[:, 0] == w[:, 0].min()
    elif k == 2:
        sub = _pareto_2d(w)
    elif (mc := _moocore()) is not None:
        sub = np.asarray(mc.is_nondominated(w, keep_weakly=True), dtype=bool)
    else:
        sub = _pareto_kd(w)
    mask[idx[sub]] = True
    return mask


def _short(obj: object) -> str:
    text = repr(obj)
    return text if len(text) <= 60 else text[:57] + "..."


def hypervolume(points: np.ndarray, reference: np.ndarray | list[float]) -> float:
    """Hypervolume (minimisation) dominated by ``points`` and bounded by ``reference``.

    Points not strictly better than the reference in every objective contribute nothing. moocore's
    ``hypervolume`` when installed (same value up to rounding, ~1e-16 relative); else exact: a sweep for k = 2,
    inclusion–exclusion-free slicing (HSO) for k ≥ 3 (fine for the frontier sizes met here).
    """
    try:
        p = np.asarray(points, dtype=np.float64)
        ref = np.asarray(reference, dtype=np.float64)
    except (TypeError, ValueError):
        raise bad("points", _short(points), "must be a 2-D array of numbers (reference: a list of numbers)") from None
    if ref.ndim != 1 or not np.isfinite(ref).all():
        raise bad("reference", ref.tolist(), "must be a list of finite numbers, one per objective")
    if p.size == 0:
        return 0.0
    if p.ndim == 1:
        p = p[None, :]
    if p.ndim != 2:
        raise bad("points", _short(points), "must be a 2-D array (one row per point)")
    if p.shape[1] != ref.shape[0]:
        raise bad("reference", ref.tolist(), f"has {ref.shape[0]} values for {p.shape[1]} objectives")
    if np.isnan(p).any():
        row = int(np.flatnonzero(np.isnan(p).any(axis=1))[0])
        raise bad("points", p[row].tolist(), f"row {row} is NaN: a point with no value has no place in a hypervolume")
    p = p[np.all(p < ref, axis=1)]
    if not len(p):
        return 0.0
    p = np.unique(p[pareto_mask(p)], axis=0)
    mc = _moocore()
    if mc is not None and p.shape[1] >= 2:
        return float(mc.hypervolume(p, ref=ref))
    return float(_hv(p, ref))


def _hv(p: np.ndarray, ref: np.ndarray) -> float:
    k = p.shape[1]
    if k == 1:
        return float(ref[0] - p[:, 0].min())
    if k == 2:
        p = p[np.argsort(p[:, 0])]
        f2 = np.minimum.accumulate(p[:, 1])
        widths = np.diff(np.append(p[:, 0], ref[0]))
        return float(np.sum(widths * (ref[1] - f2)))
    # slice along the last objective
    p = p[np.argsort(p[:, -1])]
    total = 0.0
    for i in range(len(p)):
        upper = p[i + 1, -1] if i + 1 < len(p) else ref[-1]
        h = upper - p[i, -1]
        if h <= 0:
            continue
        sub = p[: i + 1, :-1]
        sub = sub[pareto_mask(sub)]
        total += h * _hv(np.unique(sub, axis=0), ref[:-1])
    return total
