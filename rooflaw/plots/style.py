"""One look for every rooflaw figure: sizes, fonts, colours, and saving to PNG or SVG by file extension."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..errors import bad

if TYPE_CHECKING:  # matplotlib >= 3.10 names the rcParams keys (a Literal); only the annotation uses it
    from matplotlib.typing import RcKeyType

#: File extensions a figure can be written to.
FORMATS = (".png", ".svg")
#: Colours of the two phases, used by every figure.
PHASE_COLOURS = {"prefill": "#1f77b4", "decode": "#d62728"}
PHASE_MARKERS = {"prefill": "o", "decode": "s"}
#: Colours of the compute roofs per format.
ROOF_COLOURS = {
    "fp32": "#7f7f7f", "tf32": "#8c564b", "fp16": "#1f77b4", "fp8": "#2ca02c", "int8": "#ff7f0e",
    "int4": "#9467bd", "fp4": "#e377c2",
}  # fmt: skip
RC: dict[RcKeyType, Any] = {
    "figure.dpi": 110,
    "savefig.dpi": 150,
    "savefig.bbox": "tight",
    "savefig.pad_inches": 0.1,
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "legend.fontsize": 8,
    "legend.frameon": False,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "svg.fonttype": "none",
}


def check_path(path: str | Path, field: str = "out") -> Path:
    """``path`` as a Path if its extension is one of :data:`FORMATS`; a one-line error naming ``field`` otherwise."""
    p = Path(path)
    if p.suffix.lower() not in FORMATS:
        raise bad(field, str(path), f"unknown figure format {p.suffix or '(none)'!r}; use {' or '.join(FORMATS)}")
    return p


@contextmanager
def style() -> Iterator[ModuleType]:
    """Context in which figures get rooflaw's style (the Agg backend: no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with plt.rc_context(RC):
        yield plt


def title(text: str, width_in: float) -> str:
    """``text`` wrapped to fit a figure ``width_in`` inches wide at the title font size."""
    return textwrap.fill(text, max(40, int(width_in * 13)))


def save(fig: Any, path: str | Path) -> Path:
    """Write ``fig`` to ``path`` (PNG or SVG, by extension) and close it."""
    import matplotlib.pyplot as plt

    p = check_path(path)
    fig.savefig(p, format=p.suffix.lower()[1:])
    plt.close(fig)
    return p


def si(value: float, unit: str) -> str:
    """``42.5e12, "FLOP/s"`` -> ``"42.5 TFLOP/s"``."""
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"
