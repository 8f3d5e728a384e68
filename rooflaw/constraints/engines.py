"""Engine profiles: what a serving stack adds to the roofline, and the efficiencies it achieves.

A pure roofline assumes every kernel reaches the device's peaks and costs nothing to launch.
Real engines lose in these physical ways, each one named parameter:

* **achieved bandwidth**: weight streaming reaches a fraction ``memory`` of the peak bandwidth
  (a device-family figure, ``Device.achieved["memory"]``, times the engine's ``memory_factor``);
* **achieved compute, per kernel class**: the family's fraction of each tensor/vector roof
  (``Device.achieved["fp16"]``, ``["fp4"]``, ``["int8"]``, ``["fp32"]`` -- the vector roof) times ONE
  engine factor per kernel class: ``compute_factor`` for dense GEMMs and vector ops,
  ``mixed_factor`` for GEMMs that dequantise their weights in the inner loop (W4A16 / int8
  weight-only on the 16-bit roof; GGUF blocks on llama.cpp's int8 MMQ kernels: ``Format.dequant``),
  ``attention_factor`` for unfused attention matmuls (an engine whose attention is fused runs it at
  the family's fraction of the roof, factor 1). NVFP4 on Blackwell runs on the FP4 roof (see :mod:`.precision`);
* **small-batch GEMV**: an engine with ``gemv_max_batch`` > 0 (TensorRT: 8) runs the dequantising
  GEMMs of a decode step of at most that many sequences as CUDA-core GEMV kernels on the vector roof
  (work grows with the batch: AWQ decode at batch 8 costs 2.5-3× batch 1 on Thor, NVFP4 1.4×); an engine with
  its own kernels has a ``gemv_factor`` for them (CUDA-core kernels: not its tensor-core ``compute_factor``);
* **packed or padded prompts** (``padding``): TensorRT-LLM (input padding removed), vLLM and llama.cpp pack a
  batch's prompts, so a batch of B prompts costs their tokens' FLOPs with the weights read once; TensorRT Edge-LLM
  pads every prompt of a batch to the batch's longest (``LLMInferenceRuntime::setUpForPrefillExecution``: "Pad
  each sequence to the max length of this batch"; ``padding = "longest"``). For B equal prompts -- what a
  :class:`.workload.Workload` describes -- both cost the same; prompts of unequal length (a benchmark's dataset
  prompts) cost B × the longest on a padding engine (:func:`.serving.padded_prompt_ratio`). A former fitted 2.14×
  ``batch_pad`` that every engine paid, equal prompts included, is gone;
* **per-kernel overhead**: ``kernel_s`` seconds (device family: launch latency, the tail of a
  kernel that does not fill the GPU, host sync) per kernel launched, times the number of kernels
  the engine launches per layer and per pass -- which depends on its fusion;
* **per-pass overhead**: ``pass_s`` seconds per forward pass (sampling, detokenising, host↔device
  sync, the scheduler), an engine figure.

Device figures: for a GPU with an ``architecture``, the kernel curves of that architecture
(:mod:`.kernels`, fitted to measured kernels) scaled by the device's own datasheet peaks
(:mod:`.curves_applied`); for any other device (CPU, NPU, TPU, another vendor), its catalog ``[achieved]``
table where it has one (fitted on end-to-end rows), else its own scalar efficiencies. Engine figures from
``engines.toml`` beside this module (``rooflaw devices fit-efficiency``, kernel-derived device figures
held fixed), each with the device architectures it was fitted on (``fitted_on``); a device outside them
says so in :meth:`Applied.describe`. ``ideal`` is the pure roofline (efficiency 1, no overhead).
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from ..devices.device import Device
from ..errors import bad
from . import operators as _O
from .curves_applied import COMPUTE_KEYS  # roof dtypes an achieved-compute table may carry (fp32: the vector roof)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ENGINES_FILE = Path(__file__).with_name("engines.toml")


@dataclass(frozen=True)
class EngineProfile:
    """One serving stack. ``kernels_per_layer``: kernels launched per transformer layer per forward
    pass for a dense layer (``moe_kernels`` more for a routed-expert layer, plus ``kernels_per_expert`` per
    distinct expert the layer's router picks in that pass: an engine that loops over experts, not one grouped
    MoE kernel); ``kernels_per_pass``: embedding, final norm, LM head, sampling. ``head``: the format it keeps
    the token embedding and LM head in when weights are quantised (``None``: quantised like the weights)."""

    name: str
    kernels_per_layer: float | None  #: None: one kernel per operator with work
    kernels_per_pass: float | None
    moe_kernels: float = 4.0
    #: kernels per distinct routed expert touched in a pass (0: fused/grouped MoE kernels -- TensorRT-LLM,
    #: vLLM fused_moe, llama.cpp mul_mat_id); the expected count per phase is E·(1 − (1 − K/E)^T)
    kernels_per_expert: float = 0.0
    memory_factor: float = 1.0
    compute_factor: float = 1.0
    mixed_factor: float = 1.0
    attention_factor: float = 1.0
    #: its dequantising GEMV kernels (``gemv_max_batch``) relative to the vector roof's achieved fraction, where
    #: fitted (else they take ``compute_factor``, as every other kernel)
    gemv_factor: float = 1.0
    #: seconds per transformer layer per pass the host adds (launch gaps CUDA graphs do not hide; 0 with graphs)
    layer_s: float = 0.0
    #: decode batches up to this size run dequantising GEMMs as CUDA-core GEMV kernels on the vector roof
    gemv_max_batch: int = 0
    pass_s: float = 0.0
    attention: str = "fused"
    head: str | None = "bf16"
    note: str = ""
    provenance: dict[str, str] = field(default_factory=dict)
    rows: tuple[str, ...] = ()
    #: where the per-kernel cost is paid: ``device`` (gaps between kernels on the accelerator: CUDA graphs, fused
    #: engines -- it adds to the roofline) or ``host`` (eager PyTorch: Python and dispatch launch each kernel; on an
    #: accelerator the host launches while the device runs, so a pass takes max(roofline, launches); on a CPU host
    #: and device are the same cores and they add)
    launch: str = "device"
    #: device architectures (or kinds, e.g. ``cpu``) whose published rows fitted this profile's figures
    fitted_on: tuple[str, ...] = ()
    #: how a batch's prompts are prefilled: ``packed`` (their tokens only) or ``longest`` (each padded to the
    #: batch's longest prompt: costs more only when the prompts differ in length)
    padding: str = "packed"

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["rows"] = list(self.rows)
        d["fitted_on"] = list(self.fitted_on)
        return d


#: Kernel counts from each engine's fused layer (documented, not fitted):
#: TensorRT-LLM / Edge-LLM: fused QKV GEMM, fused RoPE + attention (XQA), O GEMM, fused
#: residual+norm twice, fused gate/up GEMM with SwiGLU, down GEMM ≈ 7, CUDA graphs.
#: vLLM: QKV, rotary, attention, O, add+norm, gate_up, act, down, add+norm ≈ 9, CUDA graphs.
#: llama.cpp: one ggml node per op: norm, mul, q, k, v, rope×2, cpy×2, attention, o, add, norm,
#: mul, gate, up, silu, mul, down, add ≈ 20.
#: gpt-fast: torch.compile (Inductor fuses pointwise ops) + CUDA graphs ≈ 10.
#: torch-eager: one aten kernel per eager op, counted per rooflaw operator below (views excluded).

#: Aten kernels eager PyTorch launches per operator of a dense layer (:mod:`rooflaw.devices.eager_decoder`,
#: a Hugging-Face-style layer): a residual add + RMSNorm (pow, mean, add eps, rsqrt, mul, mul) = 7;
#: one ``F.linear`` per projection; RoPE on q and k (mul, neg, cat, mul, add) = 10; SDPA fuses QKᵀ,
#: softmax and ·V into 1; SwiGLU: gate + up, SiLU + mul. Two copies the operator list does not model:
#: the K/V cache writes (2) and GQA's ``repeat_interleave`` of K and V (2, none for MHA).
#: ``tests/test_truth_eager_kernels.py`` counts the real decoder's kernels with a ``TorchDispatchMode``.
#: Each operator declares its own count (``Op.eager_kernels``); the two copies are added here.
EAGER_LAYER_KERNELS: dict[str, int] = {
    **{op.name: op.eager_kernels for op in _O.FULL_OPS if op.scope == "layer" and op.eager_kernels is not None},
    "kv_write": 2, "kv_repeat": 2,
}  # fmt: skip
#: Per pass: embedding gather, the RoPE tables (arange, outer, cat, cos, sin; casting them to a 16-bit model
#: dtype adds 2; not an operator), final RMSNorm (no residual: 6), LM head.
EAGER_PASS_KERNELS: dict[str, int] = {
    **{op.name: op.eager_kernels for op in _O.FULL_OPS if op.scope == "model" and op.eager_kernels is not None},
    "rope_tables": 5,
}
#: A routed-expert layer runs, in place of the dense FFN's ``ffn_up`` + ``ffn_act`` + ``ffn_down`` (5), the router's
#: own kernels once per pass: the gate GEMV (``F.linear`` d → E), softmax, top-k, the zeroed output and
#: ``unique`` over the picks; and per expert the router picked: the mask (``==``), ``nonzero``, the gather of its
#: rows, gate, up, SiLU, mul, down, the gather of its routing weights, their mul and ``index_add``. The profile
#: charges the router per MoE layer (``moe_kernels``: router − dense FFN) and the rest per *distinct* expert
#: touched in the pass (``kernels_per_expert``): top-k in a one-token decode step, all E in a long prefill.
EAGER_ROUTER_KERNELS: dict[str, int] = {"gate_gemv": 1, "softmax": 1, "topk": 1, "zeros": 1, "unique": 1}
EAGER_EXPERT_KERNELS: dict[str, int] = {
    "mask": 1, "nonzero": 1, "gather_rows": 1, "ffn_up": 2, "ffn_act": 2, "ffn_down": 1, "gather_weights": 1,
    "weight_mul": 1, "index_add": 1,
}  # fmt: skip
EAGER_KERNELS_PER_EXPERT = sum(EAGER_EXPERT_KERNELS.values())
#: extra kernels of a MoE layer's router over the dense FFN it replaces (5 − 5 = 0 in eager PyTorch)
EAGER_MOE_KERNELS = sum(EAGER_ROUTER_KERNELS.values()) - sum(
    EAGER_LAYER_KERNELS[k] for k in ("ffn_up", "ffn_act", "ffn_down")
)
BUILTIN_ENGINES: dict[str, EngineProfile] = {
    "ideal": EngineProfile("ideal", 0.0, 0.0, 0.0, head=None, note="pure roofline: efficiency 1, no overhead"),
    "device": EngineProfile(
        "device",
        None,
        None,
        0.0,
        head=None,
        note="the device file's own scalar efficiencies and kernel_overhead per operator launch, no fitted figures",
    ),  # fmt: skip
    "tensorrt-llm": EngineProfile("tensorrt-llm", 7.0, 4.0, gemv_max_batch=8, note="TensorRT-LLM"),
    "tensorrt-edge-llm": EngineProfile(
        "tensorrt-edge-llm",
        7.0,
        4.0,
        gemv_max_batch=8,
        padding="longest",
        note="TensorRT Edge-LLM (Jetson/DRIVE C++ runtime with its own plugins: not the measured TensorRT-LLM kernels; "
        "pads a batch's prompts to the longest)",
    ),
    "vllm": EngineProfile("vllm", 9.0, 4.0),
    "llama.cpp": EngineProfile(
        "llama.cpp",
        20.0,
        6.0,
        attention="unfused",
        head=None,
        note="GGUF: head quantised as in the file; attention unfused (flash attention is opt-in, -fa)",
    ),  # fmt: skip
    "gpt-fast": EngineProfile("gpt-fast", 10.0, 4.0, head=None, note="torch.compile + CUDA graphs"),
    "torch-eager": EngineProfile(
        "torch-eager",
        float(sum(EAGER_LAYER_KERNELS.values())),
        float(sum(EAGER_PASS_KERNELS.values())),
        float(EAGER_MOE_KERNELS),
        kernels_per_expert=float(EAGER_KERNELS_PER_EXPERT),
        head=None,
        launch="host",
        note="eager PyTorch, one aten kernel per op (EAGER_LAYER_KERNELS); GQA layer, 11 per routed expert touched",
    ),
}
ENGINE_NAMES = tuple(BUILTIN_ENGINES)


@cache
def fitted_figures() -> dict[str, dict[str, Any]]:
    if not ENGINES_FILE.is_file():
        return {}
    data = tomllib.loads(ENGINES_FILE.read_text(encoding="utf-8"))
    return {k: v for k, v in data.get("engine", {}).items() if isinstance(v, dict)}


def get_engine(name: str | EngineProfile) -> EngineProfile:
    """The profile called ``name`` with its fitted figures (``engines.toml``) applied."""
    if isinstance(name, EngineProfile):
        return name
    if name not in BUILTIN_ENGINES:
        raise bad("engine", name, f"unknown engine profile; use one of {', '.join(ENGINE_NAMES)}")
    base = BUILTIN_ENGINES[name]
    fit = fitted_figures().get(name)
    if not fit or name == "ideal":
        return base
    changes: dict[str, Any] = {k: float(fit[k]) for k in ENGINE_KEYS if k in fit}  # fields named at run time
    prov = {k: str(fit.get("provenance", "fitted")) for k in changes}
    on = tuple(str(x) for x in fit.get("fitted_on", ()))
    return dataclasses.replace(base, **changes, provenance=prov, rows=tuple(fit.get("rows", ())), fitted_on=on)


#: Fitted figures an ``engines.toml`` entry may set.
ENGINE_KEYS = ("memory_factor", "compute_factor", "mixed_factor", "attention_factor", "gemv_factor", "layer_s",
               "pass_s")  # fmt: skip


def default_engine(device: Device) -> str:
    """The engine a device's estimates assume when none is named: the catalog's ``achieved.engine``, else
    ``torch-eager`` on a CPU, ``tensorrt-llm`` on an NVIDIA GPU or SoC (one with an ``architecture``), and
    ``device`` (its own scalar efficiencies and per-launch overhead) on anything else: an NPU, a TPU or
    another vendor's GPU gets no engine figures fitted on NVIDIA rows."""
    name = device.achieved.get("engine") if device.achieved else None
    if isinstance(name, str) and name in BUILTIN_ENGINES:
        return name
    if device.kind == "cpu":
        return "torch-eager"
    return "tensorrt-llm" if getattr(device, "architecture", None) else "device"


