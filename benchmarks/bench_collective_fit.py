"""The collective families alone (custom all-reduce, NCCL) against the measured tables: in sample, leave one GPU out
and band coverage per GPU (docs/kernels-moe-collectives.md, the per-curve fit).

Fits only the ``allreduce`` and ``nccl`` families on ``custom_allreduce_perf`` and ``nccl_perf`` of every GPU folder
(at most ``--sample`` rows per GPU, table and framework, seed 0; every row scored), as ``fit.fit_kernels`` does, and
prints per GPU the median |predicted/measured - 1| in sample / held out (the ``generic`` curves of the other three)
and the share of its held-out rows inside the 80 % band of the other GPUs' held-out rows (``fit.band_tail``'s rule),
then the pooled figures and the band; ``--joint`` fits each family as one least-squares problem (the fit before
``collectives.fit_split``), for comparison.

    python benchmarks/bench_collective_fit.py [KERNELS_DIR] [--sample N] [--joint]
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

from rooflaw.fitting import FAMILIES, GENERIC, band_tail, family_errors, fit_curves, fit_kernels, kernel_gpus

HERE = Path(__file__).resolve()
DEFAULT = next((p for p in (HERE.parents[2] / "shared" / "data" / "kernels", Path("/work/shared/data/kernels"))
                if p.is_dir()), HERE.parents[2] / "shared" / "data" / "kernels")  # fmt: skip
TABLES = ("custom_allreduce_perf", "nccl_perf")


def main(argv: list[str]) -> None:
    args = [a for a in argv if not a.startswith("--") and not a.isdigit()]
    sample = int(argv[argv.index("--sample") + 1]) if "--sample" in argv else 4000
    fams = [FAMILIES["allreduce"], FAMILIES["nccl"]]
    if "--joint" in argv:
        fams = [dataclasses.replace(f, fit=None) for f in fams]
    t0 = time.time()
    gpus = kernel_gpus([args[0] if args else DEFAULT], only=TABLES)
    for g in gpus:
        g.tables[:] = [t for t in g.tables if t.table in TABLES]
    res = fit_kernels(gpus, sample=sample, families=fams)
    ratios: dict[str, dict[str, np.ndarray]] = {}
    for g in gpus:  # the held-out predictions again (fit_kernels keeps only their medians), for coverage per GPU
        rest = [h for h in gpus if h.name != g.name]
        for f, (p, m) in family_errors(g, fit_curves(rest, GENERIC, sample, 0, fams)).items():
            ok = (m > 0) & (p > 0)
            ratios.setdefault(f, {})[g.name] = m[ok] / p[ok]
    for f in ("allreduce", "nccl"):
        cells = []
        for g in res.gpus:
            others = {k: v for k, v in ratios[f].items() if k != g}
            tail = band_tail(others)
            lo, hi = np.quantile(np.concatenate(list(others.values())), (tail, 1 - tail))
            cov = float(np.mean((ratios[f][g] >= lo) & (ratios[f][g] <= hi)))
            cells.append(f"{g} {res.in_sample[g][f]:.3f}/{res.held_out[g][f]:.3f}/{cov:.2f}")
        print(f"{f}: " + ", ".join(cells) + f"; pooled {res.pooled_in_sample[f]:.3f}/{res.pooled_held_out[f]:.3f}, "
              f"band {res.bands[f][0]:.2f}-{res.bands[f][1]:.2f} holding {res.coverage[f]:.3f}")  # fmt: skip
    print(f"(in sample / held out / coverage; {time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main(sys.argv[1:])
