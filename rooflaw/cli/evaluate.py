"""``rooflaw evaluate`` and ``rooflaw gemm``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

import typer

from .. import api
from ..errors import bad
from ..units import fmt_bytes, fmt_count, fmt_energy, fmt_time
from . import app
from .common import (
    atomic_output,
    check_output,
    console,
    err_console,
    esc,
    print_json,
    ready_law,
    table,
)
from .disagg import DISAGG
from .options import (
    ARCH,
    ARCH_FILE,
    ATTENTION,
    DEVICE_OR_SYSTEM,
    ENGINE,
    HF_CONFIG,
    INPUT_TOKENS,
    JSON,
    OUTPUT_TOKENS,
    PRECISION,
    TILES,
    TOKENS,
)
from .speculative import ACCEPTANCE, DRAFT, DRAFT_TOKENS

#: Most decode steps ``--steps`` computes: the table holds 40 bytes per step (plus chunked temporaries), so
#: 10⁷ steps take ~0.4 GB and ~40 s; the step times are vectorised, not looped (0.5 s per 10⁵ steps).
MAX_STEPS = 10_000_000
#: Most steps listed one by one in ``--json`` (each ~150 bytes there); above it ``steps`` is left out and
#: ``steps_summary`` (always present) carries the totals and extremes -- write every row with ``--steps-csv``.
JSON_STEPS = 100_000
#: Most steps shown in the terminal table; above it the first and last ``TABLE_STEPS // 2`` are shown.
TABLE_STEPS = 200


def load_arch(hf_config: Optional[Path], arch: Optional[str], arch_file: Optional[Path]) -> api.Architecture:
    given = [x for x in (hf_config, arch, arch_file) if x is not None]
    if len(given) != 1:
        raise bad("arch", len(given), "give exactly one of --hf-config, --arch, --arch-file")
    if hf_config is not None:
        return api.from_hf_config(hf_config)
    if arch_file is not None:
        return api.from_file(arch_file)
    return api.from_spec(arch)


@app.command()
def evaluate(
    device: Optional[str] = DEVICE_OR_SYSTEM,
    hf_config: Optional[Path] = HF_CONFIG,
    arch: Optional[str] = ARCH,
    arch_file: Optional[Path] = ARCH_FILE,
    precision: str = PRECISION,
    batch: str = typer.Option("1", help="Sequences per batch; with --system a sweep: 1,8,64 or 1:256 (powers of 2)."),
    input_tokens: int = INPUT_TOKENS,
    output_tokens: int = OUTPUT_TOKENS,
    attention: str = ATTENTION,
    engine: Optional[str] = ENGINE,
    preset: str = typer.Option("full", help="Cost model: full (per-operator roofline) or paper (App. E)."),
    tiles: bool = TILES,
    steps: bool = typer.Option(False, "--steps", help="Also list every decode step (context, time, FLOPs, bytes)."),
    steps_csv: Optional[Path] = typer.Option(
        None, "--steps-csv", help="Write every decode step as CSV (SI units; implies --steps)."
    ),
    law: Optional[str] = typer.Option(None, help="Add the predicted loss of this law (name or expression)."),
    tokens: Optional[float] = TOKENS,
    plot: Optional[Path] = typer.Option(None, "--plot", help="Write the roofline + time breakdown (.png or .svg)."),
    csv: Optional[Path] = typer.Option(None, "--csv", help="Write the per-operator table as CSV (SI units)."),
    as_json: bool = JSON,
    system: Optional[str] = typer.Option(
        None, "--system", help="Devices + interconnect: h100-sxm:8, a systems-catalog id (hgx-h100) or a TOML file."
    ),
    layout: Optional[str] = typer.Option(
        None, "--layout", help="tp=8 | ep=8,dp_attn=8 | pp=4,tp=2 | helix=kvp4,tpep8 (needs --system; default tp=1)."
    ),
    overlap: bool = typer.Option(False, "--overlap/--no-overlap", help="Hide communication behind compute."),
    max_batch: bool = typer.Option(False, "--max-batch", help="Report the largest batch whose memory fits a device."),
    host_time: bool = typer.Option(
        False, "--host-time", help="Serving: add the engine's fitted host and front-end seconds to the in-flight rows."
    ),
    pareto_plot: Optional[Path] = typer.Option(
        None, "--pareto-plot", help="Write tokens/s per device vs per user over the --batch sweep (.png/.svg)."
    ),
    draft: Optional[str] = DRAFT,
    draft_tokens: int = DRAFT_TOKENS,
    acceptance: str = ACCEPTANCE,
    disagg: Optional[str] = DISAGG,
) -> None:
    """Latency (prefill, every decode step, TTFT, TPOT), memory and energy of one architecture on one device;
    with --system/--layout: serving across devices (per-device memory, communication, tokens/s, J/token);
    with --draft: speculative decoding (TPOT, tokens/s, memory and energy include the draft)."""
    from . import speculative as spec_cli

    spec_cli.check_draft_options(draft, draft_tokens, acceptance)
    if disagg is not None:
        from .disagg import serve_disagg

        for flag, val in (("--steps", steps), ("--plot", plot), ("--csv", csv), ("--law", law), ("--draft", draft),
                          ("--layout", layout), ("--max-batch", max_batch), ("--host-time", host_time),
                          ("--pareto-plot", pareto_plot)):  # fmt: skip
            if val:
                raise bad(flag.lstrip("-"), val, "does not apply to --disagg (two pools, their own layouts)")
        return serve_disagg(device, system, load_arch(hf_config, arch, arch_file), precision, batch, input_tokens,
                            output_tokens, attention, engine, preset, tiles, overlap, disagg, as_json)  # fmt: skip
    if system is not None or layout is not None or max_batch or pareto_plot is not None or not batch.isdigit():
        from .serving import serve

        for flag, val in (("--steps", steps), ("--plot", plot), ("--csv", csv), ("--law", law), ("--draft", draft)):
            if val:
                raise bad(flag.lstrip("-"), val, "is for one device and one batch; drop --system/--layout/sweeps")
        return serve(
            device,
            system,
            layout,
            load_arch(hf_config, arch, arch_file),
            precision,
            batch,
            input_tokens,
            output_tokens,
            attention,
            engine,
            preset,
            tiles,
            overlap,
            max_batch,
            pareto_plot,
            as_json,
            host_time=host_time,
        )
    if host_time:
        raise bad("host-time", True, "is for serving (--system, --layout, --max-batch or a batch sweep)")
    if device is None:
        raise bad("device", None, "give --device (one chip) or --system (several)")
    n_batch = int(batch)
    if plot is not None:
        api.check_figure_path(plot, "plot")
    steps = steps or steps_csv is not None
    if steps and draft is not None:
        raise bad("steps", True, "lists the plain decode steps; drop --steps with --draft")
    if steps and output_tokens > MAX_STEPS:
        raise bad("output-tokens", output_tokens, f"--steps computes at most {MAX_STEPS:,} decode steps (40 B each)")
    if steps_csv is not None:
        check_output(steps_csv, "--steps-csv")
    a = load_arch(hf_config, arch, arch_file)
    dev = api.get_device(device)
    wl = api.Workload(n_batch, input_tokens, output_tokens, attention)
    rep = api.evaluate(a, dev, wl, precision, preset, tiles, engine)
    out = rep.to_dict()
    op_rows = api.op_rows(rep)
    out["ops"] = op_rows
    out["tokens_per_s"] = api.throughput(rep)
    spec = None
    if draft is not None:
        if tiles:
            raise bad("tiles", True, "the verification pass has no tile/wave model; drop --tiles with --draft")
        spec = spec_cli.speculate(a, draft, dev, wl, draft_tokens, acceptance, precision, preset, engine)
        spec_cli.merge(out, spec)
    banded = api.band_applies(rep.applied)
    out["bands"] = _bands(out) if banded else {}
    if law is not None:
        lw = ready_law(law, tokens)
        loss = lw.loss(a, tokens=tokens)
        out.update(loss=loss, perplexity=math.exp(loss) if loss < 709 else None, law=lw.name)
        out["outside_law_domain"] = lw.outside(api.law_inputs(a.columns(), tokens))
        if out["outside_law_domain"] and not as_json:
            err_console.print(f"warning: {name_of(a)} lies outside the domain law {lw.name} was fitted on "
                              f"({'; '.join(out['outside_law_domain'])}): the loss is extrapolated",
                              markup=False)  # fmt: skip
    tab = None
    if steps:
        tab = api.decode_step_table(a, dev, wl, precision, preset, tiles, engine)
        out["steps_summary"] = steps_summary(tab)
        if as_json and output_tokens <= JSON_STEPS:
            out["steps"] = api.step_rows(tab)
    if steps_csv is not None and tab is not None:  # --steps-csv implies --steps
        write_steps_csv(tab, steps_csv)
    if csv is not None:
        write_csv(op_rows, csv)
    if plot is not None:
        with atomic_output(plot, "--plot") as tmp:
            api.plot_report(rep, tmp)
    if as_json:
        print_json(out)
        return
    name = a.name or "architecture"
    console.print(
        f"[bold]{esc(name)}[/bold] on [bold]{esc(dev.name)}[/bold] ({esc(dev.id)}) — {esc(rep.precision.name)}, "
        f"B={n_batch}, S_in={input_tokens}, S_out={output_tokens}, preset={preset}"
    )
    console.print(
        f"params {fmt_count(out['params_total'])} total, {fmt_count(out['params_active'])} active; "
        f"weights {fmt_bytes(out['weight_bytes'])}, KV cache {fmt_bytes(out['kv_cache_bytes'])}, "
        f"memory {fmt_bytes(out['memory_bytes'])} of {fmt_bytes(dev.memory_capacity)} "
        f"({'fits' if out['fits_in_memory'] else 'DOES NOT FIT'})"
    )
    for phase in ("prefill", "decode"):
        rows = [
            [r["name"], fmt_count(r["flops"]), fmt_bytes(r["bytes"]), _intensity(r["intensity"]),
             fmt_time(r["seconds"]), _share(r["share"]), _short_bound(r["bound"]), r["roof"]]
            for r in op_rows if r["phase"] == phase
        ]  # fmt: skip
        what = "summed over layers" if phase == "prefill" else f"summed over layers and {output_tokens} steps"
        console.print(table(f"{phase}: per operator ({what})", OP_HEADERS, rows))
    bd = out["bands"]
    summary = [
        ["prefill / TTFT", _banded(out["prefill_s"], bd.get("prefill_s"), fmt_time)],
        [f"decode ({output_tokens} steps)", _banded(out["decode_s"], bd.get("decode_s"), fmt_time)],
        ["TPOT (mean)", _banded(out["tpot_s"], bd.get("tpot_s"), fmt_time)],
        ["total", _banded(out["total_s"], bd.get("total_s"), fmt_time)],
        ["prefill tokens/s", _banded(out["tokens_per_s"]["prefill"], bd.get("prefill_tokens_per_s"), _rate)],
        ["decode tokens/s", _banded(out["tokens_per_s"]["decode"], bd.get("decode_tokens_per_s"), _rate)],
        ["tokens/s (end to end)", _banded(out["tokens_per_s"]["total"], bd.get("total_tokens_per_s"), _rate)],
        ["energy", fmt_energy(out["energy_j"])],
    ]
    if spec is not None:
        summary += spec_cli.rows(spec)
    if law is not None:
        summary += [
            ["loss (" + out["law"] + ")", f"{out['loss']:.4f}"],
            ["perplexity", "overflow" if out["perplexity"] is None else f"{out['perplexity']:.2f}"],
        ]
    if tab is not None:  # --steps
        console.print(steps_table(tab))
    console.print(table("summary", ["quantity", "value"], summary))
    if not banded:
        console.print("[dim]no error band: the bands rest on fitted engines on NVIDIA GPUs (rooflaw devices "
                      "fit-efficiency); this estimate does not[/dim]")  # fmt: skip
    console.print(f"[dim]{esc(rep.provenance)}[/dim]")
    for path in (csv, plot, steps_csv):
        if path is not None:
            console.print(f"wrote {path}", markup=False)


OP_HEADERS = ["op", "FLOPs", "bytes", "FLOP/B", "time", "share", "bound", "roof"]


def _bands(out: dict) -> dict:
    """80 % bands of the times and throughputs of ``out`` (``{column: [low, high]}``, ``level``)."""
    tps = out["tokens_per_s"]
    vals = {k: out[k] for k in ("prefill_s", "ttft_s", "decode_s", "tpot_s", "total_s")}
    bd = api.bands_dict(vals)
    for phase, col in (("prefill", "prefill_s"), ("decode", "tpot_s"), ("total", "total_s")):
        b = bd.get(col)
        if b and tps.get(phase):  # a rate over the same work: its band is the time band inverted
            bd[f"{phase}_tokens_per_s"] = [tps[phase] * out[col] / b[1], tps[phase] * out[col] / b[0]]
    return bd


def _banded(value: float, band: list | None, fmt) -> str:
    """``8.96 ms [7.9 ms–10.4 ms], 80 %`` (the value alone without a band)."""
    if not band:
        return fmt(value)
    return f"{fmt(value)} [{fmt(band[0])}–{fmt(band[1])}], {api.BAND_LEVEL * 100:.0f} %"


def _rate(x: float) -> str:
    return f"{x:.4g}"


def name_of(a: api.Architecture) -> str:
    return a.name or "the architecture"


def _share(x: float) -> str:
    return "<1%" if 0 < x < 0.005 else f"{x:.0%}"


def _intensity(x: float) -> str:
    return "—" if x == float("inf") else f"{x:.3g}"


def _short_bound(bound: str) -> str:
    """``mixed (43% of steps compute-bound)`` -> ``mixed 43%`` (the full text is in --json and --csv)."""
    if bound.startswith("mixed ("):
        return "mixed " + bound[len("mixed (") :].split("%", 1)[0] + "%"
    return bound


def steps_summary(tab: dict) -> dict:
    """Totals and extremes of the per-step table (SI units)."""
    sec = tab["seconds"]
    return {
        "count": int(sec.size),
        "first_context": int(tab["context"][0]),
        "last_context": int(tab["context"][-1]),
        "seconds_total": float(sec.sum()),
        "seconds_min": float(sec.min()),
        "seconds_max": float(sec.max()),
        "flops_total": float(tab["flops"].sum()),
        "bytes_total": float(tab["bytes"].sum()),
        "listed_in_json": int(sec.size) <= JSON_STEPS,
    }


def steps_table(tab: dict):
    """The decode steps as a table; above ``TABLE_STEPS`` rows, the first and last half of that with a gap row."""
    import numpy as np

    n, half = int(tab["step"].size), TABLE_STEPS // 2
    if n <= TABLE_STEPS:
        shown = api.step_rows(tab)
    else:
        ends = {k: np.concatenate([v[:half], v[-half:]]) for k, v in tab.items()}
        rows = api.step_rows(ends)
        shown = [*rows[:half], None, *rows[half:]]
    cells = [
        [f"… {n - 2 * half:,} more", "(--steps-csv", "lists", "every", "step)"] if st is None else
        [st["step"], st["context"], fmt_time(st["seconds"]), fmt_count(st["flops"]), fmt_bytes(st["bytes"])]
        for st in shown
    ]  # fmt: skip
    return table(f"decode steps ({n:,})", ["step", "context", "time", "FLOPs", "bytes"], cells)


def write_steps_csv(tab: dict, path: Path) -> None:
    """Every decode step as CSV (columns of ``api.STEP_COLUMNS``; 17 significant digits, SI units)."""
    import numpy as np

    data = np.column_stack([tab[k].astype(float) for k in api.STEP_COLUMNS])
    with atomic_output(path, "--steps-csv") as tmp:
        np.savetxt(tmp, data, fmt=("%d", "%d", "%.17g", "%.17g", "%.17g"), delimiter=",",
                   header=",".join(api.STEP_COLUMNS), comments="")  # fmt: skip


def write_csv(rows: list[dict], path: Path) -> None:
    """The per-operator rows as CSV (columns of ``api.OP_COLUMNS``)."""
    import csv as _csv

    with atomic_output(path, "--csv") as tmp, open(tmp, "w", newline="") as f:
        w = _csv.DictWriter(f, fieldnames=list(api.OP_COLUMNS))
        w.writeheader()
        for r in rows:
            w.writerow(r)


def _gemm_band(dev, d: dict) -> dict:
    """The 80 % band of a GEMM priced on kernel curves: measured/predicted quantiles of the curves' leave-one-GPU-out
    GEMM rows, ``{"family", "level", "ratio": [low, high], "seconds": [low, high]}`` (``{}`` on the pure roofline
    or without a band)."""
    if not d["curves"]:
        return {}
    r = api.kernel_band(api.curves_for(dev), "gemm")
    if r is None:
        return {}
    return {
        "family": "gemm",
        "level": api.BAND_LEVEL,
        "ratio": list(r),
        "seconds": [d["seconds"] * r[0], d["seconds"] * r[1]],
    }


@app.command("gemm")
def gemm_cmd(
    m: int = typer.Option(..., "--m", help="Rows of A and C (tokens)."),
    n: int = typer.Option(..., "--n", help="Columns of B and C."),
    k: int = typer.Option(..., "--k", help="Reduction dimension."),
    dtype: str = typer.Option("fp32", help="Element format of A, B and C."),
    device: str = typer.Option("h100-sxm", help="Catalog id or device TOML file."),
    engine: str = typer.Option(
        "kernels", "--engine", help="kernels: the device's kernel curves where it has them; ideal: the pure roofline."
    ),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Arithmetic intensity, bound and time of one GEMM (bytes count A, B and the C write)."""
    if engine not in ("kernels", "ideal"):
        raise bad("--engine", engine, "use kernels (the device's kernel curves) or ideal (the pure roofline)")
    dev = api.get_device(device)
    g = api.gemm(m, n, k, dev, dtype, curves="auto" if engine == "kernels" else "ideal")
    d = g.to_dict()
    band = _gemm_band(dev, d)
    if as_json:
        print_json({**d, "band": band})
        return
    time_text = fmt_time(d["seconds"])
    if band:
        lo, hi = band["seconds"]
        time_text += f" [{fmt_time(lo)}–{fmt_time(hi)}], {band['level'] * 100:.0f} %"
    rows = [
        ["FLOPs", fmt_count(d["flops"]) + " FLOP"], ["bytes (A, B read; C written)", fmt_bytes(d["bytes"])],
        ["arithmetic intensity", f"{d['arithmetic_intensity']:.4g} FLOP/B"],
        ["ridge point", f"{d['ridge']:.4g} FLOP/B"], ["bound", d["bound"]], ["time", time_text],
        ["compute time", fmt_time(d["compute_seconds"])], ["memory time", fmt_time(d["memory_seconds"])],
        ["tile efficiency", f"{d['tile_efficiency']:.1%}"], ["wave efficiency", f"{d['wave_efficiency']:.1%}"],
        ["priced on", f"{d['curves']} kernel curves" if d["curves"] else "pure roofline"],
    ]  # fmt: skip
    if d["curves"]:
        rows.insert(6, ["fixed + quantise time", fmt_time(d["kernel_seconds"])])
    console.print(table(f"GEMM {m}×{n}×{k} ({g.dtype}) on {g.device}", ["quantity", "value"], rows))
