"""``rooflaw devices fit-efficiency``: fit the achieved-performance figures to published runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from .common import atomic_output, check_output, console, err_console, print_json, table
from .devices import devices_app


@devices_app.command("fit-efficiency")
def fit_efficiency_cmd(
    data: Path = typer.Argument(..., help="published.csv (see shared/data/measured/README.md)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write the fitted figures (TOML) to this file."),
    write_catalog: bool = typer.Option(
        False, "--write-catalog", help="Store the figures in the bundled catalog ([achieved]) and engines.toml."
    ),
    held_out: bool = typer.Option(
        False,
        "--held-out",
        help="Also fit without each source / board (with its power modes) and predict it.",
    ),
    as_json: bool = typer.Option(False, "--json", help="One JSON object; no tables."),
) -> None:
    """Fit per-family bandwidth/compute efficiencies, kernel cost and engine overheads (robust, log space)."""
    if out is not None:  # a bad --out fails before the fit, not after it
        check_output(out, "--out", (".toml",))
    from .. import fitting as fe
    from ..fitting import load_cases

    cases, skipped = load_cases(data)
    if not as_json and console.is_terminal:
        with console.status(f"fitting {len(cases)} measurements ..."):
            res = fe.fit_efficiencies(cases)
    else:
        res = fe.fit_efficiencies(cases)
    rows = fe.efficiency_errors(cases, res)
    in_sample, ideal = fe.median_abs_error(rows), fe.median_abs_error(fe.efficiency_errors(cases, None))
    held: dict[str, dict[str, float]] = {}  # median errors left out by source / board
    cov: dict[str, Any] = {}
    report: dict[str, object] = {
        "families": res.families,
        "engines": res.engines,
        "prompts": res.prompts,
        "rows": res.rows,
        "in_sample": in_sample,
        "ideal": ideal,
        "cases": rows,
        "skipped": [{"row_id": r, "reason": why} for r, why in skipped],
    }
    if held_out or write_catalog:
        from .. import api

        for key in ("source", "board") if held_out else ("source",):
            ho = fe.held_out_errors(cases, key)
            report[f"leave_one_{key}_out"] = held[key] = fe.median_abs_error(ho)
            report[f"leave_one_{key}_out_cases"] = ho
            if key == "source":
                loso = ho
        phase_bands = api.bands_from_rows(loso, "leave one source out")
        report["bands"] = {p: {"rows": b.rows, "band_80": list(b.band())} for p, b in phase_bands.items()}
        # each source banded from leave-one-source-out runs that never saw it (nested)
        report["band_coverage"] = cov = api.band_coverage(loso, nested=fe.nested_held_out_errors(cases, "source"))
    if out is not None:
        text = "\n".join(fe.achieved_table(res, f).replace("[achieved]", f'[family."{f}"]') for f in res.families)
        with atomic_output(out, "--out", (".toml",)) as tmp:
            tmp.write_text(text + "\n" + fe.engines_toml(res), encoding="utf-8")
    if write_catalog:
        for p in fe.write_engine_catalog(res):
            err_console.print(f"wrote {p}")
        note = f"leave-one-source-out residuals of {len(cases)} cases of {data.name}"
        err_console.print(f"wrote {api.write_bands(phase_bands, note, fe.FIT_COMMAND)}")
    if as_json:
        print_json(report)
        return
    fam_rows = [[f, k, f"{v:.4g}"] for f, vals in res.families.items() for k, v in sorted(vals.items())]
    fam_rows += [[e, k, f"{v:.4g}"] for e, vals in res.engines.items() for k, v in sorted(vals.items())]
    fam_rows += [["prompts (dataset)", k, f"{v:.4g}"] for k, v in sorted(res.prompts.items())]
    console.print(
        table(
            f"fitted on {len(cases)} measurements ({len(skipped)} rows skipped)",
            ["family / engine", "parameter", "value"],
            fam_rows,
        )
    )
    err_rows = [[k, f"{ideal[k]:.1%}", f"{v:.1%}"] for k, v in in_sample.items()]
    for key in ("source", "board"):
        m = held.get(key)
        if m:
            err_rows += [[f"{k} (leave one {key} out)", "—", f"{v:.1%}"] for k, v in m.items()]
    console.print(table("median |predicted/measured − 1|", ["phase", "pure roofline", "fitted"], err_rows))
    if cov:
        band_rows = [[p, f"{v['inside']}/{v['rows']}", f"{v['share']:.0%}"] for p, v in cov.items()]
        console.print(table("80 % bands: held-out rows inside (each source banded from runs that never saw it)",
                            ["phase", "inside", "share"], band_rows))  # fmt: skip
    if out is not None:
        err_console.print(f"wrote {out}")
