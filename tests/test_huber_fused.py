"""The fused (numba) fitting objective against the numpy one it replaces for sums of power laws."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from rooflaw import fit_law  # noqa: E402
from rooflaw.objectives import huber_fused as H  # noqa: E402
from rooflaw.objectives.builtins import get_law  # noqa: E402
from rooflaw.objectives.huber import LogHuberObjective  # noqa: E402


def _data(n: int = 60, seed: int = 0, noise: float = 0.01) -> tuple[dict, np.ndarray]:
    rng = np.random.default_rng(seed)
    N = 10 ** rng.uniform(7, 10, n)
    D = 10 ** rng.uniform(9, 12, n)
    y = (1.7 + 400.0 / N**0.34 + 2000.0 / D**0.37) * np.exp(rng.normal(0, noise, n))
    return {"N": N, "D": D}, y


@pytest.fixture(scope="module")
def obj() -> LogHuberObjective:
    x, y = _data()
    return LogHuberObjective(get_law("E + A/N**alpha + B/D**beta"), x, y)


def _close(a: np.ndarray, b: np.ndarray, rtol: float) -> bool:
    return bool(np.all(np.abs(a - b) <= rtol * np.maximum(np.abs(a), np.abs(b)) + 1e-300))


def test_objective_and_gradient_match_numpy(obj):
    rng = np.random.default_rng(1)
    theta = np.column_stack([rng.uniform(-1, 1, 300), rng.uniform(0, 25, 300), rng.uniform(0, 25, 300),
                             rng.uniform(0, 2, 300), rng.uniform(0, 2, 300)])  # fmt: skip
    theta[:3] = [[np.nan, 1, 1, 1, 1], [0, np.inf, 1, 1, 1], [0, 1, -np.inf, 1, 1]]  # non-finite: f = inf, g = 0
    f0, g0 = obj(theta)
    for threads in (1, 2):
        H.THREADS = threads
        f1, g1 = obj.fused()(theta, None)
        assert np.array_equal(np.isfinite(f0), np.isfinite(f1)) and np.isinf(f0[:3]).all()
        ok = np.isfinite(f0)
        assert _close(f1[ok], f0[ok], 1e-13) and _close(g1[ok], g0[ok], 1e-11)
        assert (g1[~ok] == 0).all()
    w = np.random.default_rng(2).uniform(0, 3, obj.n)
    f0, g0 = obj(theta[3:], w)
    f1, g1 = obj.fused(w)(theta[3:], None)
    assert _close(f1, f0, 1e-13) and _close(g1, g0, 1e-11)


def test_exp_and_log_are_within_an_ulp_of_libm(obj):
    obj.fused()(np.zeros((1, 5)), None)  # compile / load
    mod = H._KERNELS[(3, 5)].py_func.__globals__
    x = np.concatenate([-np.random.default_rng(3).uniform(0, 740, 20_000), [0.0, -1e-300, -744.0, -745.2]])
    e = np.array([mod["_exp"](v) for v in x])
    assert np.all(np.abs(e - np.exp(x)) <= 2.3e-16 * np.exp(x) + 5e-324)
    assert mod["_exp"](-np.inf) == 0.0 and np.isnan(mod["_exp"](np.nan)) and mod["_exp"](-800.0) == 0.0
    y = np.concatenate([1 + np.random.default_rng(4).uniform(0, 1e3, 20_000), [1.0, 2.0, 3.0, 1e300]])
    lg = np.array([mod["_log"](v) for v in y])
    assert np.all(np.abs(lg - np.log(y)) <= 2.3e-16 * np.log(y)) and mod["_log"](1.0) == 0.0
    assert np.isnan(mod["_log"](np.nan)) and mod["_log"](np.inf) == np.inf


def test_fit_takes_the_fused_path_and_finds_the_numpy_optimum(monkeypatch):
    x, y = _data(30, seed=5, noise=0.0)  # one optimum: the law's own parameters
    data = {"N": x["N"], "D": x["D"], "loss": y}
    calls = []
    real = H.fused_fg
    monkeypatch.setattr(H, "fused_fg", lambda *a: calls.append(1) or real(*a))
    monkeypatch.setattr(H, "MIN_PAIRS", 0)
    fused = fit_law("E + A/N**alpha + B/D**beta", data, starts=400)
    assert calls  # the multistart ran on the kernel
    monkeypatch.setattr(H, "MIN_PAIRS", 10**12)
    calls.clear()
    ref = fit_law("E + A/N**alpha + B/D**beta", data, starts=400)
    assert not calls
    want = {"E": 1.7, "A": 400.0, "alpha": 0.34, "B": 2000.0, "beta": 0.37}
    # 30 exact points: zero residual at the optimum
    assert fused.objective < 1e-10 and ref.objective < 1e-10, (fused.objective, ref.objective)
    for k, v in want.items():
        assert fused.params[k] == pytest.approx(v, rel=1e-4) and ref.params[k] == pytest.approx(v, rel=1e-4), k
