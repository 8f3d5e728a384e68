"""Error bands: how far measured latencies fall from rooflaw's predictions, per phase, on rows it did not fit.

A band is a pair of quantiles of the ratio ``measured / predicted`` over held-out rows: the end-to-end phases
(``prefill``, ``decode``, ``e2e``) from leave-one-source-out on the published measurements (``rooflaw devices
fit-efficiency DATA --write-catalog`` writes ``bands.toml`` beside this module, with the rows and the command),
the kernel families from the kernel curves' own ``bands`` (leave-one-GPU-out). A prediction ``p`` of a phase
gets the 80 % band ``[p·r(0.1), p·r(0.9)]``; a throughput (tokens/s, the inverse of a time) gets
``[x / r(0.9), x / r(0.1)]``.

``--confidence q`` meets a latency budget at the ``q`` quantile: the phase's latency times ``r(q)`` must stay
within the budget, i.e. the latency itself within ``budget / r(q)`` -- one factor per phase, so every solver
(closed form, GP, exhaustive, search, the kernels) stays exact (:class:`rooflaw.solver.budgets.LatencyBudget`).

:func:`coverage` checks that a band holds what it claims: for each source, the band is rebuilt from the other
sources' held-out ratios only and the source's own held-out rows are counted inside or out.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import bad
from ..safe_io import write_text_atomic

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

BANDS_FILE = Path(__file__).with_name("bands.toml")
#: Quantile levels stored per phase (a ``--confidence`` outside [0.05, 0.95] is refused: too few rows).
LEVELS = tuple(round(0.05 * i, 2) for i in range(1, 20))
#: The band every printed latency carries: the central 80 % (quantiles 0.1 and 0.9).
BAND_LEVEL = 0.8
#: Which band an output column takes (times: their phase; throughputs: decode, inverted).
COLUMN_PHASE = {
    "prefill_s": "prefill", "ttft_s": "prefill", "decode_s": "decode", "tpot_s": "decode", "total_s": "e2e",
    "latency_s": "e2e", "tokens_per_s": "decode", "tokens_per_s_per_user": "decode",
    "tokens_per_s_per_device": "decode",
}  # fmt: skip
#: Latency-budget phases (:data:`rooflaw.solver.budgets.PHASES`) -> band phase.
BUDGET_PHASE = {"prefill": "prefill", "decode": "decode", "total": "e2e"}


@dataclass(frozen=True)
class PhaseBand:
    """Quantiles ``ratio[i]`` of measured/predicted at ``levels[i]`` over ``rows`` held-out rows of ``phase``."""

    phase: str
    levels: tuple[float, ...]
    ratio: tuple[float, ...]
    rows: int
    source: str = ""

    def at(self, q: float) -> float:
        """measured/predicted at quantile ``q`` (log-linear between stored levels)."""
        q = check_confidence(q, self.levels)
        return float(np.exp(np.interp(q, self.levels, np.log(self.ratio))))

    def band(self, level: float = BAND_LEVEL) -> tuple[float, float]:
        """(low, high) ratio of the central ``level`` band."""
        lo = round((1.0 - level) / 2.0, 10)
        return self.at(lo), self.at(1.0 - lo)


def check_confidence(q: Any, levels: Sequence[float] = LEVELS) -> float:
    """``q`` as a float in [levels[0], levels[-1]], else a one-line error naming ``confidence``."""
    if isinstance(q, bool) or not isinstance(q, (int, float)) or not math.isfinite(float(q)):
        raise bad("confidence", q, "must be a number between 0.05 and 0.95 (e.g. 0.9)")
    if not (levels[0] - 1e-12 <= float(q) <= levels[-1] + 1e-12):
        raise bad("confidence", q, f"must be between {levels[0]} and {levels[-1]}: the bands rest on held-out rows")
    return float(q)


def quantiles(ratios: Iterable[float], levels: Sequence[float] = LEVELS) -> tuple[float, ...]:
    """Empirical quantiles (numpy's linear interpolation) of ``ratios`` at ``levels``."""
    r = np.asarray([x for x in ratios if math.isfinite(x) and x > 0], dtype=float)
    if r.size == 0:
        raise bad("ratios", "[]", "no finite positive measured/predicted ratios to build a band from")
    return tuple(float(v) for v in np.quantile(r, levels))


def from_rows(rows: Sequence[Mapping[str, Any]], source: str = "") -> dict[str, PhaseBand]:
    """Bands per phase from held-out rows (``phase`` and ``error`` = predicted/measured − 1, as
    :func:`rooflaw.constraints.fit_efficiency.held_out` returns them)."""
    by: dict[str, list[float]] = {}
    for r in rows:
        by.setdefault(str(r["phase"]), []).append(1.0 / (1.0 + float(r["error"])))
    return {p: PhaseBand(p, LEVELS, quantiles(v), len(v), source) for p, v in sorted(by.items())}


def coverage(rows: Sequence[Mapping[str, Any]], level: float = BAND_LEVEL, key: str = "held_out") -> dict[str, Any]:
    """Share of held-out rows inside their ``level`` band when each group of ``key`` (a source) is banded only
    from the other groups' rows: per phase ``{"rows", "inside", "share"}`` and ``all``."""
    out: dict[str, Any] = {}
    groups = sorted({str(r[key]) for r in rows})
    tot_in = tot_n = 0
    for phase in sorted({str(r["phase"]) for r in rows}):
        ph = [r for r in rows if r["phase"] == phase]
        inside = n = 0
        for g in groups:
            test = [r for r in ph if str(r[key]) == g]
            train = [r for r in ph if str(r[key]) != g]
            if not test or len(train) < 2:
                continue
            lo_q = (1.0 - level) / 2.0
            ratios = [1.0 / (1.0 + float(r["error"])) for r in train]
            lo, hi = quantiles(ratios, (lo_q, 1.0 - lo_q))
            for r in test:
                x = 1.0 / (1.0 + float(r["error"]))
                inside += int(lo <= x <= hi)
                n += 1
        out[phase] = {"rows": n, "inside": inside, "share": inside / n if n else math.nan}
        tot_in, tot_n = tot_in + inside, tot_n + n
    out["all"] = {"rows": tot_n, "inside": tot_in, "share": tot_in / tot_n if tot_n else math.nan}
    return out


@cache
def shipped() -> dict[str, PhaseBand]:
    """The bands shipped in the package (``bands.toml``); empty when none were written."""
    if not BANDS_FILE.is_file():
        return {}
    data = tomllib.loads(BANDS_FILE.read_text(encoding="utf-8"))
    levels = tuple(float(x) for x in data.get("levels", LEVELS))
    src = str(data.get("source", ""))
    out = {}
    for p, v in data.get("phase", {}).items():
        out[p] = PhaseBand(p, levels, tuple(float(x) for x in v["ratio"]), int(v.get("rows", 0)), src)
    return out


def phase_band(phase: str) -> PhaseBand | None:
    """The shipped band of ``phase`` (``prefill``, ``decode``, ``e2e``), ``None`` when none was written."""
    return shipped().get(phase)


def confidence_factor(budget_phase: str, q: float | None) -> float:
    """measured/predicted at quantile ``q`` for a latency budget of ``budget_phase`` (1 for ``q`` None)."""
    if q is None:
        return 1.0
    check_confidence(q)
    b = phase_band(BUDGET_PHASE.get(budget_phase, budget_phase))
    if b is None:
        raise bad("confidence", q, f"no {budget_phase} band shipped (rooflaw devices fit-efficiency --write-catalog)")
    return b.at(q)


def value_band(column: str, value: float, level: float = BAND_LEVEL) -> tuple[float, float] | None:
    """(low, high) of output ``column``'s ``value`` at the central ``level`` band (``None``: no band)."""
    phase = COLUMN_PHASE.get(column)
    b = phase_band(phase) if phase else None
    if b is None or not math.isfinite(value):
        return None
    lo, hi = b.band(level)
    if column.startswith("tokens_per_s"):  # a rate: the inverse of a time
        return value / hi, value / lo
    return value * lo, value * hi


def bands_dict(values: Mapping[str, Any], level: float = BAND_LEVEL) -> dict[str, Any]:
    """``{column: [low, high]}`` for every banded column of ``values`` plus ``level`` (for JSON outputs)."""
    out: dict[str, Any] = {}
    for k, v in values.items():
        try:
            x = float(v)
        except (TypeError, ValueError):
            continue
        b = value_band(k, x, level)
        if b is not None:
            out[k] = [b[0], b[1]]
    if out:
        out["level"] = level
    return out


def band_applies(app: Any) -> bool:
    """Whether the shipped end-to-end bands describe an estimate resting on ``app`` (an
    :class:`~.engines.Applied`): a fitted serving engine on a device priced by kernel curves or a fitted family --
    not the pure roofline, the paper's model, or a device's own unfitted figures (an NPU, a TPU)."""
    if app is None or app.engine in ("ideal", "device", "paper"):
        return False
    return bool(getattr(app, "curves", "")) or "fitted family" in str(getattr(app, "source", ""))


def problem_band(device: Any, engine: Any, preset: str, phase: str, level: float = BAND_LEVEL) -> dict[str, Any]:
    """The band of a problem's latency ``phase`` (prefill | decode | total) under ``device``/``engine``/``preset``:
    ``{"phase", "level", "ratio": [low, high], "rows"}``, or ``{}`` where no band applies (:func:`band_applies`)."""
    from .engines import applied

    if preset != "full" or not band_applies(applied(device, engine, preset)):
        return {}
    b = phase_band(BUDGET_PHASE.get(phase, phase))
    if b is None:
        return {}
    lo, hi = b.band(level)
    return {"phase": b.phase, "level": level, "ratio": [lo, hi], "rows": b.rows}


def kernel_band(curves: Any, family: str) -> tuple[float, float] | None:
    """(low, high) measured/predicted of a kernel ``family`` from curves' leave-one-GPU-out ``bands``."""
    if curves is None:
        return None
    b = (getattr(curves, "bands", None) or {}).get(family)
    return (float(b[0]), float(b[1])) if b else None


def bands_toml(bands: Mapping[str, PhaseBand], rows_note: str, command: str) -> str:
    """``bands.toml``: per phase the measured/predicted quantiles, with where they came from."""

    def fl(xs: Iterable[float]) -> str:
        return "[" + ", ".join(f"{x:.4g}" for x in xs) + "]"

    out = [
        "# Error bands: quantiles of measured/predicted on held-out rows (rooflaw/constraints/bands.py). Written by:",
        f"# {command}",
        f'source = "{rows_note}"',
        f"levels = {fl(LEVELS)}",
        "",
    ]
    for p, b in sorted(bands.items()):
        out += [f"[phase.{p}]", f"rows = {b.rows}", f"ratio = {fl(b.ratio)}", ""]
    return "\n".join(out)


def write(bands: Mapping[str, PhaseBand], rows_note: str, command: str, path: str | Path | None = None) -> str:
    """Write ``bands.toml`` (the package's, or ``path``) and drop the cached copy."""
    p = Path(path) if path else BANDS_FILE
    write_text_atomic(p, bands_toml(bands, rows_note, command))
    shipped.cache_clear()
    return str(p)


def fmt_band(text: str, low: str, high: str, level: float = BAND_LEVEL) -> str:
    """``8.96 ms [7.9–10.4], 80 %`` from the formatted value and its formatted band."""
    return f"{text} [{low}–{high}], {level * 100:.0f} %"


# names under which the public API (``rooflaw``) exports this module's entry points
band_coverage = coverage
bands_from_rows = from_rows
write_bands = write
