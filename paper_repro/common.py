"""Shared settings, the evaluated search space and its Pareto frontiers, and figure helpers.

Everything goes through the public ``rooflaw`` API. Frontiers come from ``rooflaw.frontier``
(the exhaustive solver); each (device, workload, precision, preset, phase) frontier is computed once per
process and cached.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import rooflaw

DEVICE = "jetson-agx-orin-64gb"
LAW = "paper-2602.10377"
SPACE = "paper"
WORKLOAD = rooflaw.Workload(batch=1, input_tokens=1024, output_tokens=16)
#: The cost presets every frontier is computed under: the paper's §5 theory formulas, its App. D per-operator
#: roofline (what draws its Figs. 5, 7, 8a) and rooflaw's default.
PRESETS = ("paper", "paper-ops", "full")
PRECISIONS = ("fp16", "int8")
PHASES = ("prefill", "decode", "total")
PHASE_LABEL = {
    "prefill": "prefill latency (1,024 tokens)",
    "decode": "decode latency (16 tokens)",
    "total": "total latency (prefill + 16 decode steps)",
}
PRESET_LABEL = {
    "paper": "paper preset (§5 / App. E formulas)",
    "paper-ops": "paper-ops preset (App. D per-operator)",
    "full": "full preset (rooflaw default)",
}
PREC_STYLE = {"fp16": dict(color="tab:blue", marker="o"), "int8": dict(color="tab:orange", marker="s")}
PRESET_STYLE = {
    "paper": dict(color="tab:green", ls="--"),
    "paper-ops": dict(color="tab:brown", ls="-."),
    "full": dict(color="tab:purple", ls="-"),
}
#: Columns that describe a frontier point (what the report prints).
ARCH_COLS = ("layers", "d_model", "heads", "kv_heads", "ffn", "experts", "top_k")


@dataclass
class Context:
    """One run: output folder, reduced mode, and timings per section."""

    out: Path
    quick: bool = False
    timings: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.out = Path(self.out)
        self.out.mkdir(parents=True, exist_ok=True)


def device(name: str = DEVICE) -> rooflaw.Device:
    return rooflaw.get_device(name)


def law() -> rooflaw.LossLaw:
    return rooflaw.get_law(LAW)


def device_summary(dev: rooflaw.Device) -> str:
    """One line with the numbers of a device that the roofline uses."""
    pf = dev.peak_flops
    parts = [f"{k.upper()} {v / 1e12:.4g} T{'OP' if k.startswith('int') else 'FLOP'}/s" for k, v in pf.items()]
    return (
        f"{dev.name} (`{dev.id}`): " + ", ".join(parts) + f" dense; {dev.memory_bandwidth / 1e9:.4g} GB/s; "
        f"{dev.memory_capacity / 1e9:.4g} GB"
    )


def problem(
    preset: str,
    precision: str,
    phase: str = "total",
    dev: str = DEVICE,
    workload: rooflaw.Workload = WORKLOAD,
    latency_budget: float | None = None,
) -> rooflaw.Problem:
    return rooflaw.Problem(
        law=LAW,
        device=device(dev),
        space=SPACE,
        workload=workload,
        precision=precision,
        phase=phase,
        preset=preset,
        latency_budget=latency_budget,
    )


_FRONTIERS: dict[tuple, pd.DataFrame] = {}


def frontier(
    preset: str, precision: str, phase: str, dev: str = DEVICE, workload: rooflaw.Workload = WORKLOAD
) -> pd.DataFrame:
    """The loss–latency Pareto frontier of the paper space (sorted by latency), cached per process.

    Columns include the architecture, r, rho, gqa, loss, latency_s (of ``phase``), prefill_s, decode_s,
    memory_bytes and energy_j. Only points that fit the device's memory are candidates.
    """
    key = (preset, precision, phase, dev, workload)
    if key not in _FRONTIERS:
        prob = problem(preset, precision, phase, dev, workload)
        res = rooflaw.frontier(prob, objectives=("loss", "latency"))
        df = res.frontier
        df = df.sort_values(["latency_s", "loss"]).reset_index(drop=True)
        if "total_s" not in df:
            df["total_s"] = df["prefill_s"] + df["decode_s"]
        _FRONTIERS[key] = df
    return _FRONTIERS[key]


def all_frontiers(dev: str = DEVICE, workload: rooflaw.Workload = WORKLOAD) -> dict[tuple[str, str, str], pd.DataFrame]:
    """(preset, precision, phase) -> frontier for the paper's setting."""
    return {(ps, pr, ph): frontier(ps, pr, ph, dev, workload) for ps in PRESETS for pr in PRECISIONS for ph in PHASES}


def staircase(df: pd.DataFrame, losses: np.ndarray) -> np.ndarray:
    """Smallest frontier latency reaching loss ≤ L, for each L (inf where none does)."""
    lat = df["latency_s"].to_numpy()
    loss = df["loss"].to_numpy()
    order = np.argsort(loss, kind="stable")
    lat_min_upto = np.minimum.accumulate(lat[order])  # min latency among the k lowest-loss points
    idx = np.searchsorted(loss[order], np.asarray(losses, float), side="right") - 1
    return np.where(idx >= 0, lat_min_upto[np.clip(idx, 0, None)], np.inf)


def arch_label(row: Any) -> str:
    """Compact text of one frontier point: l×d, heads/kv, ffn, E/K."""
    moe = f", E{int(row['experts'])}/K{int(row['top_k'])}" if int(row["experts"]) > 1 else ", dense"
    return (
        f"l={int(row['layers'])}, d={int(row['d_model'])}, kv={int(row['kv_heads'])}/{int(row['heads'])}, "
        f"ffn={int(row['ffn'])}{moe}"
    )


def fmt_ms(seconds: float) -> str:
    ms = seconds * 1e3
    return f"{ms:.3g} ms" if ms < 1000 else f"{ms / 1e3:.3g} s"


def share(mask: Any) -> float:
    m = np.asarray(mask, dtype=bool)
    return float(m.mean()) if m.size else float("nan")


def savefig(fig: Any, ctx: Context, name: str) -> str:
    path = ctx.out / name
    fig.savefig(path, dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return name


def plt():
    """matplotlib.pyplot with a headless backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as _plt

    _plt.rcParams.update({"font.size": 9, "axes.titlesize": 10, "axes.grid": True, "grid.alpha": 0.3})
    return _plt


class Timer:
    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.t0
