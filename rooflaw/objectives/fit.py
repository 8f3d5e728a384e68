"""Fitting a ``LossLaw`` to training runs.

The standard recipe (Hoffmann approach 3 as Epoch encoded it), generalised to any law: fit in log space
with a Huber loss (delta 1e-3, summed) on ``log y - log f``, L-BFGS from a grid of starts, keep the best.
Coefficients of additive terms (and the constant term) are fitted as logs, so a sum of power-law terms
becomes ``log f = logsumexp_i(c_i + sum_j e_ij * log x_j)`` -- linear in the fitted parameters, so the
objective and its gradient for *all* starts at once are a few matrix products. Gradients are derived by
sympy from the law's expression (any expression works; sums of power laws take the fast linear path).

All starts run together in one vectorised L-BFGS (each start has its own history and backtracking line
search); the best point is polished with scipy's L-BFGS-B and analytic gradients. ``method="nls"``
is plain nonlinear least squares on the loss (the paper's method), from the best grid starts.
"""

from __future__ import annotations

import itertools
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import sympy
from scipy import optimize

from ..arch.architecture import COLUMNS
from ..errors import RooflawError
from .builtins import get_law
from .identifiable import check_identifiable
from .law import LossLaw, param_symbol
from .variables import VARIABLES, law_inputs, symbol

#: The recipe's start grids, in fit space (coefficients as natural logs).
GRID_COEF = (0.0, 5.0, 10.0, 15.0, 20.0, 25.0)
GRID_CONST = (-1.0, -0.5, 0.0, 0.5, 1.0)
GRID_EXP = (0.0, 0.5, 1.0, 1.5, 2.0)
GRID_OTHER = (0.5, 1.0, 2.0)
#: Above this many grid points the default start set is a seeded Latin-hypercube sample of this size.
MAX_GRID = 20_000
LHS_STARTS = 4096


# ---- the objective ---------------------------------------------------------------------------------
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
        us = []
        for t in terms:
            u = sympy.expand_log(sympy.log(t.xreplace(sub)), force=True)
            if u.has(sympy.I) or any(not a.args[0].is_number for a in u.atoms(sympy.log)):
                us = None
                break
            us.append(u)
        if us is None or any(u.has(sympy.zoo, sympy.nan) for u in us):
            us = [sympy.log(expr.xreplace(sub))]  # not a sum of positive terms: log of the whole
        self.lse = len(us) > 1
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
    def to_fit(self, params: Mapping[str, float]) -> np.ndarray:
        return np.array([math.log(params[p]) if p in self.log_params else params[p] for p in self.names], float)

    def from_fit(self, theta: np.ndarray) -> dict[str, float]:
        theta = np.asarray(theta, float)
        return {p: float(np.exp(t) if p in self.log_params else t) for p, t in zip(self.names, theta, strict=False)}

    def _terms(self, theta: np.ndarray) -> tuple[list[np.ndarray], Callable[[list[np.ndarray]], np.ndarray]]:
        """Per-term log values ``U_i`` (S, n), and a function contracting ``dF/dU_i`` to ``dF/dtheta``."""
        S = theta.shape[0]
        if self.linear:
            us = [theta @ ph + c for ph, c in zip(self.phi, self.c0, strict=False)]

            def back(ws: list[np.ndarray]) -> np.ndarray:
                return sum(w @ ph.T for w, ph in zip(ws, self.phi, strict=False))

            return us, back
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


# ---- batched L-BFGS ---------------------------------------------------------------------------------
@dataclass
class _Batch:
    x: np.ndarray
    f: np.ndarray
    status: np.ndarray  # 1 converged, 2 line search stalled (converged at a kink), 3 maxiter, 4 non-finite
    iterations: int


def batched_lbfgs(*args: Any, **kwargs: Any) -> _Batch:
    """Minimise many independent problems at once. ``fg(x, rows)`` gives objective and gradient of the
    problems ``rows`` at ``x`` (len(rows), p). Stopping rules follow scipy's L-BFGS-B defaults
    (``ftol`` relative to ``max(|f|, 1)``, ``gtol`` on the largest gradient component)."""
    with np.errstate(all="ignore"):
        return _batched_lbfgs(*args, **kwargs)


