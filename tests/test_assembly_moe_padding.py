"""The routed experts' rows padded to whole tiles (:mod:`rooflaw.constraints.moe_padding`) against hand counts, an
exact binomial enumeration, the MoE kernel family's own Monte Carlo (``kernels.moe.expected_load``) and its busiest EP
rank (:mod:`rooflaw.constraints.parallel.routing`)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp

import rooflaw as rl
from rooflaw.constraints import moe_padding as P
from rooflaw.constraints.kernels import moe as KM
from rooflaw.constraints.parallel.routing import busiest_share

_T, _K, _E, _COV = sp.symbols("T K E cov", positive=True)
_FUNCS = [{"Max": np.maximum, "Min": np.minimum, "nonzero": np.sign, "ncdf": P.ncdf_values}, "numpy"]
_padded = sp.lambdify((_T, _K, _E, _COV), P.padded_rows(_T, _K, _E, _COV), modules=_FUNCS)


def _cov(T, K, E):
    return E * (1 - (1 - K / E) ** T)


def _exact(T: int, K: float, E: float) -> float:
    """E[padded rows] by enumeration: each of E experts gets X ~ Binomial(T, K/E) rows, padded to ⌈X/m⌉·m, m the
    family's tile (kernels.moe.tile_rows of the mean rows per touched expert)."""
    p = K / E
    m = float(KM.tile_rows(T * K / _cov(T, K, E)))
    x = np.arange(T + 1)
    logpmf = np.array([math.lgamma(T + 1) - math.lgamma(k + 1) - math.lgamma(T - k + 1) for k in x])
    with np.errstate(divide="ignore"):
        logpmf = logpmf + x * math.log(p) + (T - x) * (math.log1p(-p) if p < 1 else -np.inf * (x < T))
    pmf = np.exp(np.where(np.isfinite(logpmf), logpmf, -np.inf))
    return float(E * m * np.sum(pmf * np.ceil(x / m)))


@pytest.mark.parametrize(
    ("T", "K", "E", "padded"),
    [(100, 4, 4, 4 * 128),  # every token on every expert: 100 rows each, one 128-row tile
     (300, 2, 2, 2 * 3 * 128),  # 300 rows each: ⌈300/128⌉ = 3 tiles
     (10, 8, 8, 8 * 16),  # 10 rows each: the smallest tile, 16
     (1, 8, 256, 8 * 16)],  # one token: 8 experts of one row each, one 16-row tile each
)  # fmt: skip
def test_hand_counted_padded_rows(T, K, E, padded):
    assert _padded(T, K, E, _cov(T, K, E)) == pytest.approx(padded, rel=1e-9)


@pytest.mark.parametrize(
    ("T", "K", "E"),
    [(4, 8, 256), (64, 8, 256), (256, 8, 256), (1024, 8, 256), (2048, 8, 256), (4096, 8, 256), (16384, 8, 256),
     (100, 2, 8), (1000, 2, 8), (37, 6, 128), (3000, 6, 128), (70, 4, 16), (512, 22, 512)],
)  # fmt: skip
def test_closed_form_matches_the_exact_binomial_expectation(T, K, E):
    assert _padded(T, K, E, _cov(T, K, E)) == pytest.approx(_exact(T, K, E), rel=0.012)


@pytest.mark.parametrize(("T", "E", "K", "ep"), [(16, 64, 8, 1), (300, 128, 8, 1), (5000, 64, 6, 1), (64, 256, 8, 8),
                                                 (1024, 256, 8, 8), (512, 256, 8, 32), (8192, 256, 8, 8)])  # fmt: skip
def test_busiest_rank_matches_the_family_monte_carlo(T, E, K, ep):
    """The assembly's EP shard (E/ep experts, top_k·busiest_share/ep per token) pads as many rows as the family's
    seeded Monte Carlo of its heaviest expert group under uniform routing."""
    _, _, padded, _ = KM.expected_load(T, E, K, ep, "uniform")
    k = K * float(busiest_share(T, E, K, ep)) / ep
    assert P.padding_value(T, k, E / ep) * T * k == pytest.approx(padded, rel=0.035)


def test_the_tile_menu_is_the_family_s():
    assert (P.TILE_MIN, P.TILE_MAX) == (KM.TILE_MIN, KM.TILE_MAX)
    r = sp.Symbol("r", positive=True)
    f = sp.lambdify(r, P.tile_height(r), modules=_FUNCS)
    for rows in (0.5, 1, 15.9, 16, 16.1, 31, 32, 33, 64, 64.5, 128, 129, 5000):
        assert f(rows) == float(KM.tile_rows(rows))


