"""``rooflaw devices list|show|calibrate``."""

from __future__ import annotations

import collections
from collections.abc import Callable
from pathlib import Path
from typing import Optional

import typer

from ..api import Device, get_device, list_devices
from ..errors import bad
from . import app
from .common import CLOCK_HELP, atomic_output, check_clock, check_output, console, err_console, esc, print_json, table

devices_app = typer.Typer(
    name="devices",
    help="The device catalog: list, show, and calibrate this machine.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(devices_app, name="devices")


def _t(dev: Device, dtype: str) -> str:
    v = dev.peak_flops.get(dtype)
    if v is None:
        return "—"
    return f"{v / 1e12:.4g}" + ("?" if f"peak_flops.{dtype}" in dev.uncertain else "")


def _prov_summary(dev: Device) -> str:
    counts = collections.Counter(dev.provenance.values())
    return ", ".join(k for k, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


#: Columns of ``devices list``: key -> (header, cell); the first ``NARROW`` fit 80 columns, ``--wide`` shows all.
def _columns() -> dict[str, tuple[str, Callable[[Device], str]]]:
    return {
        "id": ("id", lambda d: d.id),
        "fp16": ("fp16 TF", lambda d: _t(d, "fp16")),
        "int8": ("int8 TOP", lambda d: _t(d, "int8")),
        "bandwidth": ("BW GB/s", lambda d: f"{d.memory_bandwidth / 1e9:.4g}"),
        "memory": ("mem GB", lambda d: f"{d.memory_capacity / 1e9:.4g}"),
        "power": ("peak W", lambda d: f"{d.power_peak:.4g}" if d.power_peak is not None else "—"),
        "fp8": ("fp8", lambda d: _t(d, "fp8")),
        "fp4": ("fp4", lambda d: _t(d, "fp4")),
        "fp32": ("fp32", lambda d: _t(d, "fp32")),
        "name": ("name", lambda d: d.name),
        "provenance": ("provenance", _prov_summary),
    }


NARROW = 6


@devices_app.command("list")
def list_cmd(
    wide: bool = typer.Option(False, "--wide", help="Every column (name, fp8/fp4/fp32 roofs, provenance)."),
    columns: Optional[str] = typer.Option(
        None,
        "--columns",
        help="Comma-separated: id, fp16, int8, bandwidth, memory, power, fp8, fp4, fp32, name, provenance.",
    ),
    as_json: bool = typer.Option(False, "--json", help="A JSON list of devices, SI units."),
) -> None:
    """Every catalog device and power mode (and plug-in devices). Dense peaks; '?' = uncertain."""
    devs = list_devices()
    if as_json:
        print_json([d.to_dict() for d in devs])
        return
    every = _columns()
    if columns is not None:
        keys = [k.strip() for k in columns.split(",") if k.strip()]
        unknown = [k for k in keys if k not in every]
        if unknown or not keys:
            raise bad("columns", columns, f"choose from {', '.join(every)}")
        cols = [every[k] for k in keys]
        wide = True  # the user's choice: print it whole
    else:
        cols = list(every.values()) if wide else list(every.values())[:NARROW]
    rows = [[str(cell(d)) for _, cell in cols] for d in devs]
    more = "" if wide else "; --wide, --columns for more"
    title = f"{len(devs)} devices: dense TFLOP/s (TOP/s), '?' = uncertain{more}"
    t = table(title, [h for h, _ in cols], rows)
    for c in t.columns:
        c.no_wrap = True
    if wide:  # as wide as it needs: a pager or a wide terminal shows it whole
        from rich.console import Console
        from rich.measure import Measurement

        width = Measurement.get(console, console.options.update(width=1000), t).maximum
        Console(width=max(console.width, width)).print(t)
    else:
        console.print(t)


def _fmt_field(field: str, value: object) -> str:
    if value is None:
        return "—"
    if field == "tile" and isinstance(value, tuple):
        return "x".join(str(x) for x in value)
    if not isinstance(value, (int, float)):
        return str(value)
    if field.startswith("peak_flops."):
        unit = "OP/s" if field.startswith("peak_flops.int") else "FLOP/s"
        return f"{float(value) / 1e12:.6g} T{unit} ({float(value):.6g} {unit})"
    units = {
        "memory_bandwidth": (1e9, "GB/s", "B/s"),
        "memory_capacity": (1e9, "GB", "B"),
        "l2_bytes": (1e6, "MB", "B"),
        "energy_per_flop": (1e-12, "pJ/FLOP", "J/FLOP"),
        "energy_per_byte": (1e-12, "pJ/B", "J/B"),
    }
    if field in units:
        scale, human, si = units[field]
        return f"{float(value) / scale:.6g} {human} ({float(value):.6g} {si})"
    if field in ("power_idle", "power_peak"):
        return f"{float(value):.4g} W"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _show_rows(dev: Device) -> list[list[str]]:
    rows: list[list[str]] = []
    fields = [f"peak_flops.{k}" for k in dev.peak_flops] + [
        "memory_bandwidth",
        "memory_capacity",
        "l2_bytes",
        "sm_count",
        "tile",
        "power_idle",
        "power_peak",
        "energy_per_flop",
        "energy_per_byte",
        "compute_efficiency",
        "memory_efficiency",
    ]
    for f in fields:
        v = dev.peak_flops[f.split(".", 1)[1]] if f.startswith("peak_flops.") else getattr(dev, f)
        if v is None:
            continue
        prov = dev.provenance.get(f, "—")
        if f in dev.uncertain:
            prov += " (uncertain)"
        rows.append([f, _fmt_field(f, v), prov, dev.sources.get(f, "—")])
    return rows


@devices_app.command("show")
def show_cmd(
    device: str = typer.Argument(..., help="Catalog id, id@mode, a device TOML file, or a plug-in id."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object, SI units."),
) -> None:
    """Every field of one device with its provenance and source."""
    dev = get_device(device)
    if as_json:
        d = dev.to_dict()
        d["ridge_fp16"] = dev.ridge("fp16") if _has_roof(dev, "fp16") else None
        print_json(d)
        return
    vendor = dev.vendor or "unknown vendor"
    console.print(f"[bold]{esc(dev.name)}[/bold] ({esc(dev.id)}) — {esc(vendor)}, {esc(dev.kind)}")
    console.print(
        table(
            "fields (dense peaks, SI in brackets)",
            ["field", "value", "provenance", "source"],
            _show_rows(dev),
        )
    )
    if _has_roof(dev, "fp16"):
        console.print(f"ridge point (fp16): {dev.ridge('fp16'):.4g} FLOP/byte")
    console.print(_curves_line(dev), markup=False, soft_wrap=True)
    if dev.uncertain:
        console.print(f"uncertain: {', '.join(dev.uncertain)}", markup=False)
    if dev.achieved:
        a = dev.achieved
        figs = ", ".join(f"{k} {v:.3g}" for k, v in a.items() if isinstance(v, float) and k != "kernel_s")
        console.print(
            f"achieved ({a.get('provenance', '?')}, family {a.get('family', '?')}, {len(a.get('rows', []))} published"
            f" rows): {figs}; {float(a.get('kernel_s', 0)) * 1e6:.3g} µs/kernel",
            markup=False,
        )
    if dev.notes:
        console.print(f"notes: {dev.notes}", markup=False)


def _curves_line(dev: Device) -> str:
    """Which architecture prices ``dev``'s kernels, and on which GPUs' measured kernels those curves were fitted."""
    from ..api import curves_for

    if not dev.architecture:
        return "architecture: none -- no kernel curves; the engine profile's achieved fractions price it"
    kern = dev.curves_architecture
    head = f"architecture: {dev.architecture}" + (f", kernels priced as {kern}" if kern != dev.architecture else "")
    curves = curves_for(dev)
    if curves is None:
        return f"{head}; no kernel curves in the catalog"
    gpus = ", ".join(curves.provenance.get("gpus", [])) or "?"
    pooled = " (pooled: no curves of its own architecture)" if curves.architecture != kern else ""
    return f"{head}; kernel curves '{curves.architecture}'{pooled}, fitted on {gpus}"


def _has_roof(dev: Device, dtype: str) -> bool:
    try:
        dev.roof(dtype)
    except ValueError:
        return False
    return True


@devices_app.command("calibrate")
def calibrate_cmd(
    out: Optional[Path] = typer.Option(None, "--out", help="Write the measured device to this TOML file."),
    base: Optional[str] = typer.Option(
        None, "--base", help="Catalog device this machine is: store efficiency factors (measured / peak)."
    ),
    seconds: float = typer.Option(2.0, "--seconds", help="Time budget of the measurements."),
    threads: int = typer.Option(1, "--threads", min=1, help="torch intra-op threads (validate with the same)."),
    clock: str = typer.Option("wall", "--clock", help=CLOCK_HELP),
    cuda: bool = typer.Option(
        False, "--cuda", help="Measure the CUDA GPU instead (torch micro-benchmarks; skipped cleanly without one)."
    ),
    power: Optional[str] = typer.Option(
        None,
        "--power",
        help="Power under load, e.g. 65W: gives the device energy figures (else RAPL or nvidia-smi where exposed).",
    ),
    as_json: bool = typer.Option(False, "--json", help="One JSON object, SI units; no progress output."),
) -> None:
    """Measure this machine: GEMM FLOP/s (fp32, bf16), bandwidth, vector rate, eager kernel overhead, capacity,
    power (stated with --power, else RAPL / nvidia-smi where the machine exposes it)."""
    from ..api import calibrate
    from ..units import parse_power

    watts = parse_power(power, "--power") if power is not None else None
    check_clock(clock)
    if out is not None:
        check_output(out, "--out", (".toml",))
    if cuda:
        _calibrate_cuda(out, base, as_json, watts)
        return
    base_dev = get_device(base) if base is not None else None
    if not as_json and console.is_terminal:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=console) as bar:
            task = bar.add_task("measuring", total=1.0)
            dev = calibrate(
                base_dev,
                seconds=seconds,
                progress=lambda step, f: bar.update(task, completed=f, description=step),
                threads=threads,
                clock=clock,
                power=watts,
            )
    else:
        dev = calibrate(base_dev, seconds=seconds, threads=threads, clock=clock, power=watts)
    _write_and_show(dev, out, as_json)


def _calibrate_cuda(out: Optional[Path], base: Optional[str], as_json: bool, watts: Optional[float] = None) -> None:
    """``devices calibrate --cuda``: the ``local-cuda`` device (:mod:`rooflaw.devices.calibrate_cuda`)."""
    from ..api import calibrate_cuda, cuda_available

    if base is not None:
        raise bad("--base", base, "not used with --cuda (the GPU's roofs are its own measured rates)")
    if not cuda_available():
        err_console.print("no CUDA device: GPU calibration skipped")
        raise typer.Exit(0)
    if not as_json and console.is_terminal:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=console) as bar:
            task = bar.add_task("measuring the GPU", total=1.0)
            dev = calibrate_cuda(lambda step, f: bar.update(task, completed=f, description=step), power=watts)
    else:
        dev = calibrate_cuda(power=watts)
    _write_and_show(dev, out, as_json)


def _write_and_show(dev, out: Optional[Path], as_json: bool) -> None:
    """A calibrated device: written to ``out`` (atomically) if given, then printed as JSON or as a table."""
    from ..api import save_device_toml

    if out is not None:
        with atomic_output(out, "--out", (".toml",)) as tmp:
            save_device_toml(dev, tmp)
    if as_json:
        print_json(dev.to_dict())
        return
    console.print(table(f"{dev.name} ({dev.id})", ["field", "value", "provenance", "source"], _show_rows(dev)))
    console.print(f"notes: {dev.notes}", markup=False)
    if out is not None:
        err_console.print(f"wrote {out}", markup=False)