def _batched_lbfgs(
    fg: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
    x0: np.ndarray,
    m: int = 10,
    maxiter: int = 1000,
    ftol: float = 2.220446049250313e-09,
    gtol: float = 1e-5,
    max_ls: int = 25,
    progress: Callable[[int, int], None] | None = None,
) -> _Batch:
    """Minimise many independent problems at once. ``fg(x, rows)`` gives objective and gradient of the
    problems ``rows`` at ``x`` (len(rows), p). Stopping rules follow scipy's L-BFGS-B defaults."""
    x = np.array(x0, float)
    S, p = x.shape
    rows_all = np.arange(S)
    f, g = fg(x, rows_all)
    status = np.zeros(S, int)
    status[~np.isfinite(f)] = 4
    sh = np.zeros((m, S, p))
    yh = np.zeros((m, S, p))
    rh = np.zeros((m, S))
    gamma = np.ones(S)
    first = np.ones(S, bool)
    slot = np.zeros(S, int)  # next history slot per problem
    c1 = 1e-4
    it = 0
    for it in range(1, maxiter + 1):  # noqa: B007
        idx = np.flatnonzero(status == 0)
        if progress is not None:
            progress(S - idx.size, S)
        if idx.size == 0:
            break
        gi = g[idx]
        done = np.abs(gi).max(axis=1) <= gtol
        if done.any():
            status[idx[done]] = 1
            idx, gi = idx[~done], gi[~done]
            if idx.size == 0:
                continue
        # two-loop recursion, newest pair first
        q = gi.copy()
        order = [(slot[idx] - 1 - j) % m for j in range(m)]
        alph = []
        for sl in order:
            S_ = sh[sl, idx]
            Y_ = yh[sl, idx]
            R_ = rh[sl, idx]
            a = R_ * np.einsum("ij,ij->i", S_, q)
            q -= a[:, None] * Y_
            alph.append(a)
        z = gamma[idx, None] * q
        for sl, a in zip(reversed(order), reversed(alph), strict=False):
            S_ = sh[sl, idx]
            Y_ = yh[sl, idx]
            b = rh[sl, idx] * np.einsum("ij,ij->i", Y_, z)
            z += S_ * (a - b)[:, None]
        d = -z
        gd = np.einsum("ij,ij->i", gi, d)
        reset = ~(gd < 0) | ~np.isfinite(gd) | ~np.isfinite(d).all(axis=1)
        if reset.any():
            d[reset] = -gi[reset]
            gd[reset] = -np.einsum("ij,ij->i", gi[reset], gi[reset])
            rh[:, idx[reset]] = 0.0
            gamma[idx[reset]] = 1.0
        t = np.ones(idx.size)
        fst = first[idx] | reset
        if fst.any():
            t[fst] = np.minimum(1.0, 1.0 / np.maximum(np.linalg.norm(gi[fst], axis=1), 1e-300))
        first[idx] = False
        # backtracking Armijo line search, all problems together
        fi = f[idx]
        pending = np.arange(idx.size)
        fnew = np.full(idx.size, np.inf)
        gnew = np.zeros((idx.size, p))
        ok = np.zeros(idx.size, bool)
        for _ in range(max_ls):
            if pending.size == 0:
                break
            xt = x[idx[pending]] + t[pending, None] * d[pending]
            ft, gt = fg(xt, idx[pending])
            acc = np.isfinite(ft) & (ft <= fi[pending] + c1 * t[pending] * gd[pending])
            sel = pending[acc]
            fnew[sel], gnew[sel], ok[sel] = ft[acc], gt[acc], True
            rej = pending[~acc]
            if rej.size:
                # quadratic interpolation, safeguarded to [0.1, 0.5] of the step
                ftr = ft[~acc]
                tr = t[rej]
                den = 2.0 * (ftr - fi[rej] - gd[rej] * tr)
                with np.errstate(all="ignore"):
                    tq = np.where(np.isfinite(ftr) & (den > 0), -gd[rej] * tr * tr / den, 0.1 * tr)
                t[rej] = np.clip(tq, 0.1 * tr, 0.5 * tr)
            pending = rej
        status[idx[~ok]] = 2
        acc_i = np.flatnonzero(ok)
        if acc_i.size == 0:
            continue
        ia = idx[acc_i]
        s = t[acc_i, None] * d[acc_i]
        yv = gnew[acc_i] - g[ia]
        sy = np.einsum("ij,ij->i", s, yv)
        yy = np.einsum("ij,ij->i", yv, yv)
        good = np.isfinite(sy) & np.isfinite(yy) & (yy > 1e-300) & (sy > 1e-10 * yy)
        sl = slot[ia]
        sh[sl, ia] = s
        yh[sl, ia] = yv
        rh[sl, ia] = np.where(good, 1.0 / np.where(good, sy, 1.0), 0.0)
        gamma[ia] = np.where(good, sy / np.where(good, yy, 1.0), gamma[ia])
        slot[ia] = (sl + 1) % m
        fo = f[ia]
        x[ia] += s
        f[ia] = fnew[acc_i]
        g[ia] = gnew[acc_i]
        conv = (fo - f[ia]) <= ftol * np.maximum.reduce([np.abs(fo), np.abs(f[ia]), np.ones_like(fo)])
        status[ia[conv]] = 1
    status[status == 0] = 3
    if progress is not None:
        progress(S, S)
    return _Batch(x=x, f=f, status=status, iterations=it)


