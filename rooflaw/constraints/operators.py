"""Per-operator FLOPs and bytes, written once as sympy expressions.

Every operator is a function of the architecture symbols (:data:`symbols.ARCH`), the precision
byte widths (b_w, b_a, b_kv), the batch ``B`` and three phase symbols: ``T`` tokens in this pass,
``Sq`` query length per sequence and ``C`` attended context length. A phase substitutes them:
prefill ``T = B·S_in, Sq = C = S_in``; decode step t ``T = B, Sq = 1, C = S_in + t``.

Conventions (the ``full`` preset):
- FLOPs count a multiply-add as 2; attention scores are computed for the full S_q × C block (no
  causal halving, as the paper's Table 10 and an unfused implementation do). With unfused
  attention (the default, as the paper's Tables 10-12) the score matrix is stored, re-read by
  softmax and by scores·V; a fused kernel (``Workload(attention="fused")``) keeps it on chip.
- Vector ops (norms and residual adds, RoPE/q-k norms, softmax, the FFN activation) compute in
  16 bits or more, so they read and write ``b_v`` = max(b_a, 2) bytes per element, and so does
  the score matrix between QKᵀ, softmax and ·V: INT8 halves only the linear layers' traffic --
  the paper's reason why INT8 helps sub-linearly.
- Weight bytes are read once per pass; MoE reads the expected number of distinct experts touched
  by ``T`` tokens, E·(1 − (1 − K/E)^T), plus shared experts.
- The KV cache is 2·kv_heads·head_dim·b_kv bytes per token per layer (K and V, KV heads).
- Prefill computes LM-head logits only for the last token of each sequence (what serving
  engines do); logits are written in fp32.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from .symbols import ARCH, B, C, Sq, T, b_a, b_h, b_kv, b_v, b_w, unfused

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
    model, where groups are independent GEMMs of that shape (experts)."""

    name: str
    roof: str
    scope: str
    flops: sp.Expr
    bytes: sp.Expr
    gemm: tuple[sp.Expr, sp.Expr, sp.Expr, sp.Expr] | None = None


def _proj(name: str, n_out: sp.Expr, k_in: sp.Expr, out_bytes: sp.Expr, bias: sp.Expr = 0) -> Op:
    return Op(
        name,
        "linear",
        "layer",
        flops=2 * T * k_in * n_out + bias * T * n_out,
        bytes=k_in * n_out * b_w + bias * n_out * b_a + T * k_in * b_a + T * n_out * out_bytes,
        gemm=(T, n_out, k_in, sp.Integer(1)),
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
    _proj("q_proj", q_out, d, b_a, a["qkv_bias"]),
    _proj("k_proj", kv_out, d, b_kv, a["qkv_bias"]),
    _proj("v_proj", kv_out, d, b_kv, a["qkv_bias"]),
    Op(
        "qk_norm_rope",
        "vector",
        "layer",
        flops=T * (nh + nkv) * hd * (6 + 4 * a["qk_norm_on"]),
        bytes=2 * T * (q_out + kv_out) * b_v + a["qk_norm_size"] * b_v,
    ),
    Op(
        "attn_scores",
        "attention",
        "layer",
        flops=2 * B * Sq * C * nh * hd,
        bytes=T * q_out * b_a + B * C * kv_out * b_kv + unfused * B * nh * Sq * C * b_v,
    ),
    Op("softmax", "vector", "layer", flops=5 * B * nh * Sq * C, bytes=unfused * 2 * B * nh * Sq * C * b_v),
    Op(
        "attn_values",
        "attention",
        "layer",
        flops=2 * B * Sq * C * nh * hd,
        bytes=unfused * B * nh * Sq * C * b_v + B * C * kv_out * b_kv + T * q_out * b_a,
    ),
    _proj("o_proj", d, q_out, b_a),
    _norm("ffn_norm", a["norms_per_layer"] / 2, d),
    Op(
        "router",
        "linear",
        "layer",
        flops=2 * T * d * (E * a["moe"] + a["shared_gate"]),
        bytes=d * (E * a["moe"] + a["shared_gate"]) * b_w + a["moe"] * T * (d + E) * b_a,
        gemm=(T, E * a["moe"] + a["shared_gate"], d, sp.Integer(1)),
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
    ),
    Op(
        "ffn_act",
        "vector",
        "layer",
        flops=T * ffn_tokens_width * (4 + gated),
        bytes=T * ffn_tokens_width * (n_up + 1) * b_v,
    ),
    Op(
        "ffn_down",
        "linear",
        "layer",
        flops=2 * T * ffn_tokens_width * d,
        bytes=d * (experts_touched * ffn + nsh * ffn_sh) * b_w + T * ffn_tokens_width * b_a + T * (K + nsh) * d * b_a,
        gemm=(_tokens_per_expert, d, ffn, experts_touched),
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


def weight_bytes_expr() -> sp.Expr:
    """Bytes of all weights (all experts; embeddings and LM head, if untied, at ``b_h`` bytes)."""
    from ..arch.architecture import param_counts

    c = param_counts(ARCH)
    outer = c["embed"] + c["lm_head"]
    return (c["total"] - outer) * b_w + outer * b_h


def kv_cache_bytes_expr(tokens: sp.Expr) -> sp.Expr:
    """KV-cache bytes for ``tokens`` cached tokens summed over the batch: 2·l·kv_heads·head_dim·b_kv per token."""
    return 2 * a["layers"] * nkv * hd * b_kv * tokens


def activation_bytes_expr(S: sp.Expr) -> sp.Expr:
    """Peak activation workspace of a prefill of ``S`` tokens per sequence.

    One layer's live tensors: the residual and normed stream (2·d), the FFN intermediates of the
    active experts ((1+gated)·(K·ffn + shared)), one attention-score block (heads·S, unfused
    attention), plus fp32 logits for the last token (4·V per sequence).
    """
    return B * S * (2 * d + n_up * ffn_tokens_width + unfused * nh * S) * b_a + 4 * B * V


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
