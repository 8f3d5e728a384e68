"""The joint space end to end: ``wide`` × precisions × batch sizes, its exact frontier, on Dask or in-process.

Usage: python benchmarks/bench_joint.py [--cases joint,giga] [--space wide] [--device h100-sxm]
       [--precisions bf16,fp8,nvfp4] [--batches 1,8,64] [--giga-batches 28] [--scheduler local:2 | --n-jobs 2]
       [--objectives loss,latency,throughput] [--backend numba|numpy|auto] [--check-numpy]

* joint (#11): ``wide`` × {bf16, fp8, nvfp4} × batch {1, 8, 64} = 107 M points on a Dask LocalCluster of 2 worker
  processes (``--scheduler``; ``--n-jobs N`` runs it in-process instead).
* joint-numpy (``--check-numpy``): the joint case again, in-process on the numpy backend; the two frontiers must be
  identical (``pd.testing.assert_frame_equal``).
* giga (#15): ``wide`` × {bf16, fp8, nvfp4} × batch 1…``--giga-batches`` (28: 1.0 × 10⁹ points), in-process on 2
  threads, with this process's peak memory (VmHWM; no worker processes).

Every point is priced by the cost model and the precision-aware law ``chinchilla-precision`` (100B training
tokens, the law's fitted domain, 50 ms decode budget): with ``--backend numba`` (the default) each (precision,
batch) combination runs on the generated scan kernel, one task per combination, whose in-kernel pre-filter keeps
only points that can be on the joint frontier; with ``numpy`` on the vectorised numpy evaluator. Each task keeps
its non-dominated rows and the union is filtered exactly once. Kernels are compiled once per precision and cached
on disk: run the benchmark twice to time the warm path (the first run's compile time is in ``setup_s``).

Prints one JSON object per case: points, wall seconds, process CPU seconds (threads; Dask workers' CPU is the tasks'
``eval_cpu_s``), points/s, frontier size, per (precision, batch) frontier counts, the CPU count and the 1-minute
load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import pandas as pd

import rooflaw as rl


def _peak_rss_gb() -> float | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 2**20, 3)
    except OSError:
        return None
    return None


def case(
    a: argparse.Namespace,
    name: str,
    batches: tuple[int, ...],
    sched: str | None,
    n_jobs: int | None,
    backend: str | None = None,
) -> dict:
    prob = rl.Problem(law="chinchilla-precision", device=a.device, space=a.space, tokens=1e11,
                      latency_budget=a.latency_budget)  # fmt: skip
    joint = rl.JointSpace(tuple(a.precisions.split(",")), batches)
    load0 = os.getloadavg()[0]
    t0, c0 = time.perf_counter(), time.process_time()
    res = rl.joint_frontier(prob, joint, a.objectives, n_jobs=n_jobs, scheduler=sched, backend=backend or a.backend)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    counts = {f"{p}/{b}": int(n) for (p, b), n in res.frontier.groupby(["precision", "batch"]).size().items()}
    t = res.timings
    return {
        "case": name, "space": a.space, "device": a.device, "precisions": a.precisions,
        "batches": ",".join(map(str, batches)), "objectives": a.objectives, "latency_budget": a.latency_budget,
        "scheduler": sched, "n_jobs": t["n_jobs"], "backend": t["backend"], "points": res.evaluated,
        "architectures": res.architectures, "combinations": res.combinations, "feasible": res.feasible,
        "frontier": res.frontier_size, "wall_s": round(wall, 2), "points_per_s": round(res.evaluated / wall),
        "process_cpu_s": round(cpu, 1), "eval_cpu_s": round(t["eval_cpu_seconds"], 1),
        "cpu_ns_per_point": round(1e9 * (t["eval_cpu_seconds"] if sched else cpu) / res.evaluated, 1),
        "setup_s": round(t["setup_seconds"], 2), "merge_s": round(t["pareto_seconds"], 3), "tasks": t["tasks"],
        "peak_rss_gb": _peak_rss_gb() if sched is None else None,
        "frontier_by_precision_batch": counts if len(counts) <= 12 else f"{len(counts)} combinations on it",
        "cpus": os.cpu_count(), "load_before": round(load0, 2), "load_after": round(os.getloadavg()[0], 2),
        "_frontier": res.frontier,
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="joint,giga")
    ap.add_argument("--space", default="wide")
    ap.add_argument("--device", default="h100-sxm")
    ap.add_argument("--precisions", default="bf16,fp8,nvfp4")
    ap.add_argument("--batches", default="1,8,64")
    ap.add_argument("--giga-batches", type=int, default=28, help="the giga case's batch sizes: 1…N")
    ap.add_argument("--objectives", default="loss,latency,throughput")
    ap.add_argument("--latency-budget", default="50ms")
    ap.add_argument("--scheduler", default="local:2")
    ap.add_argument("--n-jobs", type=int, default=None, help="the joint case in-process (threads / joblib)")
    ap.add_argument("--backend", default="numba", help="numba (the scan kernel), numpy or auto")
    ap.add_argument(
        "--check-numpy",
        action="store_true",
        help="also run the joint case in-process on numpy and require the identical frontier (~2-3 min)",
    )
    a = ap.parse_args()
    out = []
    for name in a.cases.split(","):
        if name == "joint":
            sched = None if a.n_jobs is not None else a.scheduler
            batches = tuple(int(b) for b in a.batches.split(","))
            out.append(case(a, name, batches, sched, a.n_jobs))
            if a.check_numpy:
                ref = case(a, "joint-numpy", batches, None, 2, "numpy")
                pd.testing.assert_frame_equal(out[-1]["_frontier"], ref["_frontier"])  # raises if they differ
                out.append(ref | {"identical_frontier": True})
        elif name == "giga":
            out.append(case(a, name, tuple(range(1, a.giga_batches + 1)), None, 2))
        else:
            raise SystemExit(f"--cases: unknown case {name!r} (joint, giga)")
    print(json.dumps([{k: v for k, v in o.items() if k != "_frontier"} for o in out], indent=1))


if __name__ == "__main__":
    main()
