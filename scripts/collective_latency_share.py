"""How much of a collective family's held-out error is its fixed times: the held-out median |predicted/measured - 1|
per GPU with the pooled ``generic`` curves as they are, with the held-out GPU's own fitted fixed times put in them
(``--figures``, default latency and hop; cycle figures converted between the curves' clocks), and with one scalar
per GPU (its small-message latency over the pooled one, geometric mean over its curves) on every curve's latency and
hop. A diagnostic, not a model: the second and third read the held-out GPU's own rows.

    python scripts/collective_latency_share.py DIR nccl [--figures latency,hop] [--sample 1500]
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np

from rooflaw.constraints.kernels import FAMILIES, GENERIC, load_curves
from rooflaw.constraints.kernels import collectives as C
from rooflaw.constraints.kernels import fit as F


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("family", choices=("allreduce", "nccl"))
    ap.add_argument("--figures", default="latency,hop")
    ap.add_argument("--sample", type=int, default=1500)
    a = ap.parse_args()
    fam, figs = FAMILIES[a.family], a.figures.split(",")
    gpus = F.kernel_gpus([a.dir], only=list(fam.tables))
    catalog = load_curves()
    prep = {p.gpu.name: p for p in F.prepare(gpus, fam, a.sample)}

    def fit(gs, arch):
        c = dataclasses.replace(catalog[arch], clock_mhz=F.reference_clock_mhz(gs))
        return F.fit_family(fam, [prep[g.name] for g in gs], c)

    def err(g, c) -> np.ndarray:
        rows = prep[g.name].rows
        p, m = fam.predict(rows, g.device, c), rows["latency"].to_numpy(float)
        ok = np.isfinite(p) & (p > 0) & (m > 0)
        return np.abs(p[ok] / m[ok] - 1)

    out: dict[str, dict[str, np.ndarray]] = {"pooled": {}, "own fixed times": {}, "one scalar": {}}
    for g in gpus:
        gen, own = fit([h for h in gpus if h.name != g.name], GENERIC), fit([g], g.architecture)
        mine, logs = dict(gen.collectives), []
        for k, cg in gen.collectives.items():
            co = own.collectives.get(k)
            if co is None or co.latency <= 0:
                continue
            key, kind = k.split("/")
            clock = g.device.clock / 1e6 / gen.clock_mhz  # own cycle figures -> seconds at the pooled clock
            mine[k] = dataclasses.replace(
                cg, **{f: getattr(co, f) * (clock if C.in_cycles(key, f) else 1.0) for f in figs}
            )
            own_c, gen_c = C.curve(own, key, kind, g.device), C.curve(gen, key, kind, g.device)
            if own_c is not None and gen_c is not None:
                logs.append(np.log(own_c.latency / gen_c.latency))
        s = float(np.exp(np.mean(logs)))
        one = {k: dataclasses.replace(c, latency=c.latency * s, hop=c.hop * s) for k, c in gen.collectives.items()}
        out["pooled"][g.name] = err(g, gen)
        out["own fixed times"][g.name] = err(g, dataclasses.replace(gen, collectives=mine))
        out["one scalar"][g.name] = err(g, dataclasses.replace(gen, collectives=one))
        print(f"{g.name}: scalar {s:.2f}")
    for label, es in out.items():
        per = " ".join(f"{n} {np.median(e):.3f}" for n, e in es.items())
        print(f"{a.family} held out, {label}: {per} | pooled {np.median(np.concatenate(list(es.values()))):.3f}")


if __name__ == "__main__":
    main()
