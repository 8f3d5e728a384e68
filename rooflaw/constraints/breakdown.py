"""Per-operator tables of a :class:`~rooflaw.constraints.roofline.CostReport`: share of time, arithmetic intensity,
achieved FLOP/s and throughput in tokens per second. SI units."""

from __future__ import annotations

import math
from typing import Any

from .roofline import CostReport

#: Columns of :func:`op_rows` (and of ``rooflaw evaluate --csv``), in order.
OP_COLUMNS = ("phase", "name", "flops", "bytes", "seconds", "share", "intensity", "flops_per_s", "bound", "roof")


def op_rows(report: CostReport) -> list[dict[str, Any]]:
    """One dict per operator and phase (decode summed over all steps), with the columns of :data:`OP_COLUMNS`.

    ``share`` is the operator's fraction of its phase's time, ``intensity`` FLOP/byte (0 for an operator that
    moves bytes only), ``flops_per_s`` the FLOP/s the cost model charges it (FLOPs / seconds).
    """
    phase_total = {"prefill": report.values["prefill_s"], "decode": report.values["decode_s"]}
    rows = []
    for o in report.ops:
        total = phase_total[o.phase]
        rows.append(
            {
                "phase": o.phase,
                "name": o.name,
                "flops": o.flops,
                "bytes": o.bytes,
                "seconds": o.seconds,
                "share": o.seconds / total if total > 0 else math.nan,
                "intensity": o.flops / o.bytes if o.bytes > 0 else math.inf,
                "flops_per_s": o.flops / o.seconds if o.seconds > 0 else math.nan,
                "bound": o.bound,
                "roof": o.roof,
            }
        )
    return rows


def throughput(report: CostReport) -> dict[str, float]:
    """Tokens per second: ``prefill`` (B·S_in / prefill time), ``decode`` (B·S_out / decode time) and ``total``
    (generated tokens B·S_out over the whole request, prefill included)."""
    w = report.workload
    v = report.values
    return {
        "prefill": w.batch * w.input_tokens / v["prefill_s"],
        "decode": w.batch * w.output_tokens / v["decode_s"],
        "total": w.batch * w.output_tokens / v["total_s"],
    }


__all__ = ["OP_COLUMNS", "op_rows", "throughput"]
