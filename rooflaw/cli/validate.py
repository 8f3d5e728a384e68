"""``rooflaw validate``: predicted vs measured latency of real torch decoders on this machine."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..errors import bad
from . import app
from .common import CLOCK_HELP, check_clock, console, err_console, print_json, table


@app.command()
def validate(
    device: str = typer.Option("local", "--device", help="local (calibrate now), a catalog id, or a device TOML file."),
    quick: bool = typer.Option(False, "--quick", help="3 small configs, short runs (a smoke test, ~30 s)."),
    cuda: bool = typer.Option(
        False,
        "--cuda",
        help="Measure 12 GPU-sized decoders (0.3-8 B) on the CUDA GPU; --device local calibrates the GPU "
        "(skipped cleanly without one).",
    ),
    threads: int = typer.Option(
        1, "--threads", min=1, help="torch intra-op threads for calibration and measurement (CPU; default 1)."
    ),
    clock: str = typer.Option("wall", "--clock", help=CLOCK_HELP),
    graphs: bool = typer.Option(
        False, "--graphs", help="With --cuda: time CUDA-graph replays of the dense configs (no host launch cost)."
    ),
    measured: Optional[Path] = typer.Option(
        None, "--measured", help="With --cuda: no GPU work, predict the runs of this earlier validate --cuda --json."
    ),
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
    for flag, value in (("--graphs", graphs), ("--measured", measured)):
        if value and not cuda:
            raise bad(flag, str(value), "needs --cuda")
    if cuda and measured is None and not torch.cuda.is_available():
        err_console.print("no CUDA device: GPU validation skipped")
        raise typer.Exit(0)
    show = not as_json and console.is_terminal
    if cuda:
        rep, dev = _run_cuda(device, quick, show, graphs, measured)
    else:
        # local CPU: validate calibrates this machine itself, one calibration round among each round of measurements
        dev = None if device == "local" else api.get_device(device)
        rep = _measure(lambda step=None: v.run(dev, quick, "cpu", step, threads, clock), show)
    if as_json:
        print_json(rep)
        return
    rows = [[c["name"], c["phase"], f"{c['predicted_s'] * 1e3:.3g} ms", f"{c['measured_s'] * 1e3:.3g} ms",
             f"{c['error']:+.1%}", f"{c['spread']:.0%}"] for c in rep["configs"]]  # fmt: skip
    if cuda:
        title = f"validate on {rep['device']} (engine torch-eager, the GPU ({rep['gpu']}), {rep['statistic']})"
        tail = f"(load average {_load(rep['load_avg_1min'])}, median spread {rep['median_spread']:.0%})"
    else:
        title = (f"validate on {rep['device']} (engine torch-eager, {rep['threads']} torch threads, "
                 f"{rep['statistic']}; calibration {rep['calibration']})")  # fmt: skip
        tail = (f"; mean error prefill {rep['mean_error_prefill']:+.1%}, decode {rep['mean_error_decode']:+.1%} "
                f"(load average {_load(rep['load_avg_1min_start'])} → {_load(rep['load_avg_1min'])}, "
                f"median spread {rep['median_spread']:.0%}, {rep['rounds']} rounds)")  # fmt: skip
    console.print(table(title, ["config", "phase", "predicted", "measured", "error", "spread (median/best − 1)"], rows))
    console.print(f"MAPE prefill {rep['mape_prefill']:.1%}, decode {rep['mape_decode']:.1%} " + tail)


def _load(v: object) -> str:
    return "n/a" if v is None else f"{v:.1f}"


def _measure(call, show: bool):
    """``call(progress)`` under a progress bar on a terminal, else ``call()``."""
    if not show:
        return call()
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=console) as bar:
        task = bar.add_task("measuring", total=1.0)
        return call(lambda s, f: bar.update(task, completed=f, description=s))


def _run_cuda(device: str, quick: bool, show: bool, graphs: bool, measured: Optional[Path]):
    """(report, predicting device) of ``validate --cuda``: ``local`` calibrates the GPU (micro-benchmarks only),
    else a catalog id or device file predicts with its own (e.g. published-fitted) figures."""
    from .. import api
    from .. import validate_cuda as vc

    if device == "local":
        if show:
            err_console.print("calibrating the GPU (micro-benchmarks only) ...")
        dev = api.calibrate_cuda()
    else:
        dev = api.get_device(device)
    names = vc.QUICK_CUDA if quick else None
    done = vc.measured_rows(str(measured)) if measured is not None else None
    run = lambda step=None: vc.run_cuda(dev, step, names, graphs=graphs, measured=done)  # noqa: E731
    return _measure(run, show), dev
