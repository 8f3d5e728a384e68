"""The paper's LHS + adaptive-refinement search (rooflaw.solver.adaptive) against the exhaustive frontier."""

from __future__ import annotations

import numpy as np
import pytest

import rooflaw
from rooflaw import solver
from rooflaw.arch.space import Space

SMALL = {"layers": [4, 8, 12, 16], "d_model": [768, 1024, 1536, 2048], "head_dim": [128], "kv_heads": [1, 2, "heads"],
         "moe": [[1, 1], [8, 1], [16, 1]], "r_single": [0.5, 1, 2], "vocab": [32000], "tied": [False]}  # fmt: skip


def problem(space="paper"):
    return solver.Problem(law="paper-2602.10377", device=rooflaw.get_device("jetson-agx-orin-64gb"), space=space,
                          phase="total", preset="paper-ops")  # fmt: skip


def keys(df):
    return set(map(tuple, df[["layers", "d_model", "kv_heads", "ffn", "experts", "top_k"]].astype(int).to_numpy()))


def test_enough_budget_finds_the_exact_frontier_of_a_small_space():
    prob = problem(Space.from_mapping(SMALL, name="small"))
    exact = solver.frontier(prob, objectives=("loss", "latency")).frontier
    res = solver.adaptive_search(prob, budget=prob.space.size, initial=prob.space.size // 4, seed=3)
    # it stops on its own (frontier stable / no candidate left) after evaluating under 2/3 of the space
    assert res.evaluations < 2 * prob.space.size / 3
    assert keys(res.frontier) == keys(exact)


def test_frontier_is_the_pareto_set_of_what_was_evaluated():
    res = solver.adaptive_search(problem(), budget=300, seed=1)
    assert res.evaluations == len(set(res.evaluated["index"])) <= 300
    ok = res.evaluated[res.evaluated["feasible"]]
    # brute force: a frontier point is not dominated by any feasible evaluated point
    for _, p in res.frontier.iterrows():
        dom = (ok["loss"] <= p["loss"]) & (ok["latency_s"] <= p["latency_s"])
        dom &= (ok["loss"] < p["loss"]) | (ok["latency_s"] < p["latency_s"])
        assert not dom.any()
    assert len(res.frontier) == len(ok) - sum(
        bool(((ok["loss"] <= r["loss"]) & (ok["latency_s"] <= r["latency_s"])
              & ((ok["loss"] < r["loss"]) | (ok["latency_s"] < r["latency_s"]))).any())
        for _, r in ok.iterrows()
    )  # fmt: skip


def test_seeded_and_latin():
    prob = problem()
    a = solver.adaptive_search(prob, budget=200, seed=7)
    b = solver.adaptive_search(prob, budget=200, seed=7)
    assert a.evaluated["index"].tolist() == b.evaluated["index"].tolist()
    # the initial sample is a Latin hypercube: each of the 8 depths appears initial/8 times before repair/dedup
    first = a.evaluated[a.evaluated["round"] == 0]
    counts = np.bincount(np.searchsorted(prob.space.layers, first["layers"].astype(int)), minlength=8)
    assert counts.max() - counts.min() <= 2


def test_bad_budget():
    with pytest.raises(rooflaw.RooflawError, match="budget"):
        solver.adaptive_search(problem(), budget=0)
