"""Rounding a continuous optimum (l, d, r, ρ, gqa) to a real, hardware-aligned architecture of a space.

The neighbourhood of the relaxation -- the nearest declared values of every dimension of the space (depth,
width multiple of ``align``, head_dim, kv_heads dividing heads, per-expert FFN ratio, (experts, top_k)) -- is
evaluated, vectorised, with the problem's **full** cost model; the best feasible point is kept and the search
moves to its neighbourhood until no neighbour is better (a discrete local search). If nothing near the
relaxation is feasible the window widens until something is.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ...errors import RooflawError

DIMS = ("layers", "d_model", "head_dim", "kv_ratio", "r_single", "moe")


def _nearest(values: list[float], target: float, k: int) -> list[int]:
    """Indices of the ``k`` values nearest to ``target`` below and above (log distance)."""
    v = np.asarray(values, dtype=float)
    order = np.argsort(np.abs(np.log(v / target)))
    centre = int(order[0])
    lo, hi = max(0, centre - k), min(len(v), centre + k + 1)
    return list(range(lo, hi))


class _Grid:
    """The space's per-dimension value lists, filtered for alignment."""

    def __init__(self, space: Any, align: int) -> None:
        ch = space.choices()
        self.space = space
        self.layers = list(ch["layers"])
        ds = [d for d in ch["d_model"] if d % align == 0]
        if not ds:
            raise RooflawError(
                f"align={align}: no d_model of space {space.name!r} is a multiple of it ({ch['d_model']})"
            )
        self.d_model = ds
        self.head_dim = [h for h in ch["head_dim"] if h in (64, 128)] or list(ch["head_dim"])
        self.r_single = list(ch["r_single"])
        self.moe = list(ch["moe"])
        self.vt = list(ch["vocab_tied"])
        self.align = align


def _columns(grid: _Grid, rows: list[tuple]) -> dict[str, np.ndarray]:
    """Architecture columns of (layers, d_model, head_dim, kv_heads, r_single, experts, top_k) rows; invalid rows
    (head_dim ∤ d_model, kv_heads ∤ heads, misaligned ffn) are dropped."""
    sp = grid.space
    a = np.array(rows, dtype=float).reshape(-1, 7)
    lay, d, hd, kv, rs, E, Kk = a.T
    heads = d / hd
    ffn = np.asarray(sp.ffn_for(d, rs), dtype=float)
    ok = (np.mod(d, hd) == 0) & (kv >= 1) & (np.mod(heads, kv) == 0) & (Kk <= E)
    if grid.align > sp.ffn_align:
        ok &= np.mod(ffn, grid.align) == 0
    v, t = grid.vt[0]
    n = int(ok.sum())
    cols = {
        "layers": lay[ok], "d_model": d[ok], "heads": heads[ok], "kv_heads": kv[ok], "head_dim": hd[ok],
        "ffn": ffn[ok], "experts": E[ok], "top_k": Kk[ok], "shared_experts": np.zeros(n), "shared_ffn": ffn[ok],
        "vocab": np.full(n, float(v)), "tied": np.full(n, float(t)),
    }  # fmt: skip
    for k, val in sp.fixed.items():
        cols[k] = np.full(n, float(val))
    return cols


def _neighbourhood(grid: _Grid, x: Mapping[str, float], k: int) -> list[tuple]:
    """Rows around a continuous point: ``k`` nearest values each side per dimension."""
    ls = [grid.layers[i] for i in _nearest(grid.layers, x["l"], k)]
    ds = [grid.d_model[i] for i in _nearest(grid.d_model, x["d"], k)]
    rows = []
    for d, hd in itertools.product(ds, grid.head_dim):
        if d % hd:
            continue
        heads = d // hd
        kvs = grid.space.kv_options(heads)
        kvs = [kvs[i] for i in _nearest(kvs, max(heads / x["gqa"], 1e-9), k)]
        for E, Kk in grid.moe:
            if Kk > E:
                continue
            rsel = [grid.r_single[i] for i in _nearest(grid.r_single, x["r"] / Kk, k)]
            for kv, rs, lay in itertools.product(kvs, rsel, ls):
                rows.append((lay, d, hd, kv, rs, E, Kk))
    return rows


def _point_of(row: Mapping[str, Any]) -> dict[str, float]:
    """The paper variables of one architecture row."""
    return {
        "l": float(row["layers"]), "d": float(row["d_model"]), "r": float(row["top_k"] * row["ffn"] / row["d_model"]),
        "rho": float(row["top_k"] / row["experts"]), "gqa": float(row["heads"] / row["kv_heads"]),
    }  # fmt: skip


def round_solution(
    problem: Any, x: Mapping[str, float], k: int = 1, max_rounds: int = 20
) -> tuple[pd.Series | None, pd.DataFrame, dict[str, Any]]:
    """Round the continuous point ``x`` to the best feasible aligned architecture of ``problem.space``.

    Returns (best row or None, every evaluated candidate, stats: evaluated count, rounds, window).
    """
    grid = _Grid(problem.space, problem.align)
    seen: set[tuple] = set()
    frames = []
    best = None
    centre = dict(x)
    rounds = 0
    window = k
    polished = False
    while rounds < max_rounds:
        rounds += 1
        rows = [r for r in _neighbourhood(grid, centre, window) if r not in seen]
        seen.update(rows)
        if rows:
            cols = _columns(grid, rows)
            if len(cols["layers"]):
                df = problem.evaluate(cols)
                frames.append(df)
                feas = df[df["feasible"]]
                if len(feas):
                    cand = feas.loc[feas["loss"].idxmin()]
                    if best is None or cand["loss"] < best["loss"] - 1e-12:
                        best = cand
                        centre = _point_of(best)
                        continue
        if best is None:
            # nothing feasible yet: widen the window (up to the whole space)
            if window > max(len(grid.layers), len(grid.d_model), len(grid.r_single)):
                break
            window *= 2
            continue
        if not polished:  # one wider look around the local optimum before stopping
            polished, window = True, window + 1
            continue
        break
    allc = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return best, allc, {"evaluated": len(allc), "rounds": rounds, "window": window}


def arch_of(problem: Any, row: Mapping[str, Any]):
    """The :class:`~rooflaw.arch.Architecture` of a candidate row."""
    return problem.space.architecture(row)


__all__ = ["DIMS", "arch_of", "round_solution"]
