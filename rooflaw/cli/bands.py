"""Error bands in the printed outputs of ``solve``, ``frontier``, ``search`` and ``compare`` (printing only)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .. import api
from ..units import fmt_time


def problem_band(prob: Any, phase: str | None = None) -> dict[str, Any]:
    """The 80 % band of ``prob``'s latency ``phase`` (default: its own), with its ``--confidence`` if any."""
    phase = phase or prob.phase
    out = dict(api.problem_band(prob.device, prob.engine, prob.preset, phase))
    if out and prob.confidence is not None:
        out["confidence"] = prob.confidence
        out["factor"] = api.confidence_factor(phase, prob.confidence)
    return out


def interval(value: float, band: dict[str, Any]) -> list[float] | None:
    """[low, high] of a latency ``value`` under ``band`` (None without one)."""
    if not band:
        return None
    lo, hi = band["ratio"]
    return [value * lo, value * hi]


def fmt_banded(value: float, band: dict[str, Any], fmt: Callable[[float], str] = fmt_time) -> str:
    """``8.96 ms [7.9 ms–10.4 ms], 80 %`` (the value alone without a band)."""
    iv = interval(value, band)
    if iv is None:
        return fmt(value)
    return f"{fmt(value)} [{fmt(iv[0])}–{fmt(iv[1])}], {band['level'] * 100:.0f} %"


def intervals(values: Iterable[float], band: dict[str, Any]) -> list[list[float]] | None:
    """[low, high] of each latency of ``values`` (a frontier's), None without a band."""
    if not band:
        return None
    lo, hi = band["ratio"]
    return [[float(v) * lo, float(v) * hi] for v in values]
