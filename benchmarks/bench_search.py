"""Search quality: hypervolume of the Optuna search frontier ÷ hypervolume of the exact frontier.

Usage: python benchmarks/bench_search.py [--spaces paper,wide] [--samplers random,nsga2,tpe,gp]
       [--trials 200,500,1000,2000]

Same reference point for both (the exact frontier's nadir + 10 % of its range); loss vs decode latency on
jetson-orin-nano-8gb (fp16, B=1, S_in=1024, S_out=16, the device capacity as the only constraint). Each sampler runs
once with the largest trial count; the smaller counts are prefixes of that run (samplers do not depend on n_trials).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import rooflaw
from rooflaw import Problem, frontier, hypervolume, search, search_frontier


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spaces", default="paper,wide")
    ap.add_argument("--samplers", default="random,nsga2,tpe")
    ap.add_argument("--trials", default="200,500,1000,2000")
    ap.add_argument("--device", default="jetson-orin-nano-8gb")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    counts = [int(x) for x in a.trials.split(",")]
    rows = []
    for space in a.spaces.split(","):
        # the whole space, as measured in docs/search.md (not only the paper law's fitted domain)
        prob = Problem(
            law="paper-2602.10377", device=rooflaw.get_device(a.device), space=space, allow_extrapolation=True
        )
        t0 = time.perf_counter()
        ex = frontier(prob).frontier
        t_ex = time.perf_counter() - t0
        v = ex[["loss", "latency_s"]].to_numpy()
        ref = v.max(axis=0) + 0.1 * (v.max(axis=0) - v.min(axis=0))
        hv_ex = hypervolume(v, ref)
        print(f"# {space}: {prob.space.size:,} points, exact frontier {len(ex)} in {t_ex:.1f} s, ref {ref.tolist()}")
        for sampler in a.samplers.split(","):
            t0 = time.perf_counter()
            res = search(prob, sampler=sampler, n_trials=max(counts), seed=a.seed)
            secs = time.perf_counter() - t0
            cells = []
            for n in counts:
                f = search_frontier(res.trials[res.trials["trial"] < n], ("loss", "latency"))
                hv = hypervolume(f[["loss", "latency_s"]].to_numpy(), ref) if len(f) else 0.0
                cells.append(hv / hv_ex)
            rows.append((space, sampler, cells, secs))
            print(f"{space:6s} {sampler:7s} " + " ".join(f"{c:.4f}" for c in cells) + f"   ({secs:.0f} s)", flush=True)
    print()
    print("| space | sampler | " + " | ".join(f"{n} trials" for n in counts) + f" | seconds ({max(counts)}) |")
    print("|---|---|" + "---|" * len(counts) + "---|")
    for space, sampler, cells, secs in rows:
        print(f"| {space} | {sampler} | " + " | ".join(f"{c:.4f}" for c in cells) + f" | {secs:.0f} |")
    _ = np


if __name__ == "__main__":
    main()
