"""The busiest expert-parallel rank under uniform top-k routing (``parallel/routing.py``) against independent
references: the closed forms of the expected maximum of 2 and 3 normals, an exact enumeration of a tiny routing, and
a seeded Monte Carlo of the routing itself; and what it does to a layout (EP only, decode at few tokens)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import rooflaw as R
from rooflaw.constraints.kernels.moe import expected_load
from rooflaw.constraints.parallel import parse_layout, shard
from rooflaw.constraints.parallel import serving as S
from rooflaw.constraints.parallel.routing import busiest_share, expected_max_normal, serving_share
from rooflaw.constraints.roofline import complete_columns
from rooflaw.constraints.scenario import Scenario
from rooflaw.devices.system import get_system


def test_expected_max_of_normals_closed_forms():
    assert expected_max_normal(1) == 0.0
    assert expected_max_normal(2) == pytest.approx(1 / math.sqrt(math.pi), rel=1e-9)
    assert expected_max_normal(3) == pytest.approx(3 / (2 * math.sqrt(math.pi)), rel=1e-9)
    assert expected_max_normal(8) == pytest.approx(1.42360, abs=1e-4)  # tabulated (Tippett 1925)


def _exact_share(T: int, E: int, K: int, R_: int) -> float:
    """E[max rank pairs] / mean by enumerating every routing of T tokens (each K distinct experts of E)."""
    picks = list(itertools.combinations(range(E), K))
    total = 0.0
    for route in itertools.product(picks, repeat=T):
        counts = np.bincount([e // (E // R_) for p in route for e in p], minlength=R_)
        total += counts.max()
    return total / len(picks) ** T / (T * K / R_)


@pytest.mark.parametrize(("T", "E", "K", "R_", "tol"), [(2, 8, 2, 2, 0.08), (3, 8, 2, 4, 0.08), (2, 16, 4, 4, 0.08)])
def test_busiest_share_against_exact_enumeration(T, E, K, R_, tol):
    assert busiest_share(T, E, K, R_) == pytest.approx(_exact_share(T, E, K, R_), rel=tol)


def _monte_carlo_share(T: int, E: int, K: int, R_: int, draws: int = 600) -> float:
    rng = np.random.default_rng(20261203)
    best = []
    for _ in range(draws):
        experts = np.argsort(rng.random((T, E)), axis=1)[:, :K]  # K distinct experts per token, uniformly
        best.append(np.bincount((experts // (E // R_)).ravel(), minlength=R_).max())
    return float(np.mean(best)) / (T * K / R_)


@pytest.mark.parametrize(
    ("T", "E", "K", "R_", "tol"),
    [(1, 256, 8, 8, 0.08), (8, 256, 8, 8, 0.03), (64, 256, 8, 8, 0.02), (16, 128, 8, 4, 0.03),
     (32, 8, 2, 8, 0.03), (256, 128, 8, 8, 0.02)],
)  # fmt: skip
def test_busiest_share_against_monte_carlo(T, E, K, R_, tol):
    assert busiest_share(T, E, K, R_) == pytest.approx(_monte_carlo_share(T, E, K, R_), rel=tol)


@pytest.mark.parametrize(
    ("T", "E", "K", "R_"), [(64, 256, 8, 8), (1024, 256, 8, 8), (64, 128, 8, 4), (1744, 128, 8, 8)]
)
def test_busiest_share_matches_the_moe_kernel_familys_routing_law(T, E, K, R_):
    """The MoE kernel family prices the most loaded EP group of its own seeded routing draws
    (``kernels.moe.expected_load``, independent binomial experts): the same busiest rank, within 3 %."""
    rows = expected_load(T, E, K, R_, "uniform")[0]
    assert busiest_share(T, E, K, R_) == pytest.approx(rows / (T * K / R_), rel=0.03)


def test_busiest_share_limits():
    assert busiest_share(64, 256, 8, 1) == 1.0  # one rank holds every expert
    assert busiest_share(64, 1, 1, 8) == 1.0  # dense
    assert busiest_share(0, 256, 8, 8) == 1.0
    big = busiest_share(1 << 20, 256, 8, 8)
    assert 1.0 < big < 1.002  # the law of large numbers
    # a rank of one expert takes at most one pair per token: Mixtral on 8 ranks, one token -> at most 4x the mean
    assert busiest_share(1, 8, 2, 8) <= 4.0
    many = busiest_share(8, np.array([256.0, 128.0, 1.0]), np.array([8.0, 8.0, 1.0]), 8)
    assert many.shape == (3,) and many[2] == 1.0 and np.all(many[:2] > 1.3)


def test_layouts_stream_the_busiest_ranks_experts():
    """Decode of 8 sequences on 8 EP ranks: the FFN shard streams the busiest rank's touched experts, (E/R)·(1 −
    (1 − K·share/E)^T) of them (hand count from Qwen3-30B-A3B's config: 48 MoE layers, hidden 2048, expert width
    768, gate/up/down, 16-bit), not the mean rank's; one rank is the mean rank, bit for bit."""
    a = R.load_architecture("qwen3-30b-a3b")
    lay = parse_layout("ep=8,dp_attn=8")
    cols = complete_columns({k: np.array([float(v)]) for k, v in a.columns().items()})
    sc = Scenario.of(get_system("h100-sxm:8"), R.Workload(8, 1024, 64), "bf16", "full", None, lay).on_chip()
    one = sc.with_workload(R.Workload(8, 1024, 64))
    loads = {"attn": sc.with_workload(R.Workload(1, 1024, 64)), "ffn": one}
    shp = shard.shapes(cols, lay)
    busy = S._device_phase(shp, loads, False, cols, 8)[0]["decode"][2]
    mean = S._device_phase(shp, loads, False)[0]["decode"][2]
    T, E, K, R_ = 8, 128, 8, 8
    share = float(serving_share(T, E, K, R_))  # the served routing law's busiest rank (session 16)
    expert = 3 * 2048 * 768 * 2
    touched = lambda k: E / R_ * (1 - (1 - k / E) ** T)  # noqa: E731
    per_step = (busy[0] - mean[0]) / 64  # the decode phase's bytes are its 64 steps'
    # plus the busiest rank's extra activation rows (under 1 %)
    assert per_step == pytest.approx(48 * expert * (touched(K * share) - touched(K)), rel=0.02)
    assert share > 1.3
    assert S._device_phase(shp, loads, False, cols, 1)[0]["decode"][2][0] == mean[0]


