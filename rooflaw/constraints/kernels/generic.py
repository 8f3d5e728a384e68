"""What the ``generic`` curves (a GPU of an architecture with none) carry (:func:`pooled`), and the alternative way
to build them: each figure the median of the architectures' (``fit-kernels --generic median``).

Each GPU in the measured tables is the only one of its architecture, so the shipped pooled least-squares fit over all
their rows identifies some figures poorly (they trade off against each other across GPUs) and can land them far from
every architecture's own value (``attention_l2`` 0.037 pooled vs 0.005--0.027 per architecture). The median way
takes each pooled figure (:func:`pooled`) as the median over the architectures' own fits of that figure (among those
that have it): a value some architecture actually reached, fitted jointly with its other figures. GPU-side fixed
times counted in SM cycles (:data:`CYCLES`) are compared in cycles, ``seconds · clock_mhz``, and written back as
seconds at ``clock_mhz`` of the result (the geometric mean of the GPUs' clocks, :func:`.fit.reference_clock_mhz`).
Leaving a GPU out needs no fit: its architecture's curves are dropped from the median. Which way ships was decided by
a rule fixed in advance (docs/kernels.md: on session 12's final fits, held out 18.9 % pooled vs 22.2 % median).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from . import FAMILIES, GENERIC, SCALARS, CollectiveCurve, Family, KernelCurves, attention_decode, attention_prefill
from .collectives import RAMP_FIGURES, in_cycles
from .paths import with_params

#: dict-valued figures of :class:`KernelCurves` (dotted ``<dict>.<key>`` paths): every ``dict[str, float]`` field
DICTS = tuple(f.name for f in dataclasses.fields(KernelCurves) if f.type == "dict[str, float]")
#: figures counted in SM cycles written as seconds (µs for ``token_us``) at the curves' ``clock_mhz`` (a family that
#: makes another figure a cycle count adds it here)
CYCLES = frozenset(
    {
        "kernel_s",
        "kstep_s",
        "split_s",
        "moe_s",
        "decode_tile_s",
        "decode_mha_tile_s",
        "decode_ws_tile_s",
        "mla_tile_s",
        "attention_tile_s",
        "attention_ws_tile_s",
        "token_us",
    }
)
#: how ``generic`` was built, in its provenance (after ``fit_sample``, which describes the architectures' fits)
BUILT = "; generic: each figure the median of the architectures' fits (kernels/generic.py)"
_COLLECTIVE = tuple(f.name for f in dataclasses.fields(CollectiveCurve))


def collective_cycles(path: str) -> bool:
    """Whether dotted ``path`` (``collectives.<key>/<kind>.<figure>``) is a collective's SM-cycle figure
    (:func:`.collectives.in_cycles`)."""
    head, _, rest = path.partition(".")
    key, _, fig = rest.rpartition(".")
    return head == "collectives" and in_cycles(key.split("/")[0], fig)


def pooled(name: str) -> bool:
    """Whether figure ``name`` is carried into the ``generic`` curves (a median): not an engine's MoE kernel rates
    per dtype (``rate.``, ``engine_compute.``, fixed seconds ``launch.<framework>/moe_<dtype>``) nor the MoE kernels'
    per-dtype rates (``moe_compute.<key>``), which
    describe the kernels an architecture runs (vLLM hands the layer to Triton on Ada, to FlashInfer on
    Blackwell) and so have no architecture-free value, nor a prefill side kernel's rate,
    nor a GEMM library's own fixed time (``launch.<framework>/<dtype>/<library>``, :mod:`.gemm_library`), nor a
    collective's channel ramp (:data:`.collectives.RAMP_FIGURES`), nor a decode kernel's own split (``split_share.``),
    side kernel's or fp8-KV kernel's rate (:mod:`.attention_decode`)."""
    engine = name.startswith(("rate.", "engine_compute.", "launch.")) and "/moe_" in name
    engine = engine or (name.startswith("launch.") and name.count("/") == 2)
    engine = engine or (name.startswith("collectives.") and name.rsplit(".", 1)[-1] in RAMP_FIGURES)
    engine = engine or attention_prefill.side_rate(name) or attention_decode.side_rate(name)
    kernel = name.startswith("split_share.")  # a decode kernel's own split (attention)
    kernel = kernel or attention_decode.fp8_rate(name)  # an architecture's fp8-KV decode kernel
    return not (name.startswith(("moe_compute.", "moe_reread_lib.")) or engine or kernel)


def figures(c: KernelCurves) -> dict[str, float]:
    """Dotted path -> value of every figure ``c`` holds (scalars but ``clock_mhz``, dict entries, collectives)."""
    out = {s: float(getattr(c, s)) for s in SCALARS if s != "clock_mhz"}
    for d in DICTS:
        out.update({f"{d}.{k}": float(v) for k, v in getattr(c, d).items()})
    for k, cc in c.collectives.items():
        out.update({f"collectives.{k}.{a}": float(getattr(cc, a)) for a in _COLLECTIVE})
    return out


def determined(gpus: Iterable[Any], families: Iterable[Family] | None = None) -> set[str]:
    """The figures the tables of ``gpus`` (:class:`.fit.GPU`) determine (each family's ``used``, else ``params``):
    an architecture's other figures sit at their defaults (Ampere's ``attention_fp8``: it runs no fp8 attention)."""
    out: set[str] = set()
    for fam in families if families is not None else FAMILIES.values():
        for g in gpus:
            frames = [t.rows for t in g.tables if t.table in fam.tables]
            if frames:
                out.update(fam.used(pd.concat(frames, ignore_index=True)) if fam.used is not None else fam.params)
    return out


def median_curves(
    curves: Iterable[KernelCurves], clock_mhz: float, fitted: Mapping[str, Collection[str]] | None = None
) -> KernelCurves:
    """``generic`` curves whose every pooled figure is the median of ``curves``' values of it (cycle figures in
    cycles, written as seconds at ``clock_mhz``), over the curves that have it -- with ``fitted`` (architecture ->
    :func:`determined` figures), over those whose rows determine it; figures none of them has, or not pooled, keep
    their defaults."""
    given = list(curves)
    values: dict[str, list[float]] = {}
    for c in given:
        for path, v in figures(c).items():
            if pooled(path) and (fitted is None or path in fitted.get(c.architecture, ())):
                cycles = (path.split(".")[0] in CYCLES or collective_cycles(path)) and c.clock_mhz > 0 < clock_mhz
                values.setdefault(path, []).append(v * c.clock_mhz / clock_mhz if cycles else v)
    base = KernelCurves(architecture=GENERIC, compute={}, memory=1.0, kernel_s=0.0, clock_mhz=clock_mhz)
    return with_params(base, {p: float(np.median(v)) for p, v in values.items()})
