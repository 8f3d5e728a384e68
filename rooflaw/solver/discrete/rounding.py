"""Rounding a continuous optimum (l, d, r, ρ, gqa) to a real, hardware-aligned architecture of a space.

Only points of the problem's aligned space are candidates (d_model and ffn multiples of ``Problem.align``, see
:meth:`Problem.on_aligned_space`), the same points the exhaustive solver and the search enumerate. The
neighbourhood of a point is, evaluated vectorised with the problem's **full** cost model:

- the whole *width line*: every aligned d_model within :data:`D_LINE` steps each side (a budget trades width for
  depth and for the FFN/expert choice, so the best width of another structure is often many steps away -- on a
  64-step width space the floor/ceil neighbourhood alone missed the optimum by 10 %);
- depths within ``max(k, 2)`` steps each side; for every (experts, top_k) pair the ``k`` per-expert FFN ratios
  nearest each side of r/top_k; the ``k`` kv_heads nearest each side of heads/gqa and the fewest (MQA) and most
  (MHA); every head_dim, vocabulary, tied/untied and layer pattern of the space.

The best feasible point is kept and the search moves to its neighbourhood until no neighbour is better (a
discrete local search), then looks once more with a wider window. If nothing near the relaxation is feasible the
window widens until something is. The answer is the best of everything evaluated, so it is never worse than the
best point of the floor/ceil lattice around the relaxation; how far it can be from the global discrete optimum
is measured in ``tests/test_rounding_property.py`` and docs/solver.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ...arch.space import aligned_mask

DIMS = ("layers", "d_model", "head_dim", "kv_ratio", "r_single", "moe")
#: Aligned widths evaluated each side of the centre's d_model (the width line).
D_LINE = 24
#: Fewest depths evaluated each side of the centre's depth.
L_WINDOW = 2
#: Depths evaluated each side of the centre's depth at the widths nearest the centre (the depth line).
L_LINE = 32
_ROW = ("layers", "d_model", "head_dim", "kv_heads", "r_single", "experts", "top_k")


def _nearest(values: list[float], target: float, k: int) -> list[int]:
    """Indices of the ``k`` values nearest to ``target`` below and above (log distance)."""
    v = np.asarray(values, dtype=float)
    order = np.argsort(np.abs(np.log(v / target)))
    centre = int(order[0])
    lo, hi = max(0, centre - k), min(len(v), centre + k + 1)
    return list(range(lo, hi))


class _Grid:
    """The aligned space's per-dimension value lists."""

    def __init__(self, problem: Any) -> None:
        space = problem.on_aligned_space().space  # raises naming `align` when no point is aligned
        ch = space.choices()
        self.space = space
        self.align = problem.align
        self.layers = list(ch["layers"])
        self.d_model = list(ch["d_model"])
        self.head_dim = list(ch["head_dim"])
        self.r_single = list(ch["r_single"])
        self.moe = list(ch["moe"])
        self.vt = np.array(ch["vocab_tied"], dtype=float).reshape(-1, 2)
        self.pattern = np.array(ch["pattern"], dtype=float).reshape(-1, 2)


def _columns(grid: _Grid, rows: np.ndarray) -> dict[str, np.ndarray]:
    """Architecture columns of (layers, d_model, head_dim, kv_heads, r_single, experts, top_k) rows, crossed with
    every (vocab, tied) and layer pattern of the space; rows that are not points of the aligned space (head_dim ∤
    d_model, kv_heads ∤ heads, unaligned d_model or ffn) are dropped."""
    sp = grid.space
    lay, d, hd, kv, rs, E, Kk = rows.reshape(-1, 7).T
    heads = d / hd
    ffn = np.asarray(sp.ffn_for(d, rs), dtype=float)
    ok = (np.mod(d, hd) == 0) & (kv >= 1) & (np.mod(heads, kv) == 0) & (Kk <= E)
    if grid.align is not None:
        ok &= aligned_mask(d, ffn, grid.align)
    base = {"layers": lay[ok], "d_model": d[ok], "heads": heads[ok], "kv_heads": kv[ok], "head_dim": hd[ok],
            "ffn": ffn[ok], "experts": E[ok], "top_k": Kk[ok]}  # fmt: skip
    n, nx = int(ok.sum()), len(grid.vt) * len(grid.pattern)
    cols = {k: np.repeat(v, nx) for k, v in base.items()}
    vt = np.tile(np.repeat(grid.vt, len(grid.pattern), axis=0), (n, 1))
    pat = np.tile(grid.pattern, (n * len(grid.vt), 1))
    cols |= {"vocab": vt[:, 0], "tied": vt[:, 1], "shared_experts": np.zeros(n * nx), "shared_ffn": cols["ffn"]}
    for k, val in sp.fixed.items():
        cols[k] = np.full(n * nx, float(val))
    if sp.has_patterns:
        every, cols["window"] = pat[:, 0], pat[:, 1]
        cols["local_layers"] = cols["layers"] - np.floor(cols["layers"] / every)
        cols["attn_layers"] = cols["ffn_layers"] = cols["layers"]
    return cols


