"""Achieved-performance curves per GPU architecture, fitted to measured kernels -- the seam.

This module fixes what the rest of rooflaw may rely on; the fit (``fit.py``), the per-family kernel
predictors (``predict.py`` and friends) and the kernel-table reader (``tables.py``) live beside it.

A device names its ``architecture`` (:data:`rooflaw.devices.device.ARCHITECTURES`); :func:`curves_for`
returns that architecture's :class:`KernelCurves` from the catalog shipped in the package
(``kernel_curves.toml`` beside this file, written by ``rooflaw devices fit-kernels``), or the pooled
``generic`` curves for a GPU whose architecture has none, or ``None`` for a device with no architecture
(CPU, NPU, TPU, another vendor's GPU: its own scalar efficiencies apply).

Every figure is **dimensionless or a time**, so it carries to any GPU of the architecture with its own
datasheet peaks: ``t_kernel = max(FLOPs / (peak_dtype · compute[dtype] · tile/wave), bytes / (bandwidth ·
memory)) + kernel_s`` is the one time formula of a kernel (the assembly's per-operator time).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class CollectiveCurve:
    """One collective on one link kind: ``t = latency + bytes_moved / (link_bandwidth · efficiency)`` (s)."""

    latency: float  #: s, fixed per call
    efficiency: float  #: achieved fraction of the link's datasheet bandwidth


@dataclass(frozen=True)
class KernelCurves:
    """Achieved performance of one GPU architecture, as fractions of datasheet figures plus fixed latencies.

    ``compute``: achieved fraction of each roof dtype's dense datasheet peak for large, well-tiled GEMMs
    (keys as :data:`rooflaw.devices.device.DTYPES`: ``fp16`` also prices bf16; ``fp8``, ``fp4``, ``int8``;
    ``fp8_block`` block-scaled fp8; ``mixed`` a weight-only quantised GEMM as a fraction of the activation
    dtype's peak). ``memory``: achieved fraction of DRAM bandwidth for a kernel that streams its operands
    (small-M GEMM, GEMV, decode attention's KV reads). ``kernel_s``: seconds every kernel costs on top of
    its roofline (launch, prologue/epilogue, the tail wave). ``half_rows``: GEMM rows at which the large-M
    rate is halved (``M/(M + half_rows)`` ramp; 0 none). ``attention``: achieved fraction of the attention
    dtype's peak in a FlashAttention-style prefill kernel, with causal FLOPs (the masked half skipped).
    ``attention_memory``: achieved bandwidth fraction of a decode attention kernel reading the KV cache.
    ``moe``: achieved fraction of the GEMM rate inside a grouped-GEMM MoE layer. ``collectives``: per
    ``"<collective>/<link>"`` key (e.g. ``"allreduce/nvlink"``). ``bands``: per family (``gemm``,
    ``context_attention``, ``generation_attention``, ``moe``, ``allreduce``), the (low, high) quantiles of
    measured/predicted in leave-one-GPU-out for the 80 % band. ``provenance``: source, commit, rows,
    command, residuals (median |predicted/measured - 1| per family, in sample and held out).
    """

    architecture: str
    compute: dict[str, float]
    memory: float
    kernel_s: float
    half_rows: float = 0.0
    attention: float = 1.0
    attention_memory: float = 1.0
    moe: float = 1.0
    collectives: dict[str, CollectiveCurve] = field(default_factory=dict)
    bands: dict[str, tuple[float, float]] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)


# ---- families: how a measured table is priced and which figures it fits --------------------------
from collections.abc import Callable  # noqa: E402


@dataclass(frozen=True)
class Family:
    """A kernel family: the measured tables it prices, the :class:`KernelCurves` figures it fits, its predictor.

    ``params``: dotted paths into :class:`KernelCurves` (``"memory"``, ``"compute.fp8"``,
    ``"collectives.allreduce/nvlink.latency"``) that this family's rows determine; families are fitted in
    registration order, each holding the figures fitted before it fixed (GEMM first: ``compute.*``, ``memory``,
    ``kernel_s``, ``half_rows``; then attention, MoE, collectives). ``predict(rows, device, curves)`` returns the
    predicted latency of each row of a table (a ``pandas.DataFrame`` with the table's own columns) in
    **milliseconds**, NaN where a row is not modelled.
    """

    name: str
    tables: tuple[str, ...]
    params: tuple[str, ...]
    predict: Callable[..., Any]


#: name -> Family, in fit order (see :func:`register`).
FAMILIES: dict[str, Family] = {}


def register(family: Family) -> Family:
    """Add ``family`` to :data:`FAMILIES` (a module defining one calls this at import)."""
    FAMILIES[family.name] = family
    return family


def family_of_table(table: str) -> Family | None:
    """The family that prices measured table ``table`` (e.g. ``gemm_perf``), or ``None``."""
    return next((f for f in FAMILIES.values() if table in f.tables), None)
