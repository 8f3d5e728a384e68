"""A joint frontier (architecture × precision × batch × layout): loss against latency and throughput against
interactivity, each point coloured by its precision and layout, its marker by its batch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .style import check_path, save, style, title

_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
            "#17becf")  # fmt: skip
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")


def groups(front: Any) -> list[str]:
    """Colour groups of a joint frontier, in first-seen order: ``precision · option`` (one of them when the other
    has a single value)."""
    precs, opts = front["precision"].astype(str), front["option"].astype(str)
    if opts.nunique() <= 1:
        labels = precs
    elif precs.nunique() <= 1:
        labels = opts
    else:
        labels = precs + " · " + opts
    return list(labels)


def plot_joint_frontier(front: Any, path: str | Path, title_text: str, x: str = "latency_s") -> Path:
    """Write the joint frontier ``front`` (a :class:`~rooflaw.solver.discrete.joint.JointFrontierResult` frontier:
    ``loss``, ``x`` in seconds, ``precision``, ``batch``, ``option``, ``tokens_per_s``, ``tokens_per_s_per_user``,
    optionally ``tokens_per_s_per_device``) to ``path``: left, loss against latency; right, tokens/s per device
    against tokens/s per user (the throughput–interactivity trade-off)."""
    p = check_path(path)
    label = groups(front)
    order = list(dict.fromkeys(label))
    batches = sorted(set(int(b) for b in front["batch"]))
    per_dev = front["tokens_per_s_per_device"] if "tokens_per_s_per_device" in front else front["tokens_per_s"]
    with style() as plt:
        from matplotlib.lines import Line2D
        from matplotlib.ticker import FuncFormatter

        fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.8))
        fmt = FuncFormatter(lambda v, _: f"{v:g}")
        for gi, g in enumerate(order):
            c = _COLOURS[gi % len(_COLOURS)]
            for bi, b in enumerate(batches):
                m = [lab == g and int(bb) == b for lab, bb in zip(label, front["batch"], strict=True)]
                if not any(m):
                    continue
                sub = front[m]
                mk = _MARKERS[bi % len(_MARKERS)]
                ax.scatter(sub[x] * 1e3, sub["loss"], s=14, c=c, marker=mk, lw=0, alpha=0.85)
                bx.scatter(sub["tokens_per_s_per_user"], per_dev[m], s=14, c=c, marker=mk, lw=0, alpha=0.85)
        ax.set_xscale("log")
        bx.set_xscale("log")
        bx.set_yscale("log")
        minor = FuncFormatter(lambda v, _: f"{v:g}" if f"{v:g}"[0] in "25" else "")
        for axis in (ax.xaxis, bx.xaxis, bx.yaxis):  # plain numbers; minor ticks at 2 and 5 labelled
            axis.set_major_formatter(fmt)
            axis.set_minor_formatter(minor)
        ax.set_xlabel("latency (ms)" if x == "latency_s" else f"{x.replace('_s', '')} latency (ms)")
        ax.set_ylabel("loss")
        bx.set_xlabel("tokens/s per user (interactivity)")
        bx.set_ylabel("tokens/s per device (throughput)")
        handles = [Line2D([], [], ls="", marker="o", c=_COLOURS[i % len(_COLOURS)], label=g) for i, g in
                   enumerate(order)]  # fmt: skip
        if len(batches) > 1:
            handles += [Line2D([], [], ls="", marker=_MARKERS[i % len(_MARKERS)], c="0.3", label=f"batch {b}")
                        for i, b in enumerate(batches)]  # fmt: skip
        ax.legend(handles=handles, loc="best")
        fig.suptitle(title(f"{title_text} — {len(front)} frontier points", 11), fontsize=10)
        save(fig, p)
    return p


__all__ = ["groups", "plot_joint_frontier"]
