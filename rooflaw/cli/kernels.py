"""``rooflaw devices fit-kernels`` and ``check-kernels``: kernel curves fitted to, and checked on, measured kernels."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Optional

import typer

from ..errors import bad
from .common import atomic_output, check_output, console, err_console, print_json, table
from .devices import devices_app


def _writable(out: Path, option: str, suffixes: tuple[str, ...]) -> Path:
    p = check_output(out, option, suffixes)
    if not os.access(p.parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise bad(option, str(p), "cannot be written (permission denied)")
    return p


@contextlib.contextmanager
def _progress(quiet: bool) -> Iterator[Callable[[str], None]]:
    """A status line on a terminal (``update(text)``), nothing with ``--json`` or when piped."""
    if quiet or not err_console.is_terminal:
        yield lambda text: None
        return
    with err_console.status("reading kernel tables ...") as st:
        yield lambda text: st.update(text)


def _maps(items: list[str]) -> dict[str, str]:
    out = {}
    for it in items:
        folder, sep, ident = it.partition("=")
        if not sep or not folder or not ident:
            raise bad("--map", it, "use GPU_FOLDER=DEVICE_ID_OR_FILE, e.g. l40s=my-l40s.toml")
        out[folder] = ident
    return out


@devices_app.command("fit-kernels")
def fit_kernels_cmd(
    dirs: list[Path] = typer.Argument(
        ..., help="Kernel table folders laid out like shared/data/kernels (root or GPU)."
    ),
    out: Optional[Path] = typer.Option(None, "--out", help="Write the fitted curves (TOML) to this file."),
    write_catalog: bool = typer.Option(
        False, "--write-catalog", help="Store them as the package's kernel_curves.toml."
    ),
    mapping: list[str] = typer.Option([], "--map", help="GPU_FOLDER=DEVICE (catalog id or device file); repeatable."),
    sample: int = typer.Option(8000, "--sample", min=100, help="Rows per (GPU, table, framework) the fit uses."),
    held_out: bool = typer.Option(True, "--held-out/--no-held-out", help="Also leave each GPU out and predict it."),
    generic: str = typer.Option(
        "pooled",
        "--generic",
        help="How the curves of an unseen architecture are built: pooled (one fit on every "
        "GPU's rows) or median (each figure's median over the architectures' fits).",
    ),
    source: str = typer.Option(
        "aiconfigurator (NVIDIA ai-dynamo/aiconfigurator), Apache-2.0", "--source", help="Where the tables come from."
    ),
    commit: str = typer.Option("095f58a51c", "--commit", help="Their version (commit) for the provenance."),
    licence: str = typer.Option("Apache-2.0", "--licence", help="Their licence, for the catalog's [meta]."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object; no tables."),
) -> None:
    """Fit kernel curves per GPU architecture (robust, log space) with leave-one-GPU-out residuals and bands."""
    from .. import fitting as kf

    if out is not None:
        _writable(out, "--out", (".toml",))
    overrides = _maps(mapping)
    with _progress(as_json) as say:
        say("reading kernel tables ...")
        gpus = kf.kernel_gpus(dirs, overrides)
        res = kf.fit_kernels(gpus, sample=sample, held_out=held_out, progress=lambda s: say(f"fitting {s} ..."),
                             generic=generic)  # fmt: skip
    argv = sys.argv[sys.argv.index("fit-kernels") + 1 :] if "fit-kernels" in sys.argv else []
    command = " ".join(["rooflaw devices fit-kernels", *(shlex.quote(a) for a in argv)])
    curves = kf.with_provenance(res, gpus, command, sample, source, commit)
    text = kf.catalog_text(curves, source, commit, licence)
    if out is not None:
        with atomic_output(out, "--out", (".toml",)) as tmp:
            tmp.write_text(text, encoding="utf-8")
    if write_catalog:
        p = kf.write_kernel_catalog(text)
        err_console.print(f"wrote {p}", markup=False)
    report = {
        "gpus": {g.name: {"device": g.device.id, "architecture": g.architecture} for g in gpus},
        "in_sample": res.in_sample,
        "held_out": res.held_out,
        "pooled_in_sample": res.pooled_in_sample,
        "pooled_held_out": res.pooled_held_out,
        "bands": {f: list(b) for f, b in res.bands.items()},
        "band_coverage": res.coverage,
        "curves": {a: _curves_dict(c) for a, c in curves.items()},
    }
    if as_json:
        print_json(report)
        return
    fams = sorted({f for d in res.in_sample.values() for f in d})
    rows = [
        [
            g.name,
            g.architecture,
            f,
            f"{res.in_sample[g.name].get(f, float('nan')):.1%}",
            f"{res.held_out.get(g.name, {}).get(f, float('nan')):.1%}",
        ]
        for g in gpus
        for f in fams
        if f in res.in_sample[g.name]
    ]
    console.print(
        table("median |predicted/measured - 1|", ["gpu", "architecture", "family", "in sample", "held out"], rows)
    )
    if res.bands:
        console.print(
            table(
                "80 % bands (measured/predicted, held-out GPUs)",
                ["family", "q10", "q90", "coverage"],
                [[f, f"{b[0]:.3f}", f"{b[1]:.3f}", f"{res.coverage[f]:.0%}"] for f, b in res.bands.items()],
            )
        )


def _curves_dict(c) -> dict:
    """Every figure of curves ``c`` (its dataclass fields; provenance left out: it is in the catalog file)."""
    d = {
        f.name: getattr(c, f.name)
        for f in dataclasses.fields(c)
        if f.name not in ("collectives", "bands", "provenance")
    }
    d["collectives"] = {k: dataclasses.asdict(v) for k, v in c.collectives.items()}
    d["bands"] = {k: list(v) for k, v in c.bands.items()}
    return d


#: ``--engine`` names -> the framework whose fixed latencies price every row (``None``: each row's own folder).
ENGINE_FRAMEWORKS = {"kernels": None, "tensorrt-llm": "trtllm", "trtllm": "trtllm", "vllm": "vllm"}


@devices_app.command("check-kernels")
def check_kernels_cmd(
    folder: Path = typer.Argument(..., help="Kernel tables: a GPU folder like shared/data/kernels/h100_sxm (or root)."),
    device: str = typer.Option(..., "--device", help="Catalog id or device file that prices the rows."),
    engine: str = typer.Option(
        "kernels",
        "--engine",
        help="kernels (each row's own framework), tensorrt-llm or vllm (that engine's fixed latencies), "
        "ideal (pure roofline: datasheet peaks, no latencies).",
    ),
    out: Path = typer.Option(
        ..., "--out", help="CSV: every row with table, framework, version, row, latency, predicted_ms."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the median |predicted/measured - 1| per table as JSON."),
) -> None:
    """Predict every measured kernel row with the device's curves and write them beside the measurements."""
    import numpy as np
    import pandas as pd

    from ..api import get_device
    from ..fitting import KernelCurves, abs_errors, curves_for, predict_tables
    from ..fitting import read_kernel_tables as read_tables

    if engine not in (*ENGINE_FRAMEWORKS, "ideal"):
        raise bad("--engine", engine, f"use one of {', '.join((*ENGINE_FRAMEWORKS, 'ideal'))}")
    out = _writable(out, "--out", (".csv",))
    dev = get_device(device)
    with _progress(as_json) as say:
        notes: list[str] = []
        tables = read_tables(folder, notes=notes)
        say(f"predicting {sum(len(t.rows) for t in tables):,} rows on {dev.id} ...")
        if engine == "ideal":
            curves: KernelCurves | None = KernelCurves(architecture="ideal", compute={}, memory=1.0, kernel_s=0.0)
        else:
            curves = curves_for(dev)
        fw = ENGINE_FRAMEWORKS.get(engine)
        preds = []
        for t in tables:
            rows = t.rows if fw is None else t.rows.assign(framework=fw)
            preds.append(predict_tables([_with_rows(t, rows)], dev, curves, notes)[0])
        for n in notes:
            err_console.print(f"warning: {n}", markup=False)
        frames = []
        summary: dict[str, dict[str, float | int | None]] = {}
        for t, p in zip(tables, preds, strict=True):
            f = t.rows[["table", "framework", "version", "row", "latency"]].copy()
            f["predicted_ms"] = p
            frames.append(f)
        say(f"writing {out} ...")
        full = pd.concat(frames, ignore_index=True)
        with atomic_output(out, "--out", (".csv",)) as tmp:
            full.to_csv(tmp, index=False, na_rep="")
    for name, grp in full.groupby("table", sort=True):
        e = abs_errors(grp["predicted_ms"].to_numpy(dtype=np.float64), grp["latency"].to_numpy(dtype=np.float64))
        summary[str(name)] = {
            "rows": int(len(grp)),
            "modelled": int(len(e)),
            "median_abs_error": float(np.median(e)) if len(e) else None,
        }
    src = "ideal" if engine == "ideal" else (curves.architecture if curves is not None else None)
    if as_json:
        print_json(
            {"device": dev.id, "curves": src, "engine": engine, "out": str(out), "tables": summary, "notes": notes}
        )
        return
    if curves is None:
        err_console.print(
            f"{dev.id} has no architecture: no kernel curves price it (predicted_ms left empty)", markup=False
        )
    rows = [
        [
            k,
            str(v["rows"]),
            str(v["modelled"]),
            "—" if v["median_abs_error"] is None else f"{v['median_abs_error']:.1%}",
        ]
        for k, v in summary.items()
    ]
    console.print(
        table(f"{dev.id}: curves {src}, engine {engine}", ["table", "rows", "modelled", "median |err|"], rows)
    )
    err_console.print(f"wrote {out}", markup=False)


def _with_rows(t, rows):
    import dataclasses

    return dataclasses.replace(t, rows=rows)
