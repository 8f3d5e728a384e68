"""The joint space (architecture × precision × batch × option): exact against brute force, Dask equals in-process."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from rooflaw import Infeasible, JointSpace, Option, Problem, RooflawError, Workload, joint_frontier, solve_joint
from rooflaw.arch import Space
from rooflaw.cli import main

SPACE = Space(name="small", layers=[4, 8, 12], d_model=[512, 768, 1024], head_dim=[64, 128], kv_heads=[1, 4, "heads"],
              moe=[(1, 1), (8, 2)], r_single=[1.0, 3.0], vocab=[32000], tied=[False, True])  # fmt: skip
KW = {"law": "chinchilla-precision", "device": "h100-sxm", "space": SPACE, "tokens": 1e11}
PRECS, BATCHES = ("bf16", "fp8", "nvfp4"), (1, 16)
KEY = ["layers", "d_model", "heads", "kv_heads", "head_dim", "ffn", "experts", "top_k", "tied", "precision", "batch"]


def brute_mask(x: np.ndarray) -> np.ndarray:
    """Non-dominated rows (minimisation), one row at a time: the definition, nothing clever."""
    return np.array([not (np.all(x <= r, axis=1) & np.any(x < r, axis=1)).any() for r in x], dtype=bool)


def brute(objectives: tuple[str, ...], budget: str, **kw) -> pd.DataFrame:
    """Every (precision, batch) as its own Problem, evaluated row by row through Problem.evaluate, then filtered."""
    frames = []
    for p in PRECS:
        for b in BATCHES:
            prob = Problem(**KW, precision=p, workload=Workload(batch=b), latency_budget=budget, **kw)
            df = prob.evaluate(SPACE.to_frame())
            df["tokens_per_s"] = b * prob.workload.output_tokens / df["decode_s"]
            df["precision"], df["batch"] = p, b
            frames.append(df[df["feasible"]])
    allf = pd.concat(frames, ignore_index=True)
    col = {"loss": "loss", "latency": "latency_s", "memory": "memory_bytes", "throughput": "tokens_per_s"}
    sign = {"throughput": -1.0}
    x = np.column_stack([sign.get(o, 1.0) * allf[col[o]].to_numpy() for o in objectives])
    return allf[brute_mask(x)]


@pytest.mark.parametrize(
    ("objectives", "extrapolate"),
    [(("loss", "latency"), False), (("loss", "latency", "throughput"), False), (("loss", "latency"), True)],
)
def test_joint_frontier_equals_brute_force(objectives, extrapolate):
    # the law's domain (N ≥ 70M) leaves the smallest models out unless extrapolating: both paths are checked
    prob = Problem(**KW, latency_budget="12ms", allow_extrapolation=extrapolate)
    res = joint_frontier(prob, JointSpace(PRECS, BATCHES), objectives, n_jobs=1)
    ref = brute(objectives, "12ms", allow_extrapolation=extrapolate)
    assert (res.frontier["params_total"] < 7e7).any() == extrapolate
    got = res.frontier
    assert res.evaluated == SPACE.size * 6 and res.combinations == 6
    assert len(got) == len(ref) > 5
    a = got[KEY].astype(str).sort_values(KEY).reset_index(drop=True)
    b = ref[KEY].astype(str).sort_values(KEY).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)
    m = got.merge(ref, on=KEY, suffixes=("", "_ref"))
    np.testing.assert_array_equal(m["loss"], m["loss_ref"])
    np.testing.assert_array_equal(m["latency_s"], m["latency_s_ref"])
    if "throughput" in objectives:
        assert set(got["batch"]) == {1, 16}  # a larger batch trades latency for aggregate tokens/s
    else:
        assert set(got["batch"]) == {1}  # same loss, longer steps: a larger batch never wins on loss-latency
    assert set(got["precision"]) <= set(PRECS)


def test_solve_joint_picks_the_best_combination():
    prob = Problem(**KW, latency_budget="8ms")
    res = solve_joint(prob, JointSpace(PRECS, BATCHES))
    ref = brute(("loss", "latency"), "8ms").sort_values(["loss", "latency_s"]).iloc[0]
    assert res.loss == ref["loss"] and res.extra["precision"] == ref["precision"] and res.extra["batch"] == 1
    single = Problem(**KW, latency_budget="8ms", precision=res.extra["precision"])
    assert res.loss == pytest.approx(float(single.evaluate(SPACE.to_frame()).query("feasible")["loss"].min()))
    with pytest.raises(Infeasible, match="latency"):
        solve_joint(Problem(**KW, latency_budget="1us"), JointSpace(PRECS, BATCHES))


def _doubled(cols, problem):
    """A toy option: the single-device costs at twice the latency, only for models with ≤ 8 layers."""
    from rooflaw import evaluate_columns

    res = dict(evaluate_columns(cols, problem.device, problem.workload, problem.precision, problem.preset))
    for k in ("prefill_s", "decode_s", "total_s", "tpot_s"):
        res[k] = 2 * res[k]
    res["valid"] = cols["layers"] <= 8
    res["marker"] = cols["layers"] * 0 + 7.0
    return res


def test_options_plug_in():
    prob = Problem(**KW, latency_budget="30ms")
    joint = JointSpace(("nvfp4",), (1,), (Option(), Option("slow", _doubled, extra=("marker",))))
    res = joint_frontier(prob, joint, ("loss", "latency"), n_jobs=1)
    assert set(res.frontier["option"]) == {"1 device"}  # the doubled option is dominated everywhere
    assert "marker" in res.frontier and res.frontier["marker"].isna().all()
    only = joint_frontier(prob, JointSpace(("nvfp4",), (1,), (Option("slow", _doubled, extra=("marker",)),)), n_jobs=1)
    assert (only.frontier["layers"] <= 8).all() and (only.frontier["marker"] == 7).all()
    base = joint_frontier(prob, JointSpace(("nvfp4",), (1,)), n_jobs=1).frontier
    assert only.frontier["latency_s"].min() >= 2 * base["latency_s"].min()
    with pytest.raises(RooflawError, match="distinct"):
        JointSpace(options=(Option(), Option()))
    with pytest.raises(RooflawError, match="batches"):
        JointSpace(batches=(0,))


def test_cli(capsys):
    args = ["frontier", "--device", "h100-sxm", "--law", "chinchilla-precision", "--tokens", "1e11",
            "--latency-budget", "8ms", "--precisions", "bf16,fp8,nvfp4", "--batches", "1,8"]  # fmt: skip
    assert main(args + ["--json", "--objectives", "loss,latency,throughput"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["combinations"] == 6 and out["evaluated"] == 6 * out["architectures"]
    assert main(["solve", "--method", "exhaustive", *args[1:], "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["precision"] in ("bf16", "fp8", "nvfp4") and out["batch"] in (1, 8)
    assert main(args[:-1] + ["1,x"]) == 2
    assert main(args + ["--scheduler", "local:0"]) == 2
    assert main(args + ["--scheduler", "udp://x"]) == 2
    assert main(["solve", "--method", "gp", *args[1:]]) == 2
