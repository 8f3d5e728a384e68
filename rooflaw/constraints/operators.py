"""Per-operator FLOPs and bytes, written once as sympy expressions.

Every operator is a function of the architecture symbols (:data:`symbols.ARCH`), the precision
byte widths (b_w, b_a, b_kv), the batch ``B`` and three phase symbols: ``T`` tokens in this pass,
``Sq`` query length per sequence and ``C`` attended context length. A phase substitutes them:
prefill ``T = B·S_in, Sq = C = S_in``; decode step t ``T = B, Sq = 1, C = S_in + t``.

Conventions (the ``full`` preset):
- FLOPs count a multiply-add as 2 and are the FLOPs **executed**: an unfused implementation (the paper's
  Tables 10-12, torch's math SDPA) computes the full S_q × C score block and masks it; a fused,
  FlashAttention-style kernel (``Workload(attention="fused")``, the default) skips the fully masked tiles, so
  its QKᵀ, softmax and ·V run over ``Sq·C − Mk`` pairs (``Mk``: the C·(C − 1)/2 masked pairs per sequence in
  prefill less those of the 128 × 128 blocks a GPU kernel computes whole, :mod:`.fused_prefill`; 0 in decode).
  Unfused attention stores the score matrix, re-read by softmax and by scores·V;
  a fused kernel keeps it on chip. torch's ``FlopCounterMode`` counts the full block (it does not see the
  mask): the torch check compares with ``attention="unfused"``, and the fused count is the unfused one less
  the masked pairs (tests/test_cost_model.py).
- Vector ops (norms and residual adds, RoPE/q-k norms, softmax, the FFN activation) compute in
  16 bits or more, so they read and write ``b_v`` = max(b_a, 2) bytes per element, and so does
  the score matrix between QKᵀ, softmax and ·V: INT8 halves only the linear layers' traffic --
  the paper's reason why INT8 helps sub-linearly.
- A GEMM with activations narrower than 16 bits (FP8, NVFP4, INT8: W8A8, llama.cpp's MMQ) reads them quantised
  by a kernel of its own: ``attn_quant`` (the inputs of the QKV and O projections) and ``ffn_quant`` (of the FFN's
  up and down projections) move ``b_q`` = b_v + b_a bytes per input element (read 16-bit, write quantised; 0 for
  16-bit activations), as the measured GEMM kernels' ``quant_bytes`` (``kernels/gemm.py``) do. Weights a separate
  kernel dequantises before the GEMM (llama.cpp's F16 cuBLAS path for GGUF prompts) cost ``attn_dequant`` and
  ``ffn_dequant``: ``b_d`` bytes per weight each pass, on top of the GEMM's own read of the dequantised copy.
- Weight bytes are read once per pass; MoE reads the E·(1 − (1 − K/E)^T) distinct experts T tokens touch, plus
  shared experts; its ``ffn_act`` also moves the gather's and scatter-reduce's 2·(K + 1)·d elements per token.
- The KV cache is 2·kv_heads·head_dim·b_kv bytes per token per layer (K and V, KV heads).
- Prefill computes LM-head logits only for the last token of each sequence (what serving
  engines do); logits are written in fp32.

Layer kinds: every layer op names the layer-count column it runs in (``count``): ``layers`` (norms),
``attn_layers`` (GQA attention; the assembly runs the context-dependent ones of a windowed kind's layers --
sliding-window -- at context min(C, window)), ``ffn_layers`` (the main FFN), and the kind blocks below
(``mla_layers``, ``mixer_layers``, ``dense_layers``), which this module attaches to their entries of the layer-kind
registry (:data:`rooflaw.arch.layer_kinds.LAYER_KINDS`). Each op also says which per-device shape a layout prices
it on (``shard``) and how many kernels eager PyTorch launches for it (``eager_kernels``).
Adding an operator is one entry here; the assembly (``assembly.py``) places, prices and sums it.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import sympy as sp

from ..arch.layer_kinds import LAYER_KINDS, LayerKind, kinds, register_layer_kind, stack_columns
from ..errors import bad
from .symbols import ARCH, STACK, B, C, Mk, Sq, T, b_a, b_d, b_h, b_kv, b_q, b_v, b_w, sym, unfused

#: (query, key) pairs per sequence an attention kernel computes: the full block unfused, the causal ones fused.
PAIRS = Sq * C - (1 - unfused) * Mk

a = ARCH
d, nh, nkv, hd = a["d_model"], a["heads"], a["kv_heads"], a["head_dim"]
E, K, ffn = a["experts"], a["top_k"], a["ffn"]
nsh, ffn_sh = a["shared_experts"], a["shared_ffn"]
gated, V = a["gated"], a["vocab"]
q_out, kv_out = nh * hd, nkv * hd
n_up = 1 + gated  # gate and up projections (SwiGLU) or up only
norm_flops = 4 + 3 * a["layernorm"]  # per element: RMSNorm ≈ 4, LayerNorm ≈ 7
#: Expected distinct routed experts touched by T tokens (1 for a dense FFN). Operators use the
#: symbol ``E_cov``; the phase substitution (compile.prefill/decode_step) replaces it by this
#: expression, and the geometric program by a posynomial stand-in.
EXPERTS_TOUCHED = E * (1 - (1 - K / E) ** T)
experts_touched = sp.Symbol("E_cov", positive=True)
ffn_tokens_width = K * ffn + nsh * ffn_sh  # active intermediate width per token


@dataclass(frozen=True)
class Op:
    """One operator. ``roof``: ``linear`` (weight GEMM), ``attention`` (QKᵀ, ·V), ``vector``
    (softmax, norms, activations) or ``memory`` (pure data movement). ``scope``: ``layer`` (runs
    once per layer) or ``model`` (once per pass). ``gemm``: (M, N, K, groups) for the tile/wave
    model, where groups are independent GEMMs of that shape (experts). ``count``: the layer-count column
    of a layer op (default ``layers``: every layer). ``shard``: the per-device shape a layout prices it on
    (:mod:`.parallel.shard`): ``attn`` (token mixers, norms, router, embedding, LM head), ``ctx`` (the
    context-dependent attention, QKᵀ/softmax/·V, which Helix splits along the sequence) or ``ffn``.
    ``eager_kernels``: kernels eager PyTorch launches for it per layer (per pass for a model op); None where
    the engine profile counts it otherwise (the router) or nobody counted it."""

    name: str
    roof: str
    scope: str
    flops: sp.Expr
    bytes: sp.Expr
    gemm: tuple[sp.Expr, sp.Expr, sp.Expr, sp.Expr] | None = None
    count: str = "layers"
    shard: str = "attn"
    eager_kernels: int | None = None

    def __post_init__(self) -> None:
        if self.shard not in SHARDS:
            raise bad("shard", self.shard, f"of op {self.name!r} must be one of {', '.join(SHARDS)}")


#: The per-device shapes of a layout (:mod:`.parallel.shard`).
SHARDS = ("attn", "ctx", "ffn")


def _proj(
    name: str,
    n_out: sp.Expr,
    k_in: sp.Expr,
    out_bytes: sp.Expr,
    bias: sp.Expr = 0,
    count: str = "attn_layers",
    eager_kernels: int | None = None,
) -> Op:
    return Op(
        name,
        "linear",
        "layer",
        flops=2 * T * k_in * n_out + bias * T * n_out,
        bytes=k_in * n_out * b_w + bias * n_out * b_a + T * k_in * b_a + T * n_out * out_bytes,
        gemm=(T, n_out, k_in, sp.Integer(1)),
        count=count,
        eager_kernels=eager_kernels,
    )


def _norm(
    name: str, count: sp.Expr, width: sp.Expr, tokens: sp.Expr = T, residual: bool = True, eager: int | None = None
) -> Op:
    flops = count * norm_flops * tokens * width + (tokens * width if residual else 0)
    byts = count * (2 * tokens * width * b_v + width * (1 + a["layernorm"]) * b_v)
    if residual:
        byts += 3 * tokens * width * b_v
    return Op(name, "vector", "layer", flops, byts, eager_kernels=eager)


_tokens_per_expert = T * K / experts_touched

FULL_OPS: tuple[Op, ...] = (
    _norm("attn_norm", a["norms_per_layer"] / 2, d, eager=7),
    Op(
        "attn_quant",
        "memory",
        "layer",
        flops=sp.Integer(0),
        bytes=T * (d + q_out) * b_q,
        count="attn_layers",
        shard="attn",
    ),  # fmt: skip
    Op(
        "attn_dequant",
        "memory",
        "layer",
        flops=sp.Integer(0),
        bytes=d * (2 * q_out + 2 * kv_out) * b_d,
        count="attn_layers",
        shard="attn",
    ),  # fmt: skip
    _proj("q_proj", q_out, d, b_a, a["qkv_bias"], eager_kernels=1),
    _proj("k_proj", kv_out, d, b_kv, a["qkv_bias"], eager_kernels=1),
    _proj("v_proj", kv_out, d, b_kv, a["qkv_bias"], eager_kernels=1),
    Op(
        "qk_norm_rope",
        "vector",
        "layer",
        flops=T * (nh + nkv) * hd * (6 + 4 * a["qk_norm_on"]),
        bytes=2 * T * (q_out + kv_out) * b_v + a["qk_norm_size"] * b_v,
        count="attn_layers",
        eager_kernels=10,
    ),
    Op(
        "attn_scores",
        "attention",
        "layer",
        flops=2 * B * PAIRS * nh * hd,
        bytes=T * q_out * b_a + B * C * kv_out * b_kv + unfused * B * nh * Sq * C * b_v,
        count="attn_layers",
        shard="ctx",
        eager_kernels=1,  # fused SDPA: QKᵀ, softmax and ·V in one kernel
    ),
    Op(
        "softmax",
        "vector",
        "layer",
        flops=5 * B * nh * PAIRS,
        bytes=unfused * 2 * B * nh * Sq * C * b_v,
        count="attn_layers",
        shard="ctx",
        eager_kernels=0,
    ),
    Op(
        "attn_values",
        "attention",
        "layer",
        flops=2 * B * PAIRS * nh * hd,
        bytes=unfused * B * nh * Sq * C * b_v + B * C * kv_out * b_kv + T * q_out * b_a,
        count="attn_layers",
        shard="ctx",
        eager_kernels=0,
    ),
    _proj("o_proj", d, q_out, b_a, eager_kernels=1),
    _norm("ffn_norm", a["norms_per_layer"] / 2, d, eager=7),
    Op(
        "ffn_quant",
        "memory",
        "layer",
        flops=sp.Integer(0),
        bytes=T * (d + ffn_tokens_width) * b_q,
        count="ffn_layers",
        shard="ffn",
    ),  # fmt: skip
    Op(
        "ffn_dequant",
        "memory",
        "layer",
        flops=sp.Integer(0),
        bytes=(n_up + 1) * d * (experts_touched * ffn + nsh * ffn_sh) * b_d,
        count="ffn_layers",
        shard="ffn",
    ),  # fmt: skip
    Op(
        "router",
        "linear",
        "layer",
        flops=2 * T * d * (E * a["moe"] + a["shared_gate"]),
        bytes=d * (E * a["moe"] + a["shared_gate"]) * b_w + a["moe"] * T * (d + E) * b_a,
        gemm=(T, E * a["moe"] + a["shared_gate"], d, sp.Integer(1)),
        count="ffn_layers",
    ),
    Op(
        "ffn_up",
        "linear",
        "layer",
        flops=2 * T * n_up * d * ffn_tokens_width,
        bytes=n_up * d * (experts_touched * ffn + nsh * ffn_sh) * b_w
        + T * (K + nsh) * d * b_a
        + T * n_up * ffn_tokens_width * b_a,
        gemm=(_tokens_per_expert, n_up * ffn, d, experts_touched),
        count="ffn_layers",
        shard="ffn",
        eager_kernels=2,  # gate, up
    ),
    Op(
        "ffn_act",
        "vector",
        "layer",
        flops=T * ffn_tokens_width * (4 + gated),
        bytes=T * (ffn_tokens_width * (n_up + 1) + 2 * a["moe"] * (K + 1) * d) * b_v,
        count="ffn_layers",
        shard="ffn",
        eager_kernels=2,  # SiLU, mul
    ),
    Op(
        "ffn_down",
        "linear",
        "layer",
        flops=2 * T * ffn_tokens_width * d,
        bytes=d * (experts_touched * ffn + nsh * ffn_sh) * b_w + T * ffn_tokens_width * b_a + T * (K + nsh) * d * b_a,
        gemm=(_tokens_per_expert, d, ffn, experts_touched),
        count="ffn_layers",
        shard="ffn",
        eager_kernels=1,
    ),
    Op("embed", "memory", "model", flops=sp.Integer(0), bytes=T * d * (b_h + b_a), eager_kernels=1),
    Op(
        "final_norm",
        "vector",
        "model",
        flops=norm_flops * T * d,
        bytes=2 * T * d * b_v + d * (1 + a["layernorm"]) * b_v,
        eager_kernels=6,  # no residual
    ),
    Op(
        "lm_head",
        "linear",
        "model",
        flops=2 * B * d * V,
        bytes=V * d * b_h + B * d * b_a + 4 * B * V,
        gemm=(B, V, d, sp.Integer(1)),
        eager_kernels=1,
    ),
)


# --- Layer kinds beyond uniform GQA attention + the main FFN (zero layers of each in a uniform model). ---
k_ = STACK
q_lora, kv_lora, rope, v_hd = k_["q_lora_rank"], k_["kv_lora_rank"], k_["rope_dim"], k_["v_head_dim"]
latent = kv_lora + rope  # MLA cache per token per layer: the KV latent plus the shared rope key
_mla = "mla_layers"

#: MLA (DeepSeek-V2/V3) weight-absorbed (FlashMLA): an MQA over the latent, scores with head dim kv_lora_rank +
#: rope_dim, values with the first kv_lora_rank columns of the latent tile the scores loaded (a fused kernel reads
#: the cache once; an unfused one again for the values); kv_b is applied per token.
MLA_OPS: tuple[Op, ...] = (
    _proj("mla_q_a", q_lora, d, b_a, count=_mla),
    _proj("mla_q", q_out, q_lora + (1 - k_["q_lora_on"]) * d, b_a, count=_mla),
    _proj("mla_kv_a", latent, d, b_kv, count=_mla),
    Op(
        "mla_norm_rope",
        "vector",
        "layer",
        flops=T * (norm_flops * (q_lora + kv_lora) + 6 * (nh + 1) * rope),
        bytes=2 * T * (q_lora + kv_lora + (nh + 1) * rope) * b_v + (q_lora + kv_lora) * b_v,
        count=_mla,
    ),
    Op(
        "mla_kv_b",
        "linear",
        "layer",
        flops=2 * T * nh * kv_lora * (hd - rope + v_hd),
        bytes=kv_lora * nh * (hd - rope + v_hd) * b_w + T * nh * (hd - rope + 2 * kv_lora + v_hd) * b_a,
        gemm=(T, nh * kv_lora, hd - rope + v_hd, sp.Integer(1)),
        count=_mla,
    ),
    Op(
        "mla_scores",
        "attention",
        "layer",
        flops=2 * B * PAIRS * nh * latent,
        bytes=T * nh * latent * b_a + B * C * latent * b_kv + unfused * B * nh * Sq * C * b_v,
        count=_mla,
        shard="ctx",
    ),
    Op(
        "mla_softmax",
        "vector",
        "layer",
        flops=5 * B * nh * PAIRS,
        bytes=unfused * 2 * B * nh * Sq * C * b_v,
        count=_mla,
        shard="ctx",
    ),  # fmt: skip
    Op(
        "mla_values",
        "attention",
        "layer",
        flops=2 * B * PAIRS * nh * kv_lora,
        bytes=unfused * (B * nh * Sq * C * b_v + B * C * kv_lora * b_kv) + T * nh * kv_lora * b_a,
        count=_mla,
        shard="ctx",
    ),
    _proj("mla_o_proj", d, nh * v_hd, b_a, count=_mla),
)

#: A constant-state token mixer (short conv, Mamba-style SSM, linear attention): in/out projections and the
#: recurrence, whose state (``mixer_state`` elements per sequence, ≥ 16-bit) is read and written once per pass.
MIXER_OPS: tuple[Op, ...] = (
    _proj("mixer_in_proj", k_["mixer_in"], d, b_a, count="mixer_layers"),
    Op(
        "mixer_scan",
        "vector",
        "layer",
        flops=T * k_["mixer_flops"],
        bytes=T * (k_["mixer_in"] + k_["mixer_inner"]) * b_v
        + 2 * B * k_["mixer_state"] * b_v
        + k_["mixer_params"] * b_w,
        count="mixer_layers",
    ),
    _proj("mixer_out_proj", d, k_["mixer_inner"], b_a, count="mixer_layers"),
)

#: The first-k dense FFN layers of an MoE model (DeepSeek first_k_dense_replace), width dense_ffn.
_dff = k_["dense_ffn"]
DENSE_FFN_OPS: tuple[Op, ...] = (
    Op(
        "dense_ffn_up",
        "linear",
        "layer",
        flops=2 * T * n_up * d * _dff,
        bytes=n_up * d * _dff * b_w + T * d * b_a + T * n_up * _dff * b_a,
        gemm=(T, n_up * _dff, d, sp.Integer(1)),
        count="dense_layers",
        shard="ffn",
    ),
    Op(
        "dense_ffn_act",
        "vector",
        "layer",
        flops=T * _dff * (4 + gated),
        bytes=T * _dff * (n_up + 1) * b_v,
        count="dense_layers",
        shard="ffn",
    ),  # fmt: skip
    Op(
        "dense_ffn_down",
        "linear",
        "layer",
        flops=2 * T * _dff * d,
        bytes=d * _dff * b_w + T * _dff * b_a + T * d * b_a,
        gemm=(T, d, _dff, sp.Integer(1)),
        count="dense_layers",
        shard="ffn",
    ),
)

# The built-in kinds' ops, attached to their registry entries; ``local`` adds no op of its own (the assembly
# windows the attention ops).
for _name, _ops in (("mla", MLA_OPS), ("mixer", MIXER_OPS), ("dense", DENSE_FFN_OPS)):
    register_layer_kind(dataclasses.replace(LAYER_KINDS[_name], ops=_ops), replace=True)


def kind_ops() -> dict[str, tuple[Op, ...]]:
    """Ops of each registered layer kind (read live: a kind registered later is included)."""
    return {k.name: k.ops for k in kinds()}


def all_ops() -> tuple[Op, ...]:
    """The ``full`` preset's ops and every registered layer kind's."""
    return (*FULL_OPS, *(op for k in kinds() for op in k.ops))


def op_named(part: str) -> Op:
    """The op a placed part of the ``full`` model comes from: ``part`` is an op's name, or ``<op>_<kind>`` for the
    windowed copy of a base attention op in a windowed kind's layers (:func:`assembly.place`)."""
    op = _part_index(kinds()).get(part)
    if op is None:
        raise bad("op", part, "is no operator of the full model nor of a registered layer kind")
    return op


