"""Every backend on Dask workers (issue 28): a space just large enough for ``auto`` to take the numba scan, a plain
law (the problem's law object, with its evaluator already built in this process, is what the workers receive),
the CLI's ``--scheduler local:2`` path: the same frontier and counts as one process."""

from __future__ import annotations

import pandas as pd
import pytest

from rooflaw import JointSpace, Problem, joint_frontier
from rooflaw.arch import Space
from rooflaw.constraints import backends

pytest.importorskip("distributed")

#: 167,040 points (aligned): over backends.AUTO_MIN_ROWS, so ``auto`` runs the numba scan.
SPACE = Space(name="dask", layers=list(range(1, 41)), d_model=[256 * i for i in range(1, 13)], head_dim=[64, 128],
              kv_heads=[1, 2, 4, "heads"], moe=[(1, 1), (8, 2), (16, 2)], r_single=[1.0, 2.0, 3.0, 4.0],
              vocab=[32000, 50304], tied=[False, True])  # fmt: skip


def test_every_backend_on_dask_workers_equals_one_process():
    assert SPACE.size >= backends.AUTO_MIN_ROWS
    prob = Problem(law="paper-2602.10377", device="h100-sxm", space=SPACE, memory_budget="20GB")
    one = joint_frontier(prob, JointSpace(), ("loss", "latency"), n_jobs=1, backend="numpy")
    assert len(one.frontier) > 5
    expect = "numba" if backends.available() else "numpy"
    for backend in ("auto", "numpy"):
        dask = joint_frontier(prob, JointSpace(), ("loss", "latency"), scheduler="local:2", backend=backend)
        assert dask.timings["backend"] == (expect if backend == "auto" else "numpy")
        pd.testing.assert_frame_equal(one.frontier, dask.frontier)
        assert (one.evaluated, one.feasible) == (dask.evaluated, dask.feasible) == (SPACE.size, one.feasible)
