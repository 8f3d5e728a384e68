"""``rooflaw plot roofline|breakdown``: figures of one architecture on one device (PNG or SVG by extension)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .. import api
from . import app
from .common import DEFAULT_PRECISION, console

plot_app = typer.Typer(
    name="plot",
    help="Figures: the roofline of every operator, the time per operator per phase.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(plot_app, name="plot")

_DEVICE = typer.Option(..., "--device", help="Catalog id (see `rooflaw devices list`) or a device TOML file.")
_HF = typer.Option(None, "--hf-config", help="A Hugging Face config.json.")
_ARCH = typer.Option(None, "--arch", help="Spec string, e.g. layers=24,d_model=896,heads=14,...")
_ARCH_FILE = typer.Option(None, "--arch-file", help="TOML/JSON file of architecture fields.")
_OUT = typer.Option(..., "--out", help="Figure file: .png or .svg.")


def report_for(device, hf_config, arch, arch_file, precision, batch, input_tokens, output_tokens, attention, preset,
               tiles):  # fmt: skip
    """The :class:`CostReport` the plot commands draw (same options as ``evaluate``)."""
    from .evaluate import load_arch

    a = load_arch(hf_config, arch, arch_file)
    wl = api.Workload(batch, input_tokens, output_tokens, attention)
    return api.evaluate(a, api.get_device(device), wl, precision, preset, tiles)


@plot_app.command("roofline")
def roofline_cmd(
    device: str = _DEVICE,
    hf_config: Optional[Path] = _HF,
    arch: Optional[str] = _ARCH,
    arch_file: Optional[Path] = _ARCH_FILE,
    out: Path = _OUT,
    precision: str = typer.Option(DEFAULT_PRECISION, help="fp16, bf16, int8, fp8, w4a16, w4a16kv8, nvfp4, ..."),
    batch: int = typer.Option(1, help="Sequences per batch."),
    input_tokens: int = typer.Option(1024, help="Prompt tokens per sequence (S_in)."),
    output_tokens: int = typer.Option(16, help="Generated tokens per sequence (S_out)."),
    attention: str = typer.Option("unfused", help="Attention kernel: unfused or fused."),
    preset: str = typer.Option("full", help="Cost model: full or paper."),
    tiles: bool = typer.Option(False, "--tiles/--no-tiles", help="Apply the GEMM tile/wave quantisation model."),
) -> None:
    """Log-log FLOP/byte vs FLOP/s: the device's roofs per format with ridge points, every operator as a point."""
    api.check_figure_path(out)
    rep = report_for(device, hf_config, arch, arch_file, precision, batch, input_tokens, output_tokens, attention,
                     preset, tiles)  # fmt: skip
    data = api.plot_roofline(rep, out)
    ridges = ", ".join(f"{r['dtype']} {r['ridge']:,.0f}" if r["ridge"] >= 1000 else f"{r['dtype']} {r['ridge']:.3g}"
                       for r in data.roofs)  # fmt: skip
    console.print(f"wrote {out}: {len(data.points)} points, ridge points (FLOP/byte) {ridges}", markup=False)


@plot_app.command("breakdown")
def breakdown_cmd(
    device: str = _DEVICE,
    hf_config: Optional[Path] = _HF,
    arch: Optional[str] = _ARCH,
    arch_file: Optional[Path] = _ARCH_FILE,
    out: Path = _OUT,
    precision: str = typer.Option(DEFAULT_PRECISION, help="fp16, bf16, int8, fp8, w4a16, w4a16kv8, nvfp4, ..."),
    batch: int = typer.Option(1, help="Sequences per batch."),
    input_tokens: int = typer.Option(1024, help="Prompt tokens per sequence (S_in)."),
    output_tokens: int = typer.Option(16, help="Generated tokens per sequence (S_out)."),
    attention: str = typer.Option("unfused", help="Attention kernel: unfused or fused."),
    preset: str = typer.Option("full", help="Cost model: full or paper."),
    tiles: bool = typer.Option(False, "--tiles/--no-tiles", help="Apply the GEMM tile/wave quantisation model."),
) -> None:
    """Stacked time per operator for prefill and for decode (all steps)."""
    api.check_figure_path(out)
    rep = report_for(device, hf_config, arch, arch_file, precision, batch, input_tokens, output_tokens, attention,
                     preset, tiles)  # fmt: skip
    res = api.plot_breakdown(rep, out)
    t = res["totals"]
    console.print(f"wrote {out}: prefill {t['prefill'] * 1e3:.4g} ms, decode {t['decode'] * 1e3:.4g} ms", markup=False)
