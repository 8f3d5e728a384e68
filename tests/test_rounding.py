"""Rounding the relaxation to an aligned architecture vs the exact discrete optimum (plain enumeration)."""

from __future__ import annotations

import dataclasses

import pytest

from rooflaw import get_device
from rooflaw.solver import Problem, closed_form, round_solution

LAW = "paper-2602.10377"
# the solver is checked on the pure roofline (no fitted achieved-performance figures)
DEV = dataclasses.replace(get_device("jetson-agx-orin-64gb"), achieved={})
BUDGETS = {"decode": (0.01, 0.02, 0.05, 0.1), "prefill": (0.02, 0.05, 0.1, 0.3), "total": (0.05, 0.1, 0.3, 1.0)}
SWEEP = [(ph, T, M) for ph, Ts in BUDGETS.items() for T in Ts for M in (None, 1e9, 4e9)]


@pytest.fixture(scope="module")
def frame():
    return Problem(LAW, DEV).space.to_frame()


def test_rounding_reaches_the_exact_discrete_optimum(frame):
    worst = 0.0
    for ph, T, M in SWEEP:
        p = Problem(LAW, DEV, latency_budget=T, phase=ph, memory_budget=M)
        df = p.evaluate(frame)
        opt = df.loc[df["feasible"], "loss"].min()
        row, _, _ = round_solution(p, closed_form(p).x)
        assert row is not None, (ph, T, M)
        assert bool(row["feasible"])
        worst = max(worst, (row["loss"] - opt) / opt)
    assert worst == 0.0, worst  # the rounding reaches the exact discrete optimum in every case of the sweep


@pytest.mark.parametrize("align", [128, 256, 512])
def test_alignment(align):
    p = Problem(LAW, DEV, latency_budget=0.03, phase="decode", align=align)
    row, _, _ = round_solution(p, closed_form(p).x)
    a = p.space.architecture(row)
    assert a.d_model % align == 0 and a.ffn % 128 == 0
    assert a.head_dim in (64, 128) and a.heads % a.kv_heads == 0
    assert p.space.contains(a)