# ---- data --------------------------------------------------------------------------------------------
def load_table(path: str | Path) -> pd.DataFrame:
    """CSV, JSON lines (``.jsonl``/``.ndjson``/``.json``) or Parquet, by file suffix."""
    path = Path(path)
    if not path.exists():
        raise RooflawError(f"data={str(path)!r}: no such file")
    suf = path.suffix.lower()
    try:
        if suf in (".csv", ".txt"):
            return pd.read_csv(path)
        if suf in (".jsonl", ".ndjson"):
            return pd.read_json(path, lines=True)
        if suf == ".json":
            try:
                return pd.read_json(path, lines=True)
            except ValueError:
                return pd.read_json(path)
        if suf in (".parquet", ".pq"):
            return pd.read_parquet(path)
    except ImportError as e:
        raise RooflawError(f"data={str(path)!r}: {e}") from None
    except Exception as e:  # noqa: BLE001 - parser errors of many kinds
        raise RooflawError(f"data={str(path)!r}: cannot read ({type(e).__name__}: {e})") from None
    raise RooflawError(f"data={str(path)!r}: unknown format {suf!r}; use .csv, .jsonl or .parquet")


def gemstones(which: str = "cool_end") -> pd.DataFrame:
    """The Gemstones runs shipped with rooflaw (McLeish et al. 2025, MIT).

    ``which``: ``cool_end`` (after LR cool-down), ``hot`` or ``hot_100b+`` (constant LR)."""
    names = {"cool_end", "hot", "hot_100b+"}
    if which not in names:
        raise RooflawError(f"gemstones={which!r}: choose one of {', '.join(sorted(names))}")
    return load_table(Path(__file__).parent / "data" / "gemstones" / f"wandb_df_for_fitting_{which}.jsonl")


