"""Per-operator FLOPs and bytes, written once as sympy expressions.

Every operator is a function of the architecture symbols (:data:`symbols.ARCH`), the precision
byte widths (b_w, b_a, b_kv), the batch ``B`` and three phase symbols: ``T`` tokens in this pass,
``Sq`` query length per sequence and ``C`` attended context length. A phase substitutes them:
prefill ``T = B·S_in, Sq = C = S_in``; decode step t ``T = B, Sq = 1, C = S_in + t``.

Conventions (the ``full`` preset):
- FLOPs count a multiply-add as 2 and are the FLOPs **executed**: an unfused implementation (the paper's
  Tables 10-12, torch's math SDPA) computes the full S_q × C score block and masks it; a fused,
  FlashAttention-style kernel (``Workload(attention="fused")``, the default) skips the fully masked tiles, so
  its QKᵀ, softmax and ·V run over the causal pairs ``Sq·C − Mk`` only (``Mk`` = C·(C − 1)/2 hidden pairs per
  sequence in prefill, 0 in decode: the measured FA prefill kernels of ``../shared/data/kernels`` take half the
  time of the full block). Unfused attention stores the score matrix, re-read by softmax and by scores·V;
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
- Weight bytes are read once per pass; MoE reads the expected number of distinct experts touched
  by ``T`` tokens, E·(1 − (1 − K/E)^T), plus shared experts.
- The KV cache is 2·kv_heads·head_dim·b_kv bytes per token per layer (K and V, KV heads).
- Prefill computes LM-head logits only for the last token of each sequence (what serving
  engines do); logits are written in fp32.

Layer kinds: every layer op names the layer-count column it runs in (``count``): ``layers`` (norms),
``attn_layers`` (GQA attention; the assembly runs the context-dependent ones of the sliding-window
layers at context min(C, window)), ``ffn_layers`` (the main FFN), and the kind blocks below
(``mla_layers``, ``mixer_layers``, ``dense_layers``). :data:`KIND_OPS` maps each kind to its ops.
Adding an operator is one entry here; the assembly (``assembly.py``) places, prices and sums it.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from .symbols import ARCH, STACK, B, C, Mk, Sq, T, b_a, b_d, b_h, b_kv, b_q, b_v, b_w, unfused

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
    of a layer op (default ``layers``: every layer)."""

    name: str
    roof: str
    scope: str
    flops: sp.Expr
    bytes: sp.Expr
    gemm: tuple[sp.Expr, sp.Expr, sp.Expr, sp.Expr] | None = None
    count: str = "layers"


def _proj(
    name: str, n_out: sp.Expr, k_in: sp.Expr, out_bytes: sp.Expr, bias: sp.Expr = 0, count: str = "attn_layers"
) -> Op:
    return Op(
        name,
        "linear",
        "layer",
        flops=2 * T * k_in * n_out + bias * T * n_out,
        bytes=k_in * n_out * b_w + bias * n_out * b_a + T * k_in * b_a + T * n_out * out_bytes,
        gemm=(T, n_out, k_in, sp.Integer(1)),
        count=count,
    )


def _norm(name: str, count: sp.Expr, width: sp.Expr, tokens: sp.Expr = T, residual: bool = True) -> Op:
    flops = count * norm_flops * tokens * width + (tokens * width if residual else 0)
    byts = count * (2 * tokens * width * b_v + width * (1 + a["layernorm"]) * b_v)
    if residual:
        byts += 3 * tokens * width * b_v
    return Op(name, "vector", "layer", flops, byts)


_tokens_per_expert = T * K / experts_touched

