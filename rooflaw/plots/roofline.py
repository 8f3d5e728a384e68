"""The roofline picture of one architecture on one device: arithmetic intensity (FLOP/byte) against FLOP/s, the
device's compute roof per format with its ridge point, and every operator of prefill and of a decode step."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..constraints.breakdown import op_rows
from ..constraints.roofline import CostReport
from .style import PHASE_COLOURS, PHASE_MARKERS, ROOF_COLOURS, check_path, save, si, style, title

#: Points closer than this in log10 (both axes) share one label.
MERGE_DEX = 0.02
#: Vertical distance between consecutive operator labels, in decades of FLOP/s (fits the default figure size).
LABEL_GAP = 0.12


@dataclass
class RooflineData:
    """What the roofline figure draws. ``roofs``: dtype, peak (FLOP/s), ridge (FLOP/byte = peak / bandwidth), used
    (whether this precision's operators run on it); ``points``: phase, ops (names sharing the point), intensity
    (FLOP/byte), flops_per_s (FLOPs / charged seconds; a decode point is the mean step); ``skipped``: operators
    with no FLOPs or no memory traffic (no place on a log axis), with their bytes."""

    device: str
    bandwidth: float
    roofs: list[dict[str, Any]] = field(default_factory=list)
    points: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)


def roofline_data(report: CostReport) -> RooflineData:
    """The roofs and operator points of ``report`` (coincident operators of one phase merged into one point)."""
    dev, prec = report.device, report.precision
    used = {dev.roof(prec.linear_dtype)[0], dev.roof(prec.attention_dtype)[0]}
    used.add("fp32" if "fp32" in dev.peak_flops else next(iter(dev.peak_flops)))
    bw = float(dev.memory_bandwidth)
    data = RooflineData(dev.id, bw)
    for dt, peak in sorted(dev.peak_flops.items(), key=lambda kv: kv[1]):
        data.roofs.append({"dtype": dt, "peak": float(peak), "ridge": float(peak) / bw, "used": dt in used})
    for r in op_rows(report):
        if r["flops"] <= 0 or r["seconds"] <= 0 or not math.isfinite(r["intensity"]):  # no FLOPs, or no memory
            # traffic at all (a fused softmax stays on chip): no place on a log-log intensity axis
            data.skipped.append({"phase": r["phase"], "op": r["name"], "bytes": r["bytes"]})
            continue
        x, y = r["intensity"], r["flops_per_s"]
        for p in data.points:
            if (p["phase"] == r["phase"] and abs(math.log10(p["intensity"] / x)) < MERGE_DEX
                    and abs(math.log10(p["flops_per_s"] / y)) < MERGE_DEX):  # fmt: skip
                p["ops"].append(r["name"])
                break
        else:
            data.points.append({"phase": r["phase"], "ops": [r["name"]], "intensity": x, "flops_per_s": y})
    return data


def _label_positions(xs: list[float], ys: list[float], side: int, gap: float) -> list[tuple[float, float]]:
    """Label anchors (data coordinates) for points on one side of the memory roof: ``side`` −1 above-left (prefill),
    +1 below-right (decode). Labels start a fixed distance (in decades) off their point, away from the roof, and are
    pushed further away until consecutive labels are ``gap`` decades apart, so they never overlap each other nor
    cross the roof, and leader lines keep the points' order."""
    lx = [math.log10(x) + 0.08 * side for x in xs]
    ly = [math.log10(y) - 0.28 * side for y in ys]
    order = sorted(range(len(xs)), key=lambda i: ly[i], reverse=side > 0)
    prev = None
    for i in order:
        if prev is not None:
            ly[i] = max(ly[i], prev + gap) if side < 0 else min(ly[i], prev - gap)
        prev = ly[i]
    return [(10**a, 10**b) for a, b in zip(lx, ly, strict=True)]


def draw_roofline(ax: Any, data: RooflineData, labels: bool = True) -> None:
    """Draw ``data`` on matplotlib axes ``ax`` (log-log)."""
    xs_all = [p["intensity"] for p in data.points] + [r["ridge"] for r in data.roofs]
    x_lo = min(xs_all) / 4 if xs_all else 0.1
    x_hi = max(xs_all) * 4 if xs_all else 1e4
    peaks = [r["peak"] for r in data.roofs]
    ys_all = [p["flops_per_s"] for p in data.points] + [x_lo * data.bandwidth]
    y_lo, y_hi = min(ys_all) / 3, max(peaks) * 3
    top = max(data.roofs, key=lambda r: r["peak"])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.plot([x_lo, top["ridge"]], [x_lo * data.bandwidth, top["peak"]], c="k", lw=1.4,
            label=f"memory {si(data.bandwidth, 'B/s')}")  # fmt: skip
    for r in data.roofs:
        c = ROOF_COLOURS.get(r["dtype"], "0.3")
        style_ = {"lw": 1.6, "ls": "-", "alpha": 1.0} if r["used"] else {"lw": 1.0, "ls": "--", "alpha": 0.6}
        ax.plot([r["ridge"], x_hi], [r["peak"], r["peak"]], c=c, **style_,
                label=f"{r['dtype']} {si(r['peak'], 'FLOP/s')}, ridge {ridge_text(r['ridge'])} FLOP/B"
                + ("" if r["used"] else " (unused)"))  # fmt: skip
        ax.plot([r["ridge"]], [r["peak"]], marker="D", ms=4, c=c, alpha=style_["alpha"])
        ax.plot([r["ridge"], r["ridge"]], [y_lo, r["peak"]], c=c, lw=0.6, ls=":", alpha=0.7)
    label_ys = []
    for phase in ("prefill", "decode"):
        pts = [p for p in data.points if p["phase"] == phase]
        if not pts:
            continue
        name = "prefill" if phase == "prefill" else "decode (one step, mean)"
        xs, ys = [p["intensity"] for p in pts], [p["flops_per_s"] for p in pts]
        ax.scatter(xs, ys, s=22, zorder=3, c=PHASE_COLOURS[phase], marker=PHASE_MARKERS[phase], label=name,
                   edgecolors="white", lw=0.5)  # fmt: skip
        if not labels:
            continue
        side = -1 if phase == "prefill" else 1
        for p, (lx, ly) in zip(pts, _label_positions(xs, ys, side, LABEL_GAP), strict=True):
            ax.annotate(", ".join(p["ops"]), xy=(p["intensity"], p["flops_per_s"]), xytext=(lx, ly), fontsize=6.5,
                        color=PHASE_COLOURS[phase], ha="right" if side < 0 else "left", va="center", zorder=4,
                        bbox={"boxstyle": "square,pad=0.05", "fc": "white", "ec": "none", "alpha": 0.75},
                        arrowprops={"arrowstyle": "-", "color": PHASE_COLOURS[phase], "lw": 0.4, "alpha": 0.6,
                                    "shrinkA": 1, "shrinkB": 3})  # fmt: skip
            label_ys.append(ly)
    y_lo = min([y_lo, *(y / 2 for y in label_ys)])
    y_hi = max([y_hi, *(y * 2 for y in label_ys)])
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("FLOP/s charged by the cost model")


def plot_roofline(report: CostReport, path: str | Path, title_text: str | None = None) -> RooflineData:
    """Write the roofline figure of ``report`` to ``path`` (.png or .svg); returns what it drew."""
    p = check_path(path)
    data = roofline_data(report)
    with style() as plt:
        fig, ax = plt.subplots(figsize=(8.5, 6.2))
        draw_roofline(ax, data)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.11), ncol=2)
        ax.set_title(title(title_text or default_title(report), 8.5))
        if data.skipped:
            names = ", ".join(sorted({s["op"] for s in data.skipped}))
            ax.text(0.99, 0.02, f"not shown (no FLOPs, bytes only): {names}", transform=ax.transAxes, ha="right",
                    fontsize=7, color="0.4")  # fmt: skip
        save(fig, p)
    return data


def ridge_text(x: float) -> str:
    """A ridge point in FLOP/byte as a reader writes it: 25.9, 208, 1,170."""
    return f"{x:,.0f}" if x >= 1000 else f"{x:.3g}"


def default_title(report: CostReport) -> str:
    a, w = report.arch, report.workload
    name = a.name or "architecture"
    return (f"{name} on {report.device.name} — {report.precision.name}, B={w.batch}, S_in={w.input_tokens}, "
            f"S_out={w.output_tokens}, preset {report.preset}")  # fmt: skip
