"""Exhaustive frontier and solve: exact against brute force on random small spaces; CLI."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from rooflaw import Infeasible, get_device
from rooflaw.arch import Space
from rooflaw.cli import main
from rooflaw.solver import FRONTIER_COLUMNS, Problem, frontier, solve_exhaustive
from rooflaw.solver.discrete import exhaustive as ex

OBJ = {"loss": "loss", "latency": "latency_s", "memory": "memory_bytes", "energy": "energy_j"}


def brute_mask(x: np.ndarray) -> np.ndarray:
    out = np.ones(len(x), dtype=bool)
    for i in range(len(x)):
        out[i] = not (np.all(x <= x[i], axis=1) & np.any(x < x[i], axis=1)).any()
    return out


def random_space(rng: np.random.Generator) -> Space:
    return Space(
        name="rnd",
        layers=sorted(rng.choice(np.arange(1, 40), size=rng.integers(1, 5), replace=False).tolist()),
        d_model=sorted(rng.choice(np.arange(4, 40) * 64, size=rng.integers(1, 5), replace=False).tolist()),
        head_dim=[64, 128][: rng.integers(1, 3)],
        kv_heads=[1, 2, 4, "heads"][: rng.integers(1, 5)],
        moe=[(1, 1), (8, 1), (8, 2), (16, 4)][: rng.integers(1, 5)],
        r_single=sorted(rng.choice([0.5, 1.0, 2.0, 3.0, 4.0], size=rng.integers(1, 4), replace=False).tolist()),
        tied=[False, True][: rng.integers(1, 3)],
    )


def brute_frontier(prob: Problem, objectives) -> pd.DataFrame:
    df = prob.evaluate(prob.space.to_frame())
    f = df[df["feasible"]].reset_index(drop=True)
    m = brute_mask(f[[OBJ[o] for o in objectives]].to_numpy(dtype=float))
    return f[m]


def key(df: pd.DataFrame) -> list[tuple]:
    return sorted(map(tuple, df[["layers", "d_model", "kv_heads", "head_dim", "ffn", "experts", "top_k"]]
                      .astype(int).to_numpy().tolist()))  # fmt: skip


@pytest.mark.parametrize("seed", range(12))
def test_frontier_equals_brute_force_on_random_spaces(seed):
    rng = np.random.default_rng(seed)
    space = random_space(rng)
    dev = get_device(["jetson-orin-nano-8gb", "h100-sxm", "rtx-4090"][seed % 3])
    phase = ["decode", "prefill", "total"][seed % 3]
    budget = {"latency_budget": 0.05} if seed % 4 == 0 else {}
    prob = Problem(law="paper-2602.10377", device=dev, space=space, phase=phase, **budget)
    objectives = [("loss", "latency"), ("loss", "latency", "memory"), ("loss", "latency", "memory", "energy"),
                  ("loss", "energy")][seed % 4]  # fmt: skip
    try:
        res = frontier(prob, objectives)
    except Infeasible:
        assert not prob.evaluate(space.to_frame())["feasible"].any()
        return
    want = brute_frontier(prob, objectives)
    assert key(res.frontier) == key(want)
    assert res.evaluated == space.size
    assert res.feasible == int(prob.evaluate(space.to_frame())["feasible"].sum())
    # the values are those of Problem.evaluate
    merged = res.frontier.merge(want, on=["layers", "d_model", "kv_heads", "head_dim", "ffn", "experts", "top_k",
                                          "vocab", "tied"], suffixes=("", "_b"))  # fmt: skip
    for c in ("loss", "latency_s", "memory_bytes", "energy_j"):
        np.testing.assert_allclose(merged[c], merged[c + "_b"], rtol=1e-12)
    assert list(res.table().columns) == list(FRONTIER_COLUMNS)


def test_parallel_and_chunked_equal_in_process(monkeypatch):
    space = Space(
        name="mid",
        layers=list(range(2, 34, 2)),
        d_model=list(range(512, 3073, 128)),
        head_dim=[64, 128],
        kv_heads=[1, 2, 4, 8, "heads"],
        moe=[(1, 1), (8, 1), (8, 2), (16, 2)],
        r_single=[0.5, 1, 2, 4],
    )
    prob = Problem(law="paper-2602.10377", device=get_device("jetson-orin-nano-8gb"), space=space)
    one = frontier(prob, ("loss", "latency", "memory"), n_jobs=1, chunk=4096)
    monkeypatch.setattr(ex, "PARALLEL_MIN", 0)
    two = frontier(prob, ("loss", "latency", "memory"), n_jobs=2, chunk=4096)
    assert key(one.frontier) == key(two.frontier)
    assert one.evaluated == two.evaluated == space.size
    assert one.feasible == two.feasible


def test_solve_exhaustive_best_and_infeasible():
    dev = dataclasses.replace(get_device("jetson-orin-nano-8gb"), achieved={})  # pure roofline
    prob = Problem(law="paper-2602.10377", device=dev, space="paper", latency_budget=0.03)
    res = solve_exhaustive(prob)
    df = prob.evaluate(prob.space.to_frame())
    best = df[df["feasible"]].sort_values(["loss", "latency_s"]).iloc[0]
    assert res.method == "exhaustive"
    assert res.loss == pytest.approx(best["loss"], rel=1e-12)
    assert res.architecture.layers == best["layers"] and res.architecture.d_model == best["d_model"]
    assert res.latency_s["decode"] <= 0.03
    assert res.binding == "latency"
    assert res.frontier is not None and (res.frontier["latency_s"] <= 0.03).all()
    tight = Problem(law="paper-2602.10377", device=dev, space="paper", latency_budget=0.001)
    with pytest.raises(Infeasible) as e:
        solve_exhaustive(tight)
    smallest = df["decode_s"].min()
    assert e.value.binding == "latency"
    assert e.value.smallest == pytest.approx(smallest)
    assert "decode latency ≥" in str(e.value) and "'paper'" in str(e.value)
    mem = Problem(law="paper-2602.10377", device=dev, space="paper", memory_budget=1e6)
    with pytest.raises(Infeasible) as e:
        solve_exhaustive(mem)
    assert e.value.binding == "memory" and e.value.smallest == pytest.approx(df["memory_bytes"].min())


def test_cli_frontier(tmp_path, capsys):
    out, png = tmp_path / "f.csv", tmp_path / "f.png"
    rc = main(["frontier", "--device", "jetson-orin-nano-8gb", "--space", "paper", "--phase", "decode",
               "--objectives", "loss,latency,memory", "--out", str(out), "--plot", str(png), "--json"])  # fmt: skip
    assert rc == 0
    d = json.loads(capsys.readouterr().out)
    assert set(d) >= {"evaluated", "feasible", "frontier_size", "eval_seconds", "pareto_seconds"}
    assert d["evaluated"] == 6800
    df = pd.read_csv(out)
    assert list(df.columns) == list(FRONTIER_COLUMNS)
    assert len(df) == d["frontier_size"]
    assert png.stat().st_size > 1000


def test_cli_frontier_errors(tmp_path, capsys):
    bad = tmp_path / "empty.toml"
    bad.write_text("layers = [2]\nd_model = [768]\nhead_dim = [128]\nkv_heads = [4]\nmoe = [[1, 1]]\nr_single = [1]\n")
    assert main(["frontier", "--device", "h100-sxm", "--space", str(bad)]) == 2
    assert "empty after its rules" in capsys.readouterr().err
    assert main(["frontier", "--device", "h100-sxm", "--objectives", "latency,loss"]) == 2
    assert main(["frontier", "--device", "h100-sxm", "--space", "nope"]) == 2
    assert main(["frontier", "--device", "jetson-orin-nano-8gb", "--latency-budget", "1ms"]) == 3
    assert "decode latency ≥" in capsys.readouterr().err
