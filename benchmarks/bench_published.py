"""Accuracy of the achieved-performance model against published measurements (docs/benchmarks.md).

Fits the per-family / per-engine figures on every usable row of published.csv, then refits
without each source (and without each device) and predicts the held-out rows. Prints the median
|predicted/measured − 1| per phase for the pure roofline, in-sample, and held out.

    python benchmarks/bench_published.py [PATH/published.csv]
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict

import numpy as np

import rooflaw as rl


def _table(title: str, rows: list[dict[str, object]], key: str) -> None:
    by: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in rows:
        by[(str(r[key]), str(r["phase"]))].append(abs(float(r["error"])))  # type: ignore[arg-type]
    print(f"\n{title}")
    for (g, ph), v in sorted(by.items()):
        print(f"  {g:28s} {ph:8s} n={len(v):3d} median |err| {np.median(v):6.1%}")


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else "../shared/data/measured/published.csv"
    cases, skipped = rl.load_cases(path)
    print(f"{len(cases)} cases from {len({c.row_id for c in cases})} rows; {len(skipped)} rows skipped")
    t = time.perf_counter()
    res = rl.fit_efficiencies(cases)
    print(f"fit: {time.perf_counter() - t:.1f} s")
    for name, vals in {**res.families, **res.engines}.items():
        print(f"  {name:26s} " + ", ".join(f"{k}={v:.3g}" for k, v in sorted(vals.items())))
    ideal, ins = rl.efficiency_errors(cases, None), rl.efficiency_errors(cases, res)
    print("\nmedian |err|  pure roofline:", {k: f"{v:.1%}" for k, v in rl.median_abs_error(ideal).items()})
    print("median |err|  fitted (in-sample):", {k: f"{v:.1%}" for k, v in rl.median_abs_error(ins).items()})
    _table("in-sample, per family", ins, "family")
    for key in ("source", "device"):
        ho = rl.held_out_errors(cases, key)
        print(f"\nmedian |err|  leave one {key} out:", {k: f"{v:.1%}" for k, v in rl.median_abs_error(ho).items()})
        _table(f"leave one {key} out, per held-out {key}", ho, "held_out")


if __name__ == "__main__":
    main()
