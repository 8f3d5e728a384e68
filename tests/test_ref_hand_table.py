"""A hand-computed per-operator table of the ``full`` preset: FLOPs and bytes of prefill and of
decode step t, for one small model, typed as literal integers.

Every number below was worked out by hand (the arithmetic is in the comments) from the paper's
App. E.3 tables (Tables 8-15: projections 2·T·k·n FLOPs with weight k·n·b_w, activation in and out;
QKᵀ 2·B·S_q·C·d FLOPs loading Q, the K cache and storing the scores; softmax ≈ 5 FLOPs per score,
load = store; scores·V loading the scores and the V cache; SwiGLU FFN 3 matrices) and rooflaw's
documented conventions (docstring of ``rooflaw/constraints/operators.py``): K/V caches and K/V
projections in b_kv per KV head, vector ops (norms with their residual add, RoPE, softmax, SwiGLU)
in b_v = max(b_a, 2) bytes, RMSNorm 4 FLOPs/element + 1 for the residual add, weights read once
per pass, logits for the last token of each sequence only, written in fp32, and fp8 activations quantised by a
kernel of their own before each GEMM (read b_v, write b_a: b_q = 3 bytes per input element).

Model: l=2, d=64, heads=4, kv_heads=2 (head_dim 16, q_out 64, kv_out 32), ffn=128 (SwiGLU, n_up=2),
vocab=100, untied, RMSNorm. Workload B=2, S_in=8. Precision w=fp32, a=fp8, kv=fp16 so every byte
width differs from the one it could be confused with: b_w=4, b_a=1, b_kv=2, b_v=2.
Prefill: T = B·S_in = 16 tokens, S_q = C = 8. Decode step t: T = B = 2, S_q = 1, C = 8 + t.
Values are summed over the 2 layers (what ``CostReport.ops`` reports).
"""

from __future__ import annotations

import pytest

from rooflaw import Architecture, Workload, evaluate, get_device

A = Architecture(layers=2, d_model=64, heads=4, kv_heads=2, ffn=128, vocab=100)
PREC = "w=fp32,a=fp8,kv=fp16"
DEV = get_device("jetson-agx-orin-64gb")

# name: (FLOPs, bytes), prefill, both layers (×2) for per-layer operators
PREFILL = {
    # 4·T·d (RMSNorm) + T·d (residual add) = 5·16·64 = 5120 /layer
    # (2·T·d + d) norm + 3·T·d residual, ×b_v=2: (5·1024 + 64)·2 = 10368 /layer
    "attn_norm": (10240, 20736),
    # quantise the QKV input (d) and the O input (q_out): 16·(64 + 64)·(2 + 1) = 6144 /layer
    "attn_quant": (0, 12288),
    # 2·T·d·q_out = 2·16·64·64 = 131072; W 64·64·4 = 16384 + in 16·64·1 = 1024 + out 16·64·1 = 1024 -> 18432
    "q_proj": (262144, 36864),
    # 2·16·64·32 = 65536; W 64·32·4 = 8192 + in 1024 + K written to the cache 16·32·b_kv(2) = 1024 -> 10240
    "k_proj": (131072, 20480),
    "v_proj": (131072, 20480),
    # RoPE 6 FLOPs/element on q and k: 16·(4+2)·16·6 = 9216; read+write q and k: 2·16·96·2 = 6144
    "qk_norm_rope": (18432, 12288),
    # 2·B·S_q·C·heads·hd = 2·2·8·8·4·16 = 16384;
    # Q 16·64·1 = 1024 + K cache B·C·kv_out·b_kv = 2·8·32·2 = 1024 + scores B·h·S_q·C·b_v = 2·4·64·2 = 1024
    "attn_scores": (32768, 6144),
    # 5·B·h·S_q·C = 5·2·4·64 = 2560; load + store scores 2·512·2 = 2048
    "softmax": (5120, 4096),
    # as QKᵀ: scores 1024 + V cache 1024 + output 16·64·1 = 1024
    "attn_values": (32768, 6144),
    # 2·16·64·64 = 131072; W 16384 + in 1024 + out 1024
    "o_proj": (262144, 36864),
    "ffn_norm": (10240, 20736),
    # quantise the up input (d) and the down input (ffn): 16·(64 + 128)·3 = 9216 /layer
    "ffn_quant": (0, 18432),
    # 2·T·2·d·ffn = 2·16·2·64·128 = 524288; W 2·64·128·4 = 65536 + in 16·64 = 1024 + out 16·256 = 4096 -> 70656
    "ffn_up": (1048576, 141312),
    # silu·mul 5 FLOPs/element: 16·128·5 = 10240; read gate, up, write: 16·128·3·2 = 12288
    "ffn_act": (20480, 24576),
    # 2·16·128·64 = 262144; W 64·128·4 = 32768 + in 16·128·1 = 2048 + out 16·64·1 = 1024 -> 35840
    "ffn_down": (524288, 71680),
    # gather T rows of the table and write them: 16·64·(4 + 1) = 5120
    "embed": (0, 5120),
    # 4·16·64 = 4096; (2·16·64 + 64)·2 = 4224 (all T tokens are normed)
    "final_norm": (4096, 4224),
    # last token only: 2·B·d·V = 2·2·64·100 = 25600; W 100·64·4 = 25600 + in 2·64·1 = 128 + fp32 logits 4·2·100 = 800
    "lm_head": (25600, 26528),
}


