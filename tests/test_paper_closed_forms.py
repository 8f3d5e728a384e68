"""The paper's §5 closed forms, each recomputed independently of the sympy derivation in paper_repro.closed_forms.

The independent side never touches sympy: the numerical cost evaluator (``evaluate_columns``, preset ``paper``,
fractional kv_heads/ffn allowed) gives the per-layer cost, l* = budget / cost(l = 1) since the theory cost is
linear in l, the law is evaluated numerically, and scipy minimises the loss over (r, gqa) -- or central finite
differences give the derivatives.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import rooflaw  # noqa: E402

CF = pytest.importorskip("paper_repro.closed_forms")

D, HD, RHO = 2048.0, 128.0, 1 / 16
DEV = rooflaw.get_device("jetson-agx-orin-64gb")
WL = rooflaw.Workload(1, 1024, 16)
COLUMN = {"prefill": "prefill_s", "decode": "decode_s", "memory": "memory_bytes"}


def cols(r, gqa, layers=1.0, d=D, rho=RHO):
    heads = d / HD
    return {"layers": np.atleast_1d(layers), "d_model": np.atleast_1d(d), "heads": np.atleast_1d(heads),
            "kv_heads": np.atleast_1d(heads / gqa), "head_dim": np.atleast_1d(HD),
            "ffn": np.atleast_1d(r * d), "experts": np.atleast_1d(1 / rho), "top_k": np.atleast_1d(1.0),
            "vocab": np.atleast_1d(32000.0)}  # fmt: skip


def cost(regime, r, gqa, layers=1.0, d=D, rho=RHO):
    return float(rooflaw.evaluate_columns(cols(r, gqa, layers, d, rho), DEV, WL, "fp16", "paper")[COLUMN[regime]][0])


def numeric_optimum(regime):
    """argmin over (r, gqa) of the loss with l* = budget / per-layer cost (scipy, no sympy)."""
    from scipy.optimize import minimize

    law = rooflaw.get_law("paper-2602.10377")
    budget = CF.BUDGETS[regime]

    def loss(z):
        r, g = np.exp(z)
        lay = budget / cost(regime, r, g)
        return float(law.evaluate(rooflaw.law_inputs(cols(r, g, lay)))[0])

    start = np.log([1.0, 4.0])
    res = minimize(loss, start, method="Nelder-Mead", options={"xatol": 1e-9, "fatol": 1e-15, "maxiter": 4000})
    return np.exp(res.x)


@pytest.mark.parametrize("regime", ["prefill", "decode", "memory"])
def test_r_and_gqa_fixed_points_are_the_numerical_optimum(regime):
    r_num, g_num = numeric_optimum(regime)
    paper = CF.paper_fixed_point(regime)  # the paper's printed formulas, iterated
    ours = CF.rooflaw_optimum(regime)  # the sympy-derived conditions, root-found
    assert paper["r"] == pytest.approx(r_num, rel=2e-3)
    assert ours["r"] == pytest.approx(r_num, rel=2e-3)
    # the loss is flat in gqa (α_m = 0.05): the optimiser pins it down less tightly
    assert paper["gqa"] == pytest.approx(g_num, rel=2e-2)
    assert ours["gqa"] == pytest.approx(g_num, rel=2e-2)


def _xi(regime, r, gqa, rho=RHO):
    """ξ of the regime from the numerical evaluator: cost per l·d² (and per B·S_in/π, S_out·b_w/β, b_w)."""
    c = cost(regime, r, gqa, rho=rho)
    if regime == "prefill":
        return c * DEV.peak_flops["fp16"] / (WL.input_tokens * D**2)
    if regime == "decode":
        return c * DEV.memory_bandwidth / (WL.output_tokens * D**2 * 2)
    return c / (D**2 * 2)


def test_table17_partials_by_finite_differences():
    r, g, h = 1.5, 4.0, 1e-4
    dF = (_xi("prefill", r, g + h) - _xi("prefill", r, g - h)) / (2 * h)
    assert dF == pytest.approx(-4 / g**2, rel=1e-5)  # printed: −4/gqa²
    Sbar = WL.mean_context
    dW = (_xi("decode", r, g + h) - _xi("decode", r, g - h)) / (2 * h)
    assert dW == pytest.approx(-2 / g**2 - 2 * Sbar * 2 / (g**2 * D * 2), rel=1e-5)  # printed Table 17
    dA = (_xi("memory", r, g, RHO + 1e-6) - _xi("memory", r, g, RHO - 1e-6)) / 2e-6
    assert dA == pytest.approx(-3 * r / RHO**2, rel=1e-5)
    rows = {t["claim"]: t["agree"] for t in CF.table17()}
    assert all(rows.values()) and len(rows) == 3


def test_coefficients_of_tables_4_18_23_by_finite_differences():
    co = CF.coefficients()
    h = 1e-4
    for regime, paper_cr in (("prefill", 6.0), ("decode", 3.0), ("memory", 3 / RHO)):
        cr = (_xi(regime, 1.0 + h, 4.0) - _xi(regime, 1.0 - h, 4.0)) / (2 * h)
        assert cr == pytest.approx(paper_cr, rel=1e-6)
        assert co[regime]["C_r_value"] == pytest.approx(cr, rel=1e-6)
    # C_g = −gqa²·∂ξ/∂gqa: 4 in prefill, 2 in memory
    g = 4.0
    for regime, paper_cg in (("prefill", 4.0), ("memory", 2.0)):
        cg = -(g**2) * (_xi(regime, 1.0, g + h) - _xi(regime, 1.0, g - h)) / (2 * h)
        assert cg == pytest.approx(paper_cg, rel=1e-6)


def test_table22_depths_by_root_finding():
    from scipy.optimize import brentq

    for regime in ("prefill", "decode", "memory"):
        for d in (1024.0, 3072.0):
            budget = CF.BUDGETS[regime]
            lnum = brentq(lambda lay, d=d, reg=regime, b=budget: cost(reg, 1.0, 4.0, lay, d) - b, 1e-3, 1e4)
            assert CF.l_star_numeric(regime, d) == pytest.approx(lnum, rel=1e-9)
    assert all(t["agree"] for t in CF.table22())


def test_depth_first_rule_direction():
    """l* falls as d grows (numerical evaluator), so 'shrink d if l* > 48' goes the wrong way."""
    ls = [0.1 / cost("decode", 1.0, 4.0, 1.0, w) for w in CF.WIDTHS]
    assert all(a > b for a, b in zip(ls, ls[1:], strict=False))
    df = CF.depth_first()
    assert df["shrinking_d_raises_l_star"]
    assert df["widths_with_l_star_above_48_at_100ms"] == [w for w, v in zip(CF.WIDTHS, ls, strict=True) if v > 48]
