"""Fit :class:`KernelCurves` per GPU architecture to measured kernel tables, and score them leaving one GPU out.

Each family (:data:`FAMILIES`, in registration order) is fitted with ``scipy.optimize.least_squares`` on
``log(predicted / measured)`` with a soft-L1 loss, holding the figures of the families fitted before it fixed.
Rows are subsampled (seeded) to at most ``sample`` per (GPU, table, framework) for the fit; residuals are
computed on every row. ``generic`` curves, which price a GPU whose architecture has none, are one pooled fit on all
GPUs' rows (``generic="pooled"``, the default) or each figure's median over the architectures' fits
(``"median"``, :mod:`.generic`). Leave-one-GPU-out: predict each GPU with the curves the others give.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from ...devices.device import Device
from ...errors import RooflawError, bad
from . import FAMILIES, GENERIC, Family, KernelCurves, family_of_table
from .attention_decode import BOUNDS as DECODE_BOUNDS
from .catalog_file import COMMIT, SOURCE, catalog_text, curves_table, write_catalog  # noqa: F401 (re-exported)
from .collectives import BOUNDS as COLLECTIVE_BOUNDS
from .generic import BUILT, determined, median_curves, pooled
from .moe import BOUNDS as MOE_BOUNDS
from .moe import FRESH as MOE_FRESH
from .paths import get_param, with_params  # noqa: F401 (re-exported)
from .pricing import predict_tables, strict  # noqa: F401 (predict_tables re-exported)
from .tables import Table

#: aiconfigurator GPU folder -> catalog device id (folders not listed: the folder name with ``_`` -> ``-``).
GPU_DEVICES = {
    "a100_sxm": "a100-sxm-80gb",
    "h100_sxm": "h100-sxm",
    "h200_sxm": "h200-sxm",
    "b200_sxm": "b200",
    "gb200_sxm": "gb200",
    "gb200": "gb200",
    "gb300": "gb300",
    "l40s": "l40s",
    "l4": "l4",
    # aiconfigurator's other system folders (src/aiconfigurator/systems/*.yaml)
    "h20_sxm": "h20",
    "h800_sxm": "h800-sxm",
    "b300_sxm": "b300",
    "gb300_sxm": "gb300",
    "rtx_5090": "rtx-5090",
    "rtx_pro_6000_server": "rtx-pro-6000-server",
    "rtxpro6000_blackwell_server": "rtx-pro-6000-server",
}
#: starting value, lower and upper bound, typical scale of a figure, by the name of its first path component.
_BOUNDS = {
    "compute": (0.6, 0.01, 1.5, 1.0),
    "memory": (0.8, 0.05, 1.5, 1.0),
    "attention": (0.5, 0.01, 1.5, 1.0),
    "attention_fp8": (0.5, 0.01, 1.5, 1.0),
    "attention_tile_s": (1e-6, 0.0, 1e-3, 1e-6),
    "attention_ws_tile_s": (3e-6, 0.0, 1e-3, 1e-6),  # ~7k SM cycles at ~2 GHz (fitted on Hopper, Blackwell)
    **DECODE_BOUNDS,  # keys decode_<figure> (attention_decode.py)
    "attention_memory": (0.7, 0.05, 1.5, 1.0),
    "mla_token_s": (2e-8, 0.0, 1e-5, 1e-8),
    "prefill_pack_gqa": (0.5, 0.0, 1.0, 0.1),
    "prefill_blend": (4.0, 1.0, 30.0, 1.0),
    "mla_memory": (0.8, 0.05, 1.5, 1.0),
    "mla_tile_s": (3e-6, 0.0, 1e-3, 1e-6),
    "mla_walk_blend": (3.0, 1.0, 30.0, 1.0),
    "attention_l2": (0.02, 0.0, 1.0, 0.01),
    "attention_softmax": (4.0, 0.0, 200.0, 10.0),
    "softmax_overlap": (2.0, 1.0, 8.0, 1.0),
    "split_share": (0.5, 0.0, 1.0, 0.1),
    "kernel_s": (3e-6, 0.0, 1e-3, 1e-5),
    "launch": (1e-6, 0.0, 1e-2, 1e-5),
    "rate": (1.0, 0.2, 5.0, 1.0),
    "half_rows": (10.0, 0.0, 1e4, 100.0),
    "gemm_blend": (4.0, 1.0, 30.0, 1.0),
    "split_s": (2e-6, 0.0, 1e-4, 1e-6),
    "kstep_s": (1e-8, 0.0, 1e-6, 1e-8),
    "l2_sm_gbps": (10.0, 0.0, 100.0, 1.0),
    "l2_share": (0.3, 0.01, 1.0, 0.1),
    "quant_passes": (1.0, 0.0, 20.0, 1.0),
    "engine_compute": (1.0, 0.2, 3.0, 1.0),
    **COLLECTIVE_BOUNDS,  # keys collectives.<figure> (collectives.py)
    **MOE_BOUNDS,  # the MoE layer's figures (moe.py)
}
_DEFAULT_BOUNDS = (0.5, 0.0, 10.0, 1.0)
#: figures whose fit starts from the ``_BOUNDS`` start, not the curves' current (default) value
_FRESH = frozenset({"compute", "gemm_blend", "split_s", "kstep_s", "l2_sm_gbps", "l2_share"})
#: the decode attention figures whose fit starts from the ``_BOUNDS`` start (from its default, a bound, it stalls)
_FRESH = _FRESH | set(DECODE_BOUNDS) | {"mla_token_s", "mla_memory", "mla_tile_s", "prefill_pack_gqa", "prefill_blend"}
_FRESH = _FRESH | {"attention_ws_tile_s"}  # prefill's warp-specialised wave: from its default 0, a bound, it stalls
#: the MoE family's shape figures start inside their range too (at their default 0 the fit may not leave the bound)
_FRESH = _FRESH | MOE_FRESH
#: how ``generic`` is built (:func:`fit_kernels`): one fit on every GPU's rows, or the architectures' medians
GENERIC_WAYS = ("pooled", "median")
QUANTILES = (0.1, 0.9)  #: the 80 % band of measured/predicted
#: share of held-out rows an 80 % band must hold, and the tail masses its quantiles may take to get there
BAND_SHARE, TAILS = 0.8, tuple(np.round(np.arange(0.10, 0.0049, -0.005), 4))


@dataclass
class GPU:
    """One GPU's measured tables and the catalog device that prices them."""

    name: str
    device: Device
    tables: list[Table]

    @property
    def architecture(self) -> str:
        return self.device.curves_architecture or GENERIC


