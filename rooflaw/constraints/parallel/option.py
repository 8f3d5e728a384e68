"""A layout as cost columns for a joint architecture × layout search: what a solver's ``option`` dimension calls.

:func:`layout_cost_columns` returns a function ``columns(cols, problem) -> {column: array}`` giving, for every
architecture of a column table under a problem (its device, workload, precision and engine), the cost columns
the solvers use -- ``prefill_s`` (TTFT), ``decode_s``, ``total_s``, ``tpot_s``, ``memory_bytes`` (per device),
``energy_j`` (one replica's batch), ``params_total``, ``params_active`` -- the serving columns and ``valid``: the
layout divides the architecture, and (if asked) tokens/s per device ≥ a floor and TPOT ≤ a ceiling.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...arch.architecture import param_counts
from ...devices.system import System
from ...errors import bad
from ..roofline import complete_columns
from ..scenario import Scenario
from .layout import Layout, parse_layout
from .serving import layout_columns

#: Serving columns a layout option adds to a frontier row.
EXTRA = ("tokens_per_s_per_device", "comm_s_decode", "kv_replication", "devices")


@dataclass(frozen=True)
class LayoutColumns:
    """``columns(cols, problem)`` of one layout on one system (a plain object: it pickles to worker processes)."""

    system: System
    layout: Layout
    overlap: bool = False
    min_tokens_per_s_per_device: float | None = None
    max_tpot_s: float | None = None

    def __call__(self, cols: Mapping[str, np.ndarray], problem: Any) -> dict[str, np.ndarray]:
        system, lay = self.system, self.layout
        if problem.device.id != system.device.id:
            raise bad("system", system.id, f"runs {system.device.id}, the problem's device is {problem.device.id}")
        wl = problem.workload
        full = complete_columns(cols)
        sc = Scenario(system, wl, problem.precision, "full", getattr(problem, "engine", None), lay, self.overlap)
        r = layout_columns(full, sc)
        counts = param_counts(full)
        valid = r["divides"].copy()
        if self.min_tokens_per_s_per_device is not None:
            valid &= r["tokens_per_s_per_device"] >= self.min_tokens_per_s_per_device
        if self.max_tpot_s is not None:
            valid &= r["tpot_s"] <= self.max_tpot_s
        n = len(valid)
        energy = r["joules_per_token"] * wl.batch * wl.output_tokens  # one replica serving its batch
        total, active = (np.broadcast_to(counts[k], (n,)) for k in ("total", "active"))
        return {
            "prefill_s": r["ttft_s"], "decode_s": r["decode_s"], "total_s": r["latency_s"], "tpot_s": r["tpot_s"],
            "memory_bytes": r["memory_per_device_bytes"], "energy_j": energy, "params_total": total,
            "params_active": active, "valid": valid, "tokens_per_s": r["tokens_per_s"],
            "tokens_per_s_per_user": r["tokens_per_s_per_user"],
            "tokens_per_s_per_device": r["tokens_per_s_per_device"], "comm_s_decode": r["comm_s_decode"],
            "kv_replication": r["kv_replication"], "devices": np.full(n, float(lay.devices)),
        }  # fmt: skip


def layout_cost_columns(
    system: System,
    layout: str | Layout,
    overlap: bool = False,
    min_tokens_per_s_per_device: float | None = None,
    max_tpot_s: float | None = None,
) -> LayoutColumns:
    """The ``columns(cols, problem)`` function of ``layout`` on ``system`` (see the module docstring)."""
    lay = parse_layout(layout) if isinstance(layout, str) else layout
    if lay.devices > system.count:
        raise bad("layout", lay.describe(), f"needs {lay.devices} devices; the system has {system.count}")
    for name, v in (("min_tokens_per_s_per_device", min_tokens_per_s_per_device), ("max_tpot_s", max_tpot_s)):
        if v is not None and not (isinstance(v, (int, float)) and np.isfinite(v) and v > 0):
            raise bad(name, v, "must be a positive number")
    return LayoutColumns(system, lay, overlap, min_tokens_per_s_per_device, max_tpot_s)


__all__ = ["EXTRA", "LayoutColumns", "layout_cost_columns"]
