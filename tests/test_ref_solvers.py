"""Solvers against brute force: the alignment filter decides the answer, every frontier is exactly
the non-dominated set, and Optuna's frontier on a small space equals the exhaustive one."""

from __future__ import annotations

import dataclasses
import importlib.util

import numpy as np
import pandas as pd
import pytest

from rooflaw import Problem, Space, get_device, solve
from rooflaw.solver import frontier, search

LAW = "paper-2602.10377"
# optimisation is checked on the pure roofline (no fitted achieved-performance figures)
DEV = dataclasses.replace(get_device("jetson-agx-orin-64gb"), achieved={})
OBJ = {"loss": "loss", "latency": "latency_s", "memory": "memory_bytes", "energy": "energy_j"}
ARCH_KEY = ["layers", "d_model", "kv_heads", "head_dim", "ffn", "experts", "top_k"]


def dominated_by_any(x: np.ndarray, others: np.ndarray) -> np.ndarray:
    """For each row of ``x``: is some row of ``others`` ≤ in every objective and < in one? (O(n·m), plain)."""
    out = np.zeros(len(x), dtype=bool)
    for i, p in enumerate(x):
        out[i] = bool((np.all(others <= p, axis=1) & np.any(others < p, axis=1)).any())
    return out


def check_exact_frontier(front: pd.DataFrame, cloud: pd.DataFrame, objectives) -> None:
    """``front`` is exactly the non-dominated subset of ``cloud`` (up to duplicates of the same values)."""
    cols = [OBJ[o] for o in objectives]
    f, c = front[cols].to_numpy(float), cloud[cols].to_numpy(float)
    assert len(f) > 0
    assert not dominated_by_any(f, c).any(), "a frontier point is dominated"
    nd = c[~dominated_by_any(c, c)]
    # every non-dominated point of the cloud has its values on the frontier
    assert {tuple(v) for v in nd} == {tuple(v) for v in f}


# ---- alignment --------------------------------------------------------------------------------------
# d_model in steps of 64 so that, for every alignment, unaligned widths sit between the aligned ones;
# at these decode budgets the unfiltered optimum is an unaligned width (e.g. 1344 = 10.5·128 at 40 ms).
ALIGN_SPACE = Space(
    name="align-test",
    layers=list(range(2, 41, 2)),
    d_model=list(range(576, 3073, 64)),
    head_dim=[64],
    kv_heads=[1, "heads"],
    moe=[(1, 1), (8, 2)],
    r_single=[1, 2, 3, 4],
    ffn_align=64,
)
BUDGETS = (0.03, 0.05, 0.08, 0.1, 0.2, 0.3)  # chosen on the kernel-fitted figures: unaligned widths win at each


@pytest.fixture(scope="module")
def align_cases():
    """(align, budget, problem, unfiltered best loss, aligned best loss, closed-form result) where an
    unaligned width wins."""
    frame = ALIGN_SPACE.to_frame()
    out = []
    for T in BUDGETS:
        p0 = Problem(LAW, DEV, space=ALIGN_SPACE, latency_budget=T, phase="decode")
        df = p0.evaluate(frame)
        feas = df[df["feasible"]]
        if feas.empty:  # a budget nothing meets on this device's fitted figures: no case to draw from it
            continue
        best_any = feas.loc[feas["loss"].idxmin()]
        for align in (128, 256, 512, 1024):
            ok = feas["d_model"] % align == 0
            if align > ALIGN_SPACE.ffn_align:
                ok &= feas["ffn"] % align == 0
            if best_any["d_model"] % align:
                p = Problem(LAW, DEV, space=ALIGN_SPACE, latency_budget=T, phase="decode", align=align)
                best_aligned = float(feas[ok]["loss"].min())
                out.append((align, T, p, float(best_any["loss"]), best_aligned, solve(p, "closed-form")))
    return out


@pytest.mark.parametrize("align", [128, 256, 512, 1024])
def test_alignment_filters_where_an_unaligned_width_would_win(align, align_cases):
    cases = [c for c in align_cases if c[0] == align]
    assert len(cases) >= 2, f"align {align}: no budget where an unaligned width wins -- the test checks nothing"
    for _, T, _, best_any, best_aligned, res in cases:
        assert best_any < best_aligned
        a = res.architecture
        assert a.d_model % align == 0 and (align <= ALIGN_SPACE.ffn_align or a.ffn % align == 0), (align, T, a)
        assert res.loss >= best_aligned  # nothing aligned beats the aligned optimum


# issue #16 found a 10 % gap here (align 128 at 150 ms: 3.4019 vs 3.0895): rounding now searches the whole
# width line and the depth line (solver/discrete/rounding.py)
def test_rounding_reaches_the_aligned_discrete_optimum(align_cases):
    gaps = [res.loss / best_aligned - 1 for *_, best_aligned, res in align_cases]
    assert max(gaps) == 0.0, gaps


