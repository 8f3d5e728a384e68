"""``rooflaw validate``: predicted vs measured latency of real torch decoders on this machine."""

from __future__ import annotations

import typer

from . import app
from .common import CLOCK_HELP, check_clock, console, err_console, print_json, table


@app.command()
def validate(
    device: str = typer.Option("local", "--device", help="local (calibrate now), a catalog id, or a device TOML file."),
    quick: bool = typer.Option(False, "--quick", help="3 small configs, short runs (a smoke test, ~30 s)."),
    cuda: bool = typer.Option(False, "--cuda", help="Measure on the CUDA GPU (skipped cleanly without one)."),
    threads: int = typer.Option(
        1, "--threads", min=1, help="torch intra-op threads for calibration and measurement (CPU; default 1)."
    ),
    clock: str = typer.Option("wall", "--clock", help=CLOCK_HELP),
    as_json: bool = typer.Option(False, "--json", help="One JSON object; no progress output."),
) -> None:
    """Build torch decoders from ≥ 10 architecture specs, time prefill and KV-cached decode, compare with rooflaw."""
    from .. import api
    from .. import validate as v
    from ..errors import RooflawError

    try:
        import torch
    except ImportError:
        raise RooflawError("validate needs PyTorch (pip install torch)") from None
    check_clock(clock)
    if cuda and not torch.cuda.is_available():
        err_console.print("no CUDA device: GPU validation skipped")
        raise typer.Exit(0)
    show = not as_json and console.is_terminal
    dev = None  # local CPU: calibrated by validate itself, one round among each round of measurements
    if device == "local" and cuda:
        if show:
            err_console.print("calibrating this machine (micro-benchmarks only) ...")
        dev = api.calibrate(seconds=1.0 if quick else 3.0, threads=None, clock=clock)
    elif device != "local":
        dev = api.get_device(device)
    if show:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=console) as bar:
            task = bar.add_task("measuring", total=1.0)
            step = lambda s, f: bar.update(task, completed=f, description=s)  # noqa: E731
            rep = v.run(dev, quick, "cuda" if cuda else "cpu", step, None if cuda else threads, clock)
    else:
        rep = v.run(dev, quick, "cuda" if cuda else "cpu", threads=None if cuda else threads, clock=clock)
    if as_json:
        print_json(rep)
        return
    rows = [[c["name"], c["phase"], f"{c['predicted_s'] * 1e3:.3g} ms", f"{c['measured_s'] * 1e3:.3g} ms",
             f"{c['error']:+.1%}", f"{c['spread']:.0%}"] for c in rep["configs"]]  # type: ignore[union-attr]  # fmt: skip
    console.print(
        table(
            f"validate on {rep['device']} (engine torch-eager, {rep['threads']} torch threads, {rep['statistic']}; "
            f"calibration {rep['calibration']})",
            ["config", "phase", "predicted", "measured", "error", "spread (median/best − 1)"],
            rows,
        )
    )
    console.print(
        f"MAPE prefill {rep['mape_prefill']:.1%}, decode {rep['mape_decode']:.1%}; mean error prefill "
        f"{rep['mean_error_prefill']:+.1%}, decode {rep['mean_error_decode']:+.1%} (load average "
        f"{_load(rep['load_avg_1min_start'])} → {_load(rep['load_avg_1min'])}, "
        f"median spread {rep['median_spread']:.0%}, {rep['rounds']} rounds)"
    )


def _load(v: object) -> str:
    return "n/a" if v is None else f"{v:.1f}"
