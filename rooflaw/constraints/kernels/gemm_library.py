"""Fixed seconds of a GEMM by the kernel library the engine hands it to.

vLLM's block-fp8 linear layer picks its kernel library by GPU and shape -- CUTLASS, DeepGEMM or FlashInfer on
Hopper, CUTLASS or DeepGEMM on Blackwell, Triton on Ada (the tables' ``kernel_source``:
``CutlassFp8BlockScaledMMKernel``, ``DeepGemmFp8BlockScaledMMKernel``, ...) -- and each library's Python path
costs its own fixed time a call, whatever the shape: its floor at one token is 157 / 169 µs for CUTLASS on B200 /
H100 alike, 81 µs for DeepGEMM and 57 µs for FlashInfer on H100, 293 µs for Triton on L40S (2nd percentile of
each library's rows). One figure per engine and dtype priced H100's CUTLASS rows at 0.44× and its FlashInfer
rows at 1.36× in sample. So the rows of :data:`LIBRARY_FIXED` pairs take ``launch["<engine>/<key>/<library>"]``
(:func:`library_key`) in place of the engine's ``launch["<engine>/<key>"]``; a library the curves have no figure
for (a table without ``kernel_source``, a library seen on no fitted GPU) takes the engine's figure, which the fit
sets to the median of its libraries' (:func:`with_engine_figures`) -- the figure the assembly reads, which
prices a GEMM without naming its library. The library figures are not pooled into the ``generic`` curves: a
library's path differs by architecture (DeepGEMM's floor is 76 µs on H100 and 187 µs on B200, which hand it
different kernels and scale layouts; only CUTLASS's agrees, 160 / 172 µs), so a GPU of an unseen architecture is
priced by the engine's one figure, fitted on all its libraries' rows (:func:`fit_with_libraries`).

TensorRT-LLM's SmoothQuant (int8 W8A8) and weight-only plugins hand a GEMM of at most :data:`SMALL_M_KERNEL` rows
to a CUDA-core kernel of their own, not CUTLASS (``SmoothQuantGemmPlugin::enqueue``: ``m <= 4`` runs
``int8_sq_launcher``; the weight-only plugin ``weight_only_batched_gemv_launcher`` for ``m < SMALL_M_FAST_PATH``
= 5; NVIDIA/TensorRT-LLM ``cpp/tensorrt_llm/plugins``): those rows take the library ``"gemv"``
(``launch["trtllm/<key>/gemv"]``), so the CUTLASS path's fixed time is fitted on the rows that run it (A100's
SmoothQuant rows read 1.2--1.5x too slow at M <= 4 and 0.6x too fast at M = 8 on one figure).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from . import GENERIC, Family, KernelCurves

#: (substring of a table's lower-cased ``kernel_source``, library name), first match wins
LIBRARIES = (("deepgemm", "deepgemm"), ("flashinfer", "flashinfer"), ("cutlass", "cutlass"), ("triton", "triton"))
#: (compute key, engine) GEMMs whose fixed seconds follow the kernel library the engine picks
LIBRARY_FIXED = frozenset({("fp8_block", "vllm")})
#: (compute key, engine) -> the most rows its small-M CUDA-core kernel ("gemv") takes
SMALL_M_KERNEL = {("int8", "trtllm"): 4, ("mixed", "trtllm"): 4}
GEMV = "gemv"


def library_of(kernel_source: Any) -> str:
    """Name of the :data:`LIBRARIES` library ``kernel_source`` names ('' for none)."""
    src = str(kernel_source).lower()
    return next((name for sub, name in LIBRARIES if sub in src), "")


def row_libraries(rows: pd.DataFrame, keys: np.ndarray, frameworks: np.ndarray) -> np.ndarray:
    """Per row, the library of its ``kernel_source`` where its (compute key, engine) is in :data:`LIBRARY_FIXED`,
    :data:`GEMV` where it is a :data:`SMALL_M_KERNEL` pair's row of few enough rows ('' elsewhere)."""
    out = np.full(len(rows), "", dtype=object)
    if not len(rows):
        return out
    most = np.array([SMALL_M_KERNEL.get((str(k), str(f)), 0) for k, f in zip(keys, frameworks, strict=True)])
    out = np.where(rows["m"].to_numpy(dtype=np.float64) <= most, GEMV, out)
    if "kernel_source" not in rows:
        return out
    fixed = np.array([(str(k), str(f)) in LIBRARY_FIXED for k, f in zip(keys, frameworks, strict=True)], dtype=bool)
    src, inv = np.unique(rows["kernel_source"].astype(str).to_numpy(), return_inverse=True)
    libs = np.array([library_of(s) for s in src], dtype=object)[inv]
    return np.where(fixed, libs, out)


def library_key(framework: str, key: str, library: str) -> str:
    """The :attr:`KernelCurves.launch` key of ``framework``'s ``key`` GEMM run by ``library``."""
    return f"{framework}/{key}/{library}"


def library_extra(curves: KernelCurves, key: str, framework: str, library: str) -> float | None:
    """Fixed seconds beyond ``kernel_s`` of ``framework``'s ``key`` GEMM run by ``library``: the curves' figure for
    that library, ``None`` where they have none (the caller takes the engine's)."""
    if not library:
        return None
    v = curves.launch.get(library_key(framework, key, library))
    return None if v is None else float(v)


def with_engine_figures(curves: KernelCurves) -> KernelCurves:
    """``curves`` with ``launch["<engine>/<key>"]`` of each :data:`LIBRARY_FIXED` pair that has library figures set
    to their median: what a GEMM of that engine costs whose library is not named (the assembly's, a table without
    ``kernel_source``, a library no fitted GPU ran)."""
    launch = dict(curves.launch)
    for key, fw in sorted(LIBRARY_FIXED):
        figs = [v for k, v in curves.launch.items() if k.startswith(f"{fw}/{key}/")]
        if figs:
            launch[f"{fw}/{key}"] = float(np.median(figs))
    return dataclasses.replace(curves, launch=launch)


FitOne = Callable[[Family, Sequence[Any], KernelCurves], KernelCurves]


def without_libraries(terms: Any) -> Any:
    """Prepared GEMM terms (``fixed_group``, ``fixed_labels``) with every row on its engine's figure."""
    labels = [(k, f, "") for k, f, _ in terms.fixed_labels]
    uniq = sorted(set(labels))
    index = np.array([uniq.index(lab) for lab in labels] or [0])
    return dataclasses.replace(terms, fixed_group=index[terms.fixed_group], fixed_labels=tuple(uniq))


def fit_with_libraries(fam: Family, data: Sequence[Any], curves: KernelCurves, fit_one: FitOne) -> KernelCurves:
    """The family's one joint fit (``fit_one``), then :func:`with_engine_figures`; the ``generic`` curves fit
    every row on its engine's figure (no library figures: see the module docstring)."""
    if curves.architecture == GENERIC:
        data = [dataclasses.replace(p, rows=p.rows.drop(columns="kernel_source", errors="ignore"),
                                    sample_terms=without_libraries(p.sample_terms)) for p in data]  # fmt: skip
    return with_engine_figures(fit_one(dataclasses.replace(fam, fit=None), data, curves))
