"""The batched L-BFGS evaluates its objective a cache-sized block of problems at a time: same result bit for bit."""

from __future__ import annotations

import numpy as np

from rooflaw.objectives.lbfgs import batched_lbfgs


def _rosenbrock(x: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a = 1.0 + 0.01 * rows  # a different problem per row, so a mix-up of rows would show
    f = (a - x[:, 0]) ** 2 + 100.0 * (x[:, 1] - x[:, 0] ** 2) ** 2
    g = np.column_stack([-2 * (a - x[:, 0]) - 400.0 * x[:, 0] * (x[:, 1] - x[:, 0] ** 2),
                         200.0 * (x[:, 1] - x[:, 0] ** 2)])  # fmt: skip
    return f, g


def test_blocks_give_the_same_answer_as_one_call():
    x0 = np.random.default_rng(0).normal(size=(50, 2))
    whole = batched_lbfgs(_rosenbrock, x0, block=10**6)
    for block in (1, 7, 64):
        part = batched_lbfgs(_rosenbrock, x0, block=block)
        assert np.array_equal(part.x, whole.x) and np.array_equal(part.f, whole.f)
        assert np.array_equal(part.status, whole.status) and part.iterations == whole.iterations
    a = 1.0 + 0.01 * np.arange(50)
    ok = whole.status == 1
    assert ok.sum() > 40 and np.allclose(whole.x[ok], np.column_stack([a, a * a])[ok], atol=1e-3)
