"""A Pareto frontier (loss against latency) over a faint cloud of feasible points."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .style import check_path, save, style, title


def plot_frontier(front: Any, cloud: Any, path: str | Path, title_text: str, x: str = "latency_s") -> Path:
    """Write the frontier (DataFrame with ``x`` in seconds and ``loss``) over ``cloud`` (or None) to ``path``."""
    p = check_path(path)
    with style() as plt:
        fig, ax = plt.subplots(figsize=(7.5, 4.8))
        if cloud is not None and len(cloud):
            ax.scatter(cloud[x] * 1e3, cloud["loss"], s=3, c="0.6", alpha=0.15, lw=0, label="feasible (sample)")
        f = front.sort_values(x)
        ax.plot(f[x] * 1e3, f["loss"], "-o", ms=3, lw=1.2, c="#d62728", label=f"Pareto frontier ({len(f)})")
        ax.set_xscale("log")
        from matplotlib.ticker import FuncFormatter

        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}" if str(f"{v:g}")[0] in "235" else ""))
        ax.set_xlabel(f"{x.replace('_s', '')} latency (ms)")
        ax.set_ylabel("loss")
        ax.set_title(title(title_text, 7.5))
        ax.legend()
        save(fig, p)
    return p