def decode_step(C: int) -> dict[str, tuple[int, int]]:
    """Decode step with context C (T = B = 2, S_q = 1), both layers; C-linear terms written out."""
    return {
        "attn_norm": (1280, 2816),  # 5·2·64 = 640; (5·128 + 64)·2 = 1408 /layer
        "attn_quant": (0, 1536),  # 2·(64 + 64)·3 = 768 /layer
        "q_proj": (32768, 33280),  # 2·2·64·64 = 16384; 16384 + 128 + 128 = 16640 /layer
        "k_proj": (16384, 16896),  # 2·2·64·32 = 8192; 8192 + 128 + 2·32·2 = 128 -> 8448 /layer
        "v_proj": (16384, 16896),
        "qk_norm_rope": (2304, 1536),  # 2·6·16·6 = 1152; 2·2·96·2 = 768 /layer
        # 2·2·1·C·4·16 = 256·C; Q 2·64·1 = 128 + K cache 2·C·32·2 = 128·C + scores 2·4·C·2 = 16·C /layer
        "attn_scores": (2 * 256 * C, 2 * (128 + 144 * C)),
        "softmax": (2 * 40 * C, 2 * 32 * C),  # 5·2·4·C = 40·C; 2·(2·4·C)·2 = 32·C /layer
        "attn_values": (2 * 256 * C, 2 * (128 + 144 * C)),
        "o_proj": (32768, 33280),
        "ffn_norm": (1280, 2816),
        "ffn_quant": (0, 2304),  # 2·(64 + 128)·3 = 1152 /layer
        "ffn_up": (131072, 132352),  # 2·2·2·64·128 = 65536; 65536 + 2·64 = 128 + 2·256 = 512 -> 66176 /layer
        "ffn_act": (2560, 3072),  # 2·128·5 = 1280; 2·128·3·2 = 1536 /layer
        "ffn_down": (65536, 66304),  # 2·2·128·64 = 32768; 32768 + 2·128 = 256 + 2·64 = 128 -> 33152 /layer
        "embed": (0, 640),  # 2·64·5
        "final_norm": (512, 640),  # 4·2·64; 2·2·64·2 + 64·2
        "lm_head": (25600, 26528),  # as prefill: one token per sequence either way
    }


def _table(rep, phase):
    return {o.name: (o.flops, o.bytes) for o in rep.ops if o.phase == phase}


def test_prefill_table():
    rep = evaluate(A, DEV, Workload(2, 8, 1, "unfused"), PREC, engine="device")
    assert _table(rep, "prefill") == PREFILL
    assert rep.prefill_flops == sum(f for f, _ in PREFILL.values()) == 2519040
    assert rep.prefill_bytes == sum(b for _, b in PREFILL.values())


@pytest.mark.parametrize("t", [1, 5])
def test_decode_step_t_table(t):
    # a one-step decode after S_in + t − 1 prompt tokens is decode step t of an S_in = 8 request
    rep = evaluate(A, DEV, Workload(2, 8 + t - 1, 1, "unfused"), PREC, engine="device")
    assert _table(rep, "decode") == decode_step(8 + t)


def test_decode_over_all_steps_sums_the_steps():
    rep = evaluate(A, DEV, Workload(2, 8, 4, "unfused"), PREC, engine="device")
    steps = [decode_step(8 + t) for t in (1, 2, 3, 4)]
    got = _table(rep, "decode")
    for name in PREFILL:
        assert got[name] == tuple(sum(s[name][i] for s in steps) for i in (0, 1)), name
    # QKᵀ over 4 steps by hand: 2 layers · (4·128 + 144·(9+10+11+12)) = 2·(512 + 6048) = 13120 bytes
    assert got["attn_scores"][1] == 13120


def test_memory_terms():
    rep = evaluate(A, DEV, Workload(2, 8, 1, "unfused"), PREC, engine="device")
    # params: attention 3·4096 + 2·64·32 = 12288, SwiGLU 3·64·128 = 24576, norms 2·64 -> 36992 per layer;
    # 2 layers 73984 + embedding 6400 + LM head 6400 + final norm 64 = 86848; fp32 weights ×4
    assert rep.params_total == 86848
    assert rep.weight_bytes == 347392
    # K and V · 2 layers · 2 KV heads · 16 · b_kv 2 · B 2 · (8 + 1) tokens
    assert rep.kv_cache_bytes == 4608
    # one layer's live prefill tensors B·S·(2d + 2·ffn + heads·S)·b_a = 16·416 = 6656 + fp32 logits 4·2·100 = 800
    assert rep.activation_bytes == 7456


def test_flops_do_not_depend_on_precision_and_fused_attention_drops_only_score_traffic():
    a = _table(evaluate(A, DEV, Workload(2, 8, 1, "unfused"), PREC, engine="device"), "prefill")
    b = _table(evaluate(A, DEV, Workload(2, 8, 1, "fused"), "fp16", engine="device"), "prefill")
    # a fused (FlashAttention-style) kernel skips the causal mask's hidden pairs: of S·C = 8·8 = 64 query-key pairs
    # C·(C − 1)/2 = 28 are masked, so its QKᵀ, softmax and ·V execute 36/64 of the unfused FLOPs; nothing else moves
    causal = (8 * 8 - 8 * 7 / 2) / (8 * 8)
    attention = ("attn_scores", "softmax", "attn_values")
    # the fp8 activations' quantise kernels move bytes only; fp16 activations have none (no such operator runs)
    quant = ("attn_quant", "ffn_quant")
    assert all(a[k][0] == 0 and a[k][1] > 0 and k not in b for k in quant)
    assert {k: v[0] for k, v in a.items() if k not in attention + quant} == {
        k: v[0] for k, v in b.items() if k not in attention
    }
    assert {k: b[k][0] for k in attention} == {k: a[k][0] * causal for k in attention}
    # fp16 fused: QKᵀ loads Q 16·64·2 = 2048 + K cache 2·8·32·2 = 1024, both layers -> 6144; softmax moves nothing
    assert b["attn_scores"][1] == 6144 and b["softmax"] == (5120 * causal, 0)