def _column(df: pd.DataFrame, spec: str, what: str) -> np.ndarray:
    if spec in df.columns:
        s = df[spec]
    else:  # an arithmetic expression over columns: whitelisted and computed with numpy, never eval'd
        from . import safe_expr

        avail = ", ".join(map(str, df.columns))
        quoted: dict[str, str] = {}  # `Column Name` -> a placeholder identifier

        def _quote(m: re.Match) -> str:
            quoted[f"quoted_column_{len(quoted)}"] = m.group(1)
            return f"quoted_column_{len(quoted) - 1}"

        try:
            text, tree = safe_expr.parse(re.sub(r"`([^`]*)`", _quote, str(spec)), what)
        except RooflawError as e:
            raise RooflawError(f"{e}; or no column {spec!r} (available: {avail})") from None
        cols = {}
        for nm, called in safe_expr.names(tree):
            col = quoted.get(nm, nm)
            if called:
                continue
            if col not in df.columns:
                raise RooflawError(f"{what}: no column {col!r}; available: {avail}")
            cols[nm] = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float)
        s = np.broadcast_to(safe_expr.to_numpy(tree, text, cols, what), (len(df),))
    v = pd.to_numeric(pd.Series(s), errors="coerce").to_numpy(dtype=float)
    bad_rows = np.flatnonzero(~np.isfinite(v))
    if bad_rows.size:
        i = bad_rows[0]
        raw = pd.Series(s).iloc[i]
        raise RooflawError(f"column {spec!r} row {i}: {raw!r} is not a finite number ({bad_rows.size} such rows)")
    bad_rows = np.flatnonzero(v <= 0)
    if bad_rows.size:
        i = bad_rows[0]
        raise RooflawError(f"column {spec!r} row {i}: {v[i]!r} is not positive ({bad_rows.size} such rows)")
    return v


