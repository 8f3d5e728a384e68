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
from scipy import optimize

from ..arch.architecture import COLUMNS
from ..errors import RooflawError
from .builtins import get_law
from .huber import LogHuberObjective
from .huber_fused import usable
from .identifiable import check_identifiable
from .law import LossLaw
from .lbfgs import batched_lbfgs
from .table import load_table
from .variables import VARIABLES, law_inputs

#: The recipe's start grids, in fit space (coefficients as natural logs).
GRID_COEF = (0.0, 5.0, 10.0, 15.0, 20.0, 25.0)
GRID_CONST = (-1.0, -0.5, 0.0, 0.5, 1.0)
GRID_EXP = (0.0, 0.5, 1.0, 1.5, 2.0)
GRID_OTHER = (0.5, 1.0, 2.0)
#: Above this many grid points the default start set is a seeded Latin-hypercube sample of this size.
MAX_GRID = 20_000
LHS_STARTS = 4096
#: Above this many training rows the multi-start runs on a seeded random subsample of this many rows; the
#: :data:`REFINE_STARTS` best distinct end points are then refined on every row and the best polished, so a
#: 10⁶-row fit costs about what a 512-row fit does plus a few full-data L-BFGS runs (docs/fitting.md).
SUBSAMPLE_ROWS = 512
REFINE_STARTS = 8


# ---- data --------------------------------------------------------------------------------------------
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
    #: rows of the seeded subsample the starts ran on (0: all rows; see :data:`SUBSAMPLE_ROWS`)
    subsample: int = 0
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
        if self.bootstrap and self.ci95 is not None:  # set together by fit_law
            out.update(bootstrap=self.bootstrap, stderr=self.stderr, ci95={k: list(v) for k, v in self.ci95.items()})
        out.update(n_starts=self.n_starts, n_converged=self.n_converged, seconds=self.seconds)
        if self.subsample:
            out["subsample"] = self.subsample
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


def _chunked(obj: LogHuberObjective, weights: np.ndarray | None, chunk: int = 1 << 21, starts: int = 0):
    """``fg(theta, rows)`` for :func:`batched_lbfgs`: the fused numba kernel for ``starts`` starts of a sum of power
    laws when it applies (:func:`huber_fused.usable`), else the numpy objective ``chunk`` values at a time."""
    if usable(obj.linear, starts, obj.n, weights):
        return obj.fused(weights)

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


def _block(obj: LogHuberObjective, starts: int) -> int | None:
    """Starts per objective call: all of them for the fused kernel (no temporaries), else L-BFGS's default."""
    return starts if usable(obj.linear, starts, obj.n, None) else None


def _polish(obj: LogHuberObjective, theta: np.ndarray, f0: float) -> tuple[np.ndarray, float]:
    """scipy's L-BFGS-B from ``theta`` (objective ``f0``); the start itself when polishing does not improve it."""

    def fun(t):
        f, g = obj(t[None, :])
        return float(f[0]), g[0]

    res = optimize.minimize(fun, theta, jac=True, method="L-BFGS-B")
    if np.isfinite(res.fun) and res.fun <= f0:
        return res.x, float(res.fun)
    return theta, float(f0)


