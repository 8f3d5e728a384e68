"""Optuna search over the joint space (architecture × precision × batch × layout) against the exact joint frontier:
its points are exact evaluations, never beyond the exact frontier; it finds the exact best under a budget; a layout
that does not divide is an infeasible trial; a study's definition includes the joint dimensions."""

from __future__ import annotations

import json

import numpy as np
import pytest
from cli_helpers import run_cli, space_file

import rooflaw as R
from rooflaw.arch import Space
from rooflaw.solver.discrete.pareto import hypervolume
from rooflaw.solver.search.joint_trials import matrix, minimised

# 32 architectures (4 or 8 heads, dense or 8 experts) x {bf16, fp8} x {1, 16} x {tp=4, ep=8}: 256 joint points.
# ep=8,dp_attn=8 does not divide the dense models (1 expert): those trials must be infeasible, not errors.
SPACE = Space(name="tiny-joint", layers=[4, 8], d_model=[512, 1024], head_dim=[128], kv_heads=[1, "heads"],
              moe=[(1, 1), (8, 2)], r_single=[1.0, 3.0], vocab=[32000], tied=[False])  # fmt: skip
LAYOUTS = ("tp=4", "ep=8,dp_attn=8")
KEY = ["layers", "d_model", "heads", "kv_heads", "ffn", "experts", "top_k", "precision", "batch", "option"]


def problem(**kw):
    return R.Problem(law="chinchilla-precision", device="h100-sxm", space=SPACE, tokens=1e11,
                     workload=R.Workload(16, 256, 16), allow_extrapolation=True, **kw)  # fmt: skip


def joint(layouts=LAYOUTS):
    return R.JointSpace(("bf16", "fp8"), (1, 16), R.layout_options("h100-sxm:8", layouts))


def test_search_points_are_exact_and_never_beyond_the_exact_frontier():
    objs = ("loss", "latency", "throughput")
    prob, js = problem(latency_budget="20ms"), joint()
    exact = R.joint_frontier(prob, js, objs, n_jobs=1).frontier
    res = R.search(prob, sampler="nsga2", n_trials=80, seed=1, objectives=objs, joint=js)
    t = res.trials
    assert len(t) == 80 and set(t["option"]) == set(LAYOUTS) and set(t["precision"]) == {"bf16", "fp8"}
    # the layout validity reaches the sampler as a constraint: EP on a dense model is a trial, infeasible
    dense_ep = t[(t["experts"] == 1) & (t["option"] == "ep=8,dp_attn=8")]
    assert len(dense_ep) and not dense_ep["valid"].any() and not dense_ep["feasible"].any()
    # every feasible trial is weakly dominated by a point of the exact frontier (which it may equal)
    ex = matrix(exact, objs)
    for v in matrix(t[t["feasible"]], objs):
        assert (np.all(ex <= v, axis=1)).any()
    # trials that hit an exact frontier point carry exactly its values (same code, same numbers)
    m = res.frontier.merge(exact, on=KEY, suffixes=("", "_x"))
    assert len(m) >= 3
    for c in ("loss", "latency_s", "tokens_per_s", "memory_bytes"):
        np.testing.assert_array_equal(m[c], m[f"{c}_x"])
    # the same reference point for both: the search's hypervolume cannot exceed the exact frontier's
    ref = minimised(res.reference_point, objs)
    assert res.reference_point[2] == 0.0  # throughput's reference: 0 tokens/s
    assert 0 < res.hypervolume <= hypervolume(ex, ref) * (1 + 1e-12)


def test_search_finds_the_exact_best_under_a_budget():
    prob, js = problem(latency_budget="9.6ms"), joint()  # binds: the best is fp8 + EP, bf16 + EP just misses
    best = R.solve_joint(prob, js)
    got = R.solve_optuna(prob, n_trials=100, seed=0, sampler="tpe", joint=js)  # found at trial 67 (seed 0)
    assert got.loss == best.loss
    assert {k: got.extra[k] for k in ("precision", "batch", "option")} == {
        k: best.extra[k] for k in ("precision", "batch", "option")}  # fmt: skip
    assert got.architecture.spec() == best.architecture.spec()
    with pytest.raises(R.Infeasible):
        R.solve_optuna(problem(latency_budget="1us"), n_trials=5, seed=0, joint=js)


def test_a_study_is_defined_by_its_joint_dimensions(tmp_path):
    url = f"journal:///{tmp_path / 'study.log'}"
    prob = problem()
    first = R.search(prob, sampler="random", n_trials=4, seed=0, storage=url, study_name="s", joint=joint())
    assert first.ran == 4
    again = R.search(prob, sampler="random", n_trials=6, seed=0, storage=url, study_name="s", joint=joint())
    assert again.ran == 2 and len(again.trials) == 6  # resumed: only what is missing
    with pytest.raises(R.RooflawError, match="joint"):
        R.search(prob, sampler="random", n_trials=6, storage=url, study_name="s", joint=joint(("tp=4",)))
    with pytest.raises(R.RooflawError, match="no joint dimensions"):
        R.search(prob, sampler="random", n_trials=6, storage=url, study_name="s")
    with pytest.raises(R.RooflawError, match="measure"):
        R.search(prob, n_trials=2, joint=joint(), measure=lambda a, w: 1.0)


def test_cli_search_joint(tmp_path, capsys):
    space = space_file(tmp_path)
    base = ["search", "--device", "h100-sxm", "--space", str(space), "--law", "chinchilla-precision", "--tokens",
            "1e11", "--allow-extrapolation", "--batch", "16", "--input-tokens", "256", "--system", "h100-sxm:8",
            "--sampler", "random", "--n-trials", "12"]  # fmt: skip
    code, out, err = run_cli(capsys, *base, "--layouts", "tp=4;ep=8,dp_attn=8", "--precisions", "bf16,fp8",
                          "--objectives", "loss,latency,throughput", "--engine", "vllm", "--json")  # fmt: skip
    assert code == 0, err
    d = json.loads(out)
    assert d["trials"] == 12 and d["combinations"] == 4 and d["joint_points"] == 128 and d["frontier_size"] >= 1
    # a layout that divides no architecture of the space: every trial infeasible -> exit 3 naming the option
    dense = tmp_path / "dense.toml"
    dense.write_text(space.read_text().replace("[[1, 1], [8, 2]]", "[[1, 1]]"))
    code, _, err = run_cli(capsys, *[a if a != str(space) else str(dense) for a in base], "--layouts", "ep=8,dp_attn=8")
    assert code == 3 and "option" in err and "Traceback" not in err
    code, _, err = run_cli(capsys, *base, "--layouts", "tp=4", "--backend", "numba")
    assert code == 2 and "backend" in err
