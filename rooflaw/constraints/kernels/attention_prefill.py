"""Prefill attention's side kernels: the kernels an engine hands some prefill shapes to, each at its own rate.

An engine's prefill op runs its own kernel for most shapes and hands the rest to another library (the table's
``kernel_source`` names it): a one-token prompt to a decode kernel, a head dim its backend lacks to a Triton or
FlashAttention-4 kernel, TensorRT-LLM's wide heads on Blackwell to FlashInfer. Each such kernel runs at its own
``rate["<engine>/<op>/<path>"]`` (relative to the curves' prefill fraction, as an engine's rate is), where fitted;
elsewhere at the engine's rate.
"""

from __future__ import annotations

import numpy as np

#: (substring of a table's ``kernel_source``, name) of the side kernels an engine hands some prefill shapes to, first
#: match wins; a row whose source names none runs the engine's own prefill kernel (TensorRT-LLM's FMHA, vLLM's
#: FlashAttention or FlashInfer prefill), priced at the engine's rate. vLLM runs a one-token prompt through its decode
#: kernel (FlashInfer's, TensorRT-LLM-gen's: no 128-row query tiles), a head dim its backend lacks through its Triton
#: kernel (d = 192 on Blackwell and Ada) or FlashAttention-4 (d = 512 on Hopper); TensorRT-LLM hands d = 256 and 512
#: to FlashInfer on Blackwell.
KERNEL_PATHS = (("decode", "decode"), ("triton", "triton"), ("fa4", "fa4"), ("torch_flow_flashinfer", "flashinfer"))
SIDE_NAMES = frozenset(n for _, n in KERNEL_PATHS)
#: the prefill ops whose rows name side kernels
PREFILL_OPS = ("context_attention", "context_mla")


def kernel_paths(rows) -> np.ndarray:
    """Per row, the :data:`KERNEL_PATHS` name its ``kernel_source`` names ('' for the engine's own kernel or none)."""
    if "kernel_source" not in rows:
        return np.full(len(rows), "", dtype=object)
    src, inv = np.unique(rows["kernel_source"].astype(str).str.lower().to_numpy(), return_inverse=True)
    names = np.array([next((n for sub, n in KERNEL_PATHS if sub in s), "") for s in src] or [""], dtype=object)
    return names[inv]


def path_key(framework: str, op: str, path: str) -> str:
    """The :attr:`KernelCurves.rate` key of an engine's side kernel ``path`` for prefill op ``op``."""
    return f"{framework}/{op}/{path}"


def path_rate(rate: np.ndarray, paths: np.ndarray | None, frameworks: np.ndarray, op: str, table: dict) -> np.ndarray:
    """``rate`` with each side kernel's own ``rate["<engine>/<op>/<path>"]`` where the curves hold it."""
    if paths is None or not table or not len(rate):
        return rate
    pairs = np.char.add(np.char.add(frameworks.astype(str), "|"), paths.astype(str))
    keys, inv = np.unique(pairs, return_inverse=True)
    own = []
    for k in keys:
        fw, path = k.split("|")
        own.append(table.get(path_key(fw, op, path), np.nan) if path else np.nan)
    mine = np.asarray(own)[inv]
    return np.where(np.isfinite(mine), mine, rate)


def side_rate(name: str) -> bool:
    """Whether fitted figure ``name`` is a side kernel's rate, ``rate.<engine>/<prefill op>/<path>``: a kernel an
    architecture's engines hand shapes to (Triton on Blackwell 0.2 of the engine's rate, on Ada 0.8), with no
    architecture-free value, so not pooled in ``generic`` (:func:`.fit.pooled`)."""
    parts = name.split("/")
    return name.startswith("rate.") and len(parts) == 3 and parts[1] in PREFILL_OPS and parts[2] in SIDE_NAMES


def path_params(rows, op: str) -> list[str]:
    """``rate.<engine>/<op>/<path>`` of each side kernel ``rows`` run (fitted figures)."""
    fws = rows["framework"].astype(str).to_numpy()
    return sorted({f"rate.{path_key(f, op, p)}" for f, p in zip(fws, kernel_paths(rows), strict=True) if p})
