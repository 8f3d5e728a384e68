"""Exhaustive frontier speed and memory on a ≥ 10⁷-point space.

Usage: python benchmarks/bench_frontier.py [--space wide] [--objectives loss,latency] [--n-jobs 2]

Times ``rooflaw.frontier`` end to end (worker start-up, cost model + loss law for every point, feasibility,
Pareto extraction) and reports peak memory as the sum of the peak RSS (VmHWM) of this process and of every worker
process — an upper bound on the true combined peak.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path


def _hwm(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                kids = [int(x) for x in (task / "children").read_text().split()]
            except OSError:
                kids = []
            out.extend(kids)
            todo.extend(kids)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--space", default="wide")
    ap.add_argument("--objectives", default="loss,latency")
    ap.add_argument("--device", default="jetson-orin-nano-8gb")
    ap.add_argument("--n-jobs", type=int, default=2)
    a = ap.parse_args()
    t_start = time.perf_counter()
    import rooflaw
    from rooflaw import Problem, frontier

    t_import = time.perf_counter() - t_start
    # the whole space, as measured in docs/search.md (not only the paper law's fitted domain)
    prob = Problem(law="paper-2602.10377", device=rooflaw.get_device(a.device), space=a.space, allow_extrapolation=True)
    t0 = time.perf_counter()
    res = frontier(prob, a.objectives, n_jobs=a.n_jobs, cloud=0)
    wall = time.perf_counter() - t0
    kids = _descendants(os.getpid())
    peak = _hwm(os.getpid()) + sum(_hwm(k) for k in kids)
    out = {
        "space": a.space, "points": prob.space.size, "objectives": a.objectives, "n_jobs": a.n_jobs,
        "evaluated": res.evaluated, "feasible": res.feasible, "frontier_size": res.frontier_size,
        "seconds": round(wall, 2), "import_seconds": round(t_import, 2),
        "eval_seconds": round(res.eval_seconds, 2), "pareto_seconds": round(res.pareto_seconds, 3),
        "points_per_second": round(res.evaluated / wall), "peak_memory_bytes": peak,
        "peak_memory_processes": 1 + len(kids),
    }  # fmt: skip
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
