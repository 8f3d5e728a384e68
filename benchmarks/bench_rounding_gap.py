"""How far the closed form's rounded answer lands above the global discrete optimum, on random small spaces.

    python benchmarks/bench_rounding_gap.py [--cases 200] [--seed 0] [--json]

Each case draws a space (up to 40 64-step widths and 40 depths, head_dim 64/96/128, up to 6 kv_heads, 6 (E, K)
pairs and 6 FFN ratios, tied/untied, ffn_align 64 -- up to ~10^6 points), an
alignment (none, 128, 256) and a budget (decode latency 4-200 ms or memory 0.3-6 GB) on the Jetson AGX Orin 64GB
(pure roofline, paper law, extrapolation allowed) -- larger spaces than tests/test_rounding_property.py draws, so
that rounding cannot see all of them; the exhaustive solver
gives the global optimum of the aligned space. Reports the gap distribution, the worst case, and the rounding's
evaluation count relative to the space size.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math

import numpy as np

from rooflaw import Infeasible, Problem, Space, get_device, solve

LAW = "paper-2602.10377"


def case(rng: np.random.Generator, dev) -> Problem:
    d0 = int(rng.integers(8, 25)) * 64
    space = Space(
        name="random",
        layers=sorted({int(v) for v in rng.integers(1, 65, int(rng.integers(4, 40)))}),
        d_model=list(range(d0, d0 + 64 * int(rng.integers(4, 41)), 64)),
        head_dim=[[64], [128], [64, 128], [64, 96, 128]][int(rng.integers(4))],
        kv_heads=[[1], [1, "heads"], [1, 2, 4, "heads"], [1, 2, 4, 8, 16, "heads"]][int(rng.integers(4))],
        moe=[
            [(1, 1)],
            [(1, 1), (8, 2)],
            [(1, 1), (8, 1), (16, 2)],
            [(1, 1), (4, 1), (8, 2), (16, 1), (32, 4), (64, 8)],
        ][int(rng.integers(4))],
        r_single=sorted({float(v) for v in rng.choice([0.25, 0.5, 1, 1.5, 2, 3, 4, 6, 8], int(rng.integers(1, 7)))}),
        vocab=[32000],
        tied=[[False], [False, True]][int(rng.integers(2))],
        ffn_align=64,
    )
    align = [None, 128, 256][int(rng.integers(3))]
    if rng.random() < 0.5:
        kw = dict(latency_budget=math.exp(rng.uniform(math.log(0.004), math.log(0.2))), phase="decode")
    else:
        kw = dict(memory_budget=float(rng.uniform(0.3e9, 6e9)))
    return Problem(LAW, dev, space=space, align=align, allow_extrapolation=True, **kw)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    dev = dataclasses.replace(get_device("jetson-agx-orin-64gb"), achieved={})
    rng = np.random.default_rng(a.seed)
    gaps, worst, infeasible, errors, share = [], None, 0, [], []
    for i in range(a.cases):
        p = case(rng, dev)
        try:
            ex = solve(p, "exhaustive")
        except Infeasible:
            infeasible += 1
            continue
        except Exception as e:  # noqa: BLE001 - e.g. no aligned point: counted, reported
            errors.append(f"case {i}: {type(e).__name__}: {e}")
            continue
        try:
            cf = solve(p, "closed-form")
        except Exception as e:  # noqa: BLE001
            errors.append(f"case {i}: closed form {type(e).__name__}: {e}")
            continue
        gap = cf.loss / ex.loss - 1
        gaps.append(gap)
        share.append(cf.extra.get("rounding", {}).get("evaluated", 0) / max(1, p.on_aligned_space().space.size))
        if worst is None or gap > worst["gap"]:
            worst = {"case": i, "gap": gap, "problem": p.describe(), "align": p.align, "space": p.space.to_dict(),
                     "closed_form": cf.architecture.spec(), "exhaustive": ex.architecture.spec()}  # fmt: skip
    g = np.array(gaps)
    out = {
        "cases": a.cases, "feasible": len(gaps), "infeasible": infeasible, "errors": errors,
        "exact": int((g <= 1e-12).sum()), "gap_median": float(np.median(g)) if len(g) else None,
        "gap_p95": float(np.quantile(g, 0.95)) if len(g) else None, "gap_max": float(g.max()) if len(g) else None,
        "evaluated_share_median": float(np.median(share)) if share else None, "worst": worst,
    }  # fmt: skip
    if a.json:
        print(json.dumps(out, indent=1))
    else:
        for k, v in out.items():
            print(f"{k}: {v}")


if __name__ == "__main__":
    main()
