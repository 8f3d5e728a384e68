"""Inner loop of a kernel family's model: refit only the given families (in order) on a small seeded sample, every
other figure the shipped catalog's, and print the last family's median |predicted/measured - 1| per GPU in sample
and held out (the pooled curves of the other GPUs) and its 80 % band with its nested coverage (as ``fit_kernels``).

    python scripts/kernel_family_loop.py DIR generation_attention [generation_mla] [--sample 1500]

A development tool (a minute or two for decode attention on the shared machine), not the catalog's fit: that is
``rooflaw devices fit-kernels DIR --write-catalog``, every family refitted in turn.
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np

from rooflaw.constraints.kernels import FAMILIES, GENERIC, load_curves
from rooflaw.constraints.kernels import fit as F


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("families", nargs="+", choices=sorted(FAMILIES))
    ap.add_argument("--sample", type=int, default=1500)
    a = ap.parse_args()
    fams = [FAMILIES[f] for f in a.families]
    gpus = F.kernel_gpus([a.dir], only=[t for f in fams for t in f.tables])
    catalog = load_curves()
    prep = {f.name: {p.gpu.name: p for p in F.prepare(gpus, f, a.sample)} for f in fams}

    def fit(gs, arch):
        c = dataclasses.replace(catalog[arch], clock_mhz=F.reference_clock_mhz(gs))
        for f in fams:
            c = F.fit_family(f, [prep[f.name][g.name] for g in gs if g.name in prep[f.name]], c)
        return c

    last = fams[-1]

    def ratios(g, c):
        rows = prep[last.name][g.name].rows
        p, m = last.predict(rows, g.device, c), rows["latency"].to_numpy(float)
        ok = np.isfinite(p) & (p > 0) & (m > 0)
        return m[ok] / p[ok]

    have = [g for g in gpus if g.name in prep[last.name]]
    ins = {g.name: ratios(g, fit([g], g.architecture)) for g in have}
    held = {g.name: ratios(g, fit([h for h in gpus if h.name != g.name], GENERIC)) for g in have}
    for label, rs in (("in sample", ins), ("held out", held)):
        med = {n: float(np.median(np.abs(1 / r - 1))) for n, r in rs.items()}
        pooled = float(np.median(np.abs(1 / np.concatenate(list(rs.values())) - 1)))
        print(f"{last.name} {label}: " + " ".join(f"{n} {v:.3f}" for n, v in med.items()) + f" | pooled {pooled:.3f}")
    tail = F.band_tail(held)
    lo, hi = np.quantile(np.concatenate(list(held.values())), (tail, 1 - tail))
    print(f"{last.name} 80 % band {lo:.2f}-{hi:.2f}, coverage {F.nested_coverage(held):.3f}")


if __name__ == "__main__":
    main()
