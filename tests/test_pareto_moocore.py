"""moocore (the fast extra) and the hand-written Pareto / hypervolume code agree, ties, duplicates and NaN included."""

from __future__ import annotations

import numpy as np
import pytest

from rooflaw.solver.discrete import pareto

moocore = pytest.importorskip("moocore")


def both(monkeypatch, fn, *args):
    got = fn(*args)
    monkeypatch.setattr(pareto, "USE_MOOCORE", False)
    want = fn(*args)
    monkeypatch.setattr(pareto, "USE_MOOCORE", True)
    return got, want


@pytest.mark.parametrize("k", [3, 4, 5])
def test_nondominated_same_mask(monkeypatch, k):
    rng = np.random.default_rng(k)
    x = rng.integers(0, 6, size=(1500, k)).astype(float)  # coarse grid: many ties and exact duplicates
    x[rng.integers(0, 1500, 40), rng.integers(0, k, 40)] = np.nan
    got, want = both(monkeypatch, pareto.pareto_mask, x)
    assert np.array_equal(got, want)
    ok = ~np.isnan(x).any(axis=1)  # the definition, by brute force
    f = x[ok]
    brute = np.array([not (np.all(f <= r, axis=1) & np.any(f < r, axis=1)).any() for r in f])
    assert np.array_equal(got[ok], brute) and not got[~ok].any()


@pytest.mark.parametrize("k", [2, 3, 4])
def test_hypervolume_same_value(monkeypatch, k):
    rng = np.random.default_rng(10 + k)
    x = rng.random((200, k))
    x = np.vstack([x, x[:5]])  # duplicates
    ref = np.full(k, 1.05)
    got, want = both(monkeypatch, pareto.hypervolume, x, ref)
    assert got == pytest.approx(want, rel=1e-12, abs=0)
    # one box: the volume by hand
    assert pareto.hypervolume(np.array([[0.5] * k]), np.ones(k)) == pytest.approx(0.5**k, rel=1e-15)