def device_for_folder(folder: str, overrides: dict[str, str] | None = None) -> Device:
    """The catalog device of aiconfigurator GPU folder ``folder`` (``overrides`` maps a folder to an id or file)."""
    from ...devices.catalog import get_device

    ident = (overrides or {}).get(folder) or GPU_DEVICES.get(folder) or folder.replace("_", "-")
    try:
        dev = get_device(ident)
    except RooflawError as e:
        raise bad("gpu folder", folder, f"no device for it ({e}); map it with --map {folder}=ID") from None
    if not dev.architecture:
        raise bad("gpu folder", folder, f"device {dev.id} has no architecture; kernel curves need one")
    return dev


def kernel_gpus(dirs: Iterable[str | Path], overrides: dict[str, str] | None = None,
                only: Iterable[str] | None = None) -> list[GPU]:  # fmt: skip
    """The GPUs of kernel-table folders ``dirs`` (roots or GPU folders), each with its catalog device
    (:func:`device_for_folder`); ``only``: read just these tables."""
    from .tables import gpu_tables

    found: dict[str, list[Table]] = {}
    for d in dirs:
        for gpu, tabs in gpu_tables(d, only).items():
            if gpu in found:
                raise bad("DIR", str(d), f"GPU folder {gpu!r} given twice")
            found[gpu] = tabs
    return [GPU(n, device_for_folder(n, overrides), t) for n, t in found.items()]


