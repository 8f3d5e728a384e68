"""``rooflaw solve``: the lowest-loss architecture that meets a latency / memory / energy budget on a device."""

from __future__ import annotations

from typing import Optional

import typer

from .. import api
from ..units import fmt_bytes, fmt_count, fmt_time
from . import app
from .common import (
    DEFAULT_ATTENTION,
    DEFAULT_PRECISION,
    ENGINE_HELP,
    EXTRAPOLATION_HELP,
    build_problem,
    console,
    esc,
    print_json,
    table,
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

METHODS = ("closed-form", "gp", "exhaustive", "optuna")


@app.command()
def solve(
    device: str = typer.Option(..., "--device", help="Catalog id (see `rooflaw devices list`) or a device TOML file."),
    law: str = typer.Option("paper-2602.10377", help="Loss law: a built-in name or an expression."),
    latency_budget: Optional[str] = typer.Option(None, "--latency-budget", help="e.g. 20ms."),
    phase: str = typer.Option("decode", help="Latency of: prefill, decode (all output tokens) or total."),
    memory_budget: Optional[str] = typer.Option(
        None, "--memory-budget", help="e.g. 8GB (the device capacity always applies)."
    ),
    energy_budget: Optional[str] = typer.Option(None, "--energy-budget", help="e.g. 2J per request."),
    space: str = typer.Option("paper", help="Search space: a built-in name (paper, wide) or a TOML file."),
    precision: str = typer.Option(DEFAULT_PRECISION, help="fp16, bf16, int8, fp8, w4a16, w4a16kv8, ..."),
    batch: int = typer.Option(1, help="Sequences per batch."),
    input_tokens: int = typer.Option(1024, help="Prompt tokens per sequence (S_in)."),
    output_tokens: int = typer.Option(16, help="Generated tokens per sequence (S_out)."),
    attention: str = typer.Option(DEFAULT_ATTENTION, help="Attention kernel: fused (FlashAttention-style) or unfused."),
    method: str = typer.Option("closed-form", help="closed-form, gp, exhaustive or optuna."),
    align: int = typer.Option(128, help="d_model (and FFN) multiple: 128 default; 256/512 per NVIDIA's tile guidance."),
    preset: str = typer.Option("full", help="Cost model that judges the architecture: full or paper."),
    engine: Optional[str] = typer.Option(None, "--engine", help=ENGINE_HELP),
    tokens: Optional[float] = typer.Option(None, help="Training tokens D, for laws that use D."),
    trials: int = typer.Option(500, help="Trials for --method optuna."),
    seed: int = typer.Option(0, help="Seed for --method optuna."),
    backend: str = typer.Option("auto", "--backend", help="--method exhaustive: auto, numpy or numba (fast extra)."),
    precisions: Optional[str] = typer.Option(
        None, "--precisions", help=PRECISIONS_HELP + " --method exhaustive or optuna."
    ),
    batches: Optional[str] = typer.Option(None, "--batches", help=BATCHES_HELP + " --method exhaustive or optuna."),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help=SCHEDULER_HELP),
    system: Optional[str] = typer.Option(None, "--system", help=SYSTEM_HELP),
    layouts: Optional[str] = typer.Option(None, "--layouts", help=LAYOUTS_HELP),
    min_tokens_per_gpu: Optional[float] = typer.Option(None, "--min-tokens-per-gpu", help=MIN_TPS_HELP),
    tpot_budget: Optional[str] = typer.Option(None, "--tpot-budget", help=TPOT_HELP),
    explain: bool = typer.Option(False, "--explain", help="Derivation, slacks, rounding, runner-ups."),
    allow_extrapolation: bool = typer.Option(False, "--allow-extrapolation", help=EXTRAPOLATION_HELP),
    as_json: bool = typer.Option(False, "--json", help="One JSON object, SI units."),
) -> None:
    """Choose the architecture with the lowest loss that meets the budgets (closed form, GP, exhaustive, Optuna)."""
    if method not in METHODS:
        raise api.RooflawError(f"method={method!r}: must be one of {', '.join(METHODS)}")
    from ..api import solve as run

    prob = build_problem(device, law, space, phase, precision, batch, input_tokens, output_tokens, preset, tokens,
                         latency_budget, memory_budget, energy_budget, align, attention=attention,
                         allow_extrapolation=allow_extrapolation, engine=engine)  # fmt: skip
    kw = {"n_trials": trials, "seed": seed} if method == "optuna" else {}
    if method == "exhaustive":
        kw = {"backend": backend}
    joint = joint_space(precisions, batches, system, layouts, min_tokens_per_gpu, tpot_budget)
    joint_explain = None
    if wants_joint(joint, scheduler):
        if method not in ("exhaustive", "optuna") or (method == "optuna" and scheduler is not None):
            raise api.RooflawError(f"method={method!r}: the joint space (--precisions/--batches/--layouts) needs "
                                   "--method exhaustive or optuna (--scheduler: exhaustive)")  # fmt: skip
        if method == "optuna":
            res = api.solve_optuna(prob, n_trials=trials, seed=seed, joint=joint or api.JointSpace())
        else:
            res = api.solve_joint(prob, joint, scheduler=scheduler, backend=backend)
        if explain:
            joint_explain = api.explain_joint(prob.on_aligned_space(), joint or api.JointSpace(), res)
    else:
        res = (
            run(prob, method, explain_result=explain, **kw)
            if method in ("closed-form", "gp")
            else run(prob, method, **kw)
        )
    out = res.to_dict()
    joint_pick = {k: res.extra[k] for k in ("precision", "batch", "option") if k in (res.extra or {})}
    cont = out.get("continuous")
    if as_json:
        keys = ("method", "regime", "binding", "continuous", "continuous_loss", "architecture", "loss", "perplexity",
                "latency_s", "memory_bytes", "energy_j", "slack", "seconds", "timings", "notes")  # fmt: skip
        obj = {k: out.get(k) for k in keys}
        obj.update(preset=prob.preset, engine=prob.engine)
        obj |= joint_pick
        if explain and res.explain:
            obj["explain"] = res.explain
        if joint_explain is not None:
            obj["explain_joint"] = joint_explain
        elif explain:
            obj["explain_discrete"] = api.explain_discrete(prob, res)
        print_json(obj)
        return
    a = res.architecture
    desc = describe_joint(prob, joint) if joint_pick else prob.describe()
    console.print(f"[bold]{esc(desc)}[/bold] — space {esc(prob.space.name)}, method {res.method}")
    if res.regime:
        console.print(f"regime: [bold]{res.regime}[/bold]; binding: {res.binding}")
    if cont:
        console.print(
            "continuous optimum: " + ", ".join(f"{k} = {v:.4g}" for k, v in cont.items())
            + (f" (loss {res.continuous_loss:.4f})" if res.continuous_loss is not None else "")
        )  # fmt: skip
    if joint_pick:
        console.print("joint choice: " + ", ".join(f"{k} {v}" for k, v in joint_pick.items()))
    if a is not None:
        rows = [
            ["layers", a.layers], ["d_model", a.d_model], ["heads", a.heads], ["kv_heads", a.kv_heads],
            ["head_dim", a.head_dim], ["ffn", a.ffn], ["experts", a.experts], ["top_k", a.top_k],
            ["params (total / active)", f"{fmt_count(a.params_total)} / {fmt_count(a.params_active)}"],
        ]  # fmt: skip
        if not a.uniform:
            rows.insert(1, ["layer pattern", a.pattern])
        console.print(table("architecture", ["field", "value"], rows))
    lat = res.latency_s
    summary = [
        ["loss", f"{res.loss:.4f}"], ["perplexity", f"{res.perplexity:.2f}"],
        ["prefill", fmt_time(lat["prefill"])], ["decode", fmt_time(lat["decode"])], ["total", fmt_time(lat["total"])],
        ["memory", fmt_bytes(res.memory_bytes)], ["energy", f"{res.energy_j:.3g} J"],
        ["time", f"{res.seconds * 1e3:.1f} ms"],
    ]  # fmt: skip
    title = f"judged by the '{prob.preset}' cost model, engine {prob.engine}"
    console.print(table(title, ["quantity", "value"], summary))
    for n in res.notes:
        console.print(f"[dim]note: {esc(n)}[/dim]")
    if explain:
        if res.explain:
            console.print("the continuous relaxation:", style="bold")
            console.print(res.explain, markup=False, highlight=False)
        if joint_explain is not None:
            console.print(api.explain_joint_text(joint_explain), markup=False, highlight=False)
        else:
            console.print(api.explain_text(api.explain_discrete(prob, res), prob.phase), markup=False, highlight=False)
