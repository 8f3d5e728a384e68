"""The one assembly: operators become latency, memory and energy -- for every backend.

Everything that turns the per-operator FLOPs and bytes of :mod:`.operators` into costs is defined here,
once, as sympy expressions; the backends only evaluate them:

- numpy (bulk, :mod:`.compile` + :mod:`.roofline`): lambdified, cached, evaluated on candidate tables;
- sympy (closed form, :mod:`.theory`): the ``paper`` preset's totals in the paper's variables;
- posynomial (GP, :mod:`.posynomial`): the ``full`` preset's parts with a posynomial expert-coverage stand-in.

What is defined here: the preset registry (:data:`PRESETS`); the phases (prefill; decode step t with context
S_in + t, and for sliding-window layers min(S_in + t, W), so their decode cost is affine in t on two step
ranges split where the window fills); the placement of each operator in its layers (:func:`place`); the
roof each operator runs on and the efficiencies (:func:`rates`); the time of a part (max(compute, memory) with its
bytes at the bandwidth of their memory stream class -- weights, KV cache, routed experts -- and the kernel curves'
MoE blend and decode attention waves, :mod:`.streams`; plus the per-launch overhead; or the theory-mode bound, one
bandwidth); the sums over layers and steps (:func:`totals`); energy (:mod:`.energy`); the mapping to the paper's
variables (:func:`paper_variable_map`). The preset registry (:data:`PRESETS`, :class:`Preset`) is :mod:`.presets`,
re-exported here, as are the energy and stream names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy as sp

from ..arch.layer_kinds import LAYER_KINDS
from ..arch.layer_kinds import stack_columns as stack_column_names
from ..errors import bad
from . import operators as O
from .energy import COMPUTE_POWER_SHARE, EnergyCoefficients, EnergyTerms, energy, energy_coefficients  # noqa: F401
from .fused_prefill import kernel_math, masked_pairs, prefill_time
from .moe_padding import MOE_PAD, MOE_PAD_DEC, padding_factor
from .moe_reread import rate_values, reread_bytes
from .paper_variables import PAPER_VARS, paper_variable_map, to_paper_variables  # noqa: F401 (re-exported)
from .presets import PRESETS, Preset, get_preset, register_preset  # noqa: F401 (re-exported)
from .streams import EXPERT_OPS, INV_BETA, ROOF_CLASSES, compute_time, decode_waves, inv_bandwidth, roof, roofline_time
from .symbols import ARCH, STACK, B, C, Mk, S_in, S_out, Sq, T, sym, t

#: Bytes per element of a linear roof's operands (the MoE family's ``ACT_BYTES``; other roofs: 16-bit)
ACT_BYTES = {"fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0, "fp4": 0.5, "int4": 0.5}

#: Inverse roofs (s/FLOP) per compute class, inverse bandwidth (s/byte), per-launch overhead (s).
INV_ROOF = {c: sym(f"inv_{c}") for c in ROOF_CLASSES}
OVERHEAD = sym("kernel_overhead")
nonzero = O.nonzero  # 1 where x > 0 (an unevaluated function, numpy: sign)


# ---- uniform stacks ----------------------------------------------------------------------------
def uniform_subs() -> dict[sp.Symbol, sp.Expr]:
    """A one-block stack: every layer has GQA attention and the main FFN, no other kind."""
    out: dict[sp.Symbol, sp.Expr] = {s: sp.Integer(0) for s in STACK.values()}
    out[STACK["attn_layers"]] = ARCH["layers"]
    out[STACK["ffn_layers"]] = ARCH["layers"]
    return out


def count_symbol(name: str) -> sp.Expr:
    return ARCH["layers"] if name == "layers" else sym(name)


# ---- phases ------------------------------------------------------------------------------------
def _cover(expr: sp.Expr, cover: sp.Expr | None) -> sp.Expr:
    return sp.sympify(expr).xreplace({O.experts_touched: O.EXPERTS_TOUCHED if cover is None else cover})


def prefill(expr: sp.Expr, cover: sp.Expr | None = None, window: sp.Expr | None = None) -> sp.Expr:
    """The prefill phase: T = B·S_in tokens, query length S_in, context S_in (min(S_in, window) if windowed), and
    the pairs a fused kernel's 128 × 128 blocks skip of ctx·(ctx − 1)/2 causally masked ones per sequence (query i
    attends keys max(0, i − ctx + 1)..i; :func:`.fused_prefill.masked_pairs`)."""
    ctx = S_in if window is None else sp.Min(S_in, window)
    subs = {T: B * S_in, Sq: S_in, C: ctx, Mk: masked_pairs(S_in, ctx)}
    return _cover(expr, cover).subs(subs, simultaneous=True)


def decode_step(expr: sp.Expr, cover: sp.Expr | None = None, context: sp.Expr | None = None) -> sp.Expr:
    """Decode step t: T = B, query length 1, context S_in + t (or ``context``), nothing masked."""
    subs = {T: B, Sq: 1, C: S_in + t if context is None else context, Mk: 0}
    return _cover(expr, cover).subs(subs, simultaneous=True)


def affine_in_t(expr: sp.Expr) -> tuple[sp.Expr, sp.Expr]:
    """Split ``expr`` = e0 + e1·t (exactly; raises if it is not affine in the step index t)."""
    e1 = sp.expand(sp.diff(expr, t))
    if sp.expand(sp.diff(e1, t)) != 0:
        raise AssertionError(f"decode cost is not affine in t: {expr}")
    return expr.subs(t, 0), e1


def steps_sum(e0: sp.Expr, e1: sp.Expr, n: sp.Expr) -> sp.Expr:
    """Σ_{t=1..n} (e0 + e1·t)."""
    return n * e0 + e1 * n * (n + 1) / 2


def sum_max_affine(a0: Any, a1: Any, b0: Any, b1: Any, n: Any) -> tuple[Any, Any]:
    """Numpy: Σ_{t=1..n} max(a0 + a1·t, b0 + b1·t), exactly, and the number of steps where a > b (n may be an array)."""
    g0, g1 = a0 - b0, a1 - b1
    base = n * b0 + b1 * n * (n + 1) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        root = np.where(g1 != 0, -g0 / np.where(g1 != 0, g1, 1.0), 0.0)
    # g1 > 0: positive for t > root; g1 < 0: positive for t < root; g1 == 0: all or none.
    lo = np.clip(np.floor(root) + 1, 1, n + 1)
    hi = np.clip(np.ceil(root) - 1, 0, n)
    cnt = np.where(g1 > 0, n - lo + 1, np.where(g1 < 0, hi, np.where(g0 > 0, n, 0)))
    first = np.where(g1 > 0, lo, 1.0)
    last = first + cnt - 1
    pos = cnt * g0 + g1 * (first + last) * cnt / 2
    return base + np.maximum(pos, 0.0), cnt


# ---- placement -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Segment:
    """Decode steps t = 1..steps of one part, each costing f0 + f1·t FLOPs and b0 + b1·t bytes."""

    steps: sp.Expr
    f0: sp.Expr
    f1: sp.Expr
    b0: sp.Expr
    b1: sp.Expr

    @property
    def constant(self) -> bool:
        return self.f1 == 0 and self.b1 == 0


@dataclass(frozen=True)
class Part:
    """One operator placed in its layers: ``count`` layers (1 for a model-level op), phase costs per layer."""

    name: str
    op: O.Op
    count: sp.Expr
    pre_flops: sp.Expr
    pre_bytes: sp.Expr
    decode: tuple[Segment, ...]
    gemm_pre: tuple[sp.Expr, ...] | None = None
    gemm_dec: tuple[sp.Expr, ...] | None = None
    window: sp.Expr | None = None  # the context bound of a windowed kind's copy of an attention op
    pad_pre: sp.Expr = sp.Integer(1)  # a routed expert's padded rows over its rows, prefill and decode (.moe_padding)
    pad_dec: sp.Expr = sp.Integer(1)

    @property
    def roof(self) -> str:
        return self.op.roof

    @property
    def scope(self) -> str:
        return self.op.scope

    @property
    def dec_flops(self) -> sp.Expr:
        return sum((steps_sum(s.f0, s.f1, s.steps) for s in self.decode), sp.Integer(0))

    @property
    def dec_bytes(self) -> sp.Expr:
        return sum((steps_sum(s.b0, s.b1, s.steps) for s in self.decode), sp.Integer(0))


def _segments(op: O.Op, cover: sp.Expr | None, window: sp.Expr | None) -> tuple[Segment, ...]:
    def seg(steps, ctx=None):
        f0, f1 = affine_in_t(decode_step(op.flops, cover, ctx))
        b0, b1 = affine_in_t(decode_step(op.bytes + reread_bytes(op), cover, ctx))
        return Segment(steps, f0, f1, b0, b1)

    if window is None:
        return (seg(S_out),)
    filling = sp.Min(sp.Max(window - S_in, 0), S_out)  # steps before the window is full
    return seg(filling), seg(S_out - filling, window)


def _part(op, name, count, cover_pre, cover_dec, window=None) -> Part:
    g_pre = g_dec = None
    if op.gemm is not None:
        g_pre = tuple(prefill(e, cover_pre, window) for e in op.gemm)
        g_dec = tuple(decode_step(e, cover_dec) for e in op.gemm)
    pf, pd = (padding_factor(s) if op.name in EXPERT_OPS else sp.Integer(1) for s in (MOE_PAD, MOE_PAD_DEC))
    return Part(
        name, op, count, prefill(op.flops, cover_pre, window), prefill(op.bytes + reread_bytes(op), cover_pre, window),
        _segments(op, cover_dec, window), g_pre, g_dec, window, prefill(pf, cover_pre, window),
        decode_step(pd, cover_dec))  # fmt: skip


def place(
    preset: str,
    kinds: frozenset[str] = frozenset(),
    cover_pre: sp.Expr | None = None,
    cover_dec: sp.Expr | None = None,
) -> list[Part]:
    """The operators of ``preset`` placed in their layers for a stack with layer ``kinds``.

    A uniform stack (no kinds) counts every layer op in ``layers`` layers. With a windowed kind's layers
    (sliding-window: ``local``) the context-dependent GQA attention ops split into a global part and one part per
    windowed kind (context min(C, window), named ``<op>_<kind>``); each kind adds its ops (the registry,
    :data:`rooflaw.arch.layer_kinds.LAYER_KINDS`). ``kinds`` may hold ``stack``: per-kind layer counts
    without a kind of their own. ``cover_*`` replace the expected distinct experts (default:
    E·(1 − (1 − K/E)^T)).
    """
    pr = PRESETS[preset]
    ops = list(pr.ops)
    windowed: list[tuple[str, str, str]] = []  # (kind, its count column, its window column)
    if pr.kinds:
        for name in sorted(kinds):
            if name == "stack":
                continue
            if name not in LAYER_KINDS:
                raise bad("layer kind", name, f"is not registered; known: {', '.join(LAYER_KINDS)}")
            ops += LAYER_KINDS[name].ops
            kind = LAYER_KINDS[name]
            windowed += [(name, kind.count, kind.window)] if kind.window else []
    parts = []
    for op in ops:
        if op.scope == "model":
            parts.append(_part(op, op.name, sp.Integer(1), cover_pre, cover_dec))
            continue
        count = count_symbol(op.count)
        if not kinds:
            count = count.xreplace(uniform_subs())
        if windowed and op.count == "attn_layers" and C in (op.flops + op.bytes).free_symbols:
            parts.append(_part(op, op.name, count - sum(sym(n) for _, n, _ in windowed), cover_pre, cover_dec))
            for name, n, w in windowed:
                parts.append(_part(op, f"{op.name}_{name}", sym(n), cover_pre, cover_dec, sym(w)))
        else:
            parts.append(_part(op, op.name, count, cover_pre, cover_dec))
    return parts


# ---- time of a part ----------------------------------------------------------------------------
def part_times(
    part: Part, ipi_pre: sp.Expr, ipi_dec: sp.Expr, theory: bool, pass_phase: str = "prefill", tiles: bool = False
) -> dict[str, Any]:
    """Seconds of one layer's worth of ``part``: ``pre`` (prefill), ``dec`` (all step-constant decode
    segments), ``varying`` [(steps, a0, a1, b0, b1)] whose Σ_t max(a0 + a1·t, b0 + b1·t) the backend sums
    exactly, ``launch`` (overhead per pass: the prefill pays it once, decode once per step -- see
    :func:`with_launches`), and the compute/memory times of prefill (``tc``, ``tm``) for the bound label.

    Roofline: :func:`roofline_time` of FLOPs·ipi and bytes at the op's stream class (:func:`inv_bandwidth`), plus
    decode attention's waves (:func:`decode_waves`) in a decode pass, a fused prefill kernel's blocks, tiles, waves
    and blend (:func:`.fused_prefill.prefill_time`) in a prefill, plus one launch overhead per pass for an op
    that does work; ``pass_phase``: the phase ``pre`` is priced as (a multi-token pass over a KV cache,
    :mod:`.passes`: ``decode``); ``tiles``: the tile/wave model's GEMMs blend at their round corner (``gemm_blend``).
    Theory mode: prefill FLOPs·ipi, decode
    bytes·inv_beta (one bandwidth), no overhead.
    """
    F, By = part.pre_flops, part.pre_bytes
    if theory:
        tc, tm = F * ipi_pre, By * INV_BETA
        dec = sum((steps_sum(s.b0, s.b1, s.steps) for s in part.decode), sp.Integer(0)) * INV_BETA
        return {"pre": tc, "dec": dec, "varying": [], "tc": tc, "tm": tm, "launch": sp.Integer(0)}
    ib_pre, ib_dec = inv_bandwidth(part.op, pass_phase), inv_bandwidth(part.op, "decode")
    tc, tm = F * ipi_pre, By * ib_pre
    waves = decode_waves(part.op)
    dec = sp.Integer(0)
    varying = []
    for s in part.decode:  # the compute of a fused kernel's matmuls with its softmax (kernel_math), per coefficient
        dec += s.steps * waves
        f0, f1 = kernel_math(part.op, s.f0, s.f0 * ipi_dec), kernel_math(part.op, s.f1, s.f1 * ipi_dec)
        if s.constant:
            dec += s.steps * roofline_time(part.op, f0, s.b0 * ib_dec, tiles, part.pad_dec)
        elif part.op.name in EXPERT_OPS or (tiles and part.op.gemm is not None):
            raise AssertionError(f"{part.op.name}: a blended GEMM's decode cost varies with the step")
        else:
            varying.append((s.steps, f0, f1, s.b0 * ib_dec, s.b1 * ib_dec))
    # a multi-token pass: decode's terms; routed experts on their padded rows (.moe_padding) in either phase
    multi = roofline_time(part.op, kernel_math(part.op, F, tc), tm, tiles, part.pad_pre)
    fused = pass_phase == "prefill" and part.op.name not in EXPERT_OPS
    pre = prefill_time(part.op, F, tc, tm, tiles) if fused else multi
    pre += waves if pass_phase == "decode" else 0
    tc = compute_time(part.op, tc, part.pad_pre)  # the bound label's: a routed expert's at the grouped GEMMs' rate
    return {"pre": pre, "dec": dec, "varying": varying, "tc": tc, "tm": tm, "launch": launch_count(part)}


def launch_count(part: Part) -> sp.Expr:
    """Kernels one layer's worth of ``part`` launches per pass: 1 if it does any work (prefill decides)."""
    return nonzero(part.pre_flops + part.pre_bytes)


