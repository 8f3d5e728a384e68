"""``rooflaw plot roofline|breakdown``: figures of one architecture on one device (PNG or SVG by extension)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .. import api
from . import app
from .common import DEFAULT_ATTENTION, DEFAULT_PRECISION, ENGINE_HELP, atomic_output, console

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
_PRECISION = typer.Option(DEFAULT_PRECISION, help="fp16, bf16, int8, fp8, w4a16, w4a16kv8, nvfp4, ...")
_BATCH = typer.Option(1, help="Sequences per batch.")
_S_IN = typer.Option(1024, help="Prompt tokens per sequence (S_in).")
_S_OUT = typer.Option(16, help="Generated tokens per sequence (S_out).")
_ATTENTION = typer.Option(DEFAULT_ATTENTION, help="Attention kernel: fused (FlashAttention-style) or unfused.")
_PRESET = typer.Option("full", help="Cost model: full, paper-ops or paper.")
_TILES = typer.Option(False, "--tiles/--no-tiles", help="Apply the GEMM tile/wave quantisation model.")
_ENGINE = typer.Option(None, "--engine", help=ENGINE_HELP)


def report_for(device, hf_config, arch, arch_file, precision, batch, input_tokens, output_tokens, attention, preset,
               tiles, engine=None):  # fmt: skip
    """The :class:`CostReport` the plot commands draw (same options as ``evaluate``; ``engine`` None: the device's)."""
    from .evaluate import load_arch

    a = load_arch(hf_config, arch, arch_file)
    wl = api.Workload(batch, input_tokens, output_tokens, attention)
    return api.evaluate(a, api.get_device(device), wl, precision, preset, tiles, engine)


@plot_app.command("roofline")
def roofline_cmd(
    device: str = _DEVICE,
    hf_config: Optional[Path] = _HF,
    arch: Optional[str] = _ARCH,
    arch_file: Optional[Path] = _ARCH_FILE,
    out: Path = _OUT,
    precision: str = _PRECISION,
    batch: int = _BATCH,
    input_tokens: int = _S_IN,
    output_tokens: int = _S_OUT,
    attention: str = _ATTENTION,
    preset: str = _PRESET,
    tiles: bool = _TILES,
    engine: Optional[str] = _ENGINE,
) -> None:
    """Log-log FLOP/byte vs FLOP/s: the device's roofs per format with ridge points, every operator as a point."""
    api.check_figure_path(out)
    rep = report_for(device, hf_config, arch, arch_file, precision, batch, input_tokens, output_tokens, attention,
                     preset, tiles, engine)  # fmt: skip
    with atomic_output(out, "--out") as tmp:
        data = api.plot_roofline(rep, tmp)
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
    precision: str = _PRECISION,
    batch: int = _BATCH,
    input_tokens: int = _S_IN,
    output_tokens: int = _S_OUT,
    attention: str = _ATTENTION,
    preset: str = _PRESET,
    tiles: bool = _TILES,
    engine: Optional[str] = _ENGINE,
) -> None:
    """Stacked time per operator for prefill and for decode (all steps)."""
    api.check_figure_path(out)
    rep = report_for(device, hf_config, arch, arch_file, precision, batch, input_tokens, output_tokens, attention,
                     preset, tiles, engine)  # fmt: skip
    with atomic_output(out, "--out") as tmp:
        res = api.plot_breakdown(rep, tmp)
    t = res["totals"]
    console.print(f"wrote {out}: prefill {t['prefill'] * 1e3:.4g} ms, decode {t['decode'] * 1e3:.4g} ms", markup=False)
