"""Fitting a law to 10⁶ rows: a synthetic set drawn from a known Chinchilla-form law, fitted with the default recipe
(4,500-start grid on a seeded 512-row subsample, the 8 best distinct end points refined on every row, then polished).

    python benchmarks/bench_fit_large.py [--rows 1000000] [--noise 0.01]

Prints CPU and wall seconds, the fitted and true parameters and their largest relative error.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np

from rooflaw import fit_law

TRUE = {"E": 1.9, "A": 300.0, "alpha": 0.31, "B": 900.0, "beta": 0.29}


def data(n: int, noise: float, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    N = 10 ** rng.uniform(7.5, 10.5, n)
    D = 10 ** rng.uniform(9, 12, n)
    y = TRUE["E"] + TRUE["A"] / N ** TRUE["alpha"] + TRUE["B"] / D ** TRUE["beta"]
    return {"N": N, "D": D, "loss": y * np.exp(noise * rng.standard_normal(n))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--noise", type=float, default=0.01)
    a = ap.parse_args()
    d = data(a.rows, a.noise)
    c, w = time.process_time(), time.perf_counter()
    res = fit_law("E + A/N**alpha + B/D**beta", d)
    out = {
        "rows": a.rows, "cpu_s": time.process_time() - c, "wall_s": time.perf_counter() - w,
        "subsample": res.subsample, "n_starts": res.n_starts, "params": res.params, "true": TRUE,
        "max_rel_error": max(abs(res.params[k] / v - 1) for k, v in TRUE.items()),
        "machine": platform.processor() or platform.machine(),
    }  # fmt: skip
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
