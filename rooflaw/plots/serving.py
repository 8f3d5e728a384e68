"""The throughput–interactivity trade-off: tokens/s per device against tokens/s per user, one curve per layout."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .style import check_path, save, style, title

_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


def plot_serving(curves: Mapping[str, Sequence[Mapping[str, Any]]], path: str | Path, title_text: str) -> Path:
    """Write one curve per label (rows with ``tokens_per_s_per_user``, ``tokens_per_s_per_device``, ``batch``,
    ``fits`` and ``pareto``) to ``path``: fitting points joined, the Pareto points filled, batches annotated."""
    p = check_path(path)
    with style() as plt:
        fig, ax = plt.subplots(figsize=(7.5, 4.8))
        for i, (label, rows) in enumerate(curves.items()):
            c = _COLOURS[i % len(_COLOURS)]
            fit = sorted((r for r in rows if r["fits"]), key=lambda r: r["tokens_per_s_per_user"])
            if not fit:
                continue
            x = [r["tokens_per_s_per_user"] for r in fit]
            y = [r["tokens_per_s_per_device"] for r in fit]
            ax.plot(x, y, "-", lw=1.2, c=c, label=label)
            for r, xi, yi in zip(fit, x, y, strict=True):
                ax.plot(xi, yi, "o", ms=4, c=c, mfc=c if r.get("pareto") else "white")
                ax.annotate(str(r["batch"]), (xi, yi), textcoords="offset points", xytext=(3, 3), fontsize=7, color=c)
        from matplotlib.ticker import FuncFormatter

        ax.set_xscale("log")
        ax.set_yscale("log")
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xlabel("tokens/s per user (interactivity)")
        ax.set_ylabel("tokens/s per device (throughput)")
        ax.set_title(title(title_text, 7.5))
        ax.legend()
        save(fig, p)
    return p


__all__ = ["plot_serving"]
