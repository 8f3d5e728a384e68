"""Device rates: the raw peaks and the efficiency-derated inverse rates the one assembly's time expressions take.

:class:`Rates` (what the backends pass as rate arguments, :meth:`Rates.stream_args`), :func:`rates` (a device, a
precision and an engine's :class:`.engines.Applied` figures -> :class:`Rates`) and :func:`engine_overhead` (seconds
per pass the engine adds). Re-exported by :mod:`.assembly`, which builds the expressions these values fill.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .moe_reread import rate_values
from .streams import ROOF_CLASSES, roof

#: Bytes per element of a linear roof's operands (the MoE family's ``ACT_BYTES``; other roofs: 16-bit)
ACT_BYTES = {"fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0, "fp4": 0.5, "int4": 0.5}


@dataclass(frozen=True)
class Rates:
    """Raw peaks and the efficiency-derated inverse rates the time expressions take.

    ``overhead``: s per op launch (one per op with work); an engine with its own kernel count charges instead (and
    ``overhead`` 0) kernel_s·(layers·(per_layer + moe·(per_moe_layer + per_expert·E_cov)) + per_pass)
    + (layer_s + gemm_s·gemms_per_layer + moe_s·moe)·layers + pass_s. Bytes stream at their class's inverse
    bandwidth (:meth:`inv_stream`: ``inv_beta``, ``inv_beta_kv``, ``inv_beta_experts``).
    """

    raw: dict[str, float]  # FLOP/s per compute class
    raw_beta: float  # bytes/s
    inv: dict[str, float]  # s/FLOP per class, derated by the achieved efficiencies
    inv_beta: float  # s/byte, derated by the achieved bandwidth fraction
    overhead: float  # s per operator launch
    kernel_s: float = 0.0  # s per engine kernel
    per_layer: float = 0.0  # engine kernels per dense layer and pass
    per_moe_layer: float = 0.0  # extra kernels per routed-expert layer
    per_pass: float = 0.0  # engine kernels per pass outside the layers
    pass_s: float = 0.0  # s per forward pass (sampling, host sync)
    inv_gemv: float = 0.0  # s/FLOP of a dequantising GEMV on the vector roof (0: the engine has none)
    gemv_max_batch: float = 0.0  # largest decode batch that takes the GEMV path
    per_expert: float = 0.0  # extra kernels per distinct routed expert touched, per MoE layer and pass
    inv_beta16: float = 0.0  # s/byte of a one-token 16-bit GEMV's weights (Device.gemv16_bandwidth; 0: none)
    layer_s: float = 0.0  # s per layer per pass the engine's host adds
    half_rows: float = 0.0  # GEMM M ramp M/(M + half_rows) of the kernel curves (tile/wave model only)
    gemm_s: float = 0.0  # s each GEMM call adds beyond kernel_s (kernel curves' per-call extra of the precision)
    gemms_per_layer: float = 0.0  # GEMM calls per layer and pass that pay gemm_s
    curves: bool = False  # priced by kernel curves (the tile model picks the kernel library's best tile)
    moe: float = 1.0  # grouped-GEMM fraction of a routed-expert layer's FFN GEMMs (kernel curves)
    inv_beta_kv: float = 0.0  # s/byte of decode attention's KV-cache reads (0: inv_beta)
    inv_beta_experts: float = 0.0  # s/byte of a routed-expert layer's grouped-GEMM stream (0: inv_beta)
    moe_s: float = 0.0  # s per MoE layer and pass beyond its kernels (kernel curves)
    moe_blend: float = float("inf")  # p = 1/moe_serial of the experts' (t_c^p + t_m^p)^(1/p) (inf: the hard max)
    moe_half_inter: float = 0.0  # expert width (elements) of half the grouped GEMMs' rate, for the precision
    decode_half_occupancy: float = 0.0  # CTAs per SM at which decode attention's KV bandwidth halves (0: none)
    decode_split: float = 0.0  # CTAs per SM a split-KV decode kernel fills (0: no split)
    decode_tile_s: float = 0.0  # s per wave of decode attention CTAs
    sm_count: float = 1.0  # SMs the decode attention waves fill
    gemm_blend: float = float("inf")  # p of a GEMM's round corner (t_c^p + t_m^p)^(1/p) (tile/wave model; inf: max)
    moe_reread: float = 0.0  # share of beyond-first token tiles re-streaming an L2-missing expert (.moe_reread)
    inv_l2: float = 0.0  # 1 / the device's L2 bytes (0: none; with moe_reread 0 too)
    attn_block: float = 1.0  # query rows / keys of a fused prefill kernel's blocks (1: exact causal pairs, no tiles)
    attention_tile_s: float = 0.0  # s per wave of a fused prefill kernel's query tiles
    prefill_blend: float = float("inf")  # p of a fused prefill kernel's math/stream blend (inf: max)
    softmax_pair_s: float = 0.0  # s per pair and head of a fused kernel's softmax (0: the softmax op instead)
    softmax_overlap: float = 1.0  # p of a fused kernel's p-norm of its matmuls and its softmax (1: in series)

    def inv_stream(self, cls: str) -> float:
        """Inverse bandwidth (s/byte) of memory stream class ``cls`` (:data:`STREAM_CLASSES`)."""
        v = {"weights": self.inv_beta, "kv": self.inv_beta_kv, "experts": self.inv_beta_experts}[cls]
        return v or self.inv_beta

    def stream_args(self, tiles: bool = False, gemv: tuple[bool, bool] = (False, False)) -> tuple[float, ...]:
        """The compiled model's rate arguments after the inverse roofs (:data:`.compile.RATE_ARGS`, in order); the GEMM
        blend for the tile/wave model (``tiles``); padded expert rows with curves, not in GEMV passes (``gemv``)."""
        pad = (0.0 if g or not self.curves else 1.0 for g in gemv)
        return (self.inv_beta, self.inv_stream("kv"), self.inv_stream("experts"), self.moe_blend, self.moe_half_inter,
                1.0 / self.moe if self.moe > 0 else 1.0, *pad, self.moe_reread, self.inv_l2, self.decode_half_occupancy,
                self.decode_split, self.decode_tile_s, self.sm_count, self.gemm_blend if tiles else float("inf"),
                self.overhead, self.attn_block, self.attention_tile_s, self.prefill_blend, self.softmax_pair_s,
                self.softmax_overlap)  # fmt: skip


def rates(device: Any, precision: Any, app: Any = None) -> Rates:
    """Rates of ``device`` for ``precision`` under the efficiencies of ``app`` (an :class:`engines.Applied`;
    ``None``: the device's scalar ``compute_efficiency`` / ``memory_efficiency`` / ``kernel_overhead``)."""
    raw = {c: float(roof(c, device, precision)[1]) for c in ROOF_CLASSES}
    if app is None:
        ce = device.compute_efficiency
        return Rates(
            raw, float(device.memory_bandwidth), {c: 1.0 / (raw[c] * ce) for c in ROOF_CLASSES},
            1.0 / (device.memory_bandwidth * device.memory_efficiency), float(device.kernel_overhead or 0.0),
        )  # fmt: skip
    from .engines import mixed_input

    inv = {}
    for c in ROOF_CLASSES:
        lin = c == "linear" and (key := precision.linear_key) in app.compute  # block-scaled fp8: its own fraction
        eff = app.eff(key if lin else roof(c, device, precision)[0])
        if c == "linear" and mixed_input(precision):
            eff = min(1.0, eff * app.mixed)
        if c == "attention":
            eff = min(1.0, eff * app.attention)
        inv[c] = 1.0 / (raw[c] * eff)
    counted, gemv = app.kernels_per_layer is not None, mixed_input(precision) and app.gemv_max_batch > 0
    eff_gemv = min(1.0, app.eff("fp32") * getattr(app, "gemv", 1.0))  # the engine's GEMV factor (engines.Applied)
    inv_gemv, bw16 = 1.0 / (raw["vector"] * eff_gemv) if gemv else 0.0, getattr(device, "gemv16_bandwidth", 0)
    return Rates(
        raw, float(device.memory_bandwidth), inv, 1.0 / (device.memory_bandwidth * app.memory),
        0.0 if counted else app.kernel_s, app.kernel_s if counted else 0.0,
        app.kernels_per_layer or 0.0, app.moe_kernels if counted else 0.0, app.kernels_per_pass or 0.0, app.pass_s,
        inv_gemv, float(app.gemv_max_batch) if gemv else 0.0,
        app.kernels_per_expert if counted else 0.0, 1.0 / (bw16 * app.memory) if bw16 else 0.0,
        app.layer_s, app.half_rows, *_gemm_launch(app, precision), bool(getattr(app, "curves", "")),
        moe_fraction(app, precision), *_streams(device, app, precision),
    )  # fmt: skip


def moe_fraction(app: Any, precision: Any) -> float:
    """The grouped MoE kernel's fraction of the linear roof for ``precision``'s expert GEMMs: ``moe`` (its bf16 rate)
    times ``moe_compute`` of the precision's compute key (the MoE family's per-dtype rate; 1 where none is fitted)."""
    from .curves_applied import gemm_key
    from .engines import mixed_input

    per_key = getattr(app, "moe_compute", None) or {}
    return float(getattr(app, "moe", 1.0)) * float(per_key.get(gemm_key(precision, mixed_input(precision)), 1.0))


def _streams(device: Any, app: Any, precision: Any = None) -> tuple[float, ...]:
    """The :class:`Rates` fields from ``inv_beta_kv`` on (``inv_beta_kv`` … ``softmax_overlap``, in order) of ``app``
    (its stream classes, 0: ``memory``'s; ``moe_half_inter`` in the linear dtype's elements; the decode attention
    terms, the prefill waves and the fused softmax only with SMs to fill)."""
    kv, ex = getattr(app, "kv_memory", None), getattr(app, "experts_memory", None)
    bw, q = float(device.memory_bandwidth), float(getattr(app, "moe_serial", 0.0))
    sms = float(getattr(device, "sm_count", None) or 0)
    half, split, wave, pwave = (
        float(getattr(app, k, 0.0)) if sms else 0.0
        for k in ("decode_half_occupancy", "decode_split", "decode_tile_s", "attention_tile_s")
    )
    return (1.0 / (bw * kv) if kv else 0.0, 1.0 / (bw * ex) if ex else 0.0, float(getattr(app, "moe_s", 0.0)),
            1.0 / q if q > 0 else float("inf"), moe_half_width(app, precision), half, split, wave, sms or 1.0,
            float(getattr(app, "gemm_blend", 0.0)) or float("inf"),
            *rate_values(float(getattr(app, "moe_reread", 0.0)), getattr(device, "l2_bytes", None)),
            (float(getattr(app, "attn_block", 0.0)) if sms else 0.0) or 1.0, pwave,  # fused prefill: with SMs
            (float(getattr(app, "prefill_blend", 0.0)) if sms else 0.0) or float("inf"),
            float(getattr(app, "softmax_pair_s", 0.0)) if sms else 0.0,
            float(getattr(app, "softmax_overlap", 1.0)))  # fmt: skip


def moe_half_width(app: Any, precision: Any) -> float:
    """``moe_half_inter`` (a bf16 expert width) in elements of ``precision``'s linear dtype: × 2 / its bytes (a
    grouped GEMM's main-loop step covers a fixed number of bytes of K, :data:`.kernels.moe.ACT_BYTES`)."""
    half = float(getattr(app, "moe_half_inter", 0.0))
    return half * 2.0 / ACT_BYTES.get(precision.linear_dtype, 2.0) if half and precision is not None else 0.0


def _gemm_launch(app: Any, precision: Any) -> tuple[float, float]:
    """(seconds per GEMM call, GEMM calls per layer) the kernel curves add for ``precision``'s linear layers."""
    extras = getattr(app, "gemm_launch", None) or {}
    if not extras or not app.kernels_per_layer:  # no engine kernel count: no GEMM calls counted
        return 0.0, 0.0
    from .curves_applied import FALLBACK, GEMMS_PER_LAYER, gemm_key
    from .engines import mixed_input

    key = gemm_key(precision, mixed_input(precision))
    while key not in extras and key in FALLBACK:
        key = FALLBACK[key]
    return float(extras.get(key, 0.0)), GEMMS_PER_LAYER


def engine_overhead(r: Rates, layers: Any, moe: Any, touched: Any = 0.0) -> Any:
    """Seconds per pass the engine adds (any backend's numbers); ``touched``: experts per MoE layer in the pass."""
    kernels = layers * (r.per_layer + r.per_moe_layer * moe + r.per_expert * moe * touched) + r.per_pass
    return r.kernel_s * kernels + (r.layer_s + r.gemm_s * r.gemms_per_layer + r.moe_s * moe) * layers + r.pass_s
