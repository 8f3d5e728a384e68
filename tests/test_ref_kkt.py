"""The closed form's KKT certificate and regime choice where they matter, against SLSQP.

Findings recorded here (issue #16): removing the KKT sign check changes no answer on 168 problems
(102 with the paper law, 66 with six user laws, latency / memory / dual budgets), and taking the
first feasible regime instead of preferring a certified one changes none of the 66 -- the projected
Newton of each regime already stops only where the bound multipliers have the right sign. The sign
check acted only on variables pinned with ``fix=``, which it treated as lower bounds: it flagged them
whenever the loss would like them larger and sent every regime to the numerical fallback. A pinned
variable now has no sign condition (``at_bound`` says ``fixed``); the pinned problems below are
certified in closed form and equal SLSQP's optimum.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy.optimize import minimize

from rooflaw import Problem, evaluate_columns, get_device
from rooflaw.objectives import parse_law
from rooflaw.solver import closed_form

LAW = "paper-2602.10377"
# optimisation is checked on the pure roofline (no fitted achieved-performance figures)
DEV = dataclasses.replace(get_device("jetson-agx-orin-64gb"), achieved={})
NAMES = ("l", "d", "r", "rho", "gqa")


def scipy_optimum(p: Problem, fix: dict[str, float], starts: int = 3) -> float:
    """Independent: SLSQP in log variables on the paper-preset evaluator and ``law.evaluate``, with the
    ``fix`` variables held at their values (finite-difference gradients)."""
    b = p.space.bounds()
    free = [n for n in NAMES if n not in fix]
    lo = np.log([b[k][0] for k in free])
    hi = np.log([b[k][1] for k in free])

    def point(z):
        x = dict(zip(free, np.exp(z), strict=True))
        x.update(fix)
        return x

    def cols(z):
        x = point(z)
        return {"layers": [x["l"]], "d_model": [x["d"]], "heads": [x["d"] / 128], "head_dim": [128],
                "kv_heads": [x["d"] / 128 / x["gqa"]], "ffn": [x["r"] * x["d"]], "experts": [1 / x["rho"]],
                "top_k": [1]}  # fmt: skip

    def loss(z):
        x = point(z)
        return float(p.law.evaluate({**x, "d_m": x["d"] / x["gqa"]})[()])

    budgets = {"memory_bytes": p.capacity}
    if p.latency_budget:
        budgets[p.latency_column] = p.latency_budget

    def slack(z, col, bound):
        return 1 - evaluate_columns(cols(z), DEV, p.workload, "fp16", "paper")[col][0] / bound

    cons = [{"type": "ineq", "fun": slack, "args": (k, v)} for k, v in budgets.items()]
    rng = np.random.default_rng(1)
    best = np.inf
    for i in range(starts):
        z0 = 0.5 * (lo + hi) if i == 0 else lo + (hi - lo) * rng.random(len(free))
        res = minimize(loss, z0, method="SLSQP", bounds=list(zip(lo, hi, strict=True)), constraints=cons,
                       options={"ftol": 1e-14, "maxiter": 1000, "eps": 1e-9})  # fmt: skip
        if all(slack(res.x, k, v) > -1e-8 for k, v in budgets.items()):
            best = min(best, float(res.fun))
    return best


PINNED = [
    ({"d": 1024.0}, dict(latency_budget=0.02, phase="decode")),
    ({"d": 2048.0}, dict(memory_budget=1e9)),
    ({"l": 16.0}, dict(latency_budget=0.05, phase="prefill")),
    ({"gqa": 4.0}, dict(latency_budget=0.02, phase="decode", memory_budget=1e9)),
    ({"rho": 0.5}, dict(latency_budget=0.02, phase="decode")),
    ({"d": 1536.0, "l": 8.0}, dict(memory_budget=2e9)),
]


@pytest.mark.parametrize("fix, kw", PINNED)
def test_pinned_problems_reach_the_scipy_optimum(fix, kw):
    p = Problem(LAW, DEV, preset="paper", **kw)
    cf = closed_form(p, fix=fix)
    assert cf.method == "closed-form", cf.notes  # certified: a pinned variable has no sign condition
    for k, v in fix.items():
        assert cf.x[k] == v and cf.at_bound[k] == "fixed"
    assert cf.loss == pytest.approx(scipy_optimum(p, fix), rel=1e-7)


def test_a_pinned_width_is_certified_in_closed_form():
    # issue #16: the sign check took a variable pinned with fix= for a lower bound, refused every regime of a
    # fixed-width problem and let the numerical fallback answer
    cf = closed_form(Problem(LAW, DEV, preset="paper", latency_budget=0.02, phase="decode"), fix={"d": 1024.0})
    assert cf.method == "closed-form", cf.notes


def test_unpinned_answers_are_certified_kkt_points_with_signed_multipliers():
    # every regime answer of these problems passes the full certificate: multipliers ≥ 0, residual ≈ 0,
    # and the loss gradient of every variable at a bound points out of the box
    for kw in (dict(latency_budget=0.02, phase="decode"), dict(memory_budget=1e9),
               dict(latency_budget=0.02, phase="decode", memory_budget=1e9)):  # fmt: skip
        cf = closed_form(Problem(LAW, DEV, preset="paper", **kw))
        assert cf.method == "closed-form" and cf.kkt_residual < 1e-8
        assert all(m > 0 for m in cf.multipliers.values()), cf.multipliers
        assert cf.at_bound, "the paper space puts ρ (and r) at a bound: the sign condition is exercised"


USER_LAW = "L0 + a/l**0.5 + b*d**0.1 + c/r**0.2"  # increasing in d, independent of rho and gqa


def test_a_looser_memory_budget_never_makes_the_relaxation_infeasible():
    # issue #16: memory <= 2 GB was declared infeasible although memory <= 0.5 GB was solved: the regimes left rho
    # and gqa (which this law ignores) where the memory budget broke, and no regime meant Infeasible
    law = parse_law(USER_LAW, values=dict(L0=2.0, a=3.0, b=0.2, c=0.1))
    tight = closed_form(Problem(law, DEV, preset="paper", memory_budget=0.5e9))
    loose = closed_form(Problem(law, DEV, preset="paper", memory_budget=2e9))
    assert loose.method == "closed-form" and loose.loss <= tight.loss
    # the variables the law ignores sit at the cheapest corner (dense, MQA): no loss lost, budget freed
    assert loose.x["rho"] == 1.0 and loose.x["gqa"] == Problem(law, DEV).space.bounds()["gqa"][1]
    assert loose.loss == pytest.approx(scipy_optimum(Problem(law, DEV, preset="paper", memory_budget=2e9), {}), 1e-7)


def test_no_regime_falls_back_to_the_numerical_solve_not_to_infeasible(monkeypatch):
    # when no regime yields a point, a feasible relaxation is solved numerically (SLSQP), never called infeasible
    from rooflaw.solver.relaxation import closed_form as cf_module

    p = Problem(LAW, DEV, preset="paper", latency_budget=0.02, phase="decode")
    want = closed_form(p).loss
    monkeypatch.setattr(cf_module.Derivation, "regime", lambda self, spec: None)  # no regime derived
    got = closed_form(p)
    assert got.method == "numerical-kkt" and got.loss == pytest.approx(want, rel=1e-6), got.notes


def test_the_certificate_flags_a_bound_the_loss_pushes_into_and_never_a_pinned_variable():
    # the sign condition of a bound multiplier, checked on the certificate itself: at the optimum rho sits at its
    # lower bound with the loss pushing it lower (fine); declare that value the *upper* end of the box and the
    # same gradient points into the box -- not a KKT point. Pinning rho there (fix=) has no sign condition.
    from rooflaw.solver.relaxation.certificate import kkt_certificate
    from rooflaw.solver.relaxation.closed_form import CONSTS, derive, problem_budgets
    from rooflaw.solver.relaxation.kkt import constants, law_kwargs

    p = Problem(LAW, DEV, preset="paper", latency_budget=0.02, phase="decode")
    cf = closed_form(p)
    assert cf.at_bound.get("rho") == "lower"
    budgets = problem_budgets(p)
    kinds = tuple(k for k in ("latency", "memory", "energy") if k in budgets)  # closed_form's order
    der = derive(p.law, p.phase, kinds, **law_kwargs(p))
    cvals = [constants(p)[s] for s in CONSTS]
    box = dict(p.space.bounds())
    *_, ok = kkt_certificate(der, cf.x, cvals, cf.active, budgets, box)
    assert ok
    box["rho"] = (cf.x["rho"] / 10, cf.x["rho"])
    _, _, at, ok = kkt_certificate(der, cf.x, cvals, cf.active, budgets, box)
    assert at["rho"] == "upper" and not ok
    _, _, at, ok = kkt_certificate(der, cf.x, cvals, cf.active, budgets, box, fixed=frozenset({"rho"}))
    assert at["rho"] == "fixed" and ok
