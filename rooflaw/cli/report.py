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
    method: str = typer.Option("exhaustive", help="exhaustive (the exact frontier) or optuna (a search's)."),
    n_trials: int = typer.Option(200, "--n-trials", help="--method optuna: completed trials the study should reach."),
    sampler: str = typer.Option("tpe", help="--method optuna: nsga2, tpe, gp or random."),
    seed: int = typer.Option(0, help="--method optuna: sampler seed."),
    storage: Optional[str] = typer.Option(None, help="--method optuna: study.log (journal file), sqlite:///f.db, …"),
    study_name: Optional[str] = typer.Option(None, "--study-name", help="--method optuna: study to create or resume."),
    as_json: bool = JSON,
) -> None:
    """Write the exact frontier (or an Optuna search's) as an offline HTML page: hover a point for its architecture,
    click it for its roofline, per-operator breakdown, memory and explanation; the problem's settings; a sortable
    table. --json prints the data the page holds."""
    if method not in ("exhaustive", "optuna"):
        raise api.bad("method", method, "must be exhaustive or optuna")
    check_output(out, "--out", (".html", ".htm"))
    api.resolve_jobs(n_jobs, "n-jobs")
    api.plotly_js()  # fail before the work when the report extra is missing
    prob = opts.problem()
    joint = joint_opts.space()
    if method == "optuna":
        if scheduler is not None:
            raise api.bad("scheduler", scheduler, "is for --method exhaustive")
        if joint is None and "throughput" in objectives:
            joint = api.JointSpace()
        res = api.search(prob, sampler=sampler, n_trials=n_trials, seed=seed, storage=storage, study_name=study_name,
                         objectives=objectives, backend=backend, joint=joint)  # fmt: skip
        if not len(res.frontier):
            raise api.Infeasible(f"no feasible trial among {len(res.trials)}: nothing to report (more --n-trials, "
                                 "or --method exhaustive)")  # fmt: skip
    elif wants_joint(joint, scheduler, objectives):
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