def _structures(grid: _Grid, x: Mapping[str, float], d: int, k: int) -> list[tuple[int, int, float, int, int]]:
    """(head_dim, kv_heads, r_single, experts, top_k) choices near ``x`` for one width."""
    out = []
    for hd in grid.head_dim:
        if d % hd:
            continue
        heads = d // hd
        kvs = grid.space.kv_options(heads)
        if not kvs:
            continue
        near = _nearest(kvs, max(heads / x["gqa"], 1e-9), k)
        kvs = [kvs[i] for i in sorted({0, len(kvs) - 1, *near})]  # MQA and MHA always (the usual answers)
        for E, Kk in grid.moe:
            rsel = [grid.r_single[i] for i in _nearest(grid.r_single, x["r"] / Kk, k)]
            out += [(hd, kv, rs, E, Kk) for kv in kvs for rs in rsel]
    return out


def _neighbourhood(grid: _Grid, x: Mapping[str, float], k: int) -> np.ndarray:
    """Rows around a continuous point (see the module docstring), as an (n, 7) array: the near structures on
    (width line × near depths) ∪ (near widths × depth line)."""
    near_l = set(_nearest(grid.layers, x["l"], max(k, L_WINDOW)))
    line_l = _nearest(grid.layers, x["l"], max(k, L_LINE))
    near_d = set(_nearest(grid.d_model, x["d"], k))
    blocks = []
    for i in _nearest(grid.d_model, x["d"], max(k, D_LINE)):
        d = grid.d_model[i]
        st = np.array(_structures(grid, x, d, k), dtype=float).reshape(-1, 5)
        ls = np.array([grid.layers[j] for j in (line_l if i in near_d else sorted(near_l))], dtype=float)
        if not len(st):
            continue
        b = np.empty((len(st) * len(ls), 7))
        b[:, 0] = np.tile(ls, len(st))
        b[:, 1] = d
        b[:, 2:4] = np.repeat(st[:, :2], len(ls), axis=0)
        b[:, 4:7] = np.repeat(st[:, 2:], len(ls), axis=0)
        blocks.append(b)
    return np.concatenate(blocks) if blocks else np.empty((0, 7))


def _keys(rows: np.ndarray) -> np.ndarray:
    """One exact key per row (the row's bytes), to skip rows already evaluated."""
    return np.ascontiguousarray(rows).view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()


def _point_of(row: Mapping[str, Any]) -> dict[str, float]:
    """The paper variables of one architecture row."""
    return {
        "l": float(row["layers"]), "d": float(row["d_model"]), "r": float(row["top_k"] * row["ffn"] / row["d_model"]),
        "rho": float(row["top_k"] / row["experts"]), "gqa": float(row["heads"] / row["kv_heads"]),
    }  # fmt: skip


def round_solution(
    problem: Any, x: Mapping[str, float], k: int = 1, max_rounds: int = 20
) -> tuple[pd.Series | None, pd.DataFrame, dict[str, Any]]:
    """Round the continuous point ``x`` to the best feasible aligned architecture of ``problem.space`` found by
    the neighbourhood search of the module docstring.

    Returns (best row or None, every evaluated candidate, stats: evaluated count, rounds, window).
    """
    grid = _Grid(problem)
    seen = np.empty(0, dtype=np.dtype((np.void, 56)))
    frames = []
    best = None
    centre = dict(x)
    rounds = 0
    window = k
    polished = False
    widest = max(len(grid.layers), len(grid.d_model), len(grid.r_single))
    while rounds < max_rounds:
        rounds += 1
        rows = _neighbourhood(grid, centre, window)
        if len(rows):
            keys = _keys(rows)
            keys, first = np.unique(keys, return_index=True)
            new = ~np.isin(keys, seen)
            rows, seen = rows[first[new]], np.concatenate([seen, keys[new]])
        if len(rows):
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
            if window > widest:
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


__all__ = ["D_LINE", "DIMS", "L_LINE", "L_WINDOW", "arch_of", "round_solution"]
