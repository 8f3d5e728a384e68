"""vLLM's block-fp8 GEMM by kernel library, and the GEMM family's scores (docs/kernels.md, session 12).

Prints, per GPU and ``kernel_source`` of vLLM's block-fp8 rows, the floor (2nd percentile of the latency, flat in
M) -- the evidence for ``gemm_library`` (each library's fixed seconds: CUTLASS ~160-170 µs on B200 and H100 alike,
DeepGEMM 81-92 µs on H100 and 170-230 µs on B200, FlashInfer ~57 µs, Triton ~290 µs). With ``--fit N`` it also fits
the GEMM family alone on N rows a table (the driver's seeded sample: each architecture's curves and the pooled
``generic`` with each GPU left out) and prints the median |predicted/measured - 1| per GPU in sample and held
out, and by library (2,000 rows: ~5 min idle, 8 min at load ~10).

    python benchmarks/bench_gemm_libraries.py [KERNELS_DIR] [--fit N]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from rooflaw.fitting import FAMILIES, GENERIC, fit_curves, kernel_gpus

HERE = Path(__file__).resolve()
DEFAULT = next((p for p in (HERE.parents[2] / "shared" / "data" / "kernels", Path("/work/shared/data/kernels"))
                if p.is_dir()), HERE.parents[2] / "shared" / "data" / "kernels")  # fmt: skip


def floors(gpus) -> pd.DataFrame:
    """Rows, 2nd-percentile and median latency (µs) of vLLM's block-fp8 rows per GPU and kernel source."""
    out = []
    for g in gpus:
        df = pd.concat([t.rows for t in g.tables], ignore_index=True)
        blk = df[(df.framework == "vllm") & (df.gemm_dtype == "fp8_block")]
        for src, r in blk.groupby("kernel_source"):
            lat = r.latency.to_numpy() * 1e3
            out.append((g.name, src, len(r), np.percentile(lat, 2), np.median(lat)))
    return pd.DataFrame(out, columns=["gpu", "kernel_source", "rows", "floor_us", "median_us"]).round(1)


def scores(gpus, sample: int) -> pd.DataFrame:
    """Per GPU and row: predicted/measured in sample (its architecture's curves) and held out (``generic`` fitted
    on the other GPUs)."""
    fam, frames = FAMILIES["gemm"], []
    for g in gpus:
        rest = [h for h in gpus if h.name != g.name]
        curves = {
            "in": fit_curves([g], g.architecture, sample, 0, [fam]),
            "out": fit_curves(rest, GENERIC, sample, 0, [fam]),
        }
        rows = pd.concat([t.rows for t in g.tables], ignore_index=True)
        for kind, c in curves.items():
            d = rows[["framework", "gemm_dtype", "kernel_source"]].copy()
            d["r"], d["gpu"], d["kind"] = fam.predict(rows, g.device, c) / rows.latency.to_numpy(), g.name, kind
            frames.append(d[np.isfinite(d.r)])
    return pd.concat(frames, ignore_index=True)


def main(root: Path, sample: int | None) -> None:
    gpus = kernel_gpus([root], only=["gemm_perf"])
    print("vLLM block fp8 by kernel library (latency, µs):")
    print(floors(gpus).to_string(index=False))
    if not sample:
        return
    d = scores(gpus, sample)
    d["e"] = (d.r - 1).abs()
    print(f"\nGEMM median |pred/meas - 1| ({sample} rows a table):")
    print(d.pivot_table(index="kind", columns="gpu", values="e", aggfunc="median").round(3).to_string())
    print("pooled:", d.groupby("kind").e.median().round(3).to_dict())
    blk = d[(d.framework == "vllm") & (d.gemm_dtype == "fp8_block")]
    g = blk.groupby(["gpu", "kernel_source", "kind"])
    print("\nvLLM block fp8 by library: median pred/meas and |pred/meas - 1|")
    print(pd.DataFrame({"ratio": g.r.median(), "err": g.e.median()}).unstack("kind").round(3).to_string())


if __name__ == "__main__":
    args = sys.argv[1:]
    n = int(args[args.index("--fit") + 1]) if "--fit" in args else None
    rest = [a for i, a in enumerate(args) if a != "--fit" and (i == 0 or args[i - 1] != "--fit")]
    main(Path(rest[0]) if rest else DEFAULT, n)
