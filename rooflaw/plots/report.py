"""``evaluate --plot``: the roofline and the time breakdown of one architecture in one figure."""

from __future__ import annotations

from pathlib import Path

from ..constraints.roofline import CostReport
from .breakdown import breakdown_data, draw_breakdown
from .roofline import default_title, draw_roofline, roofline_data
from .style import check_path, save, style, title


def plot_report(report: CostReport, path: str | Path) -> Path:
    """Write a two-panel figure (roofline above, stacked time per operator below) to ``path`` (.png or .svg)."""
    p = check_path(path)
    data = roofline_data(report)
    segs = breakdown_data(report)
    totals = {"prefill": report.values["prefill_s"], "decode": report.values["decode_s"]}
    with style() as plt:
        fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(8.5, 10), gridspec_kw={"height_ratios": [3, 1.1]})
        draw_roofline(ax1, data)
        ax1.legend(loc="upper left", fontsize=7, framealpha=0.9, frameon=True)
        draw_breakdown(ax2, segs, totals)
        ax2.legend(loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=5, fontsize=7)
        fig.suptitle(title(default_title(report), 8.5), fontsize=10)
        fig.tight_layout()
        save(fig, p)
    return p
