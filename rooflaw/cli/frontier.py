"""``rooflaw frontier``: the exact Pareto frontier of a discrete space (every point evaluated)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any, Optional

import typer

from ..units import fmt_bytes, fmt_time
from . import app
from .common import build_problem, console, print_json, table


def plot_frontier(front: Any, cloud: Any, path: Path, title: str, x: str = "latency_s") -> None:
    """Frontier (line + markers) over a faint cloud of feasible points; latency in ms, loss."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    if cloud is not None and len(cloud):
        ax.scatter(cloud[x] * 1e3, cloud["loss"], s=3, c="0.6", alpha=0.15, lw=0, label="feasible (sample)")
    f = front.sort_values(x)
    ax.plot(f[x] * 1e3, f["loss"], "-o", ms=3, lw=1.2, c="C3", label=f"Pareto frontier ({len(f)})")
    ax.set_xscale("log")
    ax.set_xlabel(f"{x.replace('_s', '')} latency (ms)")
    ax.set_ylabel("loss")
    ax.set_title(textwrap.fill(title, 95), fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


@app.command()
def frontier(
    device: str = typer.Option(..., "--device", help="Catalog id (see `rooflaw devices list`) or a device TOML file."),
    law: str = typer.Option("paper-2602.10377", help="Loss law: a built-in name or an expression."),
    space: str = typer.Option("paper", help="Space: paper, wide or a space TOML file."),
    phase: str = typer.Option("decode", help="Latency objective: prefill, decode (all output tokens) or total."),
    precision: str = typer.Option("fp16", help="fp16, bf16, int8, fp8, w4a16, w4a16kv8, ..."),
    objectives: str = typer.Option("loss,latency", help="loss,latency[,memory][,energy]."),
    latency_budget: Optional[str] = typer.Option(None, "--latency-budget", help="e.g. 20ms (feasibility)."),
    memory_budget: Optional[str] = typer.Option(None, "--memory-budget", help="e.g. 8GB (capacity always applies)."),
    energy_budget: Optional[str] = typer.Option(None, "--energy-budget", help="e.g. 2J per request."),
    batch: int = typer.Option(1, help="Sequences per batch."),
    input_tokens: int = typer.Option(1024, help="Prompt tokens per sequence (S_in)."),
    output_tokens: int = typer.Option(16, help="Generated tokens per sequence (S_out)."),
    attention: str = typer.Option("unfused", help="Attention kernel: unfused (scores in memory) or fused."),
    preset: str = typer.Option("full", help="Cost model: full or paper."),
    tokens: Optional[float] = typer.Option(None, help="Training tokens D, for laws that use D."),
    n_jobs: int = typer.Option(-1, "--n-jobs", help="Processes (-1: all cores)."),
    backend: str = typer.Option("auto", "--backend", help="auto, numpy or numba (the fast extra; same frontier)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write the frontier as CSV."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Write a PNG: frontier over the feasible cloud."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object, SI units."),
) -> None:
    """Evaluate every point of a space and print its exact Pareto frontier (feasible points only)."""
    from ..solver import frontier as run

    prob = build_problem(device, law, space, phase, precision, batch, input_tokens, output_tokens, preset, tokens,
                         latency_budget, memory_budget, energy_budget, attention=attention)  # fmt: skip
    res = run(prob, objectives, n_jobs=n_jobs, cloud=20_000 if plot is not None else 0, backend=backend)
    tab = res.table()
    if out is not None:
        tab.to_csv(out, index=False)
    if plot is not None:
        title = f"{prob.describe()} — space {prob.space.name}, {res.evaluated:,} points, {res.feasible:,} feasible"
        plot_frontier(res.frontier, res.cloud, plot, title, prob.latency_column)
    if as_json:
        print_json(res.to_dict())
        return
    console.print(
        f"[bold]{prob.describe()}[/bold] — space {prob.space.name}: {res.evaluated:,} points, {res.feasible:,} "
        f"feasible, frontier {res.frontier_size} ({', '.join(res.objectives)}); evaluated in "
        f"{res.eval_seconds:.2f} s, Pareto in {res.pareto_seconds:.3f} s"
    )
    rows = [
        [int(r.layers), int(r.d_model), int(r.heads), int(r.kv_heads), int(r.ffn), f"{int(r.experts)}/{int(r.top_k)}",
         f"{r.loss:.4f}", fmt_time(r.latency_s), fmt_bytes(r.memory_bytes), f"{r.energy_j:.3g}"]
        for r in tab.head(40).itertuples()
    ]  # fmt: skip
    console.print(
        table(
            f"frontier (first {len(rows)} of {len(tab)}, by {prob.phase} latency)",
            ["layers", "d_model", "heads", "kv", "ffn", "E/K", "loss", "latency", "memory", "energy J"],
            rows,
        )
    )
    if out is not None:
        console.print(f"[dim]wrote {out}[/dim]")
    if plot is not None:
        console.print(f"[dim]wrote {plot}[/dim]")