def initial_curves(architecture: str) -> KernelCurves:
    # moe_serial starts inside (0, 1]: at its default 0 (the hard max) the blend has no gradient in it
    return KernelCurves(architecture=architecture, compute={}, memory=_BOUNDS["memory"][0], kernel_s=3e-6,
                        moe_serial=_BOUNDS["moe_serial"][0])  # fmt: skip


# ---- data prepared once per (GPU, family) -------------------------------------------------------------
@dataclass
class Prepared:
    """A family's rows of one GPU: all of them, and the seeded sample the fit uses with its prepared terms."""

    gpu: GPU
    rows: pd.DataFrame
    sample: np.ndarray  #: positions (into ``rows``) of the rows the fit uses
    sample_terms: Any  #: ``family.prepare`` of those rows (``None`` without one)


def _evaluate(fam: Family, terms: Any, rows: pd.DataFrame, dev: Device, c: KernelCurves) -> np.ndarray:
    """Predicted seconds of prepared rows."""
    if fam.evaluate is not None:
        return np.asarray(fam.evaluate(terms, dev, c), dtype=np.float64)
    return np.asarray(fam.predict(rows, dev, c), dtype=np.float64) * 1e-3


def prepare(gpus: Sequence[GPU], fam: Family, sample: int, seed: int = 0) -> list[Prepared]:
    out = []
    for g in gpus:
        frames = [t.rows for t in g.tables if t.table in fam.tables]
        if not frames:
            continue
        rows = pd.concat(frames, ignore_index=True)
        rng = np.random.default_rng(seed)
        idx = []
        for _, grp in rows.groupby(["table", "framework"], sort=True):
            pos = grp.index.to_numpy()
            idx.append(pos if len(pos) <= sample else np.sort(rng.choice(pos, sample, replace=False)))
        samp = np.sort(np.concatenate(idx))
        with strict(f"{fam.name} tables of {g.name}"):
            sterms = fam.prepare(rows.iloc[samp].reset_index(drop=True), g.device) if fam.prepare else None
        out.append(Prepared(g, rows, samp, sterms))
    return out


def _measured_s(rows: pd.DataFrame) -> np.ndarray:
    return rows["latency"].to_numpy(dtype=np.float64) * 1e-3


def fit_family(fam: Family, data: Sequence[Prepared], curves: KernelCurves) -> KernelCurves:
    """``curves`` with the figures ``fam``'s rows in ``data`` determine fitted (others held fixed)."""
    if not data:
        return curves
    if fam.fit is not None:  # independent problems, each on its own rows (collectives: one per curve)
        return fam.fit(fam, data, curves, fit_family)
    used: list[str] = []
    for p in data:
        with strict(f"{fam.name} tables of {p.gpu.name}"):
            names = fam.used(p.rows) if fam.used is not None else fam.params
        for name in names:
            if name not in used:
                used.append(name)
    if curves.architecture == GENERIC:
        used = [name for name in used if pooled(name)]
    if not used:
        return curves
    x0, lo, hi, sc = [], [], [], []
    for name in used:
        head = name.split(".")[0]
        key = f"collectives.{name.rsplit('.', 1)[-1]}" if head == "collectives" else head
        start, low, high, scale = _BOUNDS.get(key, _DEFAULT_BOUNDS)
        cur = get_param(curves, name)
        x0.append(min(max(cur if cur is not None and head not in _FRESH else start, low), high))
        lo.append(low)
        hi.append(high)
        sc.append(scale)
    meas = [_measured_s(p.rows.iloc[p.sample]) for p in data]
    srows = [p.rows.iloc[p.sample] for p in data]

    def resid(x: np.ndarray) -> np.ndarray:
        c = with_params(curves, dict(zip(used, x, strict=True)))
        out = []
        for p, m, r in zip(data, meas, srows, strict=True):
            pred = _evaluate(fam, p.sample_terms, r, p.gpu.device, c)
            out.append(np.log(pred / m))
        res = np.concatenate(out)
        return np.where(np.isfinite(res), res, 0.0)

    x0a = np.clip(np.asarray(x0), np.asarray(lo), np.asarray(hi))
    sol = least_squares(resid, x0a, bounds=(lo, hi), loss="soft_l1", f_scale=0.1, x_scale=np.asarray(sc), max_nfev=200)
    return with_params(curves, dict(zip(used, sol.x, strict=True)))


