"""Refit kernel families from fresh starts and score them in sample and leaving one GPU out (a development tool).

The given families' figures go back to their :class:`KernelCurves` defaults (their engines' ``rate``, ``launch`` and
``split_share`` entries dropped), every other figure is the shipped catalog's, and the families are refitted in the
order given -- as ``fit_kernels`` starts them. Held out: the same families fitted on the other GPUs from the catalog's
``generic`` curves (whose other figures saw every GPU: a small leak, the same for any two trees compared).

    PYTHONPATH=. python scripts/kernel_family_fresh.py DIR context_attention generation_attention context_mla \
        --sample 3000 --out scores.json

Prints and writes the median |predicted/measured - 1| per family and GPU, pooled, and the nested 80 % band coverage.
"""

from __future__ import annotations

import argparse
import dataclasses
import json

import numpy as np

from rooflaw.constraints.kernels import FAMILIES, GENERIC, KernelCurves, load_curves
from rooflaw.constraints.kernels import fit as F


def fresh(c: KernelCurves, fams) -> KernelCurves:
    """``c`` with ``fams``' figures at their defaults and their ops' per-engine entries dropped."""
    names = {n for f in fams for n in f.params}
    kw = {f.name: f.default for f in dataclasses.fields(KernelCurves) if f.name in names}
    ops = {f.name for f in fams}
    for d in ("rate", "launch", "split_share"):
        kw[d] = {k: v for k, v in getattr(c, d).items() if k.split("/")[1:2] == [] or k.split("/")[1] not in ops}
    return dataclasses.replace(c, **kw)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("families", nargs="+", choices=sorted(FAMILIES))
    ap.add_argument("--sample", type=int, default=3000)
    ap.add_argument("--out")
    a = ap.parse_args()
    fams = [FAMILIES[f] for f in a.families]
    gpus = F.kernel_gpus([a.dir], only=[t for f in fams for t in f.tables])
    cat = {k: fresh(v, fams) for k, v in load_curves().items()}

    def fit(gs, c):
        c = dataclasses.replace(c, clock_mhz=F.reference_clock_mhz(gs))
        for f in fams:
            c = F.fit_family(f, F.prepare(gs, f, a.sample), c)
        return c

    res: dict = {"in": {}, "out": {}, "pooled_in": {}, "pooled_out": {}, "coverage": {}, "sample": a.sample}
    pooled: dict = {"in": {}, "out": {}}
    ratios: dict = {}
    for side in ("in", "out"):
        for g in gpus:
            rest = [h for h in gpus if h.name != g.name]
            c = fit([g], cat[g.architecture]) if side == "in" else fit(rest, cat[GENERIC])
            for f, (p, m) in F.family_errors(g, c).items():
                e = F.abs_errors(p, m)
                res[side].setdefault(f, {})[g.name] = float(np.median(e))
                pooled[side].setdefault(f, []).append(e)
                if side == "out":
                    ok = (m > 0) & (p > 0)
                    ratios.setdefault(f, {})[g.name] = m[ok] / p[ok]
            print(side, g.name, {f: round(v[g.name] * 100, 1) for f, v in res[side].items()}, flush=True)
    for f in pooled["in"]:
        res["pooled_in"][f] = float(np.median(np.concatenate(pooled["in"][f])))
        res["pooled_out"][f] = float(np.median(np.concatenate(pooled["out"][f])))
        res["coverage"][f] = F.nested_coverage(ratios[f])
    print(json.dumps({k: res[k] for k in ("pooled_in", "pooled_out", "coverage")}))
    if a.out:
        with open(a.out, "w", encoding="utf-8") as fh:
            json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
