"""Rounding the relaxation to an aligned architecture vs the exact discrete optimum (plain enumeration)."""

from __future__ import annotations

import dataclasses

import pytest

from rooflaw import get_device
from rooflaw.solver import Problem, closed_form, round_solution

LAW = "paper-2602.10377"
# the solver is checked on the pure roofline (no fitted achieved-performance figures)
DEV = dataclasses.replace(get_device("jetson-agx-orin-64gb"), achieved={})
#: One case per (phase, regime of the relaxation, rounds of the local search) that a sweep of every phase × latency
#: budget (decode 10/20/50/100 ms, prefill 20/50/100/300 ms, total 50/100/300/1000 ms) × memory budget (none, 1 GB,
#: 4 GB) reaches: 11 of its 36 cases. The twelfth kind (total 1 s without a memory budget: memory regime, four
#: rounds) is left out: its relaxation alone takes ~13 s of CPU (sympy derives every total-phase regime), its
#: rounding reaches no arc the others miss, and prefill 300 ms has the same capacity-bound relaxation.
#: Under `coverage --branch` the 36 cases reach the same 132 arcs of discrete/rounding.py as these 11 (34 of the
#: 36 reach 131; prefill 100 ms and total 300 ms, both here, also reach a round with no new neighbour), and the
#: masked feasibility below equals ``Problem.evaluate``'s in all 36.
SWEEP = {
    ("decode", 0.01, None): "decode-latency",
    ("decode", 0.05, 4e9): "decode+memory",
    ("decode", 0.1, 1e9): "memory",
    ("prefill", 0.02, None): "prefill-latency",
    ("prefill", 0.1, None): "prefill-latency",  # five rounds, one with no new neighbour
    ("prefill", 0.02, 4e9): "prefill+memory",
    ("prefill", 0.3, None): "memory",  # the device capacity binds, no memory budget
    ("total", 0.1, None): "total-latency",  # four rounds
    ("total", 0.3, None): "total-latency",  # a round whose whole neighbourhood was evaluated before
    ("total", 0.05, 1e9): "total+memory",
    ("total", 1.0, 4e9): "memory",
}


@pytest.fixture(scope="module")
def frame():
    """Every point of the space with its cost columns and its feasibility without a budget (one evaluation)."""
    p = Problem(LAW, DEV)
    return p.evaluate(p.space.to_frame())


def test_rounding_reaches_the_exact_discrete_optimum(frame):
    worst = 0.0
    for (ph, T, M), regime in SWEEP.items():
        p = Problem(LAW, DEV, latency_budget=T, phase=ph, memory_budget=M)
        feasible = frame["feasible"].to_numpy().copy()
        for col, bound in p.budgets().values():  # the plain enumeration, its budgets applied as masks
            feasible &= frame[col].to_numpy() <= bound
        opt = frame.loc[feasible, "loss"].min()
        cf = closed_form(p)
        assert cf.regime == regime, (ph, T, M)  # the case still stands for its regime
        row, _, _ = round_solution(p, cf.x)
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
