"""The joint space end to end: ``wide`` × precisions × batch sizes, its exact frontier, on Dask or joblib.

Usage: python benchmarks/bench_joint.py [--space wide] [--precisions bf16,fp8,nvfp4] [--batches 1,8,64]
       [--scheduler local:2 | --n-jobs 2] [--objectives loss,latency,throughput] [--device h100-sxm]

Every (architecture, precision, batch) point is evaluated by the one cost assembly (numpy backend) and the
precision-aware law ``chinchilla-precision`` (100B training tokens); each Dask task keeps its non-dominated rows and
the union is filtered exactly. Prints one JSON object: points, wall seconds, points/s, frontier size, per
(precision, batch) frontier counts, the CPU count and the 1-minute load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import rooflaw as rl


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--space", default="wide")
    ap.add_argument("--device", default="h100-sxm")
    ap.add_argument("--precisions", default="bf16,fp8,nvfp4")
    ap.add_argument("--batches", default="1,8,64")
    ap.add_argument("--objectives", default="loss,latency,throughput")
    ap.add_argument("--latency-budget", default="50ms")
    ap.add_argument("--scheduler", default="local:2")
    ap.add_argument("--n-jobs", type=int, default=None, help="joblib processes instead of Dask")
    a = ap.parse_args()
    prob = rl.Problem(law="chinchilla-precision", device=a.device, space=a.space, tokens=1e11,
                      latency_budget=a.latency_budget)  # fmt: skip
    joint = rl.JointSpace(tuple(a.precisions.split(",")), tuple(int(b) for b in a.batches.split(",")))
    sched = None if a.n_jobs is not None else a.scheduler
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    res = rl.joint_frontier(prob, joint, a.objectives, n_jobs=a.n_jobs, scheduler=sched)
    wall = time.perf_counter() - t0
    counts = {f"{p}/{b}": int(n) for (p, b), n in res.frontier.groupby(["precision", "batch"]).size().items()}
    print(json.dumps({
        "space": a.space, "device": a.device, "precisions": a.precisions, "batches": a.batches,
        "objectives": a.objectives, "latency_budget": a.latency_budget, "scheduler": sched, "n_jobs": a.n_jobs,
        "points": res.evaluated, "architectures": res.architectures, "combinations": res.combinations,
        "feasible": res.feasible, "frontier": res.frontier_size, "wall_s": round(wall, 2),
        "points_per_s": round(res.evaluated / wall), "eval_cpu_s": round(res.timings["eval_cpu_seconds"], 1),
        "tasks": res.timings["tasks"], "frontier_by_precision_batch": counts,
        "cpus": os.cpu_count(), "load_before": round(load0, 2), "load_after": round(os.getloadavg()[0], 2),
    }, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