@functools.lru_cache(maxsize=8)
def _part_index(registered: tuple[LayerKind, ...]) -> dict[str, Op]:
    """Part name -> op for the registered kinds (the key: a re-registered kind is a new object)."""
    ops = (*FULL_OPS, *(op for k in registered for op in k.ops))
    out = {op.name: op for op in ops}
    out.update({f"{op.name}_{k.name}": op for k in registered if k.window for op in ops})
    return out


def part_roofs() -> dict[str, str]:
    """The roof class of every part the ``full`` model places: each op's, and each windowed copy's (``<op>_<kind>``)."""
    return {name: op.roof for name, op in _part_index(kinds()).items()}


def stack_kinds_in(names: frozenset[str]) -> list[LayerKind]:
    """The kinds whose columns a compiled model for layer kinds ``names`` takes: the built-in ones (their columns
    are always arguments of a non-uniform model) and the registered ones named."""
    return [k for k in kinds() if k.builtin or k.name in names]


def weight_bytes_expr(cols: dict | None = None) -> sp.Expr:
    """Bytes of all weights (all experts; embeddings and LM head, if untied, at ``b_h`` bytes)."""
    from ..arch.architecture import param_counts

    c = param_counts(ARCH if cols is None else cols)
    outer = c["embed"] + c["lm_head"]
    return (c["total"] - outer) * b_w + outer * b_h


