"""Speed and accuracy of the closed-form and GP solvers.

    python benchmarks/bench_solve.py [--repeat 50] [--json]

Measures, on this machine: the one-time sympy derivation; the median time of a closed-form query and of a GP query
of the continuous relaxation (derivation cached; theory-mode and full-preset GP); rounding to an aligned
architecture; and the worst loss gap between the rounded solution and the exact discrete optimum (plain enumeration
of the space) over a budget sweep on two devices and two precisions.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

from rooflaw import Problem, clear_cache, closed_form, get_device, round_solution, solve_gp

LAW = "paper-2602.10377"
BUDGETS = {"decode": (0.005, 0.01, 0.02, 0.05, 0.1, 0.2), "prefill": (0.01, 0.02, 0.05, 0.1, 0.3, 1.0),
           "total": (0.02, 0.05, 0.1, 0.3, 1.0, 2.0)}  # fmt: skip
MEMORY = (None, 0.5e9, 1e9, 4e9)
DEVICES = ("jetson-agx-orin-64gb", "jetson-orin-nano-8gb")
PRECISIONS = ("fp16", "int8")


def _median(fn, repeat):
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    dev = get_device(DEVICES[0])
    out: dict = {"machine": platform.processor() or platform.machine(), "python": platform.python_version()}
    p = Problem(LAW, dev, latency_budget=0.02, phase="decode", memory_budget=4e9)
    clear_cache("closed-form")
    t = time.perf_counter()
    closed_form(p)
    out["first_closed_form_s"] = time.perf_counter() - t
    queries = [Problem(LAW, dev, latency_budget=T, phase="decode", memory_budget=M) for T in (0.02, 0.05, 0.1)
               for M in (None, 1e9)]  # fmt: skip
    for q in queries:
        closed_form(q)
        solve_gp(q, preset="paper")
        solve_gp(q)  # full preset (the problem's default)
    out["closed_form_query_ms"] = 1e3 * statistics.median(
        _median(lambda q=q: closed_form(q), a.repeat) for q in queries
    )
    out["gp_query_ms"] = 1e3 * statistics.median(
        _median(lambda q=q: solve_gp(q, preset="paper"), max(5, a.repeat // 5)) for q in queries
    )
    out["gp_full_query_ms"] = 1e3 * statistics.median(_median(lambda q=q: solve_gp(q), 10) for q in queries)
    firsts = []
    for q in queries:  # a device/workload/space not seen before: cvxpy compiles the branch GPs again
        clear_cache("gp")
        t = time.perf_counter()
        solve_gp(q)
        firsts.append(time.perf_counter() - t)
    out["gp_full_first_query_ms"] = 1e3 * statistics.median(firsts)
    out["rounding_ms"] = 1e3 * _median(lambda: round_solution(p, closed_form(p).x), max(5, a.repeat // 5))
    worst, n, rows = 0.0, 0, []
    frame = p.space.to_frame()
    for dev_id in DEVICES:
        d = get_device(dev_id)
        for prec in PRECISIONS:
            for ph, Ts in BUDGETS.items():
                for T in Ts:
                    for M in MEMORY:
                        q = Problem(LAW, d, latency_budget=T, phase=ph, memory_budget=M, precision=prec)
                        df = q.evaluate(frame)
                        if not df["feasible"].any():
                            continue
                        opt = float(df.loc[df["feasible"], "loss"].min())
                        row, _, st = round_solution(q, closed_form(q).x)
                        gap = float("inf") if row is None else (float(row["loss"]) - opt) / opt
                        n += 1
                        if gap > worst:
                            worst = gap
                        rows.append({"device": dev_id, "precision": prec, "phase": ph, "T": T, "M": M, "gap": gap,
                                     "evaluated": st["evaluated"]})  # fmt: skip
    out.update(sweep_problems=n, worst_rounding_gap=worst,
               mean_evaluated=statistics.mean(r["evaluated"] for r in rows),
               worst_case=max(rows, key=lambda r: r["gap"]))  # fmt: skip
    if a.json:
        print(json.dumps(out, indent=2))
        return
    for k, v in out.items():
        print(f"{k:24s} {v}")


if __name__ == "__main__":
    main()
