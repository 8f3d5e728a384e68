"""The fitting objective: a Huber loss (delta 1e-3, summed) on ``log y - log f`` for any law, in fit space.

Coefficients of additive terms (and the constant term) are fitted as logs, so a sum of power-law terms becomes
``log f = logsumexp_i(c_i + sum_j e_ij * log x_j)`` -- linear in the fitted parameters, so the objective and its
gradient for all starts at once are a few matrix products. Gradients are derived by sympy from the law's
expression (any expression works; sums of power laws take the fast linear path).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import sympy

from .law import LossLaw, param_symbol
from .variables import symbol


class LogHuberObjective:
    """Summed Huber loss of ``log y - log f(x; theta)`` for many parameter vectors at once.

    ``theta`` is in *fit space*: parameters in ``log_params`` enter as their natural log. ``weights``
    is ``(n,)`` or ``(S, n)`` (one row per start, e.g. bootstrap resamples).
    """

    def __init__(self, law: LossLaw, x: Mapping[str, np.ndarray], y: np.ndarray, delta: float = 1e-3):
        self.law = law
        self.names = law.param_names
        self.delta = float(delta)
        self.y = np.asarray(y, dtype=float)
        self.logy = np.log(self.y)
        self.n = self.y.size
        expr = sympy.expand(law.expr)
        terms = sympy.Add.make_args(expr)
        vsyms = {symbol(v) for v in law.variables}
        psyms = {p: param_symbol(p) for p in self.names}
        self.kinds = {p: _kind(psyms[p], terms, vsyms) for p in self.names}
        self.log_params = tuple(p for p in self.names if self.kinds[p] in ("coef", "const"))
        th = [sympy.Symbol(f"_th{k}", real=True) for k in range(len(self.names))]
        lx = {v: sympy.Symbol(f"_lx_{v}", real=True) for v in law.variables}
        sub = {psyms[p]: (sympy.exp(t) if p in self.log_params else t) for p, t in zip(self.names, th, strict=False)}
        sub.update({symbol(v): sympy.exp(lx[v]) for v in law.variables})
        us: list[sympy.Expr] = []
        for t in terms:
            u = sympy.expand_log(sympy.log(t.xreplace(sub)), force=True)
            if u.has(sympy.I) or any(not a.args[0].is_number for a in u.atoms(sympy.log)):
                us = []
                break
            us.append(u)
        if not us or any(u.has(sympy.zoo, sympy.nan) for u in us):
            us = [sympy.log(expr.xreplace(sub))]  # not a sum of positive terms: log of the whole
        self.logx = np.vstack([np.log(np.asarray(x[v], dtype=float)) for v in law.variables])
        args = th + [lx[v] for v in law.variables]
        self.linear = all(not sympy.diff(u, a).free_symbols & set(th) for u in us for a in th)
        p = len(th)
        if self.linear:
            # u_i = c_i + theta @ Phi_i  (Phi_i: p x n)
            self.phi, self.c0 = [], []
            zero = [0.0] * p
            for u in us:
                fu = sympy.lambdify(args, u, modules="numpy")
                self.c0.append(np.broadcast_to(np.asarray(fu(*zero, *self.logx), float), (self.n,)).copy())
                rows = []
                for a in th:
                    fd = sympy.lambdify(args, sympy.diff(u, a), modules="numpy")
                    rows.append(np.broadcast_to(np.asarray(fd(*zero, *self.logx), float), (self.n,)))
                self.phi.append(np.vstack(rows) if rows else np.zeros((0, self.n)))
        else:
            self.fu = [sympy.lambdify(args, u, modules="numpy", cse=True) for u in us]
            self.fdu = [[sympy.lambdify(args, sympy.diff(u, a), modules="numpy", cse=True) for a in th] for u in us]

    # fit space <-> parameters
    def from_fit(self, theta: np.ndarray) -> dict[str, float]:
        theta = np.asarray(theta, float)
        return {p: float(np.exp(t) if p in self.log_params else t) for p, t in zip(self.names, theta, strict=False)}

    def _terms(self, theta: np.ndarray) -> tuple[list[np.ndarray], Callable[[list[np.ndarray]], np.ndarray]]:
        """Per-term log values ``U_i`` (S, n), and a function contracting ``dF/dU_i`` to ``dF/dtheta``."""
        S = theta.shape[0]
        if self.linear:
            us = [theta @ ph + c for ph, c in zip(self.phi, self.c0, strict=False)]

            def back_linear(ws: list[np.ndarray]) -> np.ndarray:
                return sum(w @ ph.T for w, ph in zip(ws, self.phi, strict=False))

            return us, back_linear
        cols = [theta[:, k : k + 1] for k in range(theta.shape[1])]
        lx = [row[None, :] for row in self.logx]
        us = [np.broadcast_to(np.asarray(f(*cols, *lx), float), (S, self.n)) for f in self.fu]

        def back(ws: list[np.ndarray]) -> np.ndarray:
            g = np.zeros(theta.shape)
            for w, fds in zip(ws, self.fdu, strict=False):
                for k, fd in enumerate(fds):
                    dk = np.asarray(fd(*cols, *lx), float)
                    g[:, k] += (w * np.broadcast_to(dk, (S, self.n))).sum(axis=1)
            return g

        return us, back

    def fused(self, weights: np.ndarray | None = None) -> Callable[[np.ndarray, np.ndarray], tuple]:
        """``fg(theta, rows)`` for the batched L-BFGS from the numba kernel of :mod:`.huber_fused` (a sum of power
        laws only; the same objective and gradient to rounding)."""
        from .huber_fused import fused_fg

        if not self.linear:
            raise ValueError("the fused objective needs a sum of power laws")
        phi = np.ascontiguousarray(np.stack(self.phi))
        c0 = np.ascontiguousarray(np.stack(self.c0))
        return lambda theta, rows: fused_fg(theta, phi, c0, self.logy, self.delta, weights)

    def log_pred(self, theta: np.ndarray) -> np.ndarray:
        theta = np.atleast_2d(np.asarray(theta, float))
        with np.errstate(all="ignore"):
            us, _ = self._terms(theta)
            if len(us) == 1:
                return us[0]
            m = np.maximum.reduce(us)
            return m + np.log(sum(np.exp(u - m) for u in us))

    def __call__(self, theta: np.ndarray, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Objective ``(S,)`` and gradient ``(S, p)`` at ``theta`` ``(S, p)``."""
        theta = np.atleast_2d(np.asarray(theta, float))
        with np.errstate(all="ignore"):
            us, back = self._terms(theta)
            if len(us) == 1:
                lp, soft = us[0], [1.0]
            else:
                m = np.maximum.reduce(us)
                es = [np.exp(u - m) for u in us]
                tot = sum(es)
                lp = m + np.log(tot)
                soft = [e / tot for e in es]
            r = self.logy - lp
            a = np.abs(r)
            d = self.delta
            h = np.where(a <= d, 0.5 * r * r, d * (a - 0.5 * d))
            psi = np.clip(r, -d, d)
            w = 1.0 if weights is None else weights
            f = (w * h).sum(axis=1)
            dlp = -(w * psi)
            g = back([dlp * s for s in soft])
        bad = ~np.isfinite(f) | ~np.isfinite(g).all(axis=1)
        f[bad] = np.inf
        g[bad] = 0.0
        return f, g


def _kind(p: sympy.Symbol, terms: Sequence[sympy.Expr], vsyms: set) -> str:
    """How parameter ``p`` enters: ``coef`` (a plain factor of variable terms), ``const`` (a plain
    factor of variable-free terms), ``exp`` (only in exponents of variables) or ``other``."""
    holders = [t for t in terms if p in t.free_symbols]
    if holders and all(t.as_independent(p, as_Add=False)[1] == p for t in holders):
        return "coef" if any(t.free_symbols & vsyms for t in holders) else "const"
    for t in holders:
        for pw in t.atoms(sympy.Pow):
            if p in pw.base.free_symbols:
                return "other"
        if p in t.as_independent(*vsyms, as_Add=False)[0].free_symbols:
            return "other"
    return "exp"


__all__ = ["LogHuberObjective"]