def _cols(names: frozenset) -> dict[str, sp.Symbol]:
    """The architecture and stack symbols of a model with layer kinds ``names``."""
    return {**ARCH, **{c: sym(c) for c in stack_columns(names)}}


def kv_cache_bytes_expr(S: sp.Expr, kinds: frozenset = frozenset()) -> sp.Expr:
    """Bytes of the cache at ``S`` tokens per sequence, batch B: 2·kv_heads·head_dim·b_kv per token per GQA
    layer (a windowed kind's layers -- sliding-window -- keep min(S, window) tokens), plus each layer kind's own
    cache per token (at b_kv: MLA's kv_lora_rank + rope_dim) and state per sequence (≥ 16-bit: conv/SSM/linear
    attention) (:data:`rooflaw.arch.layer_kinds.LAYER_KINDS`)."""
    if not kinds:
        return 2 * a["layers"] * nkv * hd * b_kv * B * S
    c, ks = _cols(kinds), stack_kinds_in(kinds)
    win = [(k, k.window) for k in ks if k.window]
    full = (c["attn_layers"] - sum(c[k.count] for k, _ in win)) * S
    out = 2 * nkv * hd * b_kv * B * (full + sum(c[k.count] * sp.Min(S, c[w]) for k, w in win))
    for k in ks:
        if k.cache_token is not None:
            out += c[k.count] * k.cache_token(c) * b_kv * B * S
        if k.cache_state is not None:
            out += c[k.count] * B * k.cache_state(c) * b_v
    return out


