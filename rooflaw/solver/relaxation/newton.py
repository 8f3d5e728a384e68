"""Projected Newton in log variables: the stationarity solve of one closed-form regime (box-bounded, convex in
log space). ``fgh`` returns the value, gradient and Hessian of the reduced objective at a point."""

from __future__ import annotations

import math

import numpy as np


def _eval(fgh, y, rest, n):
    try:
        out = fgh(*y, *rest)
    except (ValueError, ZeroDivisionError, OverflowError):
        return math.inf, None, None
    f = out[0]
    if isinstance(f, complex) or not math.isfinite(f):
        return math.inf, None, None
    y = np.asarray(y)
    try:
        g = np.array(out[1 : 1 + n], dtype=float)
        H = np.array(out[1 + n :], dtype=float).reshape(n, n)
    except TypeError:  # complex values: outside the regime's domain
        return math.inf, None, None
    # to log space: z = log y
    gz = y * g
    Hz = np.outer(y, y) * H + np.diag(gz)
    return f, gz, Hz


def projected_newton(fgh, z0, lo, hi, rest, max_iter=200):
    n = len(z0)
    z = np.clip(z0, lo, hi)
    f, g, H = _eval(fgh, np.exp(z).tolist(), rest, n)
    if not math.isfinite(f):
        return None
    it = 0
    for it in range(max_iter):  # noqa: B007
        at_lo = (z <= lo + 1e-12) & (g > 0)
        at_hi = (z >= hi - 1e-12) & (g < 0)
        free = ~(at_lo | at_hi)
        pg = np.where(free, g, 0.0)
        if np.max(np.abs(pg), initial=0.0) < 1e-13:
            break
        p = -pg
        if free.any():
            Hf = H[np.ix_(free, free)]
            try:
                np.linalg.cholesky(Hf)
                p = np.zeros(n)
                p[free] = np.linalg.solve(Hf, -g[free])
            except np.linalg.LinAlgError:
                w = np.abs(np.diag(Hf))
                p = np.zeros(n)
                p[free] = -g[free] / np.where(w > 1e-12, w, 1.0)
        t, improved = 1.0, False
        for _ in range(60):
            zn = np.clip(z + t * p, lo, hi)
            fn, gn, Hn = _eval(fgh, np.exp(zn).tolist(), rest, n)
            if math.isfinite(fn) and fn <= f + 1e-4 * float(g @ (zn - z)) + 1e-15 * abs(f):
                improved = True
                break
            t *= 0.5
        if not improved:
            break
        step = np.max(np.abs(zn - z))
        z, f, g, H = zn, fn, gn, Hn
        if step < 1e-15:
            break
    return z, f, g, it


__all__ = ["projected_newton"]
