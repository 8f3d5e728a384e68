"""Kernel curves against measured kernels (docs/kernels.md): in sample and leave one GPU out.

Fits the kernel curves per GPU architecture on every GPU folder of ``shared/data/kernels`` (aiconfigurator's
measured GEMMs, attention, ...; A100 SXM, H100 SXM, B200 SXM, L40S), then refits on three GPUs and predicts the
fourth from its datasheet with the pooled ``generic`` curves the three give it. Prints, per family, the median
|predicted/measured - 1| of the pure roofline (datasheet peaks, no latencies), in sample and held out per GPU and
pooled, the 80 % band of measured/predicted on held-out rows, and how many of each held-out GPU's rows fall inside
the band the *other* GPUs' held-out rows give (coverage checked out of sample); then one JSON line with every figure.

    python benchmarks/bench_kernels.py [KERNELS_DIR] [--sample N]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import rooflaw as rl

HERE = Path(__file__).resolve()
DEFAULT = next((p for p in (HERE.parents[2] / "shared" / "data" / "kernels", Path("/work/shared/data/kernels"))
                if p.is_dir()), HERE.parents[2] / "shared" / "data" / "kernels")  # fmt: skip


def main(argv: list[str]) -> dict:
    args = [a for a in argv if not a.startswith("--")]
    sample = int(argv[argv.index("--sample") + 1]) if "--sample" in argv else 8000
    if "--sample" in argv:
        args.remove(str(sample))
    root = Path(args[0]) if args else DEFAULT
    t0, c0 = time.perf_counter(), time.process_time()
    gpus = rl.fitting.kernel_gpus([root])
    t_read = time.perf_counter() - t0
    res = rl.fitting.fit_kernels(gpus, sample=sample, held_out=True)
    t_fit = time.perf_counter() - t0 - t_read
    cpu = time.process_time() - c0
    fams = list(res.pooled_in_sample)
    names = [g.name for g in gpus]
    print(f"kernel curves: {sum(sum(len(t.rows) for t in g.tables) for g in gpus):,} rows of {len(gpus)} GPUs "
          f"read in {t_read:.0f} s, fitted (in sample + {len(gpus)} leave-one-out folds) in {t_fit:.0f} s; "
          f"{cpu:.0f} s CPU in all")  # fmt: skip
    print("\nmedian |predicted/measured - 1|")
    head = f"{'family':<22}{'roofline':>9}{'in sample':>10}" + "".join(f"{'out ' + n:>14}" for n in names)
    print(head + f"{'held out':>10}{'band q10-q90':>15}{'coverage':>9}")
    for f in fams:
        outs = "".join(f"{res.held_out[n].get(f, float('nan')):>14.1%}" for n in names)
        lo, hi = res.bands[f]
        print(f"{f:<22}{res.ideal[f]:>9.1%}{res.pooled_in_sample[f]:>10.1%}{outs}{res.pooled_held_out[f]:>10.1%}"
              f"{f'{lo:.2f}-{hi:.2f}':>15}{res.coverage[f]:>9.0%}")  # fmt: skip
    print("\nin sample per GPU (its architecture's curves)")
    for f in fams:
        print(f"{f:<22}" + "".join(f"{n}: {res.in_sample[n].get(f, float('nan')):.1%}  " for n in names))
    report = {
        "sample": sample, "gpus": names, "seconds_read": t_read, "seconds_fit": t_fit, "cpu_seconds": cpu,
        "ideal": res.ideal, "in_sample": res.pooled_in_sample, "held_out": res.pooled_held_out,
        "in_sample_by_gpu": res.in_sample, "held_out_by_gpu": res.held_out, "bands": res.bands,
        "coverage": res.coverage,
    }  # fmt: skip
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