def reference_clock_mhz(gpus: Sequence[GPU]) -> float:
    """Geometric mean boost clock (MHz) of ``gpus`` -- the clock at which fitted GPU-side cycles are written as
    seconds (``KernelCurves.clock_mhz``); 0 when any of them has no ``clock``."""
    clocks = [g.device.clock for g in gpus]
    if not clocks or any(not f for f in clocks):
        return 0.0
    return round(float(np.exp(np.mean(np.log(np.asarray(clocks, dtype=float) / 1e6)))), 3)


def fit_curves(gpus: Sequence[GPU], architecture: str, sample: int, seed: int = 0,
               families: Iterable[Family] | None = None,
               progress: Callable[[str], None] | None = None) -> KernelCurves:  # fmt: skip
    """Curves named ``architecture`` fitted on all of ``gpus``' tables, family by family."""
    c = dataclasses.replace(initial_curves(architecture), clock_mhz=reference_clock_mhz(gpus))
    for fam in families if families is not None else FAMILIES.values():
        if progress:
            progress(f"{architecture}: {fam.name}")
        c = fit_family(fam, prepare(gpus, fam, sample, seed), c)
    return c


# ---- predictions and scores -----------------------------------------------------------------------------
def abs_errors(pred_ms: np.ndarray, meas_ms: np.ndarray) -> np.ndarray:
    ok = np.isfinite(pred_ms) & np.isfinite(meas_ms) & (meas_ms > 0)
    return np.abs(pred_ms[ok] / meas_ms[ok] - 1.0)


def family_errors(gpu: GPU, curves: KernelCurves | None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Family -> (predicted ms, measured ms) over every modelled row of ``gpu``'s tables."""
    out: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] = {}
    for t, pred in zip(gpu.tables, predict_tables(gpu.tables, gpu.device, curves), strict=True):
        fam = family_of_table(t.table)
        if fam is None:
            continue
        ok = np.isfinite(pred)
        p, m = out.setdefault(fam.name, ([], []))
        p.append(pred[ok])
        m.append(t.rows["latency"].to_numpy(dtype=np.float64)[ok])
    return {k: (np.concatenate(p), np.concatenate(m)) for k, (p, m) in out.items()}


def _median(x: np.ndarray) -> float:
    return float(np.median(x)) if len(x) else float("nan")


@dataclass
class FitResult:
    """Curves per architecture (and ``generic``), with the scores that go into their provenance."""

    curves: dict[str, KernelCurves]
    gpus: list[str]
    in_sample: dict[str, dict[str, float]] = field(default_factory=dict)  #: gpu -> family -> median |err|
    held_out: dict[str, dict[str, float]] = field(default_factory=dict)  #: gpu -> family -> median |err|
    bands: dict[str, tuple[float, float]] = field(default_factory=dict)  #: family -> (q10, q90) measured/predicted
    #: family -> share of each held-out GPU's rows inside the band of the *other* GPUs' held-out rows (pooled)
    coverage: dict[str, float] = field(default_factory=dict)
    rows: dict[str, dict[str, int]] = field(default_factory=dict)  #: gpu -> family -> rows modelled
    ideal: dict[str, float] = field(default_factory=dict)  #: family -> median |err| of the pure roofline, all GPUs
    pooled_in_sample: dict[str, float] = field(default_factory=dict)
    pooled_held_out: dict[str, float] = field(default_factory=dict)
    generic: str = "pooled"  #: how ``generic`` was built (:data:`GENERIC_WAYS`)