def with_launches(pre: sp.Expr, dec: sp.Expr, launches: sp.Expr) -> tuple[sp.Expr, sp.Expr]:
    """Phase seconds plus the overhead of ``launches`` kernels per pass: once in prefill, once per decode step."""
    return pre + OVERHEAD * launches, dec + S_out * OVERHEAD * launches


def inv_roof(roof: str) -> sp.Expr:
    return INV_ROOF.get(roof, sp.Integer(0))


# ---- totals --------------------------------------------------------------------------------------
@dataclass
class Totals:
    """Symbolic totals over layers and steps (FLOPs per roof class, bytes, memory terms, launches)."""

    flops_pre: dict[str, sp.Expr] = field(default_factory=dict)
    flops_dec: dict[str, sp.Expr] = field(default_factory=dict)
    bytes_pre: sp.Expr = sp.Integer(0)
    bytes_dec: sp.Expr = sp.Integer(0)
    weights: sp.Expr = sp.Integer(0)
    kv: sp.Expr = sp.Integer(0)
    act: sp.Expr = sp.Integer(0)
    params_total: sp.Expr = sp.Integer(0)
    params_active: sp.Expr = sp.Integer(0)
    launches: sp.Expr = sp.Integer(0)  # kernels per pass

    def as_list(self) -> list[sp.Expr]:
        return [self.weights, self.kv, self.act, self.params_total, self.params_active,
                *(self.flops_pre[c] for c in ROOF_CLASSES), *(self.flops_dec[c] for c in ROOF_CLASSES),
                self.bytes_pre, self.bytes_dec, self.launches]  # fmt: skip


