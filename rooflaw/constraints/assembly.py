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
the device rates (:class:`Rates`, :func:`rates`, :func:`engine_overhead`) are :mod:`.device_rates`, both re-exported
here, as are the energy and stream names.
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
from .device_rates import ACT_BYTES, Rates, engine_overhead, moe_half_width, rates  # noqa: F401 (re-exported)
from .energy import COMPUTE_POWER_SHARE, EnergyCoefficients, EnergyTerms, energy, energy_coefficients  # noqa: F401
from .fused_prefill import kernel_math, masked_pairs, prefill_time
from .moe_padding import MOE_PAD, MOE_PAD_DEC, padding_factor
from .moe_reread import reread_bytes
from .paper_variables import PAPER_VARS, paper_variable_map, to_paper_variables  # noqa: F401 (re-exported)
from .presets import PRESETS, Preset, get_preset, register_preset  # noqa: F401 (re-exported)
from .streams import EXPERT_OPS, INV_BETA, ROOF_CLASSES, compute_time, decode_waves, inv_bandwidth, roofline_time
from .symbols import ARCH, STACK, B, C, Mk, S_in, S_out, Sq, T, sym, t

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


def inv_roof(roof_class: str) -> sp.Expr:
    return INV_ROOF.get(roof_class, sp.Integer(0))


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


__all__ = ["COMPUTE_POWER_SHARE", "PRESETS", "Part", "Preset", "Segment", "affine_in_t", "decode_step", "energy",
           "energy_coefficients", "engine_overhead", "paper_variable_map", "place", "prefill", "rates",
           "register_preset", "to_paper_variables", "totals"]  # fmt: skip
