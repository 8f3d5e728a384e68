"""``rooflaw frontier``: the exact Pareto frontier of a discrete space (every point evaluated)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .. import api
from ..units import fmt_bytes, fmt_energy
from . import app
from .bands import fmt_banded, intervals, problem_band
from .common import arch_table, atomic_output, check_output, console, esc, print_json
from .joint_options import describe_joint, wants_joint
from .options import JSON, N_JOBS, SCHEDULER, JointOptions, ProblemOptions, with_options
from .speculative import SpeculativeOptions


@app.command()
@with_options()
def frontier(
    *,
    opts: ProblemOptions,
    objectives: str = typer.Option("loss,latency", help="loss,latency[,memory][,energy][,throughput (joint)]."),
    n_jobs: int = N_JOBS,
    backend: str = typer.Option("auto", "--backend", help="auto, numpy or numba (the fast extra; same frontier)."),
    joint_opts: JointOptions,
    spec_opts: SpeculativeOptions,
    scheduler: Optional[str] = SCHEDULER,
    out: Optional[Path] = typer.Option(None, "--out", help="Write the frontier as CSV."),
    plot: Optional[Path] = typer.Option(
        None, "--plot", help="Figure (.png/.svg): frontier over the feasible cloud (joint: coloured by combination)."
    ),
    as_json: bool = JSON,
) -> None:
    """Evaluate every point of a space and print its exact Pareto frontier (feasible points only)."""
    from ..api import frontier as run

    if plot is not None:
        api.check_figure_path(plot, "plot")

    api.resolve_jobs(n_jobs, "n-jobs")

    if out is not None:
        check_output(out, "--out")
    prob = opts.problem()
    joint = spec_opts.merge(joint_opts.space(), prob)
    if wants_joint(joint, scheduler, objectives):
        res = api.joint_frontier(prob, joint, objectives, n_jobs=n_jobs, scheduler=scheduler, backend=backend)
    else:
        res = run(prob, objectives, n_jobs=n_jobs, cloud=20_000 if plot is not None else 0, backend=backend)
    tab = res.table()
    if out is not None:
        with atomic_output(out, "--out") as tmp:
            tab.to_csv(tmp, index=False)
    if plot is not None:
        desc = describe_joint(prob, joint) if "precision" in res.frontier else prob.describe()
        title = f"{desc} — space {prob.space.name}, {res.evaluated:,} points, {res.feasible:,} feasible"
        with atomic_output(plot, "--plot") as tmp:
            if "precision" in res.frontier:
                api.plot_joint_frontier(res.frontier, tmp, title, prob.latency_column)
            else:
                api.plot_frontier(res.frontier, res.cloud, tmp, title, prob.latency_column)
    if as_json:
        band = problem_band(prob)
        print_json({**res.to_dict(), "bands": {**band, "latency_s": intervals(res.frontier["latency_s"], band)}
                    if band and "latency_s" in res.frontier else {}})  # fmt: skip
        return
    desc = prob.describe()
    if "precision" in res.frontier:  # the joint space: name what was crossed, not the base problem's precision
        desc = describe_joint(prob, joint)
    console.print(
        f"[bold]{esc(desc)}[/bold] — space {esc(prob.space.name)}: {res.evaluated:,} points, "
        f"{res.feasible:,} feasible, frontier {res.frontier_size} ({', '.join(res.objectives)}); evaluated in "
        f"{res.eval_seconds:.2f} s, Pareto in {res.pareto_seconds:.3f} s"
    )
    band = problem_band(prob)
    values = [("loss", lambda r: f"{r['loss']:.4f}"), ("latency", lambda r: fmt_banded(r["latency_s"], band)),
              ("memory", lambda r: fmt_bytes(r["memory_bytes"]))]  # fmt: skip
    if "precision" in res.frontier:
        values = [("prec", lambda r: r["precision"]), ("B", lambda r: str(r["batch"]))] + values[:2]
        if len(set(res.frontier["option"])) > 1:
            values.insert(2, ("option", lambda r: r["option"]))
    if "throughput" in res.objectives:
        values.append(("tok/s", lambda r: f"{r['tokens_per_s']:,.0f}"))
    if "energy" in res.objectives:
        values.append(("energy", lambda r: fmt_energy(r["energy_j"])))
    t, same = arch_table(f"frontier by {prob.phase} latency", res.frontier, values, 40)
    console.print(t)
    if same:
        console.print(same, markup=False)
    if out is not None:
        console.print(f"[dim]wrote {esc(str(out))}[/dim]")
    if plot is not None:
        console.print(f"[dim]wrote {esc(str(plot))}[/dim]")
