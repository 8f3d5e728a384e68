"""Stacked time per operator for each phase (prefill, and decode summed over all steps) of one architecture."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..constraints.roofline import CostReport
from .style import check_path, save, style, title

#: A segment is labelled inside its bar when it is at least this share of the longest bar.
LABEL_MIN_SHARE = 0.07


def breakdown_data(report: CostReport) -> dict[str, list[tuple[str, float]]]:
    """Phase -> [(operator, seconds)] in the cost model's operator order; operators with zero time are left out."""
    out: dict[str, list[tuple[str, float]]] = {"prefill": [], "decode": []}
    for o in report.ops:
        if o.seconds > 0:
            out[o.phase].append((o.name, o.seconds))
    return out


def draw_breakdown(ax: Any, data: dict[str, list[tuple[str, float]]], totals: dict[str, float]) -> None:
    """Horizontal stacked bars (ms) on ``ax``, one per phase, one colour per operator (the same in both)."""
    import matplotlib

    names = list(dict.fromkeys(n for segs in data.values() for n, _ in segs))
    cmap = matplotlib.colormaps["tab20"]
    colour = {n: cmap(i % 20) for i, n in enumerate(names)}
    hatch = {n: ("//" if i >= 20 else None) for i, n in enumerate(names)}
    longest = max((sum(s for _, s in segs) for segs in data.values()), default=1.0) * 1e3
    phases = [p for p in ("prefill", "decode") if data.get(p)]
    for yi, phase in enumerate(phases):
        left = 0.0
        for n, s in data[phase]:
            w = s * 1e3
            ax.barh(yi, w, left=left, color=colour[n], hatch=hatch[n], edgecolor="white", lw=0.4, height=0.6,
                    label=n if yi == phases.index(next(p for p in phases if n in dict(data[p]))) else None)  # fmt: skip
            if w >= LABEL_MIN_SHARE * longest:
                ax.text(left + w / 2, yi, n, ha="center", va="center", fontsize=6.5, rotation=90 if w < 0.12 * longest
                        else 0)  # fmt: skip
            left += w
        ax.text(left + 0.01 * longest, yi, f"{totals[phase] * 1e3:.3g} ms", va="center", fontsize=8)
    ax.set_yticks(range(len(phases)), [("decode (all steps)" if p == "decode" else p) for p in phases])
    ax.invert_yaxis()
    ax.set_xlim(0, longest * 1.12)
    ax.set_xlabel("time (ms)")
    ax.grid(axis="y", visible=False)


def plot_breakdown(report: CostReport, path: str | Path, title_text: str | None = None) -> dict[str, Any]:
    """Write the stacked per-operator time of ``report`` to ``path`` (.png or .svg).

    Returns ``{"segments": breakdown_data(report), "totals": {"prefill": s, "decode": s}}``.
    """
    from .roofline import default_title

    p = check_path(path)
    data = breakdown_data(report)
    totals = {"prefill": report.values["prefill_s"], "decode": report.values["decode_s"]}
    with style() as plt:
        fig, ax = plt.subplots(figsize=(8.5, 3.6))
        draw_breakdown(ax, data, totals)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=5, fontsize=7)
        ax.set_title(title(title_text or "time per operator: " + default_title(report), 8.5))
        save(fig, p)
    return {"segments": data, "totals": totals}
