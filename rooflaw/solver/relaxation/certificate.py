"""The KKT side of the closed form: the certificate of a regime's point (multipliers, stationarity residual,
bound signs), the constraint values at a point, the box corner where every constraint is smallest, and the
numerical fallback (SLSQP in log variables) used when no regime gives a certified point."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import RooflawError
from .kkt import VARS

Derivation = Any  # closed_form.Derivation (kept out of the imports: closed_form imports this module)


def kkt_certificate(
    der: Derivation, x: dict[str, float], cvals, active, budgets, bounds, fixed: frozenset[str] = frozenset()
):
    """Multipliers μ ≥ 0 of the binding constraints from stationarity in log variables, and the residual.

    A variable at a bound of the box must have its loss gradient pointing out of the box (the sign condition of
    its bound multiplier); a variable pinned with ``fix=`` (in ``fixed``) is no variable of the problem at all, so
    it has neither a stationarity nor a sign condition (``at`` marks it ``fixed``)."""
    out = der.grads(*[x[v] for v in VARS], *cvals)
    n = len(VARS)
    gL = np.array(out[1 : 1 + n]) * np.array([x[v] for v in VARS])
    cols, names = [], []
    for j, k in enumerate(der.kinds):
        base = (1 + n) + j * (1 + n)
        if k in active:
            cols.append(np.array(out[base + 1 : base + 1 + n]) * np.array([x[v] for v in VARS]) / budgets[k])
            names.append(k)
    at = {}
    interior = []
    for i, v in enumerate(VARS):
        lo, hi = bounds[v]
        if v in fixed:
            at[v] = "fixed"
        elif x[v] <= lo * (1 + 1e-9):
            at[v] = "lower"
        elif x[v] >= hi * (1 - 1e-9):
            at[v] = "upper"
        else:
            interior.append(i)
    mu = np.zeros(len(cols))
    if cols:
        A = np.array(cols).T
        if interior:
            mu, *_ = np.linalg.lstsq(A[interior], -gL[interior], rcond=None)
    res_vec = gL + (np.array(cols).T @ mu if cols else 0.0)
    resid = float(np.max(np.abs(res_vec[interior]), initial=0.0))
    sign_ok = True
    for i, v in enumerate(VARS):
        if at.get(v) == "lower" and res_vec[i] < -1e-7:
            sign_ok = False
        if at.get(v) == "upper" and res_vec[i] > 1e-7:
            sign_ok = False
    return {k: float(m) for k, m in zip(names, mu, strict=False)}, resid, at, sign_ok


def constraint_values(der: Derivation, x, cvals):
    out = der.grads(*[x[v] for v in VARS], *cvals)
    n = len(VARS)
    return float(out[0]), {k: float(out[(1 + n) + j * (1 + n)]) for j, k in enumerate(der.kinds)}


def numerical_kkt(der, cvals, bounds, budgets, kinds, x0=None, starts: int = 12, seed: int = 0):
    """Fallback: SLSQP in log variables from several starts (the problem is convex in log space)."""
    from scipy.optimize import minimize

    lo = np.log([bounds[v][0] for v in VARS])
    hi = np.log([bounds[v][1] for v in VARS])
    n = len(VARS)

    def fobj(z):
        out = der.grads(*np.exp(z), *cvals)
        y = np.exp(z)
        return float(out[0]), np.array(out[1 : 1 + n]) * y

    cons = []
    for j, k in enumerate(der.kinds):
        base = (1 + n) + j * (1 + n)

        def cf(z, base=base, k=k):
            return 1.0 - der.grads(*np.exp(z), *cvals)[base] / budgets[k]

        def cj(z, base=base, k=k):
            out = der.grads(*np.exp(z), *cvals)
            return -np.array(out[base + 1 : base + 1 + n]) * np.exp(z) / budgets[k]

        cons.append({"type": "ineq", "fun": cf, "jac": cj})
    rng = np.random.default_rng(seed)
    pts = [0.5 * (lo + hi)] + [lo + (hi - lo) * rng.random(n) for _ in range(starts)]
    if x0 is not None:
        pts.insert(0, np.log([x0[v] for v in VARS]))
    best = None
    for z0 in pts:
        res = minimize(fobj, z0, jac=True, method="SLSQP", bounds=list(zip(lo, hi, strict=False)), constraints=cons,
                       options={"ftol": 1e-15, "maxiter": 500})  # fmt: skip
        if not np.all(np.isfinite(res.x)):
            continue
        x = {v: float(np.exp(zv)) for v, zv in zip(VARS, np.clip(res.x, lo, hi), strict=False)}
        loss, vals = constraint_values(der, x, cvals)
        if any(vals[k] > budgets[k] * (1 + 1e-7) for k in kinds):
            continue
        if best is None or loss < best[1]:
            best = (x, loss, vals)
    if best is None:
        raise RooflawError("numerical KKT solve found no feasible point")
    return best


def cheapest_corner(bounds) -> dict[str, float]:
    """The box corner where every theory-mode constraint is smallest (each increases in l, d, r, gqa⁻¹, ρ⁻¹)."""
    x = {v: bounds[v][0] for v in VARS}
    x["gqa"] = bounds["gqa"][1]
    x["rho"] = bounds["rho"][1]
    return x


__all__ = ["cheapest_corner", "constraint_values", "kkt_certificate", "numerical_kkt"]
