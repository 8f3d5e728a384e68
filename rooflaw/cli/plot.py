"""``rooflaw plot roofline|breakdown``: figures of one architecture on one device (PNG or SVG by extension)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Optional

import typer

from .. import api
from . import app
from .common import atomic_output, console
from .options import (
    ARCH,
    ARCH_FILE,
    ATTENTION,
    DEVICE,
    ENGINE,
    HF_CONFIG,
    INPUT_TOKENS,
    OUTPUT_TOKENS,
    PRECISION,
    TILES,
    option,
    with_options,
)

plot_app = typer.Typer(
    name="plot",
    help="Figures: the roofline of every operator, the time per operator per phase.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(plot_app, name="plot")


@dataclasses.dataclass(frozen=True)
class ModelOptions:
    """The architecture, device, workload and cost model a figure draws (the options of ``evaluate``)."""

    device: str = option(DEVICE)
    hf_config: Optional[Path] = option(HF_CONFIG)
    arch: Optional[str] = option(ARCH)
    arch_file: Optional[Path] = option(ARCH_FILE)
    precision: str = option(PRECISION)
    batch: int = option(1, help="Sequences per batch.")
    input_tokens: int = option(INPUT_TOKENS)
    output_tokens: int = option(OUTPUT_TOKENS)
    attention: str = option(ATTENTION)
    preset: str = option("full", help="Cost model: full, paper-ops or paper.")
    tiles: bool = option(TILES)
    engine: Optional[str] = option(ENGINE)

    def report(self) -> Any:
        """The :class:`CostReport` the figure draws (``engine`` None: the device's)."""
        from .evaluate import load_arch

        a = load_arch(self.hf_config, self.arch, self.arch_file)
        wl = api.Workload(self.batch, self.input_tokens, self.output_tokens, self.attention)
        return api.evaluate(a, api.get_device(self.device), wl, self.precision, self.preset, self.tiles, self.engine)


_OUT = typer.Option(..., "--out", help="Figure file: .png or .svg.")


@plot_app.command("roofline")
@with_options()
def roofline_cmd(*, model: ModelOptions, out: Path = _OUT) -> None:
    """Log-log FLOP/byte vs FLOP/s: the device's roofs per format with ridge points, every operator as a point."""
    api.check_figure_path(out)
    rep = model.report()
    with atomic_output(out, "--out") as tmp:
        data = api.plot_roofline(rep, tmp)
    ridges = ", ".join(f"{r['dtype']} {r['ridge']:,.0f}" if r["ridge"] >= 1000 else f"{r['dtype']} {r['ridge']:.3g}"
                       for r in data.roofs)  # fmt: skip
    console.print(f"wrote {out}: {len(data.points)} points, ridge points (FLOP/byte) {ridges}", markup=False)


@plot_app.command("breakdown")
@with_options()
def breakdown_cmd(*, model: ModelOptions, out: Path = _OUT) -> None:
    """Stacked time per operator for prefill and for decode (all steps)."""
    api.check_figure_path(out)
    rep = model.report()
    with atomic_output(out, "--out") as tmp:
        res = api.plot_breakdown(rep, tmp)
    t = res["totals"]
    console.print(f"wrote {out}: prefill {t['prefill'] * 1e3:.4g} ms, decode {t['decode'] * 1e3:.4g} ms", markup=False)
