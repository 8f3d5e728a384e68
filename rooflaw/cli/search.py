"""``rooflaw search``: Optuna search of a space (multi-objective or constrained), on one machine or many."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..errors import bad
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
    SYSTEM_HELP,
    TPOT_HELP,
    describe_joint,
    joint_space,
)
from .progress import ProgressBar


@app.command()
def search(
    device: str = typer.Option(..., "--device", help="Catalog id (see `rooflaw devices list`) or a device TOML file."),
    law: str = typer.Option("paper-2602.10377", help="Loss law: a built-in name or an expression."),
    space: str = typer.Option("paper", help="Space: paper, wide or a space TOML file."),
    phase: str = typer.Option("decode", help="Latency objective: prefill, decode (all output tokens) or total."),
    precision: str = typer.Option(DEFAULT_PRECISION, help="fp16, bf16, int8, fp8, w4a16, w4a16kv8, ..."),
    objectives: str = typer.Option(
        "loss,latency",
        help="loss,latency[,memory][,energy][,throughput (joint)]; 'loss' alone = min loss s.t. the budgets.",
    ),
    latency_budget: Optional[str] = typer.Option(None, "--latency-budget", help="e.g. 20ms."),
    memory_budget: Optional[str] = typer.Option(None, "--memory-budget", help="e.g. 8GB (capacity always applies)."),
    energy_budget: Optional[str] = typer.Option(None, "--energy-budget", help="e.g. 2J per request."),
    batch: int = typer.Option(1, help="Sequences per batch."),
    input_tokens: int = typer.Option(1024, help="Prompt tokens per sequence (S_in)."),
    output_tokens: int = typer.Option(16, help="Generated tokens per sequence (S_out)."),
    attention: str = typer.Option(DEFAULT_ATTENTION, help="Attention kernel: fused (FlashAttention-style) or unfused."),
    preset: str = typer.Option("full", help="Cost model: full or paper."),
    engine: Optional[str] = typer.Option(None, "--engine", help=ENGINE_HELP),
    tokens: Optional[float] = typer.Option(None, help="Training tokens D, for laws that use D."),
    sampler: str = typer.Option("tpe", help="nsga2, tpe, gp or random."),
    n_trials: int = typer.Option(200, "--n-trials", help="Completed trials the study should reach."),
    seed: int = typer.Option(0, help="Sampler seed."),
    storage: Optional[str] = typer.Option(
        None, help="sqlite:///f.db, journal:///f.log (resumable) or postgresql://… (many machines)."
    ),
    study_name: Optional[str] = typer.Option(None, "--study-name", help="Study to create or resume."),
    workers: int = typer.Option(1, help="Worker processes on this machine."),
    measure: Optional[str] = typer.Option(
        None, help="module:function (or rooflaw.measure entry point) measuring latency of a candidate."
    ),
    reference: Optional[str] = typer.Option(None, help="Hypervolume reference point, comma-separated (SI units)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write all completed trials as CSV."),
    allow_extrapolation: bool = typer.Option(False, "--allow-extrapolation", help=EXTRAPOLATION_HELP),
    as_json: bool = typer.Option(False, "--json", help="One JSON object, SI units."),
    backend: str = typer.Option("auto", "--backend", help="Cost model: auto, numpy or numba (the fast extra)."),
    precisions: Optional[str] = typer.Option(None, "--precisions", help=PRECISIONS_HELP),
    batches: Optional[str] = typer.Option(None, "--batches", help=BATCHES_HELP),
    system: Optional[str] = typer.Option(None, "--system", help=SYSTEM_HELP),
    layouts: Optional[str] = typer.Option(None, "--layouts", help=LAYOUTS_HELP),
    min_tokens_per_gpu: Optional[float] = typer.Option(None, "--min-tokens-per-gpu", help=MIN_TPS_HELP),
    tpot_budget: Optional[str] = typer.Option(None, "--tpot-budget", help=TPOT_HELP),
) -> None:
    """Search a space with Optuna; report the feasible frontier of the trials and its hypervolume."""
    from ..api import search as run
    from ..solver.search.safety import check_out_not_storage
    from ..solver.search.study import infeasible_from_trials

    if out is not None:
        check_output(out, "--out")
        check_out_not_storage(out, storage)
    prob = build_problem(device, law, space, phase, precision, batch, input_tokens, output_tokens, preset, tokens,
                         latency_budget, memory_budget, energy_budget, attention=attention,
                         allow_extrapolation=allow_extrapolation, engine=engine)  # fmt: skip
    joint = joint_space(precisions, batches, system, layouts, min_tokens_per_gpu, tpot_budget)
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
            from ..solver.search.joint_trials import joint_result

            joint_result(prob, joint, res)  # raises Infeasible naming what no trial met (exit 3)
        raise infeasible_from_trials(prob, res.trials)  # exit 3, like solve
    if as_json:
        print_json(res.to_dict())
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
    values = [("loss", lambda r: f"{r['loss']:.4f}"), ("latency", lambda r: fmt_time(r["latency_s"])),
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
