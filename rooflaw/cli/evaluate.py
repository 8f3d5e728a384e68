"""``rooflaw evaluate`` and ``rooflaw gemm``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .. import api
from ..errors import bad
from ..units import fmt_bytes, fmt_count, fmt_time
from . import app
from .common import console, print_json, table


def load_arch(hf_config: Optional[Path], arch: Optional[str], arch_file: Optional[Path]) -> api.Architecture:
    given = [x for x in (hf_config, arch, arch_file) if x is not None]
    if len(given) != 1:
        raise bad("arch", len(given), "give exactly one of --hf-config, --arch, --arch-file")
    if hf_config is not None:
        return api.from_hf_config(hf_config)
    if arch_file is not None:
        return api.from_file(arch_file)
    return api.from_spec(arch)  # type: ignore[arg-type]


@app.command()
def evaluate(
    device: str = typer.Option(..., "--device", help="Catalog id (see `rooflaw devices list`) or a device TOML file."),
    hf_config: Optional[Path] = typer.Option(None, "--hf-config", help="A Hugging Face config.json."),
    arch: Optional[str] = typer.Option(None, "--arch", help="Spec string, e.g. layers=24,d_model=896,heads=14,..."),
    arch_file: Optional[Path] = typer.Option(None, "--arch-file", help="TOML/JSON file of architecture fields."),
    precision: str = typer.Option("bf16", help="fp16, bf16, int8, fp8, w4a16, w4a16kv8, nvfp4, ..."),
    batch: int = typer.Option(1, help="Sequences per batch."),
    input_tokens: int = typer.Option(1024, help="Prompt tokens per sequence (S_in)."),
    output_tokens: int = typer.Option(16, help="Generated tokens per sequence (S_out)."),
    attention: str = typer.Option("fused", help="Attention kernel: fused (FlashAttention-style) or unfused."),
    engine: Optional[str] = typer.Option(
        None, "--engine", help="tensorrt-llm, vllm, llama.cpp, gpt-fast, torch-eager or ideal."
    ),
    preset: str = typer.Option("full", help="Cost model: full (per-operator roofline) or paper (App. E)."),
    tiles: bool = typer.Option(False, "--tiles/--no-tiles", help="Apply the GEMM tile/wave quantisation model."),
    steps: bool = typer.Option(False, "--steps", help="Also list every decode step (context, time, FLOPs, bytes)."),
    law: Optional[str] = typer.Option(None, help="Add the predicted loss of this law (name or expression)."),
    tokens: Optional[float] = typer.Option(None, help="Training tokens D, for laws that use D."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object, SI units."),
) -> None:
    """Latency (prefill, every decode step, TTFT, TPOT), memory and energy of one architecture on one device."""
    a = load_arch(hf_config, arch, arch_file)
    dev = api.get_device(device)
    wl = api.Workload(batch, input_tokens, output_tokens, attention)
    rep = api.evaluate(a, dev, wl, precision, preset, tiles, engine)
    out = rep.to_dict()
    if law is not None:
        lw = api.get_law(law)
        loss = lw.loss(a, tokens=tokens)
        out.update(loss=loss, perplexity=float(__import__("math").exp(loss)), law=lw.name)
    if steps:
        out["steps"] = api.decode_steps(a, dev, wl, precision, preset, tiles, engine)
    if as_json:
        print_json(out)
        return
    name = a.name or "architecture"
    console.print(
        f"[bold]{name}[/bold] on [bold]{dev.name}[/bold] ({dev.id}) — {rep.precision.name}, "
        f"B={batch}, S_in={input_tokens}, S_out={output_tokens}, preset={preset}"
    )
    console.print(
        f"params {fmt_count(out['params_total'])} total, {fmt_count(out['params_active'])} active; "
        f"weights {fmt_bytes(out['weight_bytes'])}, KV cache {fmt_bytes(out['kv_cache_bytes'])}, "
        f"memory {fmt_bytes(out['memory_bytes'])} of {fmt_bytes(dev.memory_capacity)} "
        f"({'fits' if out['fits_in_memory'] else 'DOES NOT FIT'})"
    )
    rows = [
        [o.phase, o.name, fmt_count(o.flops), fmt_bytes(o.bytes), fmt_time(o.seconds), o.bound, o.roof] for o in rep.ops
    ]
    console.print(
        table(
            "per operator (summed over layers; decode over all steps)",
            ["phase", "op", "FLOPs", "bytes", "time", "bound", "roof"],
            rows,
        )
    )
    summary = [
        ["prefill / TTFT", fmt_time(out["prefill_s"])],
        [f"decode ({output_tokens} steps)", fmt_time(out["decode_s"])],
        ["TPOT (mean)", fmt_time(out["tpot_s"])],
        ["total", fmt_time(out["total_s"])],
        [
            "energy",
            f"{out['energy_j']:.3g} J" if out["energy_j"] == out["energy_j"] else "n/a (device has no power figures)",
        ],
    ]
    if law is not None:
        summary += [["loss (" + out["law"] + ")", f"{out['loss']:.4f}"], ["perplexity", f"{out['perplexity']:.2f}"]]
    if steps:
        rows = [[st["step"], st["context"], fmt_time(st["seconds"]), fmt_count(st["flops"]), fmt_bytes(st["bytes"])]
                for st in out["steps"]]  # fmt: skip
        console.print(table("decode steps", ["step", "context", "time", "FLOPs", "bytes"], rows))
    console.print(table("summary", ["quantity", "value"], summary))
    console.print(f"[dim]{rep.provenance}[/dim]")


@app.command("gemm")
def gemm_cmd(
    m: int = typer.Option(..., "--m", help="Rows of A and C (tokens)."),
    n: int = typer.Option(..., "--n", help="Columns of B and C."),
    k: int = typer.Option(..., "--k", help="Reduction dimension."),
    dtype: str = typer.Option("fp32", help="Element format of A, B and C."),
    device: str = typer.Option("h100-sxm", help="Catalog id or device TOML file."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Arithmetic intensity, bound and time of one GEMM (bytes count A, B and the C write)."""
    g = api.gemm(m, n, k, api.get_device(device), dtype)
    if as_json:
        print_json(g.to_dict())
        return
    rows = [[k_, v] for k_, v in g.to_dict().items()]
    console.print(table(f"GEMM {m}×{n}×{k} ({g.dtype}) on {g.device}", ["field", "value"], rows))
