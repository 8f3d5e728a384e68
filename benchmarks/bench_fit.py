"""Fitter speed: the naive recipe (a loop of scipy L-BFGS-B calls with numerical gradients over the
4,500-start grid, as Epoch's replication does it) against ``rooflaw.objectives.fit_law`` on the same
data, in the same run. Prints both times, the ratio and both optima.

    python benchmarks/bench_fit.py            # needs ../shared/data/chinchilla/svg_extracted_data.csv
"""

from __future__ import annotations

import itertools
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import minimize

from rooflaw import fit_law

CHIN = Path(__file__).resolve().parents[1].parent / "shared/data/chinchilla/svg_extracted_data.csv"


def load() -> pd.DataFrame:
    if not CHIN.exists():
        sys.exit(f"Chinchilla data not found at {CHIN}")
    df = pd.read_csv(CHIN).sort_values("loss").iloc[:-5]
    return df.assign(N=df["Model Size"], D=df["Training FLOP"] / (6 * df["Model Size"])).reset_index(drop=True)


def naive(df: pd.DataFrame) -> tuple[dict, float]:
    logN, logD, logL = np.log(df.N.to_numpy()), np.log(df.D.to_numpy()), np.log(df.loss.to_numpy())

    def obj(p):
        # plain numpy (scipy.special.logsumexp/huber cost ~0.5 ms a call in scipy 1.17 and would make
        # the baseline look ~10x slower than the recipe really is)
        a, b, e, alpha, beta = p
        u1, u2 = a - alpha * logN, b - beta * logD
        m = np.maximum(np.maximum(u1, u2), e)
        pred = m + np.log(np.exp(u1 - m) + np.exp(u2 - m) + np.exp(e - m))
        r = np.abs(logL - pred)
        return np.sum(np.where(r <= 1e-3, 0.5 * r * r, 1e-3 * (r - 0.5e-3)))

    best = None
    grid = itertools.product(
        [0, 0.5, 1, 1.5, 2], [0, 0.5, 1, 1.5, 2], [-1, -0.5, 0, 0.5, 1], range(0, 30, 5), range(0, 30, 5)
    )
    for alpha, beta, e, a, b in grid:
        r = minimize(obj, [a, b, e, alpha, beta], method="L-BFGS-B")
        if best is None or r.fun < best.fun:
            best = r
    a, b, e, alpha, beta = best.x
    return {"E": np.exp(e), "A": np.exp(a), "alpha": alpha, "B": np.exp(b), "beta": beta}, float(best.fun)


def main() -> None:
    df = load()
    cpu = platform.processor() or platform.machine()
    print(f"machine: {cpu}, {os.cpu_count()} cores, python {platform.python_version()}")
    t = time.perf_counter()
    res = fit_law("E + A/N**alpha + B/D**beta", df)
    t_fast = time.perf_counter() - t
    t = time.perf_counter()
    p_naive, f_naive = naive(df)
    t_naive = time.perf_counter() - t
    fmt = lambda p: ", ".join(f"{k} {p[k]:.6g}" for k in ("E", "A", "B", "alpha", "beta"))  # noqa: E731
    print(f"naive (4500 x scipy L-BFGS-B, numerical gradient): {t_naive:7.2f} s")
    print(f"  objective {f_naive:.10f}  {fmt(p_naive)}")
    print(f"rooflaw fit_law (batched L-BFGS, sympy gradients): {t_fast:7.2f} s")
    print(f"  objective {res.objective:.10f}  {fmt(res.params)}")
    print(f"speed-up: {t_naive / t_fast:.1f}x")


if __name__ == "__main__":
    main()