def test_padding_is_at_least_one_and_off_without_curves():
    for T, K, E in ((1, 1, 2), (3, 2, 64), (10**6, 8, 256), (7, 8, 8)):
        assert P.padding_value(T, K, E) >= 1.0
    assert P.padding_value(64, 8, 1) == 1.0  # dense
    assert P.padding_factor().subs(P.MOE_PAD, 0) == 1  # the switch off: the factor is exactly 1
    from rooflaw.constraints.compile import RATE_ARGS

    at = RATE_ARGS.index(P.MOE_PAD)
    for engine, on in (("ideal", 0.0), ("tensorrt-llm", 1.0)):  # the pure roofline has no kernel curves
        sc = rl.Scenario.of(rl.devices.get_device("h100-sxm"), precision="bf16", engine=engine)
        assert sc.rates.stream_args()[at] == on


def test_ncdf_is_the_normal_cdf():
    for z in (-50.0, -6.0, -2.5, -1.0, -0.3, 0.0, 0.3, 1.0, 2.5, 6.0, 50.0):
        assert P.ncdf_values(z) == pytest.approx(0.5 * (1 + math.erf(z / math.sqrt(2))), abs=2.5e-4)
    assert P.ncdf_values(0.0) == 0.5


def test_the_gp_relaxation_stays_a_lower_bound_with_the_padding():
    """The GP drops the padding (a factor ≥ 1 of floors and steps): its prefill of the MoE points of Orin's space is
    at most the evaluator's, strictly below where the routed experts' compute binds (short prompts: few rows)."""
    import dataclasses

    from rooflaw.constraints import Workload, evaluate_columns
    from rooflaw.devices import get_device
    from rooflaw.solver import Problem
    from rooflaw.solver.relaxation.gp_full import build_branch

    orin = dataclasses.replace(get_device("jetson-agx-orin-64gb"), achieved={}, sm_count=None, l2_bytes=None)
    p = Problem("paper-2602.10377", orin, workload=Workload(1, 256, 8), precision="fp16", latency_budget=0.05)
    cols = p.space.columns_at(np.random.default_rng(1).choice(p.space.size, 150, replace=False))
    ref = evaluate_columns(cols, orin, p.workload, p.precision, "full")
    c = {k: np.asarray(v, dtype=float) for k, v in cols.items()}
    x = {"l": c["layers"], "d": c["d_model"], "r": c["top_k"] * c["ffn"] / c["d_model"],
         "rho": c["top_k"] / c["experts"], "gqa": c["heads"] / c["kv_heads"]}  # fmt: skip
    below = 0
    for k in np.unique(c["top_k"]):
        m = (c["moe"] == 1) & (c["top_k"] == k)
        if not m.any():
            continue
        v = build_branch(p, "t", float(k), 1, {}).values({a: b[m] for a, b in x.items()})["prefill_s"]
        assert np.all(v <= ref["prefill_s"][m] * (1 + 1e-12))
        below += int(np.sum(v < ref["prefill_s"][m] * (1 - 1e-6)))
    assert below > 0


def test_a_gemv_decode_pads_nothing(request):
    """TensorRT-LLM runs a W4A16 decode step of ≤ 8 sequences as dequantising GEMVs (``engines.gemv_path``): one row
    per expert, no M tile, so its decode is the unpadded one; at 16 sequences the grouped GEMMs pad (16-row tiles)."""
    dev = rl.devices.get_device("h100-sxm")
    arch = rl.Architecture(layers=2, d_model=2048, heads=16, kv_heads=4, ffn=768, experts=128, top_k=8, vocab=256)

    def decode(batch):
        rep = rl.evaluate(arch, dev, precision="w4a16", engine="tensorrt-llm", batch=batch, input_tokens=64,
                          output_tokens=4)  # fmt: skip
        return {o.name: o.seconds for o in rep.ops if o.phase == "decode" and o.name in ("ffn_up", "ffn_down")}

    padded = decode(1), decode(16)
    request.getfixturevalue("no_moe_padding")
    plain = decode(1), decode(16)
    assert padded[0] == plain[0]
    assert all(padded[1][k] > plain[1][k] for k in plain[1])
