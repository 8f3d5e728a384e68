"""``rooflaw report``: the frontier as one self-contained, interactive HTML page (the ``report`` extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .. import api
from . import app
from .common import atomic_output, check_output, console, esc, print_json
from .joint_options import describe_joint, wants_joint
from .options import JSON, N_JOBS, SCHEDULER, JointOptions, ProblemOptions, with_options


@app.command()
@with_options()
def report(
    *,
    opts: ProblemOptions,
    objectives: str = typer.Option("loss,latency", help="loss,latency[,memory][,energy][,throughput (joint)]."),
    out: Path = typer.Option(..., "--out", help="The HTML page to write (.html)."),
    details: int = typer.Option(
        api.REPORT_DETAILS,
        "--details",
        help="Frontier points (fastest first) given a roofline, breakdown and explanation.",
    ),
    n_jobs: int = N_JOBS,
    backend: str = typer.Option("auto", "--backend", help="auto, numpy or numba (the fast extra; same frontier)."),
    joint_opts: JointOptions,
    scheduler: Optional[str] = SCHEDULER,
    as_json: bool = JSON,
) -> None:
    """Write the exact frontier as an offline HTML page: hover a point for its architecture, click it for its
    roofline, per-operator breakdown, memory and explanation; the problem's settings; a sortable table.
    --json prints the data the page holds."""
    check_output(out, "--out", (".html", ".htm"))
    api.resolve_jobs(n_jobs, "n-jobs")
    api.plotly_js()  # fail before the work when the report extra is missing
    prob = opts.problem()
    joint = joint_opts.space()
    if wants_joint(joint, scheduler, objectives):
        joint = joint or api.JointSpace()
        res = api.joint_frontier(prob, joint, objectives, n_jobs=n_jobs, scheduler=scheduler, backend=backend)
    else:
        joint = None
        res = api.frontier(prob, objectives, n_jobs=n_jobs, cloud=0, backend=backend)
    title = f"{describe_joint(prob, joint) if joint is not None else prob.describe()} — space {prob.space.name}"
    data = api.report_data(prob, res, joint, details, title)
    with atomic_output(out, "--out", (".html", ".htm")) as tmp:
        api.write_report(data, tmp)
    if as_json:
        print_json(data)
        return
    console.print(f"[bold]{esc(data['title'])}[/bold]: {res.frontier_size} frontier points, {data['details_shown']} "
                  f"with detail")  # fmt: skip
    console.print(f"wrote {out}", markup=False)
