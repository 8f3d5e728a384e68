"""Kernel curves into the one assembly: a GPU's achieved figures from its architecture's curves.

A device with an ``architecture`` gets :class:`~.kernels.KernelCurves` (fitted to measured kernels of that
architecture, or the pooled ``generic`` curves) and each figure is a fraction of **its own** datasheet peak,
so a GPU without kernel data is priced from its datasheet:

* ``compute[dtype]``: the achieved fraction of each tensor roof (a roof the curves do not name takes the
  fp16 fraction: tf32, int4 -> int8 when present; the fp32 vector roof takes ``compute["fp32"]``, else 1:
  elementwise kernels are bandwidth-bound and priced by their bytes at ``memory``);
* ``compute["mixed"]``: a weight-only quantised (dequantising) GEMM, as a fraction of the 16-bit peak;
* ``attention``: a FlashAttention-style kernel's fraction of the attention dtype's peak (causal FLOPs);
* ``memory``: the achieved bandwidth fraction of a kernel that streams its operands;
* ``kernel_s``: seconds each kernel costs on top of its roofline, times the engine's kernel count;
* ``half_rows``: the GEMM M ramp ``M/(M + half_rows)`` of the large-M rate (with the tile/wave model).

Only what kernels cannot show comes from the engine profile (host overhead per pass and per layer, the kernel
count its fusion launches, and -- for an engine whose own kernels are not in the measured tables, llama.cpp --
its kernel-class factors). The old end-to-end ``[achieved]`` family figures are not read for such a device.
Not applied yet: ``attention_memory`` (decode attention's KV reads take ``memory``, as every other stream) and
``moe`` (routed-expert GEMMs take the GEMM rate): the assembly has one bandwidth and one linear roof per pass.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..devices.device import Device

#: engines whose kernels are the ones the measured tables hold (TensorRT-LLM, vLLM; gpt-fast's cuBLAS/Triton
#: GEMMs are priced the same way): their compute/memory/mixed/attention factors are 1 under kernel curves
TABLE_ENGINES = ("tensorrt-llm", "vllm", "gpt-fast")


def curves_of(device: Device) -> Any:
    """The :class:`~.kernels.KernelCurves` that price ``device`` (``None``: no architecture, or no curves shipped)."""
    if not getattr(device, "architecture", None):
        return None
    try:
        from .kernels import curves_for  # type: ignore[attr-defined]
    except ImportError:  # the curves catalog is not shipped in this build
        return None
    return curves_for(device)


def compute_fractions(kc: Any) -> dict[str, float]:
    """Achieved fraction of each roof dtype (:data:`.engines.COMPUTE_KEYS`) from curves ``kc``."""
    from .engines import COMPUTE_KEYS

    c = dict(kc.compute)
    fp16 = float(c.get("fp16", 1.0))
    out = {}
    for k in COMPUTE_KEYS:
        if k in c:
            out[k] = float(c[k])
        elif k == "fp32":
            out[k] = 1.0
        elif k == "int4":
            out[k] = float(c.get("int8", fp16))
        else:
            out[k] = fp16
    return out


def engine_note(device: Device, prof: Any, family: bool = False) -> str:
    """Which engine figures apply to ``device`` and why (fitted on its architecture, carried over, or none)."""
    fitted = prof.fitted_on or ()
    arch = getattr(device, "architecture", None) or device.kind
    if not prof.rows and not fitted:
        return f"{prof.name}: no fitted engine figures (kernel counts only)"
    where = ", ".join(fitted) or "published rows"
    if arch in fitted:
        return f"{prof.name} figures fitted on {where}"
    if getattr(device, "architecture", None) or family:
        return f"{prof.name} figures fitted on {where}, carried over to {arch} (host overheads)"
    return f"{prof.name} figures fitted on {where}: none apply to a {device.kind} without an architecture"


def applied_from_curves(device: Device, prof: Any, kc: Any) -> Any:
    """:class:`.engines.Applied` of ``device`` under engine profile ``prof`` with kernel curves ``kc``."""
    from .engines import Applied

    ce, me = float(device.compute_efficiency), float(device.memory_efficiency)
    frac = compute_fractions(kc)
    own = prof.name not in TABLE_ENGINES  # an engine with its own kernels keeps its kernel-class factors
    cf = prof.compute_factor if own else 1.0
    comp = {k: min(1.0, v * ce * cf) for k, v in frac.items()}
    mem = min(1.0, float(kc.memory) * me * (prof.memory_factor if own else 1.0))
    fp16 = frac["fp16"]
    mixed_abs = float(kc.compute.get("mixed", fp16)) * (prof.mixed_factor if own else 1.0)
    att_abs = float(kc.attention) * (prof.attention_factor if own else 1.0)
    mixed = mixed_abs / (fp16 * cf)
    attention = att_abs / (fp16 * cf)
    kernel_s = float(device.kernel_overhead or kc.kernel_s)
    prov = kc.provenance or {}
    src = f"kernel curves {kc.architecture}"
    if kc.architecture != device.architecture:
        src += f" (pooled: no {device.architecture} curves)"
    if prov.get("source"):
        src += f", {prov['source']}"
    src += f" × {device.id} datasheet peaks"
    return Applied(
        prof.name, mem, comp, kernel_s, prof.kernels_per_layer, prof.kernels_per_pass, prof.moe_kernels,
        prof.pass_s, src, prof.kernels_per_expert, mixed, attention, prof.gemv_max_batch,
        prof.launch == "host" and device.kind != "cpu", prof.layer_s, float(kc.half_rows), kc.architecture,
        engine_note(device, prof),
    )  # fmt: skip


#: family name the efficiency fit gives the cases on a device priced by kernel curves (figures fixed, not fitted)
CURVES_FAMILY = "kernels:"


def curve_figures(kc: Any, dtypes: set[str]) -> dict[str, float]:
    """The device figures the efficiency fit holds fixed for curves ``kc``: memory, kernel_s, each roof's fraction,
    and per roof dtype the fraction a dequantising GEMM (``mixed:<dtype>``) and a fused attention kernel
    (``attention:<dtype>``) reach -- the same products :func:`applied_from_curves` and the rates form."""
    frac = compute_fractions(kc)
    fp16 = frac["fp16"]
    out = {"memory": float(kc.memory), "kernel_s": float(kc.kernel_s), "fp32": frac["fp32"]}
    for dt in dtypes:
        out[dt] = frac[dt]
        out[f"mixed:{dt}"] = frac[dt] * float(kc.compute.get("mixed", fp16)) / fp16
        out[f"attention:{dt}"] = frac[dt] * float(kc.attention) / fp16
    return out


def rows_ramp(M: Any, half_rows: float) -> Any:
    """Rate of an M-row GEMM relative to the large-M rate of the curves: M/(M + half_rows) (1 for half_rows 0)."""
    M = np.asarray(M, dtype=np.float64)
    if not half_rows:
        return np.ones_like(M)
    return M / (M + float(half_rows))
