"""The GP sweep of issue #12: ``--method gp`` over 72 feasible problems.

    python benchmarks/bench_gp_sweep.py [--json] [--quick]

Devices (AGX Orin 64 GB, L4, H100) × batch (1, 8) × (input, output) tokens ((1024, 16), (4096, 256)) × three
total-latency budgets × fused/unfused attention = 72 problems of the paper space under the paper's law. Each
budget is a multiple (1.5×, 3×, 10×) of the fastest architecture of the discrete space (enumerated with numpy),
so every problem is feasible. For each: exit status (0 solved, 3 infeasible, 4 solver failure), seconds, the
conic solver that answered, the relaxation's loss and the rounded answer's loss and latency (the rounded answer
must meet the budget under the exact cost model). ``--quick`` runs the 12 problems of the AGX Orin at 4096/256.
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import statistics
import time

import numpy as np

from rooflaw import Infeasible, Problem, RooflawError, Workload, evaluate_columns, get_device, solve

DEVICES = ("jetson-agx-orin-64gb", "l4", "h100-sxm")
BATCHES = (1, 8)
TOKENS = ((1024, 16), (4096, 256))
FACTORS = (1.5, 3.0, 10.0)
ATTENTION = ("fused", "unfused")


def fastest_total(device: str, wl: Workload, space) -> float:
    """The smallest total latency of any point of the discrete space (exact cost model, enumerated)."""
    best = np.inf
    for cols in space.iter_chunks(1 << 16):
        r = evaluate_columns(cols, get_device(device), wl)
        ok = r["fits_in_memory"]
        if ok.any():
            best = min(best, float(r["total_s"][ok].min()))
    return best


def run(quick: bool = False) -> list[dict]:
    rows = []
    devices = DEVICES[:1] if quick else DEVICES
    tokens = TOKENS[1:] if quick else TOKENS
    for dev, B, (s_in, s_out), att in itertools.product(devices, BATCHES, tokens, ATTENTION):
        wl = Workload(B, s_in, s_out, att)
        base = Problem(device=dev, workload=wl, latency_budget=1.0, phase="total")
        t_min = fastest_total(dev, wl, base.space)
        for f in FACTORS:
            p = Problem(device=dev, workload=wl, latency_budget=f * t_min, phase="total")
            row = {"device": dev, "batch": B, "input_tokens": s_in, "output_tokens": s_out, "attention": att,
                   "budget_s": f * t_min, "factor": f}  # fmt: skip
            t0 = time.perf_counter()
            try:
                r = solve(p, "gp")
                row.update(status=0, loss=r.loss, latency_s=r.latency_s["total"], relaxed_loss=r.continuous_loss,
                           solver=r.extra["gp"]["solver"], gp_status=r.extra["gp"]["status"],
                           relaxed_latency_s=r.extra["gp"]["values"]["latency"])  # fmt: skip
            except Infeasible as e:
                row.update(status=3, error=str(e)[:200])
            except RooflawError as e:  # ExternalError (a solver failure) is exit 4, other errors exit 2
                row.update(status=4 if type(e).__name__ == "ExternalError" else 2, error=str(e)[:200])
            row["seconds"] = time.perf_counter() - t0
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    rows = run(a.quick)
    ok = [r for r in rows if r["status"] == 0]
    secs = [r["seconds"] for r in rows]
    summary = {
        "problems": len(rows), "solved": len(ok), "failed": len(rows) - len(ok),
        "median_s": statistics.median(secs), "max_s": max(secs), "total_s": sum(secs),
        "solvers": sorted({r.get("solver", "") for r in ok}),
        "over_budget": sum(1 for r in ok if r["latency_s"] > r["budget_s"] * (1 + 1e-9)),
        # the relaxed optimum's exact latency (every step summed) against the budget: the decode-step node bound
        # (gp_full.step_nodes) is conservative, so this is <= 1; its smallest value bounds what the bound costs
        "relaxed_exact_over_budget_min": min(r["relaxed_latency_s"] / r["budget_s"] for r in ok),
        "relaxed_exact_over_budget_max": max(r["relaxed_latency_s"] / r["budget_s"] for r in ok),
        "machine": platform.processor() or platform.machine(),
    }  # fmt: skip
    print(json.dumps(summary, indent=None if a.json else 2))


if __name__ == "__main__":
    main()
