"""Pareto masks and hypervolume against brute force (property tests)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from rooflaw.solver import hypervolume, pareto_mask


def brute_mask(x: np.ndarray) -> np.ndarray:
    """O(n²): i is dominated iff some j is ≤ in all and < in one."""
    n = len(x)
    out = np.ones(n, dtype=bool)
    for i in range(n):
        if np.isnan(x[i]).any():
            out[i] = False
            continue
        ok = ~np.isnan(x).any(axis=1)
        dom = ok & np.all(x <= x[i], axis=1) & np.any(x < x[i], axis=1)
        out[i] = not dom.any()
    return out


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 4).flatmap(lambda k: arrays(np.float64, st.tuples(st.integers(0, 120), st.just(k)),
                                                  elements=st.integers(0, 5).map(float))))  # fmt: skip
def test_pareto_mask_equals_brute_force_with_ties(x):
    assert np.array_equal(pareto_mask(x), brute_mask(x))


@pytest.mark.parametrize("k", [2, 3, 4])
def test_pareto_mask_random_continuous(k):
    rng = np.random.default_rng(k)
    x = rng.random((3000, k))
    x[::7] = x[1::7][: len(x[::7])]  # exact duplicates
    x[5, 0] = np.nan
    assert np.array_equal(pareto_mask(x), brute_mask(x))


def test_duplicates_all_kept():
    x = np.array([[1.0, 2.0], [1.0, 2.0], [2.0, 1.0], [2.0, 2.0]])
    assert pareto_mask(x).tolist() == [True, True, True, False]


def brute_hv_2d(p, ref, grid=400):
    xs = np.linspace(min(p[:, 0].min(), ref[0]), ref[0], grid)
    ys = np.linspace(min(p[:, 1].min(), ref[1]), ref[1], grid)
    cx, cy = (xs[1:] + xs[:-1]) / 2, (ys[1:] + ys[:-1]) / 2
    X, Y = np.meshgrid(cx, cy, indexing="ij")
    dom = np.zeros_like(X, dtype=bool)
    for q in p:
        dom |= (q[0] <= X) & (q[1] <= Y)
    return dom.sum() * (xs[1] - xs[0]) * (ys[1] - ys[0])


def test_hypervolume_known_values():
    assert hypervolume(np.array([[1.0, 1.0]]), [2.0, 2.0]) == pytest.approx(1.0)
    assert hypervolume(np.array([[0.0, 1.0], [1.0, 0.0]]), [2.0, 2.0]) == pytest.approx(3.0)
    assert hypervolume(np.array([[0.0, 0.0, 0.0]]), [1.0, 2.0, 3.0]) == pytest.approx(6.0)
    # two boxes in 3-D: union = 1·1·2 + 2·1·1 − 1·1·1 ... computed by inclusion–exclusion
    p = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 1.0]])
    ref = [2.0, 2.0, 2.0]
    a = 2 * 1 * 2
    b = 1 * 2 * 1
    inter = 1 * 1 * 1
    assert hypervolume(p, ref) == pytest.approx(a + b - inter)
    assert hypervolume(np.array([[3.0, 3.0]]), [2.0, 2.0]) == 0.0
    assert hypervolume(np.empty((0, 2)), [1.0, 1.0]) == 0.0


def test_hypervolume_2d_against_grid():
    rng = np.random.default_rng(3)
    p = rng.random((30, 2))
    ref = [1.1, 1.1]
    assert hypervolume(p, ref) == pytest.approx(brute_hv_2d(p, np.array(ref)), rel=2e-2)


def test_hypervolume_4d_monte_carlo():
    rng = np.random.default_rng(4)
    p = rng.random((12, 4))
    ref = np.ones(4) * 1.05
    s = rng.random((200_000, 4)) * ref
    dom = np.zeros(len(s), dtype=bool)
    for q in p:
        dom |= np.all(q <= s, axis=1)
    mc = dom.mean() * np.prod(ref)
    assert hypervolume(p, ref) == pytest.approx(mc, rel=2e-2)
