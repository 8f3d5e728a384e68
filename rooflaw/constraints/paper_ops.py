"""The paper's presets: ``paper-ops``, arXiv:2602.10377's App. D per-operator roofline as written (Eq. 16,
Tables 8-15), and at the end ``paper``, its §5 theory's three aggregated operators.

The paper draws its frontiers (Figs. 5, 7, 8a) with this model, not with the three aggregated terms of its §5
theory (rooflaw's ``paper`` preset). Each operator of a transformer layer takes
T_op = max(FLOPs / π, bytes / β) (Eq. 16), summed over the layers and over the S_out decode steps (Eq. 4).
No efficiency factor, no kernel overhead, no embeddings, LM head or norms -- none appear in App. D.

Symbols as in :mod:`.operators`: ``T`` tokens in the pass (prefill B·S_in, decode B), ``Sq`` query length, ``C``
attended context (prefill S_in, decode S_in + t). d = d_model, d_m = kv_heads·head_dim = d/gqa,
r·d = K·ffn. Per layer, per operator:

=================  ===================  ===============================================================
operator           FLOPs                bytes
=================  ===================  ===============================================================
q_proj, o_proj     2·T·d²               d²·b_w + T·d·b_a (load) + T·d·b_a (store)      (Tables 8-9)
k_proj, v_proj     2·T·d²/gqa           d²·b_w/gqa + T·d·b_a (load) + T·d·b_kv/gqa (KV-cache store)
qk_scores          2·B·Sq·C·d           T·d·b_a (Q) + B·C·d_m·b_kv (K cache) + B·n_h·Sq·C·b_s (store)
softmax            5·B·n_h·Sq·C         2·B·n_h·Sq·C·b_s (load + store)                    (Table 11)
scores_v           2·B·Sq·C·d           B·n_h·Sq·C·b_s + B·C·d_m·b_kv (V cache) + T·d·b_a (Table 12)
ffn (SwiGLU/MoE)   6·T·r·d²             3·d·ffn·b_w·min(E, T·K) + T·d·b_a (load) + T·d·b_a (store)
=================  ===================  ===============================================================

Readings where the tables leave a choice (each stated, none tuned):

- **MoE weight traffic** (Table 15 gives the storage 3rd²b_w/ρ = E·3·r_single·d²·b_w): a pass reads the weights
  of the experts its T·K token-slots are routed to, at most all E: min(E, T·K). A 1,024-token prefill therefore
  reads all E experts (Table 15's 3rd²b_w/ρ), a batch-1 decode step the K active ones (Table 14's 3rd²b_w) --
  the only reading under which the paper's own Fig. 7 finding "prefill favours few experts, decode the maximum"
  can arise.
- **Score matrix precision** ``b_s`` = max(b_a, 2) bytes (rooflaw's ``b_v``): the tables write b_a, equal to
  2 bytes in FP16; under INT8 the paper's prose (§4.3.2: "softmax, LayerNorm and activations stay in higher
  precision") keeps the score matrix and softmax in 16 bits. That is why INT8 is not exactly 2× here.
- **Roofs**: the linear layers run on the precision's GEMM roof, QKᵀ, softmax and scores·V on the attention
  roof (the paper's single π_H: the FP16 peak in FP16); no GEMM tile/wave model (``gemm`` unset). Softmax has
  5/(2·2) = 1.25 FLOP/byte, memory-bound on any roof above 1.25·β, so its roof never changes a number.
- **FFN activations**: the element-wise SwiGLU product is "negligible, O(BSrd)" (Table 14) and omitted; the FFN
  block loads its input and stores its output once.

Memory (the ``memory_bytes`` column) is the paper's Eq. 41 -- weights of all experts, no KV cache -- as in the
``paper`` preset.
"""

from __future__ import annotations

import sympy as sp

from .operators import Op
from .symbols import ARCH, B, C, Sq, T, b_a, b_kv, b_v, b_w

a = ARCH
d, nh, nkv, hd = a["d_model"], a["heads"], a["kv_heads"], a["head_dim"]
E, K, ffn, gated = a["experts"], a["top_k"], a["ffn"], a["gated"]
q_out, kv_out = nh * hd, nkv * hd  # d and d_m = d/gqa in the paper space (heads·head_dim = d)
n_mats = 2 + gated  # SwiGLU: gate, up, down (Table 14's "3 projections")
#: Experts whose weights a pass of T tokens reads: min(E, T·K), written with Max (which every backend maps).
EXPERTS_READ = E + T * K - sp.Max(E, T * K)


def _proj(name: str, n_out: sp.Expr, out_bytes: sp.Expr) -> Op:
    return Op(
        name,
        "linear",
        "layer",
        flops=2 * T * d * n_out,
        bytes=d * n_out * b_w + T * d * b_a + T * n_out * out_bytes,
    )


PAPER_OPS_APPD: tuple[Op, ...] = (
    _proj("q_proj", q_out, b_a),
    _proj("k_proj", kv_out, b_kv),
    _proj("v_proj", kv_out, b_kv),
    Op(
        "qk_scores",
        "attention",
        "layer",
        flops=2 * B * Sq * C * q_out,
        bytes=T * q_out * b_a + B * C * kv_out * b_kv + B * nh * Sq * C * b_v,
    ),
    Op("softmax", "attention", "layer", flops=5 * B * nh * Sq * C, bytes=2 * B * nh * Sq * C * b_v),
    Op(
        "scores_v",
        "attention",
        "layer",
        flops=2 * B * Sq * C * q_out,
        bytes=B * nh * Sq * C * b_v + B * C * kv_out * b_kv + T * q_out * b_a,
    ),
    Op(
        "o_proj",
        "linear",
        "layer",
        flops=2 * T * q_out * d,
        bytes=q_out * d * b_w + T * q_out * b_a + T * d * b_a,
    ),
    Op(
        "ffn",
        "linear",
        "layer",
        flops=2 * n_mats * T * K * ffn * d,
        bytes=n_mats * d * ffn * b_w * EXPERTS_READ + 2 * T * d * b_a,
    ),
)

# ---------------------------------------------------------------------------------------------
# The ``paper`` preset (App. E.4, §5): three aggregated operators per layer. Prefill counts only
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


__all__ = ["EXPERTS_READ", "PAPER_OPS", "PAPER_OPS_APPD", "paper_kv_cache_bytes_expr", "paper_weight_bytes_expr"]
