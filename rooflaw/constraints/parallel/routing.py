"""The busiest expert-parallel rank under uniform top-k routing: how many more routed rows it runs than the mean.

``T`` tokens each pick ``K`` distinct experts of ``E`` uniformly; the experts are split evenly over ``R`` EP ranks
(``E/R`` each). Rank r receives ``n_r`` token-expert pairs, ``Σ n_r = T·K``, mean ``μ = T·K/R``. Per token the
number of its experts on one rank is hypergeometric (E, E/R, K), so ``Var n_r = T·K·(1/R)(1 − 1/R)·c`` with
``c = (E − K)/(E − 1)``. The MoE layer waits for the busiest rank (its grouped GEMMs stream its touched experts'
weights and run its rows; the combine waits for it), whose expected load is the expected maximum of the ``n_r``.
Writing the counts as ``R`` exchangeable normals about their fixed sum (``n_r = μ + s·(Z_r − Z̄)``, ``s² =
T·K·c/R``, which gives the variance above) and taking the sum's share out exactly::

    E[max_r n_r] ≈ μ + s · e_R,   e_R = E[max of R independent N(0, 1)]   (e_1 = 0, e_2 = 1/√π, e_8 ≈ 1.4236)

capped at what one rank can hold, ``T·min(K, E/R)``. :func:`busiest_share` returns ``E[max]/μ`` (1 for one
rank); a rank's share of the token-expert pairs is then ``K·share/R`` per token (its expected distinct experts
follow from the same share, :data:`~..operators.EXPERTS_TOUCHED` at ``K·share``). The normal form is within 2 %
of a Monte Carlo of the routing for ``T ≥ 8`` and about 6 % low at ``T = 1`` (tests/test_parallel_routing.py).
No fitted figure: real routers are not uniform (a layout's ``imbalance=`` multiplies on top).

:func:`serving_share` is what the layouts price (session 16): the busiest rank under :data:`SERVING_LAW`, the
MoE kernel tables' ``power_law_1.01`` routing (:func:`..kernels.moe.expected_load`: each expert's weight drawn from
p(x) ∝ x^−1.01, the heaviest expert group's rows; a law the tables measure an EP rank under, and NVIDIA's
aiconfigurator prices serving with a power law of this kind by default), not the uniform law above: a served
model's router on real or synthetic prompts is skewed, and the layer waits for its most loaded rank. No fitted
figure; ``uniform`` keeps the normal form.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from scipy.integrate import trapezoid
from scipy.special import ndtr

#: Grid of the e_R integral (standard-normal units; the integrand is below 1e-13 outside ±8).
_GRID = np.linspace(-8.0, 8.0, 4001)


@functools.cache
def expected_max_normal(ranks: int) -> float:
    """``e_R``: the expected maximum of ``ranks`` independent standard normals (0 for one), by quadrature of
    ``∫ x · R φ(x) Φ(x)^(R−1) dx``."""
    if ranks <= 1:
        return 0.0
    x = _GRID
    pdf = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    return float(trapezoid(x * ranks * pdf * ndtr(x) ** (ranks - 1), x))


def busiest_share(tokens: float, experts: Any, top_k: Any, ranks: int) -> Any:
    """Expected routed pairs of the busiest of ``ranks`` EP ranks over the mean rank's (≥ 1; module docstring),
    for ``tokens`` tokens routed top-``top_k`` of ``experts`` (numbers or per-row arrays). 1 where ``ranks`` ≤ 1,
    ``tokens`` ≤ 0 or the model is dense (``experts`` ≤ 1)."""
    E = np.asarray(experts, dtype=float)
    K = np.asarray(top_k, dtype=float)
    if ranks <= 1 or tokens <= 0:
        return np.ones(np.broadcast(E, K).shape)
    moe = E > 1
    Es, Ks = np.where(moe, E, 2.0), np.where(moe, np.maximum(K, 1.0), 1.0)
    mu = tokens * Ks / ranks
    c = (Es - Ks) / (Es - 1.0)
    most = tokens * np.minimum(Ks, Es / ranks)
    top = np.minimum(mu + np.sqrt(tokens * Ks * c / ranks) * expected_max_normal(ranks), most)
    return np.where(moe, np.maximum(top / mu, 1.0), 1.0)


#: Routing law of served MoE layers (:func:`serving_share`): the kernel tables' ``power_law_1.01``, or ``uniform``.
SERVING_LAW = "power_law_1.01"


def serving_share(tokens: float, experts: Any, top_k: Any, ranks: int, law: str = SERVING_LAW) -> Any:
    """Routed pairs of the busiest of ``ranks`` EP ranks over the mean rank's (≥ 1) for ``tokens`` tokens routed
    top-``top_k`` of ``experts`` (numbers or per-row arrays) under ``law``: ``uniform`` is :func:`busiest_share`; a
    ``power_law_<a>`` law the heaviest expert group's expected rows of :func:`..kernels.moe.expected_load` over
    ``tokens·top_k/ranks``, at most what one rank can hold, at least the uniform law's -- where ``tokens·top_k``
    exceeds the experts (the tables' generator draws the continuous law there; below it places a few pairs at
    random, and the uniform law's busiest rank stands). 1 where ``ranks`` ≤ 1, ``tokens`` < 1, the model is dense,
    or ``ranks`` does not divide its experts (the layout check reports it)."""
    if law == "uniform":
        return busiest_share(tokens, experts, top_k, ranks)
    from ..kernels.moe import expected_load, parse_distribution

    parse_distribution(law)  # raises on an unknown law
    E, K = np.broadcast_arrays(np.asarray(experts, dtype=float), np.asarray(top_k, dtype=float))
    T = int(round(tokens))
    out = np.array(busiest_share(T, E, K, ranks), dtype=float)
    if ranks <= 1 or T < 1:
        return out
    for e, k in {(int(e), int(k)) for e, k in zip(E.ravel(), K.ravel(), strict=True)}:
        if e <= 1 or k < 1 or k > e or e % ranks or T * k <= e:
            continue
        rows = expected_load(T, e, k, ranks, law)[0]
        share = min(rows, T * min(k, e / ranks)) / (T * k / ranks)
        mask = (e == E) & (k == K)
        out[mask] = np.maximum(out[mask], share)
    return out


__all__ = ["SERVING_LAW", "busiest_share", "expected_max_normal", "serving_share"]
