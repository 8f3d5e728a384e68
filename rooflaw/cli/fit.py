"""``rooflaw fit DATA --law NAME|EXPR``: fit a loss law to training runs."""

from __future__ import annotations

import sys

import typer

from ..errors import RooflawError
from . import app
from .common import PLOT_SUFFIXES, atomic_output, check_output, console, err_console, esc, print_json, table


def _mapping(items: list[str]) -> dict[str, str]:
    out = {}
    for it in items:
        if "=" not in it:
            raise RooflawError(f"--map {it!r}: use SYMBOL=COLUMN")
        k, v = it.split("=", 1)
        out[k.strip()] = v.strip()
    return out


@app.command("fit")
def fit_cmd(
    data: str = typer.Argument(..., help="Training runs: CSV, JSON lines or Parquet."),
    law: str = typer.Option(
        ..., "--law", help="Built-in law name or an expression, e.g. 'E + A/N**alpha + B/D**beta'."
    ),
    map_: list[str] = typer.Option(
        [], "--map", help="SYMBOL=COLUMN or arithmetic over columns (+ - * / **, log, exp, sqrt; `quoted names`)."
    ),
    loss_column: str = typer.Option("loss", "--loss-column", help="Column with the measured loss."),
    method: str = typer.Option("huber", "--method", help="huber (log-space Huber, L-BFGS, multi-start) or nls."),
    huber_delta: float = typer.Option(1e-3, "--huber-delta", help="Huber delta (log space)."),
    starts: str = typer.Option("grid", "--starts", help="'grid' (the recipe grid) or a number of LHS starts."),
    bootstrap: int = typer.Option(0, "--bootstrap", help="Bootstrap resamples for stderr and 95% intervals."),
    holdout: float = typer.Option(0.0, "--holdout", help="Fraction of points held out (seeded)."),
    seed: int = typer.Option(0, "--seed", help="Random seed."),
    plot: str = typer.Option(None, "--plot", help="Write predicted-vs-actual plot to this file."),
    json: bool = typer.Option(False, "--json", help="JSON output (no progress bar)."),
) -> None:
    """Fit a law (Hoffmann/Epoch recipe generalised to any sum of power laws) and print the fit."""
    from ..api import fit_law, get_law, load_table, plot_fit

    if plot:
        check_output(plot, "--plot", PLOT_SUFFIXES)
    the_law = get_law(law)
    df = load_table(data)
    kwargs = dict(
        mapping=_mapping(map_),
        loss_column=loss_column,
        method=method,
        huber_delta=huber_delta,
        starts=starts,
        bootstrap=bootstrap,
        holdout=holdout,
        seed=seed,
    )
    if not json and sys.stderr.isatty():
        from rich.progress import Progress

        with Progress(transient=True, console=err_console) as prog:  # stderr: stdout stays the answer
            task = prog.add_task(f"fitting {len(df):,} rows", total=None)

            def cb(done: int, total: int) -> None:
                prog.update(task, completed=done, total=total)

            res = fit_law(the_law, df, progress=cb, **kwargs)
    else:
        res = fit_law(the_law, df, **kwargs)
    if plot:
        with atomic_output(plot, "--plot", PLOT_SUFFIXES) as tmp:
            plot_fit(res, tmp)
    if json:
        print_json(res.to_dict())
        return
    console.print(f"[bold]{esc(the_law.name)}[/bold]  ({res.method}, {res.n_points} points, {res.seconds:.2f} s)")
    rows = []
    for k, v in res.params.items():
        se = "" if res.stderr is None else f"{res.stderr[k]:.3g}"
        ci = "" if res.ci95 is None else f"[{res.ci95[k][0]:.4g}, {res.ci95[k][1]:.4g}]"
        rows.append([k, f"{v:.6g}", se, ci])
    console.print(table("parameters", ["name", "value", "stderr", "ci95"], rows))
    line = f"objective {res.objective:.10g}   R² {res.r2:.4f}   RMSE {res.rmse:.4g}"
    if res.n_holdout:
        line += f"   held out ({res.n_holdout}): R² {res.r2_holdout:.4f}   RMSE {res.rmse_holdout:.4g}"
    console.print(line, highlight=False)
    line = f"starts {res.n_starts}, converged {res.n_converged}"
    if res.subsample:
        line += f" (on a seeded subsample of {res.subsample:,} rows; the best refined on all {res.n_points:,})"
    console.print(line, highlight=False)
