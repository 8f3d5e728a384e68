"""``rooflaw compare``: a model against the best architectures of a space at equal latency and at equal loss."""

from __future__ import annotations

from pathlib import Path
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
    print_json,
    table,
)


@app.command()
def compare(
    device: str = typer.Option(..., "--device", help="Catalog id (see `rooflaw devices list`) or a device TOML file."),
    hf_config: Optional[Path] = typer.Option(None, "--hf-config", help="A Hugging Face config.json."),
    arch: Optional[str] = typer.Option(None, "--arch", help="Spec string, e.g. layers=24,d_model=896,heads=14,..."),
    arch_file: Optional[Path] = typer.Option(None, "--arch-file", help="TOML/JSON file of architecture fields."),
    law: str = typer.Option("paper-2602.10377", help="Loss law: a built-in name or an expression."),
    space: str = typer.Option("paper", help="Space: paper, wide or a space TOML file."),
    phase: str = typer.Option("decode", help="Latency compared: prefill, decode (all output tokens) or total."),
    precision: str = typer.Option(DEFAULT_PRECISION, help="fp16, bf16, int8, fp8, w4a16, w4a16kv8, ..."),
    memory_budget: Optional[str] = typer.Option(None, "--memory-budget", help="e.g. 8GB (capacity always applies)."),
    batch: int = typer.Option(1, help="Sequences per batch."),
    input_tokens: int = typer.Option(1024, help="Prompt tokens per sequence (S_in)."),
    output_tokens: int = typer.Option(16, help="Generated tokens per sequence (S_out)."),
    attention: str = typer.Option(DEFAULT_ATTENTION, help="Attention kernel: fused (FlashAttention-style) or unfused."),
    preset: str = typer.Option("full", help="Cost model: full or paper."),
    engine: Optional[str] = typer.Option(None, "--engine", help=ENGINE_HELP),
    tokens: Optional[float] = typer.Option(None, help="Training tokens D, for laws that use D."),
    n_jobs: int = typer.Option(-1, "--n-jobs", help="Processes (-1: all cores)."),
    allow_extrapolation: bool = typer.Option(False, "--allow-extrapolation", help=EXTRAPOLATION_HELP),
    as_json: bool = typer.Option(False, "--json", help="One JSON object, SI units."),
) -> None:
    """Your model against the best of a space: lowest loss at its latency, fastest at its loss (paper Fig. 8a)."""
    from .evaluate import load_arch

    api.resolve_jobs(n_jobs, "n-jobs")
    a = load_arch(hf_config, arch, arch_file)
    prob = build_problem(device, law, space, phase, precision, batch, input_tokens, output_tokens, preset, tokens,
                         None, memory_budget, None, attention=attention,
                         allow_extrapolation=allow_extrapolation, engine=engine)  # fmt: skip
    res = api.compare(a, prob, n_jobs=n_jobs)
    if as_json:
        print_json(res)
        return
    m = res["model"]
    console.print(
        f"{m['name'] or 'model'} against space {res['space']} ({res['feasible']:,} of {res['evaluated']:,} points "
        f"fit) — {prob.describe()}, {phase} latency, engine {res['engine']}",
        markup=False,
    )
    rows = [_row("your model", m)]
    eq_lat, eq_loss = res["equal_latency"], res["equal_loss"]
    rows.append(_row("equal latency", eq_lat) if eq_lat else ["equal latency", *["—"] * 7])
    rows.append(_row("equal loss", eq_loss) if eq_loss else ["equal loss", *["—"] * 7])
    cols = ["", "l × d", "kv", "ffn", "E/K", "active", "loss", "latency"]
    console.print(table("the model and the best of the space", cols, rows))
    if eq_lat:
        console.print(f"at equal latency: loss {eq_lat['loss']:.4f} vs {m['loss']:.4f} ({eq_lat['loss_change']:+.4f})")
    else:
        console.print(
            f"no architecture of the space is as fast as the model (fastest {fmt_time(res['fastest_latency_s'])})"
        )
    if eq_loss:
        console.print(f"at equal loss: {fmt_time(eq_loss['latency_s'])} vs {fmt_time(m['latency_s'])} "
                      f"({eq_loss['speedup']:.2f}x faster)")  # fmt: skip
    else:
        console.print(f"no architecture of the space reaches the model's loss (lowest {res['lowest_loss']:.4f})")
    if m["outside_law_domain"]:
        console.print(f"warning: the model lies outside the domain law {res['law']} was fitted on "
                      f"({'; '.join(m['outside_law_domain'])}): its loss is extrapolated", markup=False)  # fmt: skip
    if not m["fits_in_memory"]:
        console.print(f"note: the model itself needs {fmt_bytes(m['memory_bytes'])}, more than the memory limit")


def _row(label: str, e: dict) -> list[str]:
    return [label, f"{e['layers']} × {e['d_model']}", str(e["kv_heads"]), str(e["ffn"]), f"{e['experts']}/{e['top_k']}",
            fmt_count(e["params_active"]), f"{e['loss']:.4f}", fmt_time(e["latency_s"])]  # fmt: skip
