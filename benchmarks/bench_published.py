"""Accuracy of the achieved-performance model against published measurements (docs/benchmarks.md).

Fits the per-family / per-engine figures on every usable row of published.csv, then refits
without each source and without each board (a device with all its power modes) and predicts the
held-out rows. Prints the median |predicted/measured − 1| per phase for the pure roofline,
in-sample and held out; leave-one-board-out also split by what the fit still knew (the held-out
board's engine and family fitted on other boards, or not); the signed decode error of every case per
source / engine / format / batch (in sample, held out by source, by board); and one JSON line with every figure.

    python benchmarks/bench_published.py [PATH/published.csv]
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections import defaultdict

import numpy as np

import rooflaw as rl


def coverage(row: dict[str, object]) -> str:
    """What the fit that predicted a held-out row still knew of its engine and device family."""
    e, f = bool(row["engine_in_training"]), bool(row["family_in_training"])
    return {(True, True): "engine and family fitted", (False, True): "engine out", (True, False): "family out",
            (False, False): "engine and family out"}[(e, f)]  # fmt: skip


def _table(title: str, rows: list[dict[str, object]], key) -> dict[str, float]:
    by: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in rows:
        g = key(r) if callable(key) else str(r[key])
        by[(g, str(r["phase"]))].append(abs(float(r["error"])))  # type: ignore[arg-type]
        by[(g, "all")].append(abs(float(r["error"])))  # type: ignore[arg-type]
    print(f"\n{title}")
    for (g, ph), v in sorted(by.items()):
        print(f"  {g:28s} {ph:8s} n={len(v):3d} median |err| {np.median(v):6.1%}")
    return {f"{g}/{ph}": float(np.median(v)) for (g, ph), v in by.items()}


def residuals(title: str, by_fit: dict[str, list[dict[str, object]]], phase: str = "decode") -> None:
    """One line per ``phase`` case: source, engine, format, batch, model, measured ms and the signed error of
    each fit in ``by_fit`` (in sample, held out ...), sorted by source, engine, format, batch."""
    keyed = {name: {(r["row_id"], r["phase"]): r for r in rows} for name, rows in by_fit.items()}
    first = next(iter(by_fit.values()))
    rows = sorted((r for r in first if r["phase"] == phase),
                  key=lambda r: (r["source"], r["engine"], r["format"], r["batch"], r["model"]))  # fmt: skip
    head = f"{'source':18s} {'engine':12s} {'format':6s} {'B':>2s} {'model':14s} {'device':22s} {'meas ms':>8s}"
    print(f"\n{title}\n  {head} " + " ".join(f"{n:>10s}" for n in by_fit))
    for r in rows:
        k = (r["row_id"], r["phase"])
        errs = " ".join(f"{float(keyed[n][k]['error']):+10.1%}" if k in keyed[n] else f"{'-':>10s}" for n in by_fit)
        print(f"  {r['source']!s:18s} {r['engine']!s:12s} {r['format']!s:6s} {r['batch']!s:>2s} {r['model']!s:14s} "
              f"{r['device']!s:22s} {1e3 * float(r['measured_s']):8.2f} {errs}")  # type: ignore[arg-type]  # fmt: skip


def _pct(d: dict[str, float]) -> dict[str, str]:
    return {k: f"{v:.1%}" for k, v in d.items()}


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else "../shared/data/measured/published.csv"
    t_all, cpu0 = time.perf_counter(), time.process_time()
    cases, skipped = rl.fitting.load_cases(path)
    print(f"{len(cases)} cases from {len({c.row_id for c in cases})} rows; {len(skipped)} rows skipped")
    t = time.perf_counter()
    res = rl.fitting.fit_efficiencies(cases)
    fit_s = time.perf_counter() - t
    n_par = sum(len(v) for v in {**res.families, **res.engines, "prompts": res.prompts}.values())
    print(f"fit: {fit_s:.1f} s, {n_par} parameters")
    for name, vals in {**res.families, **res.engines, "prompts (dataset)": res.prompts}.items():
        print(f"  {name:26s} " + ", ".join(f"{k}={v:.3g}" for k, v in sorted(vals.items())))
    ideal, ins = rl.fitting.efficiency_errors(cases, None), rl.fitting.efficiency_errors(cases, res)
    out: dict[str, object] = {"cases": len(cases), "parameters": n_par, "fit_s": round(fit_s, 1)}
    out["pure_roofline"], out["in_sample"] = rl.fitting.median_abs_error(ideal), rl.fitting.median_abs_error(ins)
    print("\nmedian |err|  pure roofline:", _pct(out["pure_roofline"]))  # type: ignore[arg-type]
    print("median |err|  fitted (in-sample):", _pct(out["in_sample"]))  # type: ignore[arg-type]
    _table("in-sample, per family", ins, "family")
    held: dict[str, list[dict[str, object]]] = {"in sample": ins}
    for key in ("source", "board"):
        ho = held[f"no {key}"] = rl.fitting.held_out_errors(cases, key)
        out[f"leave_one_{key}_out"] = rl.fitting.median_abs_error(ho)
        print(f"\nmedian |err|  leave one {key} out:", _pct(out[f"leave_one_{key}_out"]))  # type: ignore[arg-type]
        out[f"leave_one_{key}_out_per_group"] = _table(f"leave one {key} out, per held-out {key}", ho, "held_out")
        if key == "board":
            out["leave_one_board_out_by_coverage"] = _table("leave one board out, by what the fit still knew", ho,
                                                            coverage)  # fmt: skip
    # error bands: 80 % bands from the leave-one-source-out residuals; do they hold 80 % of rows they did not see?
    loso = held["no source"]
    bands = rl.bands.bands_from_rows(loso, "leave one source out")
    out["bands_80"] = {p: [round(x, 4) for x in b.band()] for p, b in bands.items()}
    out["bands_random_effects"] = {p: {"centre": round(b.centre, 4), "spread": round(b.spread, 4), "df": b.df}
                                   for p, b in bands.items()}  # fmt: skip
    # each source banded from leave-one-source-out runs that never saw it (nested: 7 × 6 fits)
    nested = rl.fitting.nested_held_out_errors(cases, "source")
    out["band_coverage_by_source_nested"] = rl.bands.band_coverage(loso, nested=nested)
    out["band_coverage_by_source"] = rl.bands.band_coverage(loso)  # each source banded from the other sources only
    out["band_coverage_by_row"] = rl.bands.band_coverage(loso, key="row_id")  # each row banded from every other row
    print("\n80 % bands (measured/predicted), leave one source out:", out["bands_80"])
    print("  random effects (log space):", out["bands_random_effects"])
    for what in ("by_source_nested", "by_source", "by_row"):
        cov = out[f"band_coverage_{what}"]
        print(
            f"  held-out rows inside their band, banded {what.replace('_', ' ')}: "
            + ", ".join(f"{p} {v['inside']}/{v['rows']} = {v['share']:.0%}" for p, v in cov.items())  # type: ignore[union-attr]
        )
    residuals("decode residuals, predicted/measured − 1, per source / engine / format / batch", held)
    residuals("prefill residuals, predicted/measured − 1, per source / engine / format / batch", held, "prefill")
    wall, cpu = time.perf_counter() - t_all, time.process_time() - cpu0
    child = resource.getrusage(resource.RUSAGE_CHILDREN)
    out.update(wall_s=round(wall, 1), cpu_s=round(cpu + child.ru_utime + child.ru_stime, 1),
               load_1min=round(os.getloadavg()[0], 2))  # fmt: skip
    print(f"\nwall {wall:.1f} s, CPU {out['cpu_s']} s, load (1 min) {out['load_1min']}")
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