def _power_law_share(T: int, E: int, K: int, R_: int, alpha: float, draws: int = 4000) -> float:
    """Busiest of R_ expert groups' pairs over the mean, by an independent Monte Carlo of the kernel tables'
    ``power_law_<alpha>`` law: expert weights drawn from p(x) ∝ x^−alpha on [1, 0.8·T] (inverse CDF), loads in
    proportion to T·K (no rounding: T·K ≫ E here), the heaviest group's mean."""
    rng = np.random.default_rng(20261203)
    a1 = 1.0 - alpha
    lo, hi = 1.0, 0.8 * T
    w = ((hi**a1 - lo**a1) * rng.random((draws, E)) + lo**a1) ** (1.0 / a1)
    loads = w / w.sum(axis=1, keepdims=True) * (T * K)
    return float(loads.reshape(draws, R_, E // R_).sum(axis=2).max(axis=1).mean() / (T * K / R_))


@pytest.mark.parametrize(("T", "E", "K", "R_"), [(4096, 256, 8, 8), (4096, 128, 8, 4), (16384, 128, 8, 8)])
def test_serving_share_against_a_monte_carlo_of_the_power_law(T, E, K, R_):
    """The layouts' busiest rank under the tables' power_law_1.01 routing (``serving_share``) against a Monte Carlo of
    the law written here (4,000 draws): within 7 % (the module's mean of 64 seeded draws has a standard error of about
    2 % here, the law's heavy tail: per-draw shares spread ±0.3)."""
    assert float(serving_share(T, E, K, R_)) == pytest.approx(_power_law_share(T, E, K, R_, 1.01), rel=0.07)


def test_serving_share_limits_and_the_uniform_law():
    assert float(serving_share(4096, 256, 8, 1)) == 1.0  # one rank holds every expert
    assert float(serving_share(4096, 1, 1, 8)) == 1.0  # dense
    assert float(serving_share(0, 256, 8, 8)) == 1.0
    # skewed routing loads the busiest of 8 ranks well past the uniform law's, more than of 4 ranks
    eight, four = float(serving_share(4096, 256, 8, 8)), float(serving_share(4096, 256, 8, 4))
    assert eight > four > float(busiest_share(4096, 256, 8, 4)) + 0.1
    # a rank of one expert takes at most one pair per token
    assert float(serving_share(64, 8, 2, 8)) <= 4.0
    many = serving_share(64, np.array([256.0, 128.0, 1.0]), np.array([8.0, 8.0, 1.0]), 8, "uniform")
    assert np.allclose(many, busiest_share(64, np.array([256.0, 128.0, 1.0]), np.array([8.0, 8.0, 1.0]), 8))
    with pytest.raises(ValueError):
        serving_share(64, 256, 8, 8, "zipf")
