"""A layer kind added from outside the package flows through everything: one ``register_layer_kind`` call here.

The toy kind is a gated linear mixer (``glm``): in/gate projection d → 2w, a recurrence over a constant state of
``glm_state`` elements per sequence, out projection w → d, a decay vector of w parameters. References are hand
counts: its parameters, its state in the cache, its ops' FLOPs and bytes per phase (the roofline max of each on a
pure device), the per-device weights and cache of a TP=2 layout, and the per-stage layer counts of a pipeline.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import sympy as sp

from rooflaw import (
    LAYER_KINDS,
    Architecture,
    LayerKind,
    Workload,
    complete_columns,
    evaluate,
    evaluate_columns,
    evaluate_layout,
    from_hf_config,
    from_spec,
    get_device,
    get_system,
    register_layer_kind,
    unregister_layer_kind,
)
from rooflaw.constraints.operators import Op
from rooflaw.constraints.symbols import B, T, b_a, b_v, b_w, sym
from rooflaw.errors import RooflawError

d, w, st = sym("d_model"), sym("glm_width"), sym("glm_state")
GLM_OPS = (
    Op("glm_in", "linear", "layer", flops=2 * T * d * 2 * w, bytes=2 * d * w * b_w + T * d * b_a + 2 * T * w * b_a,
       gemm=(T, 2 * w, d, sp.Integer(1)), count="glm_layers"),
    Op("glm_scan", "vector", "layer", flops=6 * T * w, bytes=3 * T * w * b_v + 2 * B * st * b_v + w * b_w,
       count="glm_layers"),
    Op("glm_out", "linear", "layer", flops=2 * T * w * d, bytes=w * d * b_w + T * w * b_a + T * d * b_a,
       gemm=(T, d, w, sp.Integer(1)), count="glm_layers"),
)  # fmt: skip


def _need_fields(cfg, f, mt):
    f.update(glm_width=int(cfg["glm_width"]), glm_state=int(cfg["glm_state"]))


def _check(a):
    if a.kind_layers("glm") and a.value("glm_width") <= 0:
        raise RooflawError("glm_width must be positive for glm layers")


GLM = LayerKind(
    "glm", "glm_layers", "mixer", "gated linear", layer_types=("glm",), columns=("glm_width", "glm_state"),
    params=lambda c: 3 * c["d_model"] * c["glm_width"] + c["glm_width"], cache_state=lambda c: c["glm_state"],
    split=("glm_width", "glm_state"), check=_check, hf_types={"gated_linear": "glm"}, hf_fields=_need_fields,
    ops=GLM_OPS,
)  # fmt: skip

L, D, H, KV, HD, F, V = 4, 256, 4, 2, 64, 512, 1000
WIDTH, STATE = 384, 1024
TYPES = ("glm", "glm", "glm", "global")
DEV = dataclasses.replace(get_device("h100-sxm"), compute_efficiency=1.0, memory_efficiency=1.0, kernel_overhead=0.0)


@pytest.fixture(scope="module")
def glm():
    register_layer_kind(GLM)
    yield Architecture(layers=L, d_model=D, heads=H, kv_heads=KV, ffn=F, vocab=V, layer_types=TYPES,
                       kind_fields={"glm_width": WIDTH, "glm_state": STATE})  # fmt: skip
    unregister_layer_kind("glm")
    assert "glm" not in LAYER_KINDS


def _params(heads, kv, ffn, vocab, width, glm_layers=3, attn_layers=1):
    attn = D * heads * HD * 2 + 2 * D * kv * HD  # q, o; k, v
    mixer = 3 * D * width + width
    return attn_layers * attn + glm_layers * mixer + L * 3 * D * ffn + L * 2 * D + 2 * vocab * D + D


def test_the_architecture_counts_the_kind(glm):
    assert glm.kind_layers("glm") == 3 and glm.pattern == "1 global + 3 glm"
    # 196,608 (one attention layer) + 3 × 295,296 (glm) + 4 × 393,216 (FFN) + 2,048 (norms) + 512,000 + 256
    assert glm.params_total == _params(H, KV, F, V, WIDTH) == 3_169_664
    cols = glm.columns()
    assert (cols["glm_layers"], cols["attn_layers"], cols["glm_width"], cols["glm_state"]) == (3, 1, WIDTH, STATE)
    assert from_spec(glm.spec()) == glm  # the kind's fields travel in the spec string
    with pytest.raises(RooflawError, match="glm_width"):
        Architecture(layers=L, d_model=D, heads=H, ffn=F, layer_types=TYPES)
    with pytest.raises(RooflawError, match="kind_fields"):
        Architecture(layers=L, d_model=D, heads=H, ffn=F, kind_fields={"no_such": 1})


def test_a_hugging_face_config_names_the_kind(glm):
    cfg = {"model_type": "lfm2", "hidden_size": D, "num_attention_heads": H, "num_key_value_heads": KV,
           "num_hidden_layers": L, "vocab_size": V, "intermediate_size": F, "block_auto_adjust_ff_dim": False,
           "layer_types": ["gated_linear"] * 3 + ["full_attention"],
           "glm_width": WIDTH, "glm_state": STATE}  # fmt: skip
    a = from_hf_config(cfg)
    assert a.layer_types == TYPES and a.value("glm_width") == WIDTH and a.value("glm_state") == STATE
    # LFM2 ties its embeddings (no LM head) and norms q and k per head (2·head_dim) in its one attention layer
    assert a.params_total == _params(H, KV, F, V, WIDTH) - V * D + 2 * HD == 2_913_792


def test_evaluate_prices_the_kind_by_hand(glm):
    bs, s_in, s_out = 2, 300, 8
    rep = evaluate(glm, DEV, Workload(bs, s_in, s_out), "bf16", engine="ideal")
    # the cache: 2·kv·hd·2 bytes per token of the one global layer, the glm state of three layers (≥ 16-bit)
    assert rep.kv_cache_bytes == 2 * KV * HD * 2 * bs * (s_in + s_out) + 3 * bs * STATE * 2
    assert rep.weight_bytes == 2 * glm.params_total
    pre = {o.name: o for o in rep.ops if o.phase == "prefill"}
    dec = {o.name: o for o in rep.ops if o.phase == "decode"}
    tok = bs * s_in
    assert pre["glm_in"].flops == 3 * 2 * tok * D * 2 * WIDTH
    assert dec["glm_out"].flops == 3 * s_out * 2 * bs * WIDTH * D
    scan_bytes = 3 * tok * WIDTH * 2 + 2 * bs * STATE * 2 + WIDTH * 2
    assert pre["glm_scan"].bytes == 3 * scan_bytes
    vec, beta = DEV.vector_flops, DEV.memory_bandwidth
    assert pre["glm_scan"].seconds == pytest.approx(3 * max(6 * tok * WIDTH / vec, scan_bytes / beta), rel=1e-12)
    # the rest of the model is the uniform model less the attention of the three layers the kind replaced
    uni = evaluate(glm.replace(layer_types=()), DEV, Workload(bs, s_in, s_out), "bf16", engine="ideal")
    attn_ops = {"q_proj", "k_proj", "v_proj", "qk_norm_rope", "attn_scores", "softmax", "attn_values", "o_proj"}
    for phase, total in (("prefill", rep.prefill_flops), ("decode", rep.decode_flops)):
        u = {o.name: o.flops for o in uni.ops if o.phase == phase}
        g = {o.name: o.flops for o in rep.ops if o.phase == phase}
        assert sum(g[n] for n in attn_ops) == pytest.approx(sum(u[n] for n in attn_ops) / 4, rel=1e-12)
        assert total == pytest.approx(sum(g.values()), rel=1e-12)
    # a candidate table with the kind's columns prices the same (complete_columns fills attn_layers = 4 − 3)
    table = {k: np.array([float(v)]) for k, v in glm.columns().items() if k != "attn_layers"}
    assert complete_columns(table)["attn_layers"][0] == 1
    vals = evaluate_columns(table, DEV, Workload(bs, s_in, s_out), "bf16", engine="ideal")
    for k in ("prefill_s", "decode_s", "kv_cache_bytes", "weight_bytes", "params_total"):
        assert vals[k][0] == pytest.approx(rep.values[k], rel=1e-12), k


def test_a_layout_splits_the_kind_by_hand(glm):
    sysm, wl = get_system("hgx-h100"), Workload(4, 256, 8)
    out = evaluate_layout(glm, sysm, "tp=2", wl, "bf16")
    # per device: heads, KV heads, vocabulary, ffn and the kind's split columns halved
    assert out["weight_bytes_per_device"] == 2 * _params(H // 2, KV // 2, F // 2, V // 2, WIDTH // 2)
    assert out["kv_cache_bytes_per_device"] == 2 * (KV // 2) * HD * 2 * 4 * (256 + 8) + 3 * 4 * (STATE // 2) * 2
    stages = evaluate_layout(glm, sysm, "pp=2", wl, "bf16")["stages"]
    assert [(s["layers"], s["attn_layers"], s["glm_layers"]) for s in stages] == [(2, 0, 2), (2, 1, 1)]


def test_the_registry_refuses_what_would_clash(glm):
    with pytest.raises(RooflawError, match="already registered"):
        register_layer_kind(GLM)
    with pytest.raises(RooflawError, match="reuses 'window'"):
        register_layer_kind(LayerKind("w2", "w2_layers", "mixer", "w2", layer_types=("w2",), columns=("window",)))
    with pytest.raises(RooflawError, match="built in"):
        unregister_layer_kind("mla")
    with pytest.raises(RooflawError, match="shard"):
        Op("x", "linear", "layer", sp.Integer(0), sp.Integer(0), shard="mlp")
    from rooflaw.constraints.parallel.shard import group_of

    assert [group_of(n) for n in ("glm_in", "attn_scores_local", "mla_values", "dense_ffn_up")] == [
        "attn", "ctx", "ctx", "ffn"]  # fmt: skip
    with pytest.raises(RooflawError, match="no_such_op"):
        group_of("no_such_op")  # no longer filed under attention without a word


def test_per_kind_counts_without_a_kind_of_their_own():
    """A table whose attn_layers < layers names no kind (``stack``): those layers have no attention, and the cost
    is the uniform model's less their share of the attention ops (this raised KeyError 'stack' before)."""
    base = {"layers": 4.0, "d_model": 256.0, "heads": 4.0, "kv_heads": 2.0, "ffn": 512.0, "vocab": 1000.0}
    cols = {k: np.array([v]) for k, v in base.items()}
    wl = Workload(1, 128, 4)
    uni = evaluate_columns(cols, DEV, wl, "bf16", engine="ideal")
    less = evaluate_columns({**cols, "attn_layers": np.array([3.0])}, DEV, wl, "bf16", engine="ideal")
    arch = Architecture(layers=4, d_model=256, heads=4, kv_heads=2, ffn=512, vocab=1000)
    ops = {o.name: o for o in evaluate(arch, DEV, wl, "bf16", engine="ideal").ops if o.phase == "prefill"}
    attn = sum(ops[n].flops for n in ("q_proj", "k_proj", "v_proj", "qk_norm_rope", "attn_scores", "softmax",
                                      "attn_values", "o_proj"))  # fmt: skip
    assert less["prefill_flops"][0] == pytest.approx(uni["prefill_flops"][0] - attn / 4, rel=1e-12)
    assert less["kv_cache_bytes"][0] == 3 / 4 * uni["kv_cache_bytes"][0]
