"""The efficiency fit's priors (:mod:`.fit_efficiency`): weak log-normal priors per parameter kind, the shared
centre of the engines' kernel-class factors, and the figures an engine no fitted row ran on takes."""

from __future__ import annotations

import numpy as np

from .engines import BUILTIN_ENGINES

#: (prior median, prior spread as a factor, lower bound, upper bound) per parameter kind.
PRIORS = {
    "memory": (0.8, 2.0, 0.05, 1.0),
    "compute": (0.5, 3.0, 0.005, 1.0),
    "kernel_s": (5e-6, 4.0, 1e-8, 1e-3),
    "memory_factor": (1.0, 2.0, 0.05, 2.0),
    "compute_factor": (1.0, 2.0, 0.05, 4.0),
    "mixed_factor": (1.0, 2.0, 0.02, 4.0),
    "attention_factor": (1.0, 2.0, 0.02, 4.0),
    "gemv_factor": (1.0, 2.0, 0.02, 4.0),
    "pass_s": (3e-4, 5.0, 1e-7, 0.1),
    "layer_s": (1e-6, 10.0, 1e-10, 1e-3),
    "spread": (0.3, 2.0, 1e-3, 2.0),
    "factor_mean": (1.0, 2.0, 0.02, 4.0),
}
#: An engine's kernel-class factors (its own GEMMs, dequantising GEMMs, unfused attention, CUDA-core GEMVs relative
#: to the kernel curves' rates) are exchangeable: their priors centre on ONE shared, fitted figure
#: (``factor_mean``, itself under the weak prior above) rather than on 1, the reference engine's kernels. A factor
#: no row informs -- a kernel class seen in one source only, with that source left out -- then takes what the
#: engines' other kernel classes reach, not the reference engine's rate (partial pooling, one parameter).
POOLED = ("compute_factor", "mixed_factor", "attention_factor", "gemv_factor")


def prior_residuals(z: np.ndarray, mu: np.ndarray, sd: np.ndarray, pooled: np.ndarray) -> np.ndarray:
    """Weak log-normal priors as least-squares residuals: (log figure − log median) / log(spread factor) per
    parameter (``mu``, ``sd`` from :meth:`FitParameters.prior`), so a figure one spread factor off its median costs
    1. Where ``pooled`` (:data:`POOLED`) has any 1, ``z``, ``mu`` and ``sd`` carry one more entry at the end, the
    log of the shared centre (``factor_mean``): a pooled factor's median is that centre instead of its own."""
    n = len(pooled)
    if not pooled.any():
        return (z - mu) / sd
    centre = mu[:n] + pooled * (z[n] - mu[n])  # the pooled factors' own median is 1 (log 0): the centre moves it
    return np.append((z[:n] - centre) / sd[:n], (z[n] - mu[n]) / sd[n])


def unfitted_figures(name: str, factor_mean: float) -> dict[str, float]:
    """The figures :class:`FitParameters` would give engine ``name`` at their prior medians: ``pass_s`` and
    ``layer_s``; an engine with its own kernels (not :data:`.curves_applied.TABLE_ENGINES`) also its bandwidth
    factor and, at the shared centre ``factor_mean``, its kernel-class factors (:data:`POOLED`; attention only
    where unfused, GEMV only with a GEMV path)."""
    from .curves_applied import TABLE_ENGINES

    e = BUILTIN_ENGINES[name]
    out = {"pass_s": PRIORS["pass_s"][0], "layer_s": PRIORS["layer_s"][0]}
    if name in TABLE_ENGINES:
        return out
    out.update(memory_factor=PRIORS["memory_factor"][0], compute_factor=factor_mean, mixed_factor=factor_mean)
    if e.attention == "unfused":
        out["attention_factor"] = factor_mean
    if e.gemv_max_batch:
        out["gemv_factor"] = factor_mean
    return out