FULL_OPS: tuple[Op, ...] = (
    _norm("attn_norm", a["norms_per_layer"] / 2, d),
    Op("attn_quant", "memory", "layer", flops=sp.Integer(0), bytes=T * (d + q_out) * b_q, count="attn_layers"),
    Op(
        "attn_dequant",
        "memory",
        "layer",
        flops=sp.Integer(0),
        bytes=d * (2 * q_out + 2 * kv_out) * b_d,
        count="attn_layers",
    ),  # fmt: skip
    _proj("q_proj", q_out, d, b_a, a["qkv_bias"]),
    _proj("k_proj", kv_out, d, b_kv, a["qkv_bias"]),
    _proj("v_proj", kv_out, d, b_kv, a["qkv_bias"]),
    Op(
        "qk_norm_rope",
        "vector",
        "layer",
        flops=T * (nh + nkv) * hd * (6 + 4 * a["qk_norm_on"]),
        bytes=2 * T * (q_out + kv_out) * b_v + a["qk_norm_size"] * b_v,
        count="attn_layers",
    ),
    Op(
        "attn_scores",
        "attention",
        "layer",
        flops=2 * B * PAIRS * nh * hd,
        bytes=T * q_out * b_a + B * C * kv_out * b_kv + unfused * B * nh * Sq * C * b_v,
        count="attn_layers",
    ),
    Op(
        "softmax",
        "vector",
        "layer",
        flops=5 * B * nh * PAIRS,
        bytes=unfused * 2 * B * nh * Sq * C * b_v,
        count="attn_layers",
    ),
    Op(
        "attn_values",
        "attention",
        "layer",
        flops=2 * B * PAIRS * nh * hd,
        bytes=unfused * B * nh * Sq * C * b_v + B * C * kv_out * b_kv + T * q_out * b_a,
        count="attn_layers",
    ),
    _proj("o_proj", d, q_out, b_a),
    _norm("ffn_norm", a["norms_per_layer"] / 2, d),
    Op(
        "ffn_quant", "memory", "layer", flops=sp.Integer(0), bytes=T * (d + ffn_tokens_width) * b_q, count="ffn_layers"
    ),  # fmt: skip
    Op(
        "ffn_dequant",
        "memory",
        "layer",
        flops=sp.Integer(0),
        bytes=(n_up + 1) * d * (experts_touched * ffn + nsh * ffn_sh) * b_d,
        count="ffn_layers",
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
    ),
    Op(
        "ffn_act",
        "vector",
        "layer",
        flops=T * ffn_tokens_width * (4 + gated),
        bytes=T * ffn_tokens_width * (n_up + 1) * b_v,
        count="ffn_layers",
    ),
    Op(
        "ffn_down",
        "linear",
        "layer",
        flops=2 * T * ffn_tokens_width * d,
        bytes=d * (experts_touched * ffn + nsh * ffn_sh) * b_w + T * ffn_tokens_width * b_a + T * (K + nsh) * d * b_a,
        gemm=(_tokens_per_expert, d, ffn, experts_touched),
        count="ffn_layers",
    ),
    Op("embed", "memory", "model", flops=sp.Integer(0), bytes=T * d * (b_h + b_a)),
    Op(
        "final_norm",
        "vector",
        "model",
        flops=norm_flops * T * d,
        bytes=2 * T * d * b_v + d * (1 + a["layernorm"]) * b_v,
    ),
    Op(
        "lm_head",
        "linear",
        "model",
        flops=2 * B * d * V,
        bytes=V * d * b_h + B * d * b_a + 4 * B * V,
        gemm=(B, V, d, sp.Integer(1)),
    ),
)


# ---------------------------------------------------------------------------------------------
# Layer kinds beyond uniform GQA attention + the main FFN (zero layers of each in a uniform model).
# ---------------------------------------------------------------------------------------------
k_ = STACK
q_lora, kv_lora, rope, v_hd = k_["q_lora_rank"], k_["kv_lora_rank"], k_["rope_dim"], k_["v_head_dim"]
latent = kv_lora + rope  # MLA cache per token per layer: the KV latent plus the shared rope key
_mla = "mla_layers"

#: MLA (DeepSeek-V2/V3) in the weight-absorbed form (FlashMLA): attention runs as MQA over the latent,
#: scores with head dim kv_lora_rank + rope_dim, values with kv_lora_rank; kv_b is applied per token.
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
    ),
    Op(
        "mla_softmax",
        "vector",
        "layer",
        flops=5 * B * nh * PAIRS,
        bytes=unfused * 2 * B * nh * Sq * C * b_v,
        count=_mla,
    ),  # fmt: skip
    Op(
        "mla_values",
        "attention",
        "layer",
        flops=2 * B * PAIRS * nh * kv_lora,
        bytes=unfused * B * nh * Sq * C * b_v + B * C * kv_lora * b_kv + T * nh * kv_lora * b_a,
        count=_mla,
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
    ),
    Op(
        "dense_ffn_act",
        "vector",
        "layer",
        flops=T * _dff * (4 + gated),
        bytes=T * _dff * (n_up + 1) * b_v,
        count="dense_layers",
    ),  # fmt: skip
    Op(
        "dense_ffn_down",
        "linear",
        "layer",
        flops=2 * T * _dff * d,
        bytes=d * _dff * b_w + T * _dff * b_a + T * d * b_a,
        gemm=(T, d, _dff, sp.Integer(1)),
        count="dense_layers",
    ),
)