def _converged(batch: Any, why: str) -> tuple[np.ndarray, int]:
    """Mask of the starts that converged to a finite objective, and the best one's index; ``why`` if none did."""
    ok = np.isin(batch.status, (1, 2)) & np.isfinite(batch.f)
    if not ok.any():
        raise RooflawError(why)
    return ok, int(np.flatnonzero(ok)[np.argmin(batch.f[ok])])


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
    subsample: int | None = None,
) -> FitResult:
    """Fit ``law`` (a ``LossLaw``, built-in name or expression) to ``data`` (table, mapping or file).

    ``method``: ``"huber"`` (the recipe above) or ``"nls"`` (least squares on the loss, the paper's
    method). ``holdout``: a fraction of points held out at random (seeded) or a boolean mask.
    ``bootstrap``: resamples of the training points for standard errors and 95% percentile intervals.
    ``subsample``: above this many training rows (default :data:`SUBSAMPLE_ROWS`; 0: never) the starts run on
    a seeded subsample and the best :data:`REFINE_STARTS` end points are refined on all rows (huber only).
    ``progress(done, total)`` is called as starts finish. Raises ``RooflawError`` on bad data or when no
    start converges.
    """
    t0 = time.perf_counter()
    if isinstance(law, str):
        law = get_law(law)
    if method not in ("huber", "nls"):
        raise RooflawError(f"method={method!r}: use 'huber' or 'nls'")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**63:
        raise RooflawError(f"seed={seed!r}: must be a non-negative integer")
    subsample = SUBSAMPLE_ROWS if subsample is None else subsample
    if isinstance(subsample, bool) or not isinstance(subsample, (int, np.integer)) or subsample < 0:
        raise RooflawError(f"subsample={subsample!r}: must be a number of rows (0: use every row)")
    if not (huber_delta > 0 and math.isfinite(huber_delta)):
        raise RooflawError(f"huber_delta={huber_delta!r}: must be a positive number")
    if isinstance(data, (str, Path)):
        data = load_table(data)
    if not isinstance(data, (pd.DataFrame, Mapping)):
        text = repr(data) if len(repr(data)) <= 40 else repr(data)[:37] + "..."
        raise RooflawError(f"data={text}: must be a DataFrame, a mapping of column name to values, or a file path")
    try:
        df = data if isinstance(data, pd.DataFrame) else pd.DataFrame(dict(data))
    except (TypeError, ValueError) as e:
        raise RooflawError(f"data: cannot be read as columns ({' '.join(str(e).split())})") from None
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
    sub_rows = 0
    if method == "huber":
        if subsample and n > subsample:
            sub_rows = int(subsample)
            theta, fbest, n_conv, basins = _fit_subsampled(obj, law, xt, y_all[train], huber_delta, x0, sub_rows,
                                                           seed, progress)  # fmt: skip
        else:
            theta, fbest, n_conv, basins = _multistart(obj, law, x0, progress)
    else:
        theta, fbest, n_conv = _nls(obj, x0)
        basins = theta[None, :]
    params = obj.from_fit(theta)
    if not all(math.isfinite(v) for v in params.values()):
        raise RooflawError(f"fit of {law.name} did not converge: non-finite parameters {params}")
    # the fitted law holds where its data lie: the range of each variable over the training points
    domain = {v: (float(np.min(a)), float(np.max(a))) for v, a in xt.items() if np.size(a)}
    fitted = law.with_params(params, source=f"fitted ({method}) to {n} points", domain=domain)
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
        subsample=sub_rows,
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


def _multistart(obj: LogHuberObjective, law: LossLaw, x0: np.ndarray, progress: Callable | None):
    """Every start on every row, the best end point polished: (theta, objective, converged starts, basins)."""
    batch = batched_lbfgs(_chunked(obj, None, starts=len(x0)), x0, progress=progress, block=_block(obj, len(x0)))
    okm, best = _converged(batch, f"fit of {law.name} did not converge from any of {len(x0)} starts")
    theta, fbest = _polish(obj, batch.x[best], batch.f[best])
    return theta, fbest, int(okm.sum()), _basins(batch.x[okm], batch.f[okm], theta)


def _fit_subsampled(obj, law, xt, yt, delta, x0, rows: int, seed: int, progress: Callable | None):
    """Starts on a seeded subsample of ``rows`` rows; its :data:`REFINE_STARTS` best distinct end points refined
    on every row (one batched L-BFGS), the best polished. Same return as :func:`_multistart`."""
    pick = np.sort(np.random.default_rng(seed + 2).choice(obj.n, rows, replace=False))
    sub = LogHuberObjective(law, {v: a[pick] for v, a in xt.items()}, yt[pick], delta)
    total = len(x0) + REFINE_STARTS
    p1 = None if progress is None else (lambda done, _s: progress(done, total))
    batch = batched_lbfgs(_chunked(sub, None, starts=len(x0)), x0, progress=p1, block=_block(sub, len(x0)))
    okm, best = _converged(batch, f"fit of {law.name} did not converge from any of {len(x0)} starts (on {rows} rows)")
    seeds = _basins(batch.x[okm], batch.f[okm], batch.x[best], k=REFINE_STARTS)
    p2 = None if progress is None else (lambda done, _s: progress(len(x0) + done, total))
    ref = batched_lbfgs(_chunked(obj, None), seeds, progress=p2)
    ok2, b2 = _converged(ref, f"fit of {law.name}: no refined start converged on all {obj.n} rows")
    theta, fbest = _polish(obj, ref.x[b2], ref.f[b2])
    if progress is not None:
        progress(total, total)
    return theta, fbest, int(okm.sum()), _basins(ref.x[ok2], ref.f[ok2], theta)


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
