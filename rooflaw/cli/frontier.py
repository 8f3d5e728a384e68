"""``rooflaw frontier``: the exact Pareto frontier of a discrete space (every point evaluated)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .. import api
from ..units import fmt_bytes, fmt_time
from . import app
from .common import (
    DEFAULT_ATTENTION,
    DEFAULT_PRECISION,
    ENGINE_HELP,
    EXTRAPOLATION_HELP,
    arch_table,
    atomic_output,
    build_problem,
    check_output,
    console,
    esc,
    print_json,
)
from .joint_options import (
    BATCHES_HELP,
    LAYOUTS_HELP,
    MIN_TPS_HELP,
    PRECISIONS_HELP,
    SCHEDULER_HELP,
    SYSTEM_HELP,
    TPOT_HELP,
    describe_joint,
    joint_space,
    wants_joint,
)


@app.command()
def frontier(
    device: str = typer.Option(..., "--device", help="Catalog id (see `rooflaw devices list`) or a device TOML file."),
    law: str = typer.Option("paper-2602.10377", help="Loss law: a built-in name or an expression."),
    space: str = typer.Option("paper", help="Space: paper, wide or a space TOML file."),
    phase: str = typer.Option("decode", help="Latency objective: prefill, decode (all output tokens) or total."),
    precision: str = typer.Option(DEFAULT_PRECISION, help="fp16, bf16, int8, fp8, w4a16, w4a16kv8, ..."),
    objectives: str = typer.Option("loss,latency", help="loss,latency[,memory][,energy][,throughput (joint)]."),
    latency_budget: Optional[str] = typer.Option(None, "--latency-budget", help="e.g. 20ms (feasibility)."),
    memory_budget: Optional[str] = typer.Option(None, "--memory-budget", help="e.g. 8GB (capacity always applies)."),
    energy_budget: Optional[str] = typer.Option(None, "--energy-budget", help="e.g. 2J per request."),
    batch: int = typer.Option(1, help="Sequences per batch."),
    input_tokens: int = typer.Option(1024, help="Prompt tokens per sequence (S_in)."),
    output_tokens: int = typer.Option(16, help="Generated tokens per sequence (S_out)."),
    attention: str = typer.Option(DEFAULT_ATTENTION, help="Attention kernel: fused (FlashAttention-style) or unfused."),
    preset: str = typer.Option("full", help="Cost model: full or paper."),
    engine: Optional[str] = typer.Option(None, "--engine", help=ENGINE_HELP),
    tokens: Optional[float] = typer.Option(None, help="Training tokens D, for laws that use D."),
    n_jobs: int = typer.Option(-1, "--n-jobs", help="Processes (-1: all cores)."),
    backend: str = typer.Option("auto", "--backend", help="auto, numpy or numba (the fast extra; same frontier)."),
    precisions: Optional[str] = typer.Option(None, "--precisions", help=PRECISIONS_HELP),
    batches: Optional[str] = typer.Option(None, "--batches", help=BATCHES_HELP),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help=SCHEDULER_HELP),
    system: Optional[str] = typer.Option(None, "--system", help=SYSTEM_HELP),
    layouts: Optional[str] = typer.Option(None, "--layouts", help=LAYOUTS_HELP),
    min_tokens_per_gpu: Optional[float] = typer.Option(None, "--min-tokens-per-gpu", help=MIN_TPS_HELP),
    tpot_budget: Optional[str] = typer.Option(None, "--tpot-budget", help=TPOT_HELP),
    out: Optional[Path] = typer.Option(None, "--out", help="Write the frontier as CSV."),
    plot: Optional[Path] = typer.Option(
        None, "--plot", help="Figure (.png/.svg): frontier over the feasible cloud (joint: coloured by combination)."
    ),
    allow_extrapolation: bool = typer.Option(False, "--allow-extrapolation", help=EXTRAPOLATION_HELP),
    as_json: bool = typer.Option(False, "--json", help="One JSON object, SI units."),
) -> None:
    """Evaluate every point of a space and print its exact Pareto frontier (feasible points only)."""
    from ..api import frontier as run

    if plot is not None:
        api.check_figure_path(plot, "plot")

    api.resolve_jobs(n_jobs, "n-jobs")

    if out is not None:
        check_output(out, "--out")
    prob = build_problem(device, law, space, phase, precision, batch, input_tokens, output_tokens, preset, tokens,
                         latency_budget, memory_budget, energy_budget, attention=attention,
                         allow_extrapolation=allow_extrapolation, engine=engine)  # fmt: skip
    joint = joint_space(precisions, batches, system, layouts, min_tokens_per_gpu, tpot_budget)
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
        print_json(res.to_dict())
        return
    desc = prob.describe()
    if "precision" in res.frontier:  # the joint space: name what was crossed, not the base problem's precision
        desc = describe_joint(prob, joint)
    console.print(
        f"[bold]{esc(desc)}[/bold] — space {esc(prob.space.name)}: {res.evaluated:,} points, "
        f"{res.feasible:,} feasible, frontier {res.frontier_size} ({', '.join(res.objectives)}); evaluated in "
        f"{res.eval_seconds:.2f} s, Pareto in {res.pareto_seconds:.3f} s"
    )
    values = [("loss", lambda r: f"{r['loss']:.4f}"), ("latency", lambda r: fmt_time(r["latency_s"])),
              ("memory", lambda r: fmt_bytes(r["memory_bytes"]))]  # fmt: skip
    if "precision" in res.frontier:
        values = [("prec", lambda r: r["precision"]), ("B", lambda r: str(r["batch"]))] + values[:2]
        if len(set(res.frontier["option"])) > 1:
            values.insert(2, ("option", lambda r: r["option"]))
    if "throughput" in res.objectives:
        values.append(("tok/s", lambda r: f"{r['tokens_per_s']:,.0f}"))
    if "energy" in res.objectives:
        values.append(("energy", lambda r: f"{r['energy_j']:.3g} J"))
    t, same = arch_table(f"frontier by {prob.phase} latency", res.frontier, values, 40)
    console.print(t)
    if same:
        console.print(same, markup=False)
    if out is not None:
        console.print(f"[dim]wrote {esc(str(out))}[/dim]")
    if plot is not None:
        console.print(f"[dim]wrote {esc(str(plot))}[/dim]")