@dataclass(frozen=True)
class Applied:
    """The efficiencies and overheads one estimate rests on (SI units)."""

    engine: str
    memory: float
    compute: dict[str, float]
    kernel_s: float
    kernels_per_layer: float | None
    kernels_per_pass: float | None
    moe_kernels: float
    pass_s: float
    source: str
    #: kernels per distinct routed expert touched in a pass (see :attr:`EngineProfile.kernels_per_expert`)
    kernels_per_expert: float = 0.0
    #: dequantising GEMMs reach ``compute[dtype] × mixed`` and attention matmuls ``compute[dtype] × attention``:
    #: the engine's factor for that kernel class in place of its ``compute_factor`` (so these are ratios to it)
    mixed: float = 1.0
    attention: float = 1.0
    gemv_max_batch: int = 0  #: decode batches up to this size run dequantising GEMMs as GEMV on the vector roof
    #: the engine launches from the host while an accelerator runs (``EngineProfile.launch`` = host, device kind not
    #: cpu): a pass takes max(roofline, launch overhead) instead of their sum
    overlap: bool = False
    #: s per transformer layer per pass the engine's host adds (:attr:`EngineProfile.layer_s`)
    layer_s: float = 0.0
    #: GEMM rows at which the large-M rate halves (kernel curves; applied with the tile/wave model)
    half_rows: float = 0.0
    #: the architecture whose kernel curves priced the device ("" when none did)
    curves: str = ""
    #: which engine figures apply and why (fitted on the device's architecture, carried over, or none)
    engine_note: str = ""
    #: per curves compute key, seconds each GEMM call adds beyond ``kernel_s`` (``KernelCurves.launch``)
    gemm_launch: dict[str, float] = dataclasses.field(default_factory=dict)
    #: achieved fraction of the GEMM rate inside a grouped MoE kernel (``KernelCurves.moe``): a routed-expert
    #: layer's FFN GEMMs take it on top of the linear roof (kernel curves)
    moe: float = 1.0
    #: the grouped MoE kernel's rate per compute key relative to its bf16 one (``KernelCurves.moe_compute``: fp8 and
    #: block-fp8 expert GEMMs reach ``moe × moe_compute[key]``; a key not there: 1)
    moe_compute: dict[str, float] = field(default_factory=dict)
    #: dequantising GEMVs reach ``compute["fp32"] × gemv`` of the vector roof (a ratio to ``compute_factor``)
    gemv: float = 1.0
    #: achieved bandwidth fraction of decode attention's KV-cache reads (``KernelCurves.attention_memory``; None:
    #: ``memory``, one bandwidth for every stream)
    kv_memory: float | None = None
    #: achieved bandwidth fraction of a routed-expert layer's grouped-GEMM weight stream (``memory`` ×
    #: ``KernelCurves.moe_memory``; None: ``memory``)
    experts_memory: float | None = None
    #: seconds an MoE layer adds per pass beyond its kernels (``KernelCurves.moe_s``: routing, permutation, reduce)
    moe_s: float = 0.0
    #: q of the routed experts' blend ``(t_c^(1/q) + t_m^(1/q))^q`` (``KernelCurves.moe_serial``; 0: the hard max)
    moe_serial: float = 0.0
    #: bf16 expert width per GPU at which the grouped GEMMs' rate halves (``KernelCurves.moe_half_inter``; 0: none)
    moe_half_inter: float = 0.0
    #: share of the beyond-first token tiles that re-stream an L2-missing expert (``KernelCurves.moe_reread``)
    moe_reread: float = 0.0
    #: CTAs per SM at which decode attention's KV bandwidth halves (``KernelCurves.decode_half_occupancy``; 0: none)
    decode_half_occupancy: float = 0.0
    #: CTAs per SM a split-KV decode kernel fills (``KernelCurves.decode_split``; 0: no split)
    decode_split: float = 0.0
    #: seconds per wave of decode attention CTAs over the SMs (``KernelCurves.decode_tile_s``)
    decode_tile_s: float = 0.0
    #: p of a GEMM's round roofline corner (``KernelCurves.gemm_blend``; 0: the hard max; the tile/wave model)
    gemm_blend: float = 0.0
    #: query rows and keys of a fused prefill attention kernel's blocks (:mod:`.fused_prefill`; 0: exact causal pairs)
    attn_block: float = 0.0
    #: seconds per wave of a fused prefill attention kernel's query tiles (``KernelCurves.attention_tile_s``)
    attention_tile_s: float = 0.0
    #: p of a fused prefill attention kernel's math/stream blend (``KernelCurves.prefill_blend``; 0: the hard max)
    prefill_blend: float = 0.0
    #: seconds per (query, key) pair and head of a fused attention kernel's softmax (``KernelCurves.attention_softmax``
    #: on the fp32 peak × :func:`.kernels.sfu.softmax_scale`; 0: the assembly's softmax op)
    softmax_pair_s: float = 0.0
    #: p of a fused attention kernel's p-norm of its matmuls and softmax (``KernelCurves.softmax_overlap``; 1: series)
    softmax_overlap: float = 1.0

    def eff(self, dtype: str) -> float:
        """Achieved fraction of the ``dtype`` roof (1 where nothing was fitted for that roof)."""
        return self.compute.get(dtype, 1.0)

    def describe(self) -> str:
        if self.engine == "paper":
            return "preset paper: the paper's theory formulas (no engine overheads)"
        comp = ", ".join(f"{k} {v:.3g}" for k, v in self.compute.items()) or "1"
        if self.kernels_per_layer is None:
            kernels = f"{self.kernel_s * 1e6:.3g} µs per operator launch"
        else:
            per_expert = f" + {self.kernels_per_expert:g}/routed expert touched" * bool(self.kernels_per_expert)
            kernels = (
                f"{self.kernel_s * 1e6:.3g} µs/kernel × ({self.kernels_per_layer:g}/layer{per_expert} + "
                f"{self.kernels_per_pass or 0:g}/pass)"
            )
        gemv = f"dequantising GEMV on the vector roof ×{self.gemv:.3g} up to batch {self.gemv_max_batch}, " * bool(
            self.gemv_max_batch
        )
        layer = f"{self.layer_s * 1e6:.3g} µs/layer, " * bool(self.layer_s)
        if self.gemm_launch:
            extra = ", ".join(f"{k} {v * 1e6:.3g}" for k, v in self.gemm_launch.items())
            layer += f"+µs per GEMM call ({extra}), "
        note = f"; {self.engine_note}" if self.engine_note else ""
        streams = ""
        if self.kv_memory is not None or self.experts_memory is not None:  # the memory stream classes (curves)
            kv, ex = self.kv_memory or self.memory, self.experts_memory or self.memory
            streams = f"KV reads ×{kv:.3g}, routed experts ×{ex:.3g} (blend q {self.moe_serial:.3g}), "
            streams += f"{self.moe_s * 1e6:.3g} µs/MoE layer, " * bool(self.moe_s)
            streams += f"grouped GEMMs ×{self.moe:.3g} · ffn/(ffn + {self.moe_half_inter:.3g}·2/bytes), " * bool(
                self.moe_half_inter >= 1)  # fmt: skip
            reread = f"L2-missing experts re-read by {self.moe_reread:.3g} of their later token tiles, "
            streams += reread * bool(self.moe_reread)
        return (
            f"engine {self.engine}: bandwidth ×{self.memory:.3g}, {streams}compute ×({comp}), "
            f"mixed-input GEMM ×{self.mixed:.3g}, attention ×{self.attention:.3g}, "
            f"{gemv}{kernels}, {layer}{self.pass_s * 1e3:.3g} ms/pass"
            f"{' (host launch: max with the roofline)' if self.overlap else ''} [{self.source}{note}]"
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_NO_CURVES = object()


def applied(
    device: Device, engine: str | EngineProfile | None, preset: str = "full", *, curves: Any = _NO_CURVES
) -> Applied:
    """Resolve the efficiencies an estimate of ``device`` under ``engine`` uses.

    ``preset="paper"``: the device's own scalar efficiencies and nothing else (the paper's model).
    ``ideal``: 1 and no overhead. ``device``: the device file's scalar efficiencies and per-launch overhead.
    Otherwise, for a device whose architecture has kernel curves (:func:`.kernels.curves_for`; ``curves``
    passes a :class:`~.kernels.KernelCurves` or ``None`` explicitly), the curves' fractions of the device's own
    datasheet peaks (:mod:`.curves_applied`) plus the engine's host figures; for any other device its catalog
    ``[achieved]`` table (fitted on end-to-end rows) times the engine's factors, times the device's measured
    scalar efficiencies (``calibrate``).
    """
    ce, me = float(device.compute_efficiency), float(device.memory_efficiency)
    if preset == "paper":
        comp = {k: ce for k in COMPUTE_KEYS}
        return Applied("paper", me, comp, 0.0, None, None, 0.0, 0.0, "paper")
    prof = get_engine(engine if engine is not None else default_engine(device))
    if prof.name == "ideal":
        return Applied("ideal", 1.0, {}, 0.0, 0.0, 0.0, 0.0, 0.0, "pure roofline")
    if prof.name == "device":
        comp = {k: ce for k in COMPUTE_KEYS} if ce != 1.0 else {}
        return Applied("device", me, comp, float(device.kernel_overhead), None, None, 0.0, 0.0, "device figures")
    from . import curves_applied as CA

    kc = CA.curves_of(device) if curves is _NO_CURVES else curves
    if kc is not None:
        return Applied(**CA.applied_fields(device, prof, kc))
    ach = device.achieved or {}
    if not ach:  # no fitted family: the engine's kernel count, but none of the fitted figures
        prof = dataclasses.replace(
            prof, memory_factor=1.0, compute_factor=1.0, mixed_factor=1.0, attention_factor=1.0, layer_s=0.0, pass_s=0.0
        )
    comp = {}
    for k in COMPUTE_KEYS:
        if k in ach or ce != 1.0 or prof.compute_factor != 1.0:
            comp[k] = min(1.0, float(ach.get(k, 1.0)) * ce * prof.compute_factor)
    mem = min(1.0, float(ach.get("memory", 1.0)) * me * prof.memory_factor)
    # a per-kernel overhead set on the device (calibrate, a user file) wins over the family fit
    kernel_s = float(device.kernel_overhead or ach.get("kernel_s", 0.0))
    if ach:
        fam = f"{ach.get('provenance', 'fitted')} family {ach.get('family', '?')}"
        source = f"{fam} (end-to-end rows; no kernel curves)"
    elif ce != 1.0 or me != 1.0 or kernel_s:
        source = "device figures (no kernel curves, no fitted family)"
    else:
        source = f"no kernel curves or fitted efficiencies for {device.id}: peaks at efficiency 1"
    note = CA.engine_note(device, prof, bool(ach))
    return Applied(
        prof.name, mem, comp, kernel_s, prof.kernels_per_layer, prof.kernels_per_pass, prof.moe_kernels,
        prof.pass_s, source, prof.kernels_per_expert, prof.mixed_factor / prof.compute_factor,
        prof.attention_factor / prof.compute_factor, prof.gemv_max_batch,
        prof.launch == "host" and device.kind != "cpu", prof.layer_s, engine_note=note, gemv=CA.gemv_ratio(prof),
    )  # fmt: skip


def experts_touched(experts: Any, top_k: Any, tokens: Any) -> Any:
    """Expected distinct experts of top-``top_k`` routing over ``experts`` for ``tokens`` uniform, independent
    tokens: E·(1 − (1 − K/E)^T) (``operators.EXPERTS_TOUCHED``); plain arithmetic (numbers, arrays, the numba
    tracer). The engines with ``kernels_per_expert`` launch that many kernels per expert touched."""
    return experts * (1.0 - (1.0 - top_k / experts) ** tokens)


def mixed_input(precision) -> bool:
    """True when the linear layers dequantise their weights in the GEMM: weights narrower than the
    activations (W4A16, W8A16), or block-quantised (``Format.dequant``: GGUF blocks on llama.cpp's
    int8 MMQ kernels)."""
    from ..devices.device import DTYPES

    w = precision.weights
    return w.dequant or DTYPES.index(w.dtype) > DTYPES.index(precision.activations.dtype)


def gemv_path(r: Any, tokens: float) -> bool:
    """Whether a pass of ``tokens`` rows runs its linear layers as the engine's dequantising GEMVs (``r``: rates)."""
    return bool(r.inv_gemv > 0 and tokens <= r.gemv_max_batch)


def decode_linear_inv(r: Any, batch: Any) -> Any:
    """s/FLOP of the linear layers in a decode step of ``batch`` sequences: the GEMV path on the vector roof
    (``r.inv_gemv``) up to ``r.gemv_max_batch`` sequences, else the GEMM roof (a number or numpy array)."""
    b = np.asarray(batch, dtype=np.float64)
    return np.where((r.inv_gemv > 0) & (b <= r.gemv_max_batch), r.inv_gemv, r.inv["linear"])