#: Tokens one prefill chunk carries: serving engines prefill in chunks while the other sequences decode
#: (TensorRT-LLM ``max_num_tokens`` and vLLM ``max_num_batched_tokens`` default to 8,192), so the activation
#: workspace holds one chunk's tokens, not every sequence's prompt at once.
PREFILL_CHUNK_TOKENS = 8192


def activation_bytes_expr(S: sp.Expr, kinds: frozenset = frozenset()) -> sp.Expr:
    """Peak activation workspace of a prefill of ``S`` tokens per sequence, chunked.

    One layer's live tensors for the tokens of one prefill chunk, min(B·S, :data:`PREFILL_CHUNK_TOKENS`):
    the residual and normed stream (2·d), the FFN intermediates of the active experts ((1+gated)·(K·ffn +
    shared)), one attention-score row block (heads·S, unfused attention; heads·min(S, window) when every
    attention layer is sliding-window), plus fp32 logits for the last token (4·V per sequence).
    """
    ctx = S
    c, ks = _cols(kinds), stack_kinds_in(kinds)
    win = [(k, k.window) for k in ks if k.window and k.name in kinds]
    if win:  # full-context layers: the base attention's outside windowed kinds, and full-context kinds (MLA)
        n_full = c["attn_layers"] - sum(c[k.count] for k, _ in win) + sum(c[k.count] for k in ks if k.full_context)
        full = nonzero(n_full)
        ctx = full * S + (1 - full) * sp.Max(*(sp.Min(S, c[w]) for _, w in win))
    chunk = sp.Min(B * S, PREFILL_CHUNK_TOKENS)
    return chunk * (2 * d + n_up * ffn_tokens_width + unfused * nh * ctx) * b_a + 4 * B * V


#: ``nonzero(x)``: 1 where x > 0 else 0, unevaluated (sympy folds sign() of positive symbols to 1; ``moe`` may be 0)
nonzero = sp.Function("nonzero")
