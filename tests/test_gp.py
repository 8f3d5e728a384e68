"""The GP relaxation: agreement with the closed form, user laws, non-posynomial input."""

from __future__ import annotations

import pytest

from rooflaw import get_device
from rooflaw.errors import RooflawError
from rooflaw.objectives import parse_law
from rooflaw.solver import Problem, closed_form, solve_gp

LAW = "paper-2602.10377"
DEV = get_device("jetson-agx-orin-64gb")
CASES = [
    dict(latency_budget=0.02, phase="decode"),
    dict(latency_budget=0.05, phase="prefill"),
    dict(memory_budget=1e9),
    dict(latency_budget=0.02, phase="decode", memory_budget=1e9),
    dict(latency_budget=0.1, phase="total", memory_budget=3e9),
    dict(latency_budget=0.1, phase="total", energy_budget=2.0),
]


@pytest.mark.parametrize("kw", CASES, ids=lambda k: "-".join(f"{a}={b}" for a, b in k.items()))
def test_gp_agrees_with_closed_form(kw):
    p = Problem(LAW, DEV, **kw)
    cf = closed_form(p)
    g = solve_gp(p, preset="paper")
    assert g.status == "optimal"
    assert g.loss == pytest.approx(cf.loss, rel=1e-6)
    for k, v in cf.x.items():
        assert g.x[k] == pytest.approx(v, rel=1e-4), k
    assert set(g.active) == set(cf.active)


def test_gp_serves_a_user_posynomial_law():
    law = parse_law(
        "L0 + a/l**0.5 + b/d**0.3 + c/r**0.2 + e*rho**0.5", values=dict(L0=2.0, a=3.0, b=20.0, c=0.1, e=0.05)
    )
    p = Problem(law, DEV, latency_budget=0.02, phase="decode", memory_budget=2e9)
    g = solve_gp(p, preset="paper")
    cf = closed_form(p)
    assert g.loss == pytest.approx(cf.loss, rel=1e-6)


def test_gp_refuses_non_posynomial_law():
    law = parse_law("L0 + a/l**0.5 - b*d**0.1", values=dict(L0=2.0, a=3.0, b=0.01))
    with pytest.raises(RooflawError, match="not a posynomial"):
        solve_gp(Problem(law, DEV, latency_budget=0.02))


def test_gp_refuses_law_in_parameter_count():
    law = parse_law("E + A/N**0.3", values=dict(E=1.7, A=400.0), variables=["N"])
    with pytest.raises(RooflawError, match="not a posynomial"):
        solve_gp(Problem(law, DEV, latency_budget=0.02))