def band_tail(ratios: dict[str, np.ndarray]) -> float:
    """Tail mass of each side of an 80 % band of measured/predicted from GPUs' held-out ``ratios``: the largest of
    :data:`TAILS` (0.10: the plain 10 %/90 % quantiles) at which each GPU's rows, banded by the other GPUs' quantiles,
    hold :data:`BAND_SHARE` of the rows. GPUs differ by more than their rows scatter (a shift per GPU), so plain
    quantiles of pooled rows hold fewer of a new GPU's rows than they claim; one GPU cannot be nested: 0.10."""
    if len(ratios) < 2:
        return QUANTILES[0]
    for tail in TAILS:
        inside = total = 0
        for name, rg in ratios.items():
            rest = np.concatenate([v for k, v in ratios.items() if k != name])
            lo, hi = np.quantile(rest, (tail, 1 - tail))
            inside, total = inside + int(np.sum((rg >= lo) & (rg <= hi))), total + len(rg)
        if total and inside / total >= BAND_SHARE:
            return float(tail)
    return float(TAILS[-1])


def nested_coverage(ratios: dict[str, np.ndarray]) -> float:
    """Share of the GPUs' held-out measured/predicted ``ratios`` inside an 80 % band checked out of sample, twice
    nested: each GPU's rows against the band of the other GPUs' rows, at the tail mass those GPUs alone choose."""
    inside = total = 0
    for name, rg in ratios.items():
        others = {k: v for k, v in ratios.items() if k != name}
        if others:
            t = band_tail(others)
            lo, hi = np.quantile(np.concatenate(list(others.values())), (t, 1 - t))
            inside, total = inside + int(np.sum((rg >= lo) & (rg <= hi))), total + len(rg)
    return inside / total if total else float("nan")