def law_data(
    law: LossLaw, df: pd.DataFrame, mapping: Mapping[str, str] | None = None, loss_column: str = "loss"
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The law's variables and the loss from a table. A column named like a variable feeds it unless
    ``mapping`` says otherwise (``{symbol: column or an arithmetic expression over columns}``); architecture
    columns (``layers``, ``d_model``, ...) and ``tokens`` are also used through ``law_inputs``."""
    mapping = dict(mapping or {})
    extra = set(mapping) - set(law.variables)
    if extra:
        raise RooflawError(
            f"--map {sorted(extra)[0]}: not a variable of law {law.name}; its variables: {', '.join(law.variables)}"
        )
    if loss_column not in df.columns:
        raise RooflawError(f"loss column {loss_column!r} not in data; available: {', '.join(map(str, df.columns))}")
    derived: dict[str, np.ndarray] = {}
    arch_cols = {c: df[c].to_numpy() for c in COLUMNS if c in df.columns}
    if arch_cols:
        tok = df["tokens"].to_numpy() if "tokens" in df.columns else None
        derived = law_inputs(arch_cols, tok)
    x = {}
    for v in law.variables:
        if v in mapping:
            x[v] = _column(df, mapping[v], f"--map {v}={mapping[v]}")
        elif v in df.columns:
            x[v] = _column(df, v, f"variable {v}")
        elif v in derived:
            x[v] = np.broadcast_to(derived[v], (len(df),)).astype(float)
        else:
            avail = ", ".join(map(str, df.columns))
            raise RooflawError(f"variable {v} ({VARIABLES[v]}) has no column; use --map {v}=COLUMN; available: {avail}")
    return x, _column(df, loss_column, "loss")


# ---- result ----------------------------------------------------------------------------------------------
@dataclass
class FitResult:
    """A converged fit. ``law`` carries the fitted parameters (and bootstrap standard errors)."""

    law: LossLaw
    params: dict[str, float]
    objective: float
    r2: float
    rmse: float
    n_points: int
    seconds: float
    method: str
    n_starts: int
    n_converged: int
    r2_holdout: float | None = None
    rmse_holdout: float | None = None
    n_holdout: int = 0
    stderr: dict[str, float] | None = None
    ci95: dict[str, tuple[float, float]] | None = None
    bootstrap: int = 0
    y: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    y_pred: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    holdout_mask: np.ndarray = field(default_factory=lambda: np.zeros(0, bool), repr=False)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "law": self.law.name,
            "expression": self.law.text(),
            "method": self.method,
            "params": dict(self.params),
            "objective": self.objective,
            "r2": self.r2,
            "rmse": self.rmse,
            "n_points": self.n_points,
        }
        if self.n_holdout:
            out.update(r2_holdout=self.r2_holdout, rmse_holdout=self.rmse_holdout, n_holdout=self.n_holdout)
        if self.bootstrap:
            out.update(bootstrap=self.bootstrap, stderr=self.stderr, ci95={k: list(v) for k, v in self.ci95.items()})
        out.update(n_starts=self.n_starts, n_converged=self.n_converged, seconds=self.seconds)
        return out


def _metrics(y: np.ndarray, yp: np.ndarray) -> tuple[float, float]:
    res = y - yp
    ss = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float((res**2).sum()) / ss if ss > 0 else float("nan")
    return r2, float(np.sqrt((res**2).mean()))


def start_grid(obj: LogHuberObjective, starts: Any = "grid", seed: int = 0) -> np.ndarray:
    """Starting points in fit space: the recipe grid (``"grid"``), ``N`` seeded Latin-hypercube points
    over the grid's box, an explicit array ``(S, p)``, or a mapping parameter -> values (a product grid)."""
    grids = {"coef": GRID_COEF, "const": GRID_CONST, "exp": GRID_EXP, "other": GRID_OTHER}
    axes = [np.array(grids[obj.kinds[p]]) for p in obj.names]
    if isinstance(starts, Mapping):
        axes = [np.asarray(starts.get(p, ax), float) for p, ax in zip(obj.names, axes, strict=False)]
        for p in obj.names:
            if p in starts and p in obj.log_params:
                axes[obj.names.index(p)] = np.log(np.asarray(starts[p], float))
        starts = "grid"
    if isinstance(starts, str) and starts != "grid":
        try:
            starts = int(starts)
        except ValueError:
            raise RooflawError(f"starts={starts!r}: use 'grid' or a number of starts") from None
    if isinstance(starts, str):
        size = math.prod(len(a) for a in axes)
        if size <= MAX_GRID:
            return np.array(list(itertools.product(*axes)), float)
        starts = LHS_STARTS
    if isinstance(starts, (int, np.integer)) and not isinstance(starts, bool):
        if starts < 1:
            raise RooflawError(f"starts={starts}: must be at least 1")
        rng = np.random.default_rng(seed)
        lo = np.array([a.min() for a in axes])
        hi = np.array([a.max() for a in axes])
        u = (np.argsort(rng.random((starts, len(axes))), axis=0) + rng.random((starts, len(axes)))) / starts
        return lo + u * (hi - lo)
    arr = np.atleast_2d(np.asarray(starts, float))
    if arr.shape[1] != len(obj.names):
        raise RooflawError(f"starts: expected {len(obj.names)} columns ({', '.join(obj.names)}), got {arr.shape[1]}")
    return arr


def _chunked(obj: LogHuberObjective, weights: np.ndarray | None, chunk: int = 1 << 21):
    def fg(x: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        step = max(1, chunk // max(obj.n, 1))
        fs, gs = [], []
        for i in range(0, x.shape[0], step):
            w = None if weights is None else (weights if weights.ndim == 1 else weights[rows[i : i + step]])
            f, g = obj(x[i : i + step], w)
            fs.append(f)
            gs.append(g)
        return np.concatenate(fs), np.concatenate(gs)

    return fg


def _polish(obj: LogHuberObjective, theta: np.ndarray) -> tuple[np.ndarray, float]:
    def fun(t):
        f, g = obj(t[None, :])
        return float(f[0]), g[0]

    res = optimize.minimize(fun, theta, jac=True, method="L-BFGS-B")
    return res.x, float(res.fun)


def fit_law(
    law: LossLaw | str,
    data: pd.DataFrame | Mapping[str, Any] | str | Path,
    *,
    mapping: Mapping[str, str] | None = None,
    loss_column: str = "loss",
    method: str = "huber",
    huber_delta: float = 1e-3,
    starts: Any = "grid",
    bootstrap: int = 0,
    holdout: float | np.ndarray | Sequence[bool] = 0.0,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> FitResult:
    """Fit ``law`` (a ``LossLaw``, built-in name or expression) to ``data`` (table, mapping or file).

    ``method``: ``"huber"`` (the recipe above) or ``"nls"`` (least squares on the loss, the paper's
    method). ``holdout``: a fraction of points held out at random (seeded) or a boolean mask.
    ``bootstrap``: resamples of the training points for standard errors and 95% percentile intervals.
    Raises ``RooflawError`` on bad data or when no start converges.
    """
    t0 = time.perf_counter()
    if isinstance(law, str):
        law = get_law(law)
    if method not in ("huber", "nls"):
        raise RooflawError(f"method={method!r}: use 'huber' or 'nls'")
    if not (huber_delta > 0 and math.isfinite(huber_delta)):
        raise RooflawError(f"huber_delta={huber_delta!r}: must be a positive number")
    if isinstance(data, (str, Path)):
        data = load_table(data)
    df = data if isinstance(data, pd.DataFrame) else pd.DataFrame(dict(data))
    if len(df) == 0:
        raise RooflawError("data has no rows")
    x_all, y_all = law_data(law, df, mapping, loss_column)
    check_identifiable(law.name, law.param_names, x_all)
    n_all, p = len(y_all), len(law.params)
    if isinstance(holdout, (float, int)) and not isinstance(holdout, bool):
        if not 0 <= holdout < 1:
            raise RooflawError(f"holdout={holdout!r}: must be a fraction in [0, 1)")
        mask = np.zeros(n_all, bool)
        k = int(round(holdout * n_all))
        if k:
            mask[np.random.default_rng(seed).permutation(n_all)[:k]] = True
    else:
        mask = np.asarray(holdout, bool)
        if mask.shape != (n_all,):
            raise RooflawError(f"holdout mask has shape {mask.shape}, data has {n_all} rows")
    train = ~mask
    n = int(train.sum())
    if n < p:
        raise RooflawError(f"{n} training points for {p} parameters ({', '.join(law.params)}): need at least {p}")
    xt = {v: a[train] for v, a in x_all.items()}
    obj = LogHuberObjective(law, xt, y_all[train], huber_delta)
    x0 = start_grid(obj, starts, seed)
    if method == "huber":
        batch = batched_lbfgs(_chunked(obj, None), x0, progress=progress)
        okm = np.isin(batch.status, (1, 2)) & np.isfinite(batch.f)
        if not okm.any():
            raise RooflawError(f"fit of {law.name} did not converge from any of {len(x0)} starts")
        best = np.flatnonzero(okm)[np.argmin(batch.f[okm])]
        theta, fbest = _polish(obj, batch.x[best])
        if not (np.isfinite(fbest) and fbest <= batch.f[best]):
            theta, fbest = batch.x[best], float(batch.f[best])
        n_conv = int(okm.sum())
        basins = _basins(batch.x[okm], batch.f[okm], theta)
    else:
        theta, fbest, n_conv = _nls(obj, x0)
        basins = theta[None, :]
    params = obj.from_fit(theta)
    if not all(math.isfinite(v) for v in params.values()):
        raise RooflawError(f"fit of {law.name} did not converge: non-finite parameters {params}")
    fitted = law.with_params(params, source=f"fitted ({method}) to {n} points")
    y_pred = fitted.evaluate(x_all)
    r2, rmse = _metrics(y_all[train], y_pred[train])
    res = FitResult(
        law=fitted,
        params=params,
        objective=float(fbest),
        r2=r2,
        rmse=rmse,
        n_points=n,
        seconds=0.0,
        method=method,
        n_starts=len(x0),
        n_converged=n_conv,
        y=y_all,
        y_pred=y_pred,
        holdout_mask=mask,
    )
    if mask.any():
        res.r2_holdout, res.rmse_holdout = _metrics(y_all[mask], y_pred[mask])
        res.n_holdout = int(mask.sum())
    if bootstrap:
        se, ci = _bootstrap(obj, basins, int(bootstrap), seed, method)
        res.stderr, res.ci95, res.bootstrap = se, ci, int(bootstrap)
        res.law = fitted.with_params(params, stderr=se)
    res.seconds = time.perf_counter() - t0
    return res


def _basins(xs: np.ndarray, fs: np.ndarray, best: np.ndarray, k: int = 4) -> np.ndarray:
    """The best point plus up to ``k - 1`` other distinct low-objective end points (bootstrap starts)."""
    out = [best]
    for i in np.argsort(fs):
        if len(out) >= k:
            break
        if all(np.max(np.abs(xs[i] - o)) > 1e-2 for o in out):
            out.append(xs[i])
    return np.array(out)


def _nls(obj: LogHuberObjective, x0: np.ndarray, n_best: int = 16, weights: np.ndarray | None = None):
    with np.errstate(all="ignore"):
        pred = np.vstack([np.exp(obj.log_pred(x0[i : i + 512])) for i in range(0, len(x0), 512)])
        sse = np.nansum((pred - obj.y) ** 2, axis=1)
    sse[~np.isfinite(sse)] = np.inf
    order = np.argsort(sse)[:n_best]
    w = np.ones(obj.n) if weights is None else np.sqrt(weights)
    eps = 1e-7

    def resid(t):
        with np.errstate(all="ignore"):
            r = w * (np.exp(obj.log_pred(t)[0]) - obj.y)
        return np.where(np.isfinite(r), r, 1e6)

    best, fbest, n_conv = None, np.inf, 0
    for i in order:
        if not np.isfinite(sse[i]):
            continue
        try:
            r = optimize.least_squares(resid, x0[i], method="trf", diff_step=eps)
        except (ValueError, np.linalg.LinAlgError):
            continue
        if r.success and np.isfinite(r.cost):
            n_conv += 1
            if r.cost < fbest:
                best, fbest = r.x, float(r.cost)
    if best is None:
        raise RooflawError(f"fit of {obj.law.name} did not converge from any of {len(x0)} starts")
    return best, fbest, n_conv


def _bootstrap(obj: LogHuberObjective, basins: np.ndarray, B: int, seed: int, method: str):
    if B < 2:
        raise RooflawError(f"bootstrap={B}: need at least 2 resamples")
    rng = np.random.default_rng(seed + 1)
    counts = rng.multinomial(obj.n, np.full(obj.n, 1.0 / obj.n), size=B).astype(float)
    k = len(basins)
    if method == "huber":
        w = np.repeat(counts, k, axis=0)
        x0 = np.tile(basins, (B, 1))
        # tight tolerances: the summed Huber objective is ~1e-3, so scipy's default ftol (relative to
        # max(|f|, 1)) would stop at the full-data optimum and understate the spread
        batch = batched_lbfgs(_chunked(obj, w), x0, ftol=1e-13, gtol=1e-9)
        f = np.where(np.isin(batch.status, (1, 2)), batch.f, np.inf).reshape(B, k)
        pick = np.argmin(f, axis=1)
        thetas = batch.x.reshape(B, k, -1)[np.arange(B), pick]
        thetas = thetas[np.isfinite(f[np.arange(B), pick])]
    else:
        thetas = np.array([_nls(obj, basins, n_best=k, weights=c)[0] for c in counts])
    if len(thetas) < 2:
        raise RooflawError("bootstrap: fewer than 2 resamples converged")
    vals = {p: np.array([obj.from_fit(t)[p] for t in thetas]) for p in obj.names}
    se = {p: float(np.std(v, ddof=1)) for p, v in vals.items()}
    ci = {p: (float(np.percentile(v, 2.5)), float(np.percentile(v, 97.5))) for p, v in vals.items()}
    return se, ci


def plot_fit(result: FitResult, path: str | Path) -> Path:
    """Predicted vs actual loss, training and held-out points marked (the paper's Fig. 4)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    fig, ax = plt.subplots(figsize=(5, 5))
    tr = ~result.holdout_mask
    ax.scatter(result.y[tr], result.y_pred[tr], s=14, label=f"train (R²={result.r2:.3f})")
    if result.holdout_mask.any():
        ho = result.holdout_mask
        ax.scatter(result.y[ho], result.y_pred[ho], s=22, marker="^", label=f"held out (R²={result.r2_holdout:.3f})")
    lo = float(min(result.y.min(), result.y_pred.min()))
    hi = float(max(result.y.max(), result.y_pred.max()))
    ax.plot([lo, hi], [lo, hi], "k--", lw=1)
    ax.set_xlabel("actual loss")
    ax.set_ylabel("predicted loss")
    ax.set_title(result.law.name)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