def test_exhaustive_honours_the_alignment(align_cases):
    for align, T, p, _, best_aligned, _ in align_cases:
        res = solve(p, "exhaustive")
        assert res.architecture.d_model % align == 0 and res.loss == best_aligned, (align, T)


# ---- exhaustive frontier: exactly the non-dominated feasible set --------------------------------------
@pytest.mark.parametrize(
    "objectives, kw",
    [
        (("loss", "latency"), dict(latency_budget=0.05, phase="decode")),
        (("loss", "latency", "memory"), dict(phase="total", memory_budget=4e9)),
        (("loss", "energy"), dict(phase="prefill")),
    ],
)
def test_exhaustive_frontier_is_the_non_dominated_feasible_set(objectives, kw):
    p = Problem(LAW, DEV, **kw)
    df = p.evaluate(p.space.to_frame())
    res = frontier(p, objectives)
    check_exact_frontier(res.frontier, df[df["feasible"]], objectives)


# ---- Optuna frontier ------------------------------------------------------------------------------------
TINY = Space(
    name="tiny", layers=[4, 12], d_model=[512, 1024], head_dim=[128], kv_heads=[1, "heads"],
    moe=[(1, 1), (8, 2)], r_single=[1, 4],
)  # fmt: skip


@pytest.mark.parametrize(
    "sampler, objectives", [("nsga2", ("loss", "latency")), ("tpe", ("loss", "latency", "memory")),
                            ("random", ("loss", "latency"))],
)  # fmt: skip
def test_optuna_frontier_is_non_dominated_and_matches_brute_force_on_a_small_space(sampler, objectives):
    # d_model 512 lies outside the law's fitted domain: allow it, this checks the frontier, not the domain
    p = Problem(LAW, DEV, space=TINY, latency_budget=0.02, phase="decode", allow_extrapolation=True)
    res = search(p, sampler=sampler, n_trials=150, seed=3, objectives=objectives)
    t = res.trials
    feas = t[t["feasible"]]
    assert len(feas) < len(t), "the budget should exclude some trials"
    assert len(res.frontier) < feas["index"].nunique(), "some feasible trials must be dominated, or this checks nothing"
    # the reported frontier is exactly the non-dominated set of the feasible trials
    check_exact_frontier(res.frontier, feas, objectives)
    assert res.frontier["index"].is_unique
    # ... and against brute force over the whole space: no frontier point is dominated by any feasible point
    allp = p.evaluate(TINY.to_frame())
    allf = allp[allp["feasible"]]
    cols = [OBJ[o] for o in objectives]
    assert not dominated_by_any(res.frontier[cols].to_numpy(float), allf[cols].to_numpy(float)).any()
    if t["index"].nunique() == TINY.size:  # every point was tried: the frontier is the exhaustive one
        exact = frontier(p, objectives).frontier
        assert sorted(map(tuple, res.frontier[ARCH_KEY].astype(int).to_numpy().tolist())) == sorted(
            map(tuple, exact[ARCH_KEY].astype(int).to_numpy().tolist())
        )
    else:
        assert sampler != "random", "150 random trials cover the 32-point space (seed 3)"


@pytest.mark.parametrize("align", [256, 512])
def test_every_enumerating_path_keeps_to_the_alignment(align):
    # exhaustive frontier (numpy and the numba kernel) and the Optuna search draw only aligned points: d_model and
    # ffn multiples of align; the frontier is exactly the non-dominated set of the aligned feasible points
    p = Problem(LAW, DEV, space=ALIGN_SPACE, latency_budget=0.05, phase="decode", align=align, allow_extrapolation=True)
    df = p.evaluate(ALIGN_SPACE.to_frame())
    ok = (df["d_model"] % align == 0) & (df["ffn"] % align == 0)
    assert ok.any() and not ok.all()
    aligned = df[df["feasible"] & ok]
    fronts = [frontier(p, ("loss", "latency"), backend="numpy")]
    if importlib.util.find_spec("numba") is not None:
        fronts.append(frontier(p, ("loss", "latency"), backend="numba"))
    for f in fronts:
        assert f.evaluated == int(ok.sum())
        check_exact_frontier(f.frontier, aligned, ("loss", "latency"))
    t = search(p, sampler="random", n_trials=40, seed=1, objectives=("loss", "latency")).trials
    assert (t["d_model"] % align == 0).all() and (t["ffn"] % align == 0).all()


@pytest.mark.parametrize("method", ["exhaustive", "closed-form"])
def test_an_alignment_no_point_meets_is_bad_input_naming_align(method):
    from rooflaw import RooflawError

    p = Problem(LAW, DEV, space=ALIGN_SPACE, latency_budget=0.05, phase="decode", align=4096)
    with pytest.raises(RooflawError, match=r"^align=4096: no point of space 'align-test'"):
        solve(p, method)