def fit_kernels(
    gpus: Sequence[GPU],
    sample: int = 8000,
    seed: int = 0,
    held_out: bool = True,
    progress: Callable[[str], None] | None = None,
    families: Iterable[Family] | None = None,
    generic: str = "pooled",
) -> FitResult:
    """Curves per architecture of ``gpus`` plus ``generic``: fitted on all their rows (``"pooled"``) or the figures'
    medians over the architectures' fits (``"median"``, :func:`.generic.median_curves`); in-sample and
    leave-one-GPU-out scores (``families``: fit only these, default all of :data:`FAMILIES`)."""
    if not gpus:
        raise bad("gpus", [], "need at least one GPU's kernel tables")
    if generic not in GENERIC_WAYS:
        raise bad("generic", generic, f"must be one of {', '.join(GENERIC_WAYS)}")
    archs = sorted({g.architecture for g in gpus})
    fams = list(families) if families is not None else None
    curves = {a: fit_curves([g for g in gpus if g.architecture == a], a, sample, seed, fams, progress) for a in archs}
    fitted = {a: determined([g for g in gpus if g.architecture == a], fams) for a in archs}  # figures rows set
    median = generic == "median"
    curves[GENERIC] = (median_curves([curves[a] for a in archs], reference_clock_mhz(gpus), fitted) if median
                       else fit_curves(gpus, GENERIC, sample, seed, fams, progress))  # fmt: skip
    res = FitResult(curves, [g.name for g in gpus], generic=generic)
    ins: dict[str, list[np.ndarray]] = {}
    for g in gpus:
        errs = family_errors(g, curves[g.architecture])
        res.in_sample[g.name] = {f: _median(abs_errors(p, m)) for f, (p, m) in errs.items()}
        res.rows[g.name] = {f: len(m) for f, (p, m) in errs.items()}
        for f, (p, m) in errs.items():
            ins.setdefault(f, []).append(abs_errors(p, m))
    res.pooled_in_sample = {f: _median(np.concatenate(v)) for f, v in ins.items()}
    ideal = KernelCurves(architecture="ideal", compute={}, memory=1.0, kernel_s=0.0)
    roof: dict[str, list[np.ndarray]] = {}
    for g in gpus:
        for f, (p, m) in family_errors(g, ideal).items():
            roof.setdefault(f, []).append(abs_errors(p, m))
    res.ideal = {f: _median(np.concatenate(v)) for f, v in roof.items()}
    if held_out and len(gpus) > 1:
        ratios: dict[str, dict[str, np.ndarray]] = {}
        hos: dict[str, list[np.ndarray]] = {}
        for g in gpus:
            rest = [h for h in gpus if h.name != g.name]
            if progress:
                progress(f"leave out {g.name}")
            theirs = [curves[a] for a in archs if a != g.architecture]  # fitted without g already: g is not theirs
            given: dict[str, KernelCurves] = {
                GENERIC: median_curves(theirs, reference_clock_mhz(rest), fitted) if median
                else fit_curves(rest, GENERIC, sample, seed, fams)}  # fmt: skip
            same = [h for h in rest if h.architecture == g.architecture]
            if same and g.architecture != GENERIC:
                given[g.architecture] = fit_curves(same, g.architecture, sample, seed, fams)
            errs = family_errors(g, given.get(g.architecture) or given[GENERIC])
            res.held_out[g.name] = {f: _median(abs_errors(p, m)) for f, (p, m) in errs.items()}
            for f, (p, m) in errs.items():
                ok = (m > 0) & (p > 0)
                ratios.setdefault(f, {})[g.name] = m[ok] / p[ok]
                hos.setdefault(f, []).append(abs_errors(p, m))
        for f, rs in ratios.items():
            tail = band_tail(rs)
            lo_q, hi_q = np.quantile(np.concatenate(list(rs.values())), (tail, 1 - tail))
            res.bands[f] = (float(lo_q), float(hi_q))
            res.coverage[f] = nested_coverage(rs)
        res.pooled_held_out = {f: _median(np.concatenate(v)) for f, v in hos.items()}
    return res


def with_provenance(res: FitResult, gpus: Sequence[GPU], command: str, sample: int, source: str = SOURCE,
                    commit: str = COMMIT) -> dict[str, KernelCurves]:  # fmt: skip
    """``res.curves`` with bands and provenance (source, commit, GPUs, rows, residuals, bands, command)."""
    out = {}
    for arch, c in res.curves.items():
        mine = [g for g in gpus if arch in (GENERIC, g.architecture)]
        rows: dict[str, int] = {}
        for g in mine:
            for f, n in res.rows.get(g.name, {}).items():
                rows[f] = rows.get(f, 0) + n
        prov = {
            "source": source,
            "commit": commit,
            "gpus": [g.name for g in mine],
            "devices": [g.device.id for g in mine],
            "rows": rows,
            "fit_sample": f"at most {sample} rows per (GPU, table, framework), seed 0"
            + (
                (BUILT if res.generic == "median" else "; generic: one fit on every GPU's rows")
                if arch == GENERIC
                else ""
            ),
            "command": command,
            "residual_in_sample": {
                f: _median(np.array([res.in_sample[g.name][f] for g in mine if f in res.in_sample.get(g.name, {})]))
                for f in rows
            },
        }
        if res.held_out:
            prov["residual_held_out"] = {
                f: _median(np.array([res.held_out[g.name][f] for g in mine if f in res.held_out.get(g.name, {})]))
                for f in rows
            }
            if arch == GENERIC:
                prov["residual_in_sample"] = dict(res.pooled_in_sample)
                prov["residual_held_out"] = dict(res.pooled_held_out)
            prov["band_coverage_held_out"] = dict(res.coverage)
        out[arch] = dataclasses.replace(c, bands=dict(res.bands), provenance=prov)
    return out


#: the public spelling (``rooflaw.fitting``)
write_kernel_catalog = write_catalog
