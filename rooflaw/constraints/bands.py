"""Error bands: how far measured latencies fall from rooflaw's predictions, per phase, on sources it did not fit.

A band is a pair of quantiles of the ratio ``measured / predicted`` for a row of a source the fit did not see,
built from leave-one-source-out residuals of the published measurements (``rooflaw devices fit-efficiency DATA
--write-catalog`` writes ``bands.toml`` beside this module, with the rows and the command); the kernel families
carry the kernel curves' own ``bands`` (leave-one-GPU-out). A prediction ``p`` of a phase gets the 80 % band
``[p·r(0.1), p·r(0.9)]``; a throughput (tokens/s, the inverse of a time) gets ``[x / r(0.9), x / r(0.1)]``.

Errors cluster by source (one source's rows share an engine build, a board, a prompt set), so a band for "a row
of a new source" must hold the spread *between* sources as well as the spread of rows within one. The log ratios
y = log(measured / predicted) are read as a one-way random-effects model, y = μ_phase + u_source + e_row, with
u ~ N(0, τ²) between sources and e ~ N(0, σ²) within one (:func:`random_effects`, moment estimates). The published
rows hold five sources per phase at most (two for e2e), too few to estimate a spread per phase, so τ² and σ² are
pooled over the phases; each phase keeps its own centre μ (the mean of its sources' means: each source one draw).
A phase's quantile q is ``exp(μ + t_df(q) · sqrt(τ² + σ² + var μ))``, Student's t with the between-source degrees
of freedom (the variances are estimated from a handful of sources).

``--confidence q`` meets a latency budget at the ``q`` quantile: the phase's latency times ``r(q)`` must stay
within the budget, i.e. the latency itself within ``budget / r(q)`` -- one factor per phase, so every solver
(closed form, GP, exhaustive, search, the kernels) stays exact (:class:`rooflaw.solver.budgets.LatencyBudget`).

:func:`coverage` checks that a band holds what it claims: for each source, the band is rebuilt without the source
(from the other sources' held-out residuals, or -- ``nested`` -- from a leave-one-source-out run that never saw
it at all) and the source's own held-out rows are counted inside or out.
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
from scipy import stats

from ..errors import RooflawError, bad
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
    #: the random-effects figures behind ``ratio`` (log space): centre μ, spread sqrt(τ² + σ² + var μ), t's dof
    centre: float = 0.0
    spread: float = 0.0
    df: float = 0.0

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


def _group(row: Mapping[str, Any], key: str) -> str:
    """The group a held-out row belongs to: its ``key`` (the held-out source), else its ``source``."""
    return str(row.get(key, row.get("source", "")))


@dataclass(frozen=True)
class RandomEffects:
    """Moment estimates of y = μ_phase + u_source + e_row on log(measured/predicted): ``centre[phase]``, the
    between-source variance ``tau2``, the within-source variance ``sigma2`` (both pooled over the phases), ``df``
    the between-source degrees of freedom, ``sources[phase]`` and ``n_over[phase]`` = Σ 1/n over its sources."""

    centre: dict[str, float]
    tau2: float
    sigma2: float
    df: float
    sources: dict[str, int]
    n_over: dict[str, float]
    rows: dict[str, int]

    def spread(self, phase: str) -> float:
        """sd of y for a row of a new source in ``phase``: sqrt(τ² + σ² + var μ), var μ = (G τ² + σ² Σ 1/n) / G²."""
        g = self.sources[phase]
        var_mu = (g * self.tau2 + self.sigma2 * self.n_over[phase]) / g**2
        return math.sqrt(self.tau2 + self.sigma2 + var_mu)


def _log_ratios(rows: Sequence[Mapping[str, Any]], key: str) -> dict[tuple[str, str], list[float]]:
    """log(measured/predicted) per (phase, group of ``key``) of rows carrying ``error`` = predicted/measured − 1."""
    by: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        x = 1.0 + float(r["error"])
        if not (math.isfinite(x) and x > 0):
            raise bad("error", r["error"], "a held-out row's predicted/measured − 1 must be finite and above −1")
        by.setdefault((str(r["phase"]), _group(r, key)), []).append(-math.log(x))
    return by


def random_effects(rows: Sequence[Mapping[str, Any]], key: str = "held_out") -> RandomEffects:
    """The random-effects figures of held-out ``rows`` grouped by ``key`` (a source), see the module docstring.

    σ² = Σ (y − ȳ_g)² / Σ (n_g − 1); with μ_p the unweighted mean of phase p's G_p group means,
    E Σ_g (ȳ_g − μ_p)² = (G_p − 1)(τ² + σ² · mean_g 1/n_g), so τ² = max(0, [Σ_p Σ_g (ȳ_g − μ_p)² −
    σ² Σ_p (G_p − 1)/G_p Σ_g 1/n_g] / Σ_p (G_p − 1)); ``df`` = Σ_p (G_p − 1), else (one group per phase) the
    within-source degrees of freedom with τ² = 0."""
    by = _log_ratios(rows, key)
    if not by:
        raise bad("rows", "[]", "no held-out rows to build a band from")
    phases = sorted({p for p, _ in by})
    means = {k: float(np.mean(v)) for k, v in by.items()}
    centre = {p: float(np.mean([m for (q, _), m in means.items() if q == p])) for p in phases}
    groups = {p: [k for k in by if k[0] == p] for p in phases}
    df_w = sum(len(v) - 1 for v in by.values())
    sigma2 = sum(float(np.sum((np.asarray(v) - means[k]) ** 2)) for k, v in by.items()) / df_w if df_w else 0.0
    df_b = sum(len(g) - 1 for g in groups.values())
    n_over = {p: sum(1.0 / len(by[k]) for k in groups[p]) for p in phases}
    if df_b:
        ss_b = sum((means[k] - centre[k[0]]) ** 2 for k in by)
        ss_b -= sigma2 * sum((len(groups[p]) - 1) / len(groups[p]) * n_over[p] for p in phases)
        tau2, df = max(0.0, ss_b / df_b), float(df_b)
    else:
        tau2, df = 0.0, float(df_w)
    if df < 1:
        raise bad("rows", len(rows), "too few held-out rows and sources to estimate a band (at least two needed)")
    rows_n = {p: sum(len(by[k]) for k in groups[p]) for p in phases}
    return RandomEffects(centre, tau2, sigma2, df, {p: len(g) for p, g in groups.items()}, n_over, rows_n)


def from_rows(rows: Sequence[Mapping[str, Any]], source: str = "", key: str = "held_out") -> dict[str, PhaseBand]:
    """Bands per phase from held-out rows (``phase``, ``error`` = predicted/measured − 1 and the group ``key``, as
    :func:`rooflaw.constraints.fit_held_out.held_out` returns them): the random-effects quantiles at LEVELS."""
    re = random_effects(rows, key)
    out = {}
    for p in sorted(re.centre):
        s = re.spread(p)
        ratio = tuple(float(math.exp(re.centre[p] + stats.t.ppf(q, re.df) * s)) for q in LEVELS)
        out[p] = PhaseBand(p, LEVELS, ratio, re.rows[p], source, re.centre[p], s, re.df)
    return out


def coverage(
    rows: Sequence[Mapping[str, Any]],
    level: float = BAND_LEVEL,
    key: str = "held_out",
    nested: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> dict[str, Any]:
    """Share of held-out ``rows`` inside their ``level`` band when each group of ``key`` (a source) is banded
    without it: from ``nested[group]`` (held-out rows of a run that left the group out of every fit), else from the
    other groups' ``rows``. Per phase ``{"rows", "inside", "share"}`` and ``all``; a phase no other group has is
    not counted."""
    lo_q = round((1.0 - level) / 2.0, 10)
    counts: dict[str, list[int]] = {}
    for g in sorted({_group(r, key) for r in rows}):
        test = [r for r in rows if _group(r, key) == g]
        train = list(nested[g]) if nested is not None else [r for r in rows if _group(r, key) != g]
        try:
            bands = from_rows(train, key=key)
        except RooflawError:
            continue
        for r in test:
            b = bands.get(str(r["phase"]))
            if b is None:
                continue
            x = 1.0 / (1.0 + float(r["error"]))
            lo, hi = b.at(lo_q), b.at(1.0 - lo_q)
            c = counts.setdefault(str(r["phase"]), [0, 0])
            c[0] += int(lo <= x <= hi)
            c[1] += 1
    out: dict[str, Any] = {p: {"rows": n, "inside": i, "share": i / n if n else math.nan}
                           for p, (i, n) in sorted(counts.items())}  # fmt: skip
    tot_in, tot_n = sum(c[0] for c in counts.values()), sum(c[1] for c in counts.values())
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
        out[p] = PhaseBand(
            p,
            levels,
            tuple(float(x) for x in v["ratio"]),
            int(v.get("rows", 0)),
            src,
            float(v.get("centre", 0.0)),
            float(v.get("spread", 0.0)),
            float(v.get("df", 0.0)),
        )
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
        "# Error bands: quantiles of measured/predicted for a row of a source the fit did not see (random effects on",
        "# leave-one-source-out log ratios: centre, spread = sd, df of Student's t; rooflaw/constraints/bands.py).",
        "# Written by:",
        f"# {command}",
        f'source = "{rows_note}"',
        f"levels = {fl(LEVELS)}",
        "",
    ]
    for p, b in sorted(bands.items()):
        out += [
            f"[phase.{p}]",
            f"rows = {b.rows}",
            f"centre = {b.centre:.4g}",
            f"spread = {b.spread:.4g}",
            f"df = {b.df:g}",
            f"ratio = {fl(b.ratio)}",
            "",
        ]
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
