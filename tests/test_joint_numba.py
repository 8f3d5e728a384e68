"""The joint space on the numba scan kernel: the same frontier, counts and pick as the numpy path and as brute force.

One precision-aware law (bound to each precision's bits: one kernel per precision), its fitted domain on (the
smallest models are outside it), a decode budget; objectives with latency, throughput (maximised; ordered by
``decode_s`` inside a combination) or both. Two precisions keep the compile cost to two kernels, which every test
here shares (same law, domain, budget column and objective columns).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rooflaw import Infeasible, JointSpace, Option, Problem, RooflawError, Workload, joint_frontier, solve_joint
from rooflaw.arch import Space

pytest.importorskip("numba")

SPACE = Space(name="small", layers=[4, 8, 12], d_model=[512, 768, 1024], head_dim=[64, 128], kv_heads=[1, 4, "heads"],
              moe=[(1, 1), (8, 2)], r_single=[1.0, 3.0], vocab=[32000, 50304], tied=[False, True])  # fmt: skip
KW = {"law": "chinchilla-precision", "device": "h100-sxm", "space": SPACE, "tokens": 1e11, "latency_budget": "12ms"}
PRECS, BATCHES = ("fp8", "nvfp4"), (1, 16)
KEY = ["layers", "d_model", "heads", "kv_heads", "head_dim", "ffn", "experts", "top_k", "vocab", "tied", "precision",
       "batch"]  # fmt: skip
COL = {"loss": "loss", "latency": "latency_s", "memory": "memory_bytes", "throughput": "tokens_per_s"}


def brute(objectives: tuple[str, ...], **kw) -> pd.DataFrame:
    """Every (precision, batch) as its own Problem through Problem.evaluate, then the definition of dominance."""
    frames = []
    for p in PRECS:
        for b in BATCHES:
            prob = Problem(**(KW | kw), precision=p, workload=Workload(batch=b))
            df = prob.evaluate(SPACE.to_frame())
            df["tokens_per_s"] = b * (prob.workload.output_tokens / df["decode_s"])
            df["precision"], df["batch"] = p, b
            frames.append(df[df["feasible"]])
    allf = pd.concat(frames, ignore_index=True)
    x = np.column_stack([(-1.0 if o == "throughput" else 1.0) * allf[COL[o]].to_numpy() for o in objectives])
    keep = np.array([not (np.all(x <= r, axis=1) & np.any(x < r, axis=1)).any() for r in x], dtype=bool)
    return allf[keep]


@pytest.mark.parametrize("objectives", [("loss", "latency"), ("loss", "latency", "throughput"), ("loss", "throughput")])
def test_numba_equals_numpy_and_brute_force(objectives):
    prob = Problem(**KW)
    joint = JointSpace(PRECS, BATCHES)
    fast = joint_frontier(prob, joint, objectives, n_jobs=1, backend="numba")
    slow = joint_frontier(prob, joint, objectives, n_jobs=1, backend="numpy")
    assert fast.timings["backend"] == "numba" and fast.timings["kernel_combinations"] == 4
    assert slow.timings["backend"] == "numpy"
    pd.testing.assert_frame_equal(fast.frontier, slow.frontier)  # same rows, same values, same order
    assert (fast.evaluated, fast.feasible) == (slow.evaluated, slow.feasible) == (SPACE.size * 4, slow.feasible)
    ref = brute(objectives)
    got = fast.frontier
    assert len(got) == len(ref) > 5
    a = got[KEY].astype(str).sort_values(KEY).reset_index(drop=True)
    b = ref[KEY].astype(str).sort_values(KEY).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)
    m = got.merge(ref, on=KEY, suffixes=("", "_ref"))
    for o in objectives:
        np.testing.assert_array_equal(m[COL[o]], m[COL[o] + "_ref"])
    assert not (got["params_total"] < 7e7).any()  # the law's domain (N ≥ 70M) holds on the kernel too
    assert (brute(objectives, allow_extrapolation=True)["params_total"] < 7e7).any()  # … which leaves some out
    # loss-latency: batch 1 is always faster; with throughput, batch 16 is on the frontier; for loss-throughput a
    # batch-1 point is there only where the same architecture at batch 16 misses the 12 ms budget (else batch 16
    # would dominate it)
    assert set(got["batch"]) == ({1} if objectives == ("loss", "latency") else set(got["batch"]) | {16})
    if objectives == ("loss", "throughput"):
        arch = [k for k in KEY if k not in ("precision", "batch")]
        for _, r in got[got["batch"] == 1].iterrows():
            q = Problem(**KW, precision=r["precision"], workload=Workload(batch=16))
            assert not q.evaluate(pd.DataFrame([{k: r[k] for k in arch}]))["feasible"].iloc[0]


def test_solve_and_diagnostics_equal_numpy():
    prob = Problem(**KW)
    joint = JointSpace(PRECS, BATCHES)
    fast, slow = (solve_joint(prob, joint, backend=b) for b in ("numba", "numpy"))
    assert fast.loss == slow.loss and fast.extra == slow.extra
    assert fast.latency_s == slow.latency_s and fast.architecture == slow.architecture
    assert fast.memory_bytes == slow.memory_bytes and fast.energy_j == slow.energy_j
    pd.testing.assert_frame_equal(fast.frontier, slow.frontier)
    msgs = []
    for b in ("numba", "numpy"):
        with pytest.raises(Infeasible) as e:
            joint_frontier(Problem(**(KW | {"latency_budget": "1us"})), joint, n_jobs=1, backend=b)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1] and "latency" in msgs[0]


def test_layouts_stay_on_numpy_and_auto_keeps_small_spaces_on_numpy():
    slow_opt = Option("slow", _doubled)
    joint = JointSpace(PRECS, BATCHES, (Option(), slow_opt))
    prob = Problem(**KW)
    mixed = joint_frontier(prob, joint, ("loss", "latency", "throughput"), n_jobs=1, backend="numba")
    ref = joint_frontier(prob, joint, ("loss", "latency", "throughput"), n_jobs=1, backend="numpy")
    assert mixed.timings["backend"] == "numba+numpy" and mixed.timings["kernel_combinations"] == 4
    pd.testing.assert_frame_equal(mixed.frontier, ref.frontier)
    assert joint_frontier(prob, JointSpace(PRECS, BATCHES), n_jobs=1).timings["backend"] == "numpy"  # auto, 2,592 pts
    with pytest.raises(RooflawError, match="backend"):
        joint_frontier(prob, JointSpace(PRECS, BATCHES), n_jobs=1, backend="fast")


def _doubled(cols, problem):
    """A numpy-only option: the single-device costs at twice the time."""
    from rooflaw import evaluate_columns

    res = dict(evaluate_columns(cols, problem.device, problem.workload, problem.precision, problem.preset))
    for k in ("prefill_s", "decode_s", "total_s", "tpot_s"):
        res[k] = 2 * res[k]
    return res


def test_dask_local_cluster_numba_and_numpy_tasks_equal_single_process():
    pytest.importorskip("distributed")
    prob = Problem(**KW)
    joint = JointSpace(PRECS, BATCHES, (Option(), Option("slow", _doubled)))
    objs = ("loss", "latency", "throughput")
    one = joint_frontier(prob, joint, objs, n_jobs=1, backend="numpy")
    dask = joint_frontier(prob, joint, objs, scheduler="local:2", chunk=256, backend="numba")
    assert dask.timings["n_jobs"] == 2 and dask.timings["backend"] == "numba+numpy" and dask.timings["tasks"] > 4
    pd.testing.assert_frame_equal(one.frontier, dask.frontier)
    assert (one.evaluated, one.feasible) == (dask.evaluated, dask.feasible)
