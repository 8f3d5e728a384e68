"""Speed of serving under a layout (architectures/s, one core): ``layout_columns`` on a table of candidates.

    python benchmarks/bench_parallel.py [--n 200000] [--json]

Each layout prices every candidate with the one assembly on two or three sharded shapes (attention, FFN, and for
Helix the sequence-sharded attention), per-operator, plus the collectives; ``tp=1`` is the single-chip model
(``evaluate_columns`` itself) for comparison. Candidates: the ``paper`` space, tiled to ``--n`` rows.
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core

import numpy as np  # noqa: E402

import rooflaw  # noqa: E402

LAYOUTS = ("tp=1", "tp=2", "ep=8,dp_attn=8", "pp=2,tp=4", "helix=kvp2,tpep8")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    frame = rooflaw.get_space("paper").to_frame()
    reps = -(-args.n // len(frame))
    cols = {k: np.tile(frame[k].to_numpy(), reps)[: args.n] for k in frame.columns}
    system = rooflaw.get_system("h100-sxm:8")
    wl = rooflaw.Workload(8, 1024, 64)
    out = {}
    for lay in LAYOUTS:
        rooflaw.parallel.layout_columns({k: v[:64] for k, v in cols.items()}, system, lay, wl, "bf16")  # compile, warm
        t = time.perf_counter()
        res = rooflaw.parallel.layout_columns(cols, system, lay, wl, "bf16")
        dt = time.perf_counter() - t
        out[lay] = {"rows": args.n, "seconds": dt, "rows_per_s": args.n / dt, "valid": float(np.mean(res["valid"]))}
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for lay, r in out.items():
        print(f"{lay:>18}: {r['rows']:,} architectures in {r['seconds']:.2f} s = {r['rows_per_s']:,.0f}/s "
              f"({r['valid']:.0%} valid)")  # fmt: skip


if __name__ == "__main__":
    main()