TOTAL_KEYS = ("weights", "kv", "act", "params_total", "params_active", "fpre_linear", "fpre_attention",
              "fpre_vector", "fdec_linear", "fdec_attention", "fdec_vector", "bytes_pre", "bytes_dec",
              "launches")  # fmt: skip


def stack_columns(kinds: frozenset[str]) -> dict[str, sp.Expr]:
    """The architecture symbols a ``kinds`` stack is written over (uniform: without the stack columns)."""
    return {**ARCH, **STACK, **{c: sym(c) for c in stack_column_names(kinds)}} if kinds else dict(ARCH)


def totals(preset: str, parts: list[Part], kinds: frozenset[str] = frozenset()) -> Totals:
    from ..arch.architecture import param_counts

    pr = PRESETS[preset]
    out = Totals({c: sp.Integer(0) for c in ROOF_CLASSES}, {c: sp.Integer(0) for c in ROOF_CLASSES})
    for p in parts:
        if p.roof in ROOF_CLASSES:
            out.flops_pre[p.roof] += p.count * p.pre_flops
            out.flops_dec[p.roof] += p.count * p.dec_flops
        out.bytes_pre += p.count * p.pre_bytes
        out.bytes_dec += p.count * p.dec_bytes
        if not pr.theory:
            out.launches += p.count * launch_count(p)
    cols = stack_columns(kinds if pr.kinds else frozenset())
    counts = param_counts(cols)
    out.weights = pr.weights(cols) if pr.name == "full" else pr.weights()
    out.kv = pr.kv_cache(S_in + S_out, kinds if pr.kinds else frozenset())
    out.act = pr.activations(S_in, kinds if pr.kinds else frozenset())
    out.params_total, out.params_active = counts["total"], counts["active"]
    return out


def memory_expr(preset: str, tot: Totals) -> sp.Expr:
    """``memory_bytes``: the preset's memory terms."""
    return sum((getattr(tot, k) for k in PRESETS[preset].memory), sp.Integer(0))


# ---- device rates and energy ----------------------------------------------------------------------
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
        _moe_fraction(app, precision), *_streams(device, app, precision),
    )  # fmt: skip


def _moe_fraction(app: Any, precision: Any) -> float:
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


__all__ = ["COMPUTE_POWER_SHARE", "PRESETS", "Part", "Preset", "Segment", "affine_in_t", "decode_step", "energy",
           "energy_coefficients", "engine_overhead", "paper_variable_map", "place", "prefill", "rates",
           "register_preset", "to_paper_variables", "totals"]  # fmt: skip
