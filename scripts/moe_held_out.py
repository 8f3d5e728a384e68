"""The MoE kernel family alone, in sample and leave one GPU out, in a few minutes (the full fit-kernels takes 15+).

    python scripts/moe_held_out.py [DIR] [--sample 2000] [--gemm-sample 1000] [--swap]

In sample: each GPU's architecture keeps the shipped catalog's GEMM figures (``compute``, ``memory``, ``kernel_s``,
``l2_sm_gbps``, ``clock_mhz``) and refits the MoE figures on its own rows. Held out: the GEMM family is fitted pooled
on the other three GPUs (``--gemm-sample`` rows per table and engine), then the MoE family on their rows (``generic``,
as ``fit-kernels`` prices a held-out GPU). Prints the median |predicted/measured − 1| per GPU and pooled, and the
80 % band coverage of the held-out rows (``fit.band_tail``, as ``fit-kernels`` reports it); ``--swap`` also prints,
per held-out GPU, that score with each pooled figure replaced by the GPU's own (which pooled figure lands wrong).
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np
import pandas as pd

from rooflaw.constraints.kernels import FAMILIES, fit, load_curves, moe

GEMM = ("compute", "memory", "kernel_s", "l2_sm_gbps", "clock_mhz")
SWAP = ("moe", "moe_memory", "moe_s", "moe_serial_gbps", "moe_half_inter", "moe_slot", "moe_reread", *GEMM[:4])


def _base(c, arch: str):
    return dataclasses.replace(fit.initial_curves(arch), **{k: getattr(c, k) for k in GEMM})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", nargs="?", default="../shared/data/kernels")
    ap.add_argument("--sample", type=int, default=2000)
    ap.add_argument("--gemm-sample", type=int, default=1000)
    ap.add_argument("--swap", action="store_true")
    a = ap.parse_args()
    fam, gemm = FAMILIES["moe"], FAMILIES["gemm"]
    gpus = fit.kernel_gpus([a.dir], only=["moe_perf", "gemm_perf"])
    cat = load_curves()
    err: dict[tuple[str, str], np.ndarray] = {}
    ratios: dict[str, np.ndarray] = {}
    for g in gpus:
        rest = [h for h in gpus if h.name != g.name]
        own = fit.fit_family(fam, fit.prepare([g], fam, a.sample), _base(cat[g.architecture], g.architecture))
        gc = fit.fit_curves(rest, "generic", a.gemm_sample, 0, [gemm])
        out = fit.fit_family(fam, fit.prepare(rest, fam, a.sample), _base(gc, "generic"))
        rows = pd.concat([t.rows for t in g.tables if t.table == "moe_perf"], ignore_index=True)
        meas = rows["latency"].to_numpy(dtype=float)
        terms = moe.prepare(rows, g.device)
        for kind, c in (("in", own), ("out", out)):
            pred = moe.evaluate(terms, g.device, c) * 1e3
            ok = np.isfinite(pred) & (pred > 0)
            err[(kind, g.name)] = np.abs(pred[ok] / meas[ok] - 1)
            if kind == "out":
                ratios[g.name] = meas[ok] / pred[ok]
        if a.swap:
            for f in SWAP:
                p = moe.evaluate(terms, g.device, dataclasses.replace(out, **{f: getattr(own, f)})) * 1e3
                print(f"{g.name} held out with its own {f}: {np.nanmedian(np.abs(p / meas - 1)):.4f}")
    for kind in ("in", "out"):
        per = {n: float(np.median(e)) for (k, n), e in err.items() if k == kind}
        pooled = float(np.median(np.concatenate([e for (k, _), e in err.items() if k == kind])))
        print(kind, " ".join(f"{n} {v:.4f}" for n, v in per.items()), f"pooled {pooled:.4f}")
    print(f"80 % band coverage held out {fit.nested_coverage(ratios):.3f}")


if __name__ == "__main__":
    main()
