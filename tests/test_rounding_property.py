"""Rounding, closed form and exhaustive against brute force on random small spaces (hypothesis).

For a random space (64-step widths, head_dim 64/128, kv, (E, K), FFN ratios), budget and alignment:

- the exhaustive answer is the brute-force optimum of the aligned feasible points (``Problem.evaluate`` on every
  point, then the alignment filter written out here);
- the closed form's rounded answer is a feasible aligned point, never worse than the best feasible point of the
  floor/ceil lattice of the continuous optimum (each of l, d, r/K per (E, K), heads/gqa bracketed on the aligned
  grid, every head_dim), and never better than the global optimum. How far above the global optimum it can land is
  measured by ``benchmarks/bench_rounding_gap.py`` (docs/solver.md).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rooflaw import Infeasible, Problem, Space, get_device, solve

DEV = dataclasses.replace(get_device("jetson-agx-orin-64gb"), achieved={})
LAW = "paper-2602.10377"


@st.composite
def cases(draw):
    d0 = draw(st.integers(8, 24)) * 64
    space = Space(
        name="random",
        layers=sorted(draw(st.sets(st.integers(2, 40), min_size=2, max_size=6))),
        d_model=list(range(d0, d0 + 64 * draw(st.integers(3, 14)), 64)),
        head_dim=draw(st.sampled_from([[64], [128], [64, 128]])),
        kv_heads=draw(st.sampled_from([[1], [1, "heads"], [1, 2, 4, "heads"]])),
        moe=draw(st.sampled_from([[(1, 1)], [(1, 1), (8, 2)], [(1, 1), (8, 1), (16, 2)]])),
        r_single=sorted(draw(st.sets(st.sampled_from([0.5, 1, 1.5, 2, 3, 4]), min_size=1, max_size=3))),
        ffn_align=64,
    )
    align = draw(st.sampled_from([None, 128, 256]))
    kind = draw(st.sampled_from(["decode", "memory"]))
    budget = math.exp(draw(st.floats(math.log(0.004), math.log(0.2)))) if kind == "decode" else draw(
        st.floats(0.3e9, 6e9))  # fmt: skip
    kw = dict(latency_budget=budget, phase="decode") if kind == "decode" else dict(memory_budget=budget)
    return Problem(LAW, DEV, space=space, align=align, allow_extrapolation=True, **kw)


def aligned_frame(p: Problem) -> pd.DataFrame:
    df = p.evaluate(p.space.to_frame())
    if p.align is not None:
        df = df[(df["d_model"] % p.align == 0) & (df["ffn"] % p.align == 0)]
    return df


def bracket(values, x: float) -> set:
    """The largest value ≤ x and the smallest ≥ x (one of them at the ends)."""
    v = sorted(set(values))
    lo = [a for a in v if a <= x]
    hi = [a for a in v if a >= x]
    return {lo[-1] if lo else v[0], hi[0] if hi else v[-1]}


def lattice(df: pd.DataFrame, x: dict) -> pd.Series:
    """Rows of ``df`` on the floor/ceil lattice of the continuous point ``x``."""
    ok = df["layers"].isin(bracket(df["layers"], x["l"])) & df["d_model"].isin(bracket(df["d_model"], x["d"]))
    keep = np.zeros(len(df), dtype=bool)
    for (d, hd, _E, K), g in df[ok].groupby(["d_model", "head_dim", "experts", "top_k"]):
        rs = g["ffn"] / g["d_model"]
        kv = bracket(g["kv_heads"], (d / hd) / x["gqa"])
        sel = rs.isin(bracket(rs, x["r"] / K)) & g["kv_heads"].isin(kv)
        keep[df.index.get_indexer(g.index[sel.to_numpy()])] = True
    return pd.Series(keep, index=df.index)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(p=cases())
def test_exhaustive_is_brute_force_and_rounding_beats_its_lattice(p):
    df = aligned_frame(p)
    feas = df[df["feasible"]]
    try:
        ex = solve(p, "exhaustive")
    except Infeasible:
        assert feas.empty
        return
    assert not feas.empty and ex.loss == feas["loss"].min()
    a = ex.architecture
    assert p.align is None or (a.d_model % p.align == 0 and a.ffn % p.align == 0)
    try:
        res = solve(p, "closed-form")
    except Infeasible:
        raise AssertionError("closed form says infeasible where the exhaustive solver found a point") from None
    r = res.architecture
    assert p.space.contains(r) and (p.align is None or (r.d_model % p.align == 0 and r.ffn % p.align == 0))
    assert res.loss >= ex.loss
    near = feas[lattice(df, res.continuous)[feas.index]]
    if len(near):
        assert res.loss <= near["loss"].min() * (1 + 1e-12), "rounding is worse than its floor/ceil lattice"