#: Ops of each layer kind; ``local`` adds no op of its own (the assembly windows the attention ops).
KIND_OPS: dict[str, tuple[Op, ...]] = {"local": (), "mla": MLA_OPS, "mixer": MIXER_OPS, "dense": DENSE_FFN_OPS}
#: The layer-count column that says whether a kind is present.
KIND_COUNT = {"local": "local_layers", "mla": "mla_layers", "mixer": "mixer_layers", "dense": "dense_layers"}


def weight_bytes_expr(cols: dict | None = None) -> sp.Expr:
    """Bytes of all weights (all experts; embeddings and LM head, if untied, at ``b_h`` bytes)."""
    from ..arch.architecture import param_counts

    c = param_counts(ARCH if cols is None else cols)
    outer = c["embed"] + c["lm_head"]
    return (c["total"] - outer) * b_w + outer * b_h


def kv_cache_bytes_expr(S: sp.Expr, kinds: frozenset = frozenset()) -> sp.Expr:
    """Bytes of the cache at ``S`` tokens per sequence, batch B: 2·kv_heads·head_dim·b_kv per token per GQA
    layer (sliding-window layers keep min(S, window) tokens), kv_lora_rank + rope_dim per token per MLA layer,
    and the constant state of the conv/SSM/linear-attention layers."""
    if not kinds:
        return 2 * a["layers"] * nkv * hd * b_kv * B * S
    local = k_["local_layers"]
    out = 2 * nkv * hd * b_kv * B * ((k_["attn_layers"] - local) * S + local * sp.Min(S, k_["window"]))
    return out + k_["mla_layers"] * latent * b_kv * B * S + k_["mixer_layers"] * B * k_["mixer_state"] * b_v


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
    if "local" in kinds:
        full = _nonzero(k_["attn_layers"] - k_["local_layers"] + k_["mla_layers"])
        ctx = full * S + (1 - full) * sp.Min(S, k_["window"])
    chunk = sp.Min(B * S, PREFILL_CHUNK_TOKENS)
    return chunk * (2 * d + n_up * ffn_tokens_width + unfused * nh * ctx) * b_a + 4 * B * V


#: ``nonzero(x)`` is 1 where x > 0 else 0 (x ≥ 0 here). An unevaluated function: sympy would fold
#: sign() of a sum of positive symbols to 1, but a column like ``moe`` can be 0 in the data.
_nonzero = sp.Function("nonzero")


# ---------------------------------------------------------------------------------------------
# The paper's preset (App. E.4, §5): three aggregated operators per layer. Prefill counts only
# their FLOPs (compute-bound), decode only their bytes (memory-bound). d is d_model,
# gqa = heads/kv_heads, r = K·ffn/d, ρ = K/E.
# ---------------------------------------------------------------------------------------------
_gqa = nh / nkv
PAPER_OPS: tuple[Op, ...] = (
    Op("attn_proj", "linear", "layer", flops=2 * T * d**2 * (2 + 2 / _gqa), bytes=d**2 * b_w * (2 + 2 / _gqa)),
    Op("ffn", "linear", "layer", flops=6 * T * K * ffn * d, bytes=3 * K * ffn * d * b_w),
    Op("kv_cache", "memory", "layer", flops=sp.Integer(0), bytes=2 * B * C * d * b_kv / _gqa),
)


def paper_weight_bytes_expr() -> sp.Expr:
    """The paper's memory model (Eq. 41): l·ξ_W^all·d²·b_w -- weights of all experts, no embeddings."""
    return a["layers"] * (d**2 * (2 + 2 / _gqa) + 3 * E * ffn * d) * b_w


def paper_kv_cache_bytes_expr(S: sp.Expr) -> sp.Expr:
    """The paper's KV cache (reported, not counted in its memory model): 2·l·B·S·d·b_kv/gqa."""
    return 2 * a["layers"] * B * S * d * b_kv * nkv / nh
