"""``rooflaw search``: Optuna search of a space (multi-objective or constrained), on one machine or many."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..errors import bad
from ..units import fmt_bytes
from . import app
from .bands import fmt_banded, intervals, problem_band
from .common import arch_table, atomic_output, check_output, console, esc, print_json
from .joint_options import describe_joint
from .options import JSON, JointOptions, ProblemOptions, with_options
from .progress import ProgressBar
from .speculative import SpeculativeOptions


@app.command()
@with_options()
def search(
    *,
    opts: ProblemOptions,
    objectives: str = typer.Option(
        "loss,latency",
        help="loss,latency[,memory][,energy][,throughput (joint)]; 'loss' alone = min loss s.t. the budgets.",
    ),
    sampler: str = typer.Option("tpe", help="nsga2, tpe, gp or random."),
    n_trials: int = typer.Option(200, "--n-trials", help="Completed trials the study should reach."),
    seed: int = typer.Option(0, help="Sampler seed."),
    storage: Optional[str] = typer.Option(
        None, help="study.log (a journal file, resumable; fastest), sqlite:///f.db or postgresql://… (many machines)."
    ),
    study_name: Optional[str] = typer.Option(None, "--study-name", help="Study to create or resume."),
    workers: int = typer.Option(1, help="Worker processes on this machine."),
    measure: Optional[str] = typer.Option(
        None, help="module:function (or rooflaw.measure entry point) measuring latency of a candidate."
    ),
    reference: Optional[str] = typer.Option(None, help="Hypervolume reference point, comma-separated (SI units)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write all completed trials as CSV."),
    as_json: bool = JSON,
    backend: str = typer.Option("auto", "--backend", help="Cost model: auto, numpy or numba (the fast extra)."),
    joint_opts: JointOptions,
    spec_opts: SpeculativeOptions,
) -> None:
    """Search a space with Optuna; report the feasible frontier of the trials and its hypervolume."""
    from ..api import check_out_not_storage, infeasible_from_trials
    from ..api import search as run

    if out is not None:
        check_output(out, "--out")
        check_out_not_storage(out, storage)
    prob = opts.problem()
    joint = spec_opts.merge(joint_opts.space(), prob)
    if joint is None and "throughput" in objectives:
        from .. import api

        joint = api.JointSpace()  # throughput is a joint-space objective; the joint search of one combination
    if joint is not None and backend == "numba":
        raise bad("backend", backend, "the joint space (--precisions/--batches/--layouts) runs on numpy")
    ref = None
    if reference is not None:
        try:
            ref = [float(x) for x in reference.split(",")]
        except ValueError:
            raise bad("reference", reference, "must be comma-separated numbers") from None
    with ProgressBar("search") as bar:
        res = run(
            prob, sampler=sampler, n_trials=n_trials, seed=seed, storage=storage, study_name=study_name,
            workers=workers, objectives=objectives, measure=measure, reference=ref,
            progress=None if as_json else bar, backend=backend, joint=joint,
        )  # fmt: skip
    if out is not None:
        with atomic_output(out, "--out") as tmp:
            res.trials.to_csv(tmp, index=False)
    if (prob.latency_budget or prob.memory_budget or prob.energy_budget or joint is not None) and not len(res.frontier):
        if joint is not None:
            from ..api import joint_result

            joint_result(prob, joint, res)  # raises Infeasible naming what no trial met (exit 3)
        raise infeasible_from_trials(prob, res.trials)  # exit 3, like solve
    if as_json:
        band = problem_band(prob)
        print_json({**res.to_dict(), "bands": {**band, "latency_s": intervals(res.frontier["latency_s"], band)}
                    if band and "latency_s" in res.frontier else {}})  # fmt: skip
        return
    d = res.to_dict()
    desc = prob.describe() if joint is None else describe_joint(prob, joint)
    console.print(
        f"[bold]{esc(desc)}[/bold] — space {esc(prob.space.name)}, sampler {esc(sampler)}: "
        f"{d['trials']} trials "
        f"({d['unique']} distinct, {d['ran']} run now), frontier {d['frontier_size']}, hypervolume "
        f"{d['hypervolume']:.4g} (reference {', '.join(f'{x:.4g}' for x in d['reference_point'])}), "
        f"{d['seconds']:.1f} s"
    )
    band = problem_band(prob)
    values = [("loss", lambda r: f"{r['loss']:.4f}"), ("latency", lambda r: fmt_banded(r["latency_s"], band)),
              ("memory", lambda r: fmt_bytes(r["memory_bytes"]))]  # fmt: skip
    if joint is not None:
        values = [("prec", lambda r: r["precision"]), ("B", lambda r: str(r["batch"]))] + values[:2]
        if len(joint.options) > 1:
            values.insert(2, ("option", lambda r: r["option"]))
        if "throughput" in res.objectives:
            values.append(("tok/s", lambda r: f"{r['tokens_per_s']:,.0f}"))
    values.append(("trial", lambda r: str(int(r["trial"]))))
    t, same = arch_table("feasible frontier of the trials", res.frontier, values, 30)
    console.print(t)
    if same:
        console.print(same, markup=False)
    if out is not None:
        console.print(f"[dim]wrote {esc(str(out))}[/dim]")
