"""Joint search quality: hypervolume of the Optuna search's feasible frontier over the joint space ÷ that of the
exact joint frontier, same reference point.

Usage: python benchmarks/bench_search_joint.py [--samplers random,nsga2,tpe] [--trials 250,500,1000]

Case: space ``paper`` (6,800 architectures) × precisions {bf16, fp8} × batches {16, 64} × layouts {tp=8,
ep=8,dp_attn=8} on 8 × H100 (``h100-sxm:8``), S_in 1024, S_out 64, Chinchilla-precision law at D = 1e11 tokens,
objectives loss, decode latency, throughput (aggregate tokens/s, maximised), TPOT ≤ 50 ms: 54,400 joint points.
Reference: the exact frontier's nadir + 10 % of its range per objective (throughput negated, like the search). Each
sampler runs once with the largest trial count; smaller counts are prefixes of that run. Prints one JSON object
with every figure (plus CPU seconds and the 1-min load average) and a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

import rooflaw as R

#: objective -> (column, sign): minimised sign·column (throughput is maximised)
COLUMNS = {"loss": ("loss", 1.0), "latency": ("latency_s", 1.0), "throughput": ("tokens_per_s", -1.0)}


def matrix(df, objs):
    return np.column_stack([s * df[c].to_numpy(dtype=float) for c, s in (COLUMNS[o] for o in objs)])


def search_frontier(trials, objs):
    """Feasible, non-dominated, distinct (architecture, combination) points of the trials."""
    f = trials[trials["feasible"]].drop_duplicates(["index", "combo"])
    return f[R.pareto_mask(matrix(f, objs))] if len(f) else f


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samplers", default="random,nsga2,tpe")
    ap.add_argument("--trials", default="250,500,1000")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    counts = [int(x) for x in a.trials.split(",")]
    objs = ("loss", "latency", "throughput")
    prob = R.Problem(law="chinchilla-precision", device="h100-sxm", space="paper", tokens=1e11,
                     workload=R.Workload(16, 1024, 64))  # fmt: skip
    opts = R.parallel.layout_options("h100-sxm:8", ["tp=8", "ep=8,dp_attn=8"], max_tpot_s=0.05)
    js = R.JointSpace(("bf16", "fp8"), (16, 64), opts)
    t0, c0 = time.perf_counter(), time.process_time()
    ex = R.joint_frontier(prob, js, objs, n_jobs=1)
    t_ex, c_ex = time.perf_counter() - t0, time.process_time() - c0
    v = matrix(ex.frontier, objs)
    ref = v.max(axis=0) + 0.1 * (v.max(axis=0) - v.min(axis=0))
    hv_ex = R.hypervolume(v, ref)
    out = {"joint_points": ex.evaluated, "feasible": ex.feasible, "exact_frontier": len(ex.frontier),
           "exact_seconds": round(t_ex, 1), "exact_cpu_seconds": round(c_ex, 1), "reference_minimised": ref.tolist(),
           "runs": []}  # fmt: skip
    for sampler in a.samplers.split(","):
        t0, c0 = time.perf_counter(), time.process_time()
        res = R.search(prob, sampler=sampler, n_trials=max(counts), seed=a.seed, objectives=objs, joint=js)
        secs, cpu = time.perf_counter() - t0, time.process_time() - c0
        ratios = {}
        for n in counts:
            f = search_frontier(res.trials[res.trials["trial"] < n], objs)
            ratios[n] = round(R.hypervolume(matrix(f, objs), ref) / hv_ex, 4) if len(f) else 0.0
        best = res.trials[res.trials["feasible"]]["loss"].min()
        run = {"sampler": sampler, "ratios": ratios, "seconds": round(secs, 1), "cpu_seconds": round(cpu, 1),
               "unique": res.to_dict()["unique"], "best_loss": float(best), "exact_best_loss":
               float(ex.frontier["loss"].min())}  # fmt: skip
        out["runs"].append(run)
        print(json.dumps(run), flush=True)
    out["load_1min"] = os.getloadavg()[0]
    print(json.dumps(out))
    n = max(counts)
    print("\n| sampler | " + " | ".join(f"{c} trials" for c in counts) + f" | wall s ({n}) | CPU s ({n}) |")
    print("|---|" + "---|" * len(counts) + "---|---|")
    for r in out["runs"]:
        cells = " | ".join(f"{r['ratios'][c]:.4f}" for c in counts)
        print(f"| {r['sampler']} | {cells} | {r['seconds']} | {r['cpu_seconds']} |")


if __name__ == "__main__":
    main()
