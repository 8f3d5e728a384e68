"""Property tests across solvers: a looser budget never hurts, and the methods agree where they must.

For random budgets b1 < b2 (memory, latency per phase, energy): feasible at b1 ⇒ feasible at b2 and
loss(b2) ≤ loss(b1), for the closed form and the theory-mode GP (the same continuous relaxation, which must also
give the same optimum) and for the exhaustive solver; the closed form's rounded answer is a feasible point of the
aligned space, never better than the exhaustive optimum, and infeasible exactly when the exhaustive one is.
Issue #16 found a looser memory budget declared infeasible by the closed form (tests/test_ref_kkt.py).
The closed form is exercised on memory and decode budgets only: its prefill/total/energy regimes take 20-90 s of
sympy to derive in a fresh process (too slow for the suite; the same checks on those kinds passed by hand, see
docs/solver.md).
"""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rooflaw import Infeasible, Problem, Space, get_device, solve
from rooflaw.objectives import parse_law
from rooflaw.solver import closed_form, solve_gp

# optimisation is checked on the pure roofline (no fitted achieved-performance figures)
DEV = dataclasses.replace(get_device("jetson-agx-orin-64gb"), achieved={})
PAPER = "paper-2602.10377"
# a user law increasing in d and independent of rho and gqa (the shape that broke monotonicity)
USER = parse_law("L0 + a/l**0.5 + b*d**0.1 + c/r**0.2", values=dict(L0=2.0, a=3.0, b=0.2, c=0.1))
SMALL = Space(
    name="small", layers=[4, 8, 12, 16, 24, 32], d_model=[768, 1024, 1536, 2048, 3072], head_dim=[128],
    kv_heads=[1, 4, "heads"], moe=[(1, 1), (8, 2), (16, 1)], r_single=[0.5, 1, 2, 4], ffn_align=128,
)  # fmt: skip
# budget ranges (SI) wide enough to reach infeasible, binding and slack budgets
RANGES = {"memory": (0.2e9, 10e9), "decode": (2e-3, 0.3), "prefill": (2e-3, 0.5), "total": (0.01, 1.5),
          "energy": (0.02, 20.0)}  # fmt: skip
SETTINGS = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)


def problem(law, kind: str, budget: float, **kw) -> Problem:
    if kind == "memory":
        kw["memory_budget"] = budget
    elif kind == "energy":
        kw.update(energy_budget=budget, phase="decode")
    else:
        kw.update(latency_budget=budget, phase=kind)
    return Problem(law, DEV, allow_extrapolation=True, **kw)


def budgets(kinds):
    """(kind, b1, b2) with b1 < b2 log-uniform in the kind's range."""

    def pair(kind):
        lo, hi = (math.log(x) for x in RANGES[kind])
        u = st.floats(lo, hi, allow_nan=False)
        return (
            st.tuples(u, u)
            .filter(lambda t: t[0] < t[1] * (1 - 1e-3))
            .map(lambda t: (kind, math.exp(t[0]), math.exp(t[1])))
        )

    return st.sampled_from(kinds).flatmap(pair)


def loss_or_inf(fn):
    try:
        return fn()
    except Infeasible:
        return math.inf


def assert_monotone(l1: float, l2: float, what) -> None:
    if math.isfinite(l1):
        assert math.isfinite(l2), f"{what}: feasible at the tighter budget, infeasible at the looser one"
        assert l2 <= l1 * (1 + 1e-9), f"{what}: looser budget, higher loss {l2} > {l1}"


@SETTINGS
@given(case=budgets(("memory", "decode")))
def test_the_relaxation_is_monotone_and_closed_form_equals_the_gp(case):
    kind, b1, b2 = case
    out = []
    for b in (b1, b2):
        p = problem(PAPER, kind, b, preset="paper")
        cf = loss_or_inf(lambda p=p: closed_form(p).loss)
        gp = loss_or_inf(lambda p=p: solve_gp(p, preset="paper").loss)
        assert math.isfinite(cf) == math.isfinite(gp), (kind, b, cf, gp)
        if math.isfinite(cf):
            assert cf == pytest.approx(gp, rel=1e-5), (kind, b)
        out.append(cf)
    assert_monotone(*out, (kind, b1, b2))


@SETTINGS
@given(case=budgets(("memory",)))
def test_a_user_law_the_regimes_cannot_reach_stays_monotone(case):
    kind, b1, b2 = case
    out = [loss_or_inf(lambda b=b: closed_form(problem(USER, kind, b, preset="paper")).loss) for b in (b1, b2)]
    gp = [loss_or_inf(lambda b=b: solve_gp(problem(USER, kind, b, preset="paper"), preset="paper").loss)
          for b in (b1, b2)]  # fmt: skip
    assert_monotone(*out, ("closed form", kind, b1, b2))
    for a, g in zip(out, gp, strict=True):
        assert a == pytest.approx(g, rel=1e-5) if math.isfinite(g) else not math.isfinite(a)


@SETTINGS
@given(law=st.sampled_from([PAPER, USER]), case=budgets(("memory", "decode", "prefill", "total", "energy")))
def test_exhaustive_and_rounding_are_monotone_and_consistent(law, case):
    kind, b1, b2 = case
    ex, fg = [], []
    for b in (b1, b2):
        p = problem(law, kind, b, space=SMALL, align=128)
        e = loss_or_inf(lambda p=p: solve(p, "exhaustive").loss)
        ex.append(e)
        fg.append(loss_or_inf(lambda p=p: solve_gp(p).loss))  # the full-preset GP: a lower bound of both
        if kind in ("memory", "decode"):  # (other kinds: closed-form regimes take 20-90 s to derive in a new process)
            try:
                r = solve(p, "closed-form")
            except Infeasible:
                assert not math.isfinite(e), (kind, b, "closed form says infeasible, exhaustive found", e)
            else:
                a = r.architecture
                assert SMALL.contains(a) and a.d_model % 128 == 0 and a.ffn % 128 == 0
                row = p.evaluate({k: [v] for k, v in a.columns().items()}).iloc[0]
                assert bool(row["feasible"]) and row["loss"] == pytest.approx(r.loss, rel=1e-12)
                assert r.loss >= e * (1 - 1e-12), (kind, b, "rounding beat the exhaustive optimum")
        if math.isfinite(e) and math.isfinite(fg[-1]):
            assert fg[-1] <= e * (1 + 1e-6), (kind, b, "the GP relaxation is above a discrete feasible point")
    assert_monotone(*ex, ("exhaustive", kind, b1, b2))
    assert_monotone(*fg, ("full GP", kind, b1, b2))
