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
* ``half_rows``: the GEMM M ramp ``r/(r + half_rows)``, r = max(M, 8), of the large-M rate (with the tile/wave model).

Only what kernels cannot show comes from the engine profile (host overhead per pass and per layer, the kernel
count its fusion launches, and -- for an engine whose own kernels are not in the measured tables, llama.cpp --
its kernel-class factors). The old end-to-end ``[achieved]`` family figures are not read for such a device.
``moe`` (the grouped-GEMM fraction) derates a routed-expert layer's FFN GEMMs on top of the linear roof, as does
``moe_half_inter`` at narrow experts (``ffn/(ffn + moe_half_inter)``: :func:`.streams.roofline_time`). The memory stream
classes (:data:`.assembly.STREAM_CLASSES`, every backend): decode attention's KV-cache reads stream at
``attention_memory``, a routed-expert layer's grouped GEMMs at ``memory · moe_memory`` (:func:`stream_fields`); an
MoE layer adds ``moe_s`` per pass (:func:`.device_rates.engine_overhead`) and its grouped GEMMs blend compute and
streaming with q = ``moe_serial`` (:func:`.assembly.roofline_time`) and re-read an expert larger than the L2 once per
token tile beyond its first (``moe_reread``, :mod:`.moe_reread`); decode attention's KV bandwidth ramps with
its CTAs per SM (``decode_half_occupancy``, split-KV up to ``decode_split``) and it pays ``decode_tile_s`` per wave
of CTAs (:func:`.assembly.decode_waves`).
The tile/wave model's GEMMs blend compute and streaming at ``gemm_blend``. A roof whose TensorRT-LLM kernels walk
K at a step of their own (nvfp4 on Blackwell) is capped at the largest tile's rate per step (:func:`step_cap`).
Not read: the GEMM family's other shape terms (``split_s``, ``kstep_s``, the L2 terms), the attention
families' L2 residency (a benchmark re-running one kernel; a model's KV cache of many layers does not stay in L2)
and the per-framework launch extras of attention kernels (host work of a benchmark call).
"""

from __future__ import annotations

import dataclasses
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
        from .kernels import curves_for
    except ImportError:  # the curves catalog is not shipped in this build
        return None
    return curves_for(device)


#: a compute key the curves do not hold takes its fallback's fraction (as the kernel fit's GEMM family does:
#: nvfp4 on a GPU fitted without nvfp4 rows runs at the fp8 fraction of its own fp4 peak, down to fp16)
FALLBACK = {"fp8": "fp16", "fp8_block": "fp8", "fp4": "fp8", "int8": "fp16", "int4": "int8", "tf32": "fp16",
            "mixed": "fp16"}  # fmt: skip
#: query rows / keys of a fused prefill attention kernel's blocks (:data:`.kernels.attention_prefill.Q_TILE`)
PREFILL_BLOCK = 128.0
#: engine profile -> the framework whose measured kernels it runs (its per-call extras in ``KernelCurves.launch``)
FRAMEWORK = {"tensorrt-llm": "trtllm", "vllm": "vllm"}
#: GEMM kernels per transformer layer and pass of a fused engine (fused QKV, O, fused gate/up, down): each pays the
#: curves' per-call extra of its dtype (``launch``: the activation quantise kernel of an fp8/fp4 GEMM, host work)
GEMMS_PER_LAYER = 4.0


def compute_fraction(kc: Any, key: str) -> float:
    """``kc.compute[key]``, else its :data:`FALLBACK` chain's, else 1 (the fp32 vector roof: elementwise kernels
    are bandwidth-bound and priced by their bytes)."""
    while key not in kc.compute and key in FALLBACK:
        key = FALLBACK[key]
    return float(kc.compute.get(key, 1.0))


#: Roof dtypes an achieved-compute table may carry (``fp32`` is the vector roof); :data:`.engines.COMPUTE_KEYS`.
COMPUTE_KEYS = ("fp32", "tf32", "fp16", "fp8", "int8", "int4", "fp4")


#: Engines whose mixed-input (dequantising) GEMMs are warp-level ``mma.sync`` kernels written for Ampere: TensorRT
#: Edge-LLM's ``Int4GroupwiseGemmPlugin`` runs llm-awq's ``gemm_forward_cuda_new`` (its GEMM branch, M > 6) for
#: INT4 AWQ/GPTQ prefill (docs/source/developer_guide/.../trt-plugins: "AWQ CUDA-C++ kernels").
MMA_SYNC_MIXED = ("tensorrt-edge-llm",)


def mixed_share(kc: Any, engine: str, device: Device) -> float:
    """The factor on a dequantising GEMM's rate under ``engine`` on ``device`` with curves ``kc``: for an engine of
    :data:`MMA_SYNC_MIXED` whose curves hold no measured ``mixed`` fraction, the warp-level ``mma.sync`` rate over
    the device's dense 16-bit peak (:func:`.kernels.warp_mma.warp_mma_share`: Hopper's 2/3 x 4096 FLOP/clk/SM, an
    assumption, as no sm_100/sm_110 figure is published; decided before scoring -- the Ampere rate, 2048, was
    preferred by a session-14 helper after reading public Edge-LLM benchmark tables outside published.csv, so it
    was not taken), else 1."""
    if engine not in MMA_SYNC_MIXED or "mixed" in kc.compute:
        return 1.0
    try:
        from .kernels.warp_mma import warp_mma_share
    except ImportError:
        return 1.0
    return warp_mma_share(device)


def compute_fractions(kc: Any) -> dict[str, float]:
    """Achieved fraction of each roof dtype (:data:`COMPUTE_KEYS`) from curves ``kc``."""
    return {k: compute_fraction(kc, k) for k in COMPUTE_KEYS}


#: Compute keys of formats whose kernels differ from their roof dtype's (:attr:`~..devices.precision.Format.key`):
#: key -> the roof dtype whose peak they run on
FORMAT_KEYS = {"fp8_block": "fp8"}


def gemm_extra_s(kc: Any, key: str, engine: str) -> float:
    """Seconds one GEMM call of compute ``key`` costs beyond ``kernel_s`` under ``engine``: the curves' ``launch``
    entry of the engine's framework (an engine of another framework: the smallest any framework shows), following
    the :data:`FALLBACK` chain for a key without one (0 where none is measured)."""
    launch = getattr(kc, "launch", None) or {}
    fw = FRAMEWORK.get(engine)
    while True:
        extra = {k.split("/", 1)[0]: float(v) for k, v in launch.items() if k.split("/", 1)[-1] == key}
        if extra or key not in FALLBACK:
            break
        key = FALLBACK[key]
    if not extra:
        return 0.0
    # the measured extra is the benchmark's whole per-call cost beyond the GEMM (a separate quantise kernel plus the
    # harness's host work per call); inside a graph-captured engine the quantise step is one more kernel: at most
    # kernel_s (else tiny fp8/fp4 models would decode slower than bf16 on an 8 TB/s GPU, which engines do not show)
    measured = extra[fw] if fw in extra else min(extra.values())
    return min(measured, float(kc.kernel_s))


def gemm_key(precision: Any, mixed: bool) -> str:
    """The curves' compute key of a precision's linear layers: ``mixed`` for a dequantising GEMM (``mixed``:
    :func:`.engines.mixed_input`), else its roof."""
    return "mixed" if mixed else precision.linear_key


def engine_note(device: Device, prof: Any, family: bool = False) -> str:
    """Which engine figures apply to ``device`` and why (fitted on its architecture, carried over, or none)."""
    fitted = prof.fitted_on or ()
    arch = getattr(device, "curves_architecture", None) or device.kind
    if not prof.rows and not fitted:
        return f"{prof.name}: no fitted engine figures (kernel counts only)"
    where = ", ".join(fitted) or "published rows"
    if arch in fitted:
        return f"{prof.name} figures fitted on {where}"
    if getattr(device, "architecture", None) or family:
        if prof.name in TABLE_ENGINES:
            what = "host overheads"
        elif getattr(device, "architecture", None):
            what = "host overheads only: its kernel-class factors stay on the architectures they were fitted on"
        else:
            what = "host overheads and its kernel-class factors"
        return f"{prof.name} figures fitted on {where}, carried over to {arch} ({what})"
    return f"{prof.name} figures fitted on {where}: none apply to a {device.kind} without an architecture"


def own_kernel_factors(device: Device, prof: Any) -> bool:
    """Whether ``prof``'s kernel-class factors (memory, compute, mixed-input GEMM, attention, GEMV) apply on
    ``device``: only for an engine with its own kernels (not the measured tables' TensorRT-LLM/vLLM, whose kernels
    the curves already are), and only on the architectures its rows came from (``fitted_on``; a profile with no
    ``fitted_on``, e.g. a user's, everywhere). An engine's kernels measured on one GPU generation say nothing of
    its kernels for another (a new target's W4A16/NVFP4 kernels on Thor are not its mature Ampere ones): there
    its GEMMs and attention run at the measured tables' rates, and only its host overheads carry over. The
    architecture compared is the kernels' (``Device.curves_architecture``): the factors multiply those curves."""
    if prof.name in TABLE_ENGINES:
        return False
    fitted = tuple(prof.fitted_on or ())
    return not fitted or getattr(device, "curves_architecture", None) in fitted


def applied_fields(device: Device, prof: Any, kc: Any) -> dict[str, Any]:
    """The fields of :class:`.engines.Applied` for ``device`` under engine profile ``prof`` with kernel curves ``kc``
    (:func:`.engines.applied` builds it: this module sits below the engines)."""
    ce, me = float(device.compute_efficiency), float(device.memory_efficiency)
    fractions = compute_fractions(kc) | {k: compute_fraction(kc, k) for k in FORMAT_KEYS}
    frac = {k: min(v, step_cap(kc, device, k, prof.name)) for k, v in fractions.items()}
    own = own_kernel_factors(device, prof)
    cf = prof.compute_factor if own else 1.0
    comp = {k: min(1.0, v * ce * cf) for k, v in frac.items()}
    mem = min(1.0, float(kc.memory) * me * (prof.memory_factor if own else 1.0))
    fp16 = frac["fp16"]
    mixed_abs = compute_fraction(kc, "mixed") * mixed_share(kc, prof.name, device) * (prof.mixed_factor if own else 1.0)
    att_abs = float(kc.attention) * (prof.attention_factor if own else 1.0)
    prov = kc.provenance or {}
    src = f"kernel curves {kc.architecture}"
    if kc.architecture != device.curves_architecture:
        src += f" (pooled: no {device.curves_architecture} curves)"
    if prov.get("source"):
        src += f", {prov['source']}"
    src += f" × {device.id} datasheet peaks"
    return dict(
        engine=prof.name, memory=mem, compute=comp,
        kernel_s=float(device.kernel_overhead or kc.kernel_s * cycle_scale(kc, device)),
        kernels_per_layer=prof.kernels_per_layer, kernels_per_pass=prof.kernels_per_pass,
        moe_kernels=prof.moe_kernels, pass_s=prof.pass_s, source=src, kernels_per_expert=prof.kernels_per_expert,
        mixed=mixed_abs / (fp16 * cf), attention=att_abs / (fp16 * cf), gemv_max_batch=prof.gemv_max_batch,
        overlap=prof.launch == "host" and device.kind != "cpu", layer_s=prof.layer_s, half_rows=float(kc.half_rows),
        curves=kc.architecture, engine_note=engine_note(device, prof), gemm_launch=gemm_extras(kc, prof.name),
        moe=float(kc.moe), moe_compute=dict(getattr(kc, "moe_compute", None) or {}),
        gemv=gemv_ratio(prof) if own else 1.0,
        **stream_fields(kc, me * (prof.memory_factor if own else 1.0), cycle_scale(kc, device), device, prof.name),
    )  # fmt: skip


def decode_wave_s(kc: Any, device: Device | None, engine: str | None) -> float:
    """Seconds (SM cycles at the curves' clock) per wave of decode attention CTAs that ``engine`` pays on ``device``:
    TensorRT-LLM on a GPU where it runs no XQA (Blackwell: :func:`.kernels.attention_decode.xqa_device`) decodes with
    the warp-specialised trtllm-gen kernel, ``decode_ws_tile_s`` where the curves fit one (~3k SM cycles); every
    other engine and GPU ``decode_tile_s`` (XQA, FlashAttention: 7-9k). Hopper's fp8-KV XQA is warp-specialised too,
    but the assembly's wave does not know the cache's precision: it prices the bf16 cache's kernel there."""
    ws = float(getattr(kc, "decode_ws_tile_s", 0.0) or 0.0)
    if ws > 0.0 and device is not None and FRAMEWORK.get(engine or "") == "trtllm":
        try:
            from .kernels.attention_decode import xqa_device
        except ImportError:
            return float(kc.decode_tile_s)
        if not xqa_device(device):
            return ws
    return float(kc.decode_tile_s)


def prefill_wave_s(kc: Any, device: Device | None, engine: str | None) -> float:
    """Seconds (SM cycles at the curves' clock) per wave of a fused prefill kernel's query tiles that ``engine`` pays
    on ``device``: TensorRT-LLM and vLLM run warp-specialised TMA kernels on a Hopper or Blackwell kernel architecture
    (sm90 ``fmha_v2`` / trtllm-gen, FlashAttention-3 / FlashInfer's trtllm-gen:
    :func:`.kernels.attention_prefill.warp_specialised`), ``attention_ws_tile_s`` where the curves fit one (~7k SM
    cycles); every other engine and GPU ``attention_tile_s`` (``mma.sync`` kernels: ~3k)."""
    from .kernels.attention_prefill import tile_seconds, warp_specialised

    own = device is not None and FRAMEWORK.get(engine or "") is not None  # an engine with the family's kernels
    ws = warp_specialised(None, 1, device) if own and device is not None else np.zeros(1, dtype=bool)
    return float(np.ravel(tile_seconds(ws, kc))[0])


def stream_fields(
    kc: Any, scale: float, cycles: float = 1.0, device: Device | None = None, engine: str | None = None
) -> dict[str, float]:
    """The memory stream classes and MoE layer terms of :class:`.engines.Applied` from curves ``kc``, each bandwidth
    fraction times ``scale`` (the device's measured memory efficiency, an own-kernel engine's memory factor) as
    ``memory`` is: ``kv_memory`` = ``attention_memory`` (a fraction of the datasheet bandwidth, as the decode
    attention family fits it), ``experts_memory`` = ``memory`` × ``moe_memory`` (the MoE family streams the experts'
    weights at ``bandwidth · memory · moe_memory``), ``moe_s``, ``moe_serial``, and decode attention's
    ``decode_half_occupancy``, ``decode_split`` and ``decode_tile_s`` (the wave of the kernel ``engine`` runs:
    :func:`decode_wave_s`), the GEMMs' ``gemm_blend`` (the tile/wave model's), and a fused prefill kernel's block
    (:data:`PREFILL_BLOCK`), ``attention_tile_s`` (the wave of the kernel ``engine`` runs: :func:`prefill_wave_s`),
    ``prefill_blend`` and its softmax (:func:`softmax_fields`;
    :mod:`.fused_prefill`). ``moe_s``, ``decode_tile_s`` and ``attention_tile_s`` are SM cycles written as seconds at
    the curves' ``clock_mhz`` (as ``kernel_s``): times ``cycles`` (:func:`cycle_scale` of the device).
    ``moe_serial``: the blend's q on ``device`` (:func:`moe_serial`; without a device the curves' ``moe_serial``, the
    q of the GPUs they were fitted on)."""
    return dict(
        kv_memory=min(1.0, float(kc.attention_memory) * scale),
        experts_memory=min(1.0, float(kc.memory) * float(kc.moe_memory) * scale),
        moe_s=float(kc.moe_s) * cycles, moe_serial=moe_serial(kc, device),
        moe_half_inter=float(getattr(kc, "moe_half_inter", 0.0)), moe_reread=float(getattr(kc, "moe_reread", 0.0)),
        decode_half_occupancy=float(kc.decode_half_occupancy), decode_split=float(kc.decode_split),
        decode_tile_s=decode_wave_s(kc, device, engine) * cycles,
        gemm_blend=float(kc.gemm_blend), attn_block=PREFILL_BLOCK,
        attention_tile_s=prefill_wave_s(kc, device, engine) * cycles, prefill_blend=float(kc.prefill_blend),
        **softmax_fields(kc, device),
    )  # fmt: skip


def softmax_fields(kc: Any, device: Device | None) -> dict[str, float]:
    """A fused attention kernel's softmax as the prefill family prices it (:mod:`.fused_prefill`): ``softmax_pair_s``
    = ``attention_softmax`` / the device's fp32 peak × :func:`.kernels.sfu.softmax_scale` (s per pair and head; 0
    without a device) and ``softmax_overlap`` (p)."""
    from .kernels.sfu import softmax_scale

    a = float(getattr(kc, "attention_softmax", 0.0))
    p = float(getattr(kc, "softmax_overlap", 1.0)) or 1.0
    if device is None or a <= 0:
        return {"softmax_pair_s": 0.0, "softmax_overlap": p}
    return {"softmax_pair_s": a / float(device.roof("fp32")[1]) * softmax_scale(a, device), "softmax_overlap": p}


def step_cap(kc: Any, device: Device, key: str, engine: str) -> float:
    """The most of ``key``'s peak a GEMM reaches under ``engine`` where the kernel family prices its kernels by their
    own main-loop step (:data:`.kernels.gemm.OWN_KSTEP`: TensorRT-LLM's block-scaled fp8 and nvfp4, SmoothQuant and
    weight-only): the family times a CTA's walk of K at ``token_us["<framework>/<key>/kstep"]`` SM cycles per
    :data:`~.kernels.gemm.K_STEP` of K, so however large the GEMM its rate stays at most the largest tile's FLOPs of
    one step per SM per step time, over the device's per-SM peak (on B200 nvfp4, 2·256·128·64 FLOP in ~237 cycles:
    0.58 of the 9 PFLOPS dense roof, where the fitted fraction, which that step then never reaches, is 0.75). The
    assembly has one fraction per roof; this keeps it at the family's large-GEMM rate. ``inf`` where no step applies."""
    try:
        from .kernels.gemm import K_STEP, OWN_KSTEP, TILE_MENU
    except ImportError:
        return float("inf")
    fw = FRAMEWORK.get(engine)
    step_us = (getattr(kc, "token_us", None) or {}).get(f"{fw}/{key}/kstep")
    peak = FORMAT_KEYS.get(key, key)  # block-scaled fp8 runs on the fp8 peak
    if (key, fw) not in OWN_KSTEP or not step_us or not device.sm_count or peak not in device.peak_flops:
        return float("inf")
    step_s = float(step_us) * 1e-6 * cycle_scale(kc, device)
    tile_flops = 2.0 * max(m * n for m, n in TILE_MENU) * K_STEP
    return tile_flops / step_s / (float(device.peak_flops[peak]) / float(device.sm_count))


def moe_serial(kc: Any, device: Device | None) -> float:
    """q of the routed experts' blend on ``device`` (:func:`.kernels.moe_blend.serial`: from its DRAM bandwidth per
    SM); the curves' ``moe_serial`` where the kernel families are not shipped."""
    try:
        from .kernels.moe_blend import serial
    except ImportError:
        return float(kc.moe_serial)
    return serial(kc, device)


def cycle_scale(kc: Any, device: Device) -> float:
    """The factor on the curves' GPU-side fixed times for ``device`` (:func:`.kernels.gemm.cycle_scale`: cycles of the
    SM clock written as seconds at the curves' ``clock_mhz``); 1 where the kernel families are not shipped."""
    try:
        from .kernels.gemm import cycle_scale as scale
    except ImportError:
        return 1.0
    return scale(kc, device)


def gemv_ratio(prof: Any) -> float:
    """An engine's dequantising-GEMV rate as a ratio to its ``compute_factor``: its fitted ``gemv_factor`` over the
    compute factor (the GEMV is a CUDA-core kernel, not a tensor-core GEMM), 1 where none is fitted."""
    if "gemv_factor" not in (prof.provenance or {}):
        return 1.0
    return float(prof.gemv_factor) / float(prof.compute_factor)


def gemm_extras(kc: Any, engine: str) -> dict[str, float]:
    """Per compute key, the seconds a GEMM call adds under ``engine`` (:func:`gemm_extra_s`), where not 0."""
    keys = ("fp16", "fp8", "fp8_block", "fp4", "int8", "int4", "mixed")
    return {k: v for k in keys if (v := gemm_extra_s(kc, k, engine))}


#: family name the efficiency fit gives the cases on a device priced by kernel curves (figures fixed, not fitted)
CURVES_FAMILY = "kernels:"


def curve_figures(kc: Any, dtypes: set[str]) -> dict[str, float]:
    """The device figures the efficiency fit holds fixed for curves ``kc``: memory, kernel_s, each roof's fraction,
    the memory stream classes' bandwidth fractions (``memory:kv``, ``memory:experts``), ``moe_s``, ``moe_serial``,
    and per roof dtype the fraction a dequantising GEMM (``mixed:<dtype>``) and a fused attention kernel
    (``attention:<dtype>``) reach -- the same products :func:`applied_from_curves` and the rates form."""
    frac = compute_fractions(kc)
    fp16 = frac["fp16"]
    out = {"memory": float(kc.memory), "kernel_s": float(kc.kernel_s), "fp32": frac["fp32"]}
    st = stream_fields(kc, 1.0)  # the memory stream classes and MoE layer terms (as the assembly's rates read them)
    out |= {"memory:kv": st["kv_memory"], "memory:experts": st["experts_memory"], "moe_s": st["moe_s"],
            "moe_serial": st["moe_serial"]}  # fmt: skip
    for dt in dtypes:
        out[dt] = frac[dt]
        out[f"mixed:{dt}"] = frac[dt] * compute_fraction(kc, "mixed") / fp16
        out[f"attention:{dt}"] = frac[dt] * float(kc.attention) / fp16
    return out


def curve_tiles(M: Any, N: Any, groups: Any, device: Device) -> Any:
    """Tile × wave efficiency of ``groups`` M×N GEMMs priced by kernel curves: the kernel fit's best tile of its menu
    (:func:`.kernels.gemm.tile_wave_efficiency`), else the device's own tile (:func:`.gemm.tile_efficiency`)."""
    try:
        from .kernels.gemm import tile_wave_efficiency
    except ImportError:
        from .gemm import tile_efficiency

        dev = dataclasses.replace(device, gemm_half_rows=0.0)
        te, we = tile_efficiency(M, N, groups, dev)
        return te * we
    return tile_wave_efficiency(M, N, groups, device)
