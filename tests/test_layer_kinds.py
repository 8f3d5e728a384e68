"""Layer stacks in the cost model: each layer's kind sets its KV cache, attention cost and state, at every step.

References: hand-written formulas per decode step summed by brute force (sliding window filling mid-decode),
hand counts of the cache of Gemma-3-1B / DeepSeek-V2-Lite / LFM2, and the uniform model (a window larger than
every context must cost exactly what global attention costs).
"""

from __future__ import annotations

import dataclasses

import hf_configs as H
import numpy as np
import pytest

from rooflaw import Architecture, Workload, decode_steps, evaluate, evaluate_columns, from_hf_config, get_device

ORIN = get_device("jetson-agx-orin-64gb")
NANO = get_device("jetson-orin-nano-8gb")
# no efficiency factors, no launch overhead: times are pure roofline maxima
PURE = dataclasses.replace(ORIN, compute_efficiency=1.0, memory_efficiency=1.0, kernel_overhead=0.0)

TINY = Architecture(layers=6, d_model=512, heads=8, kv_heads=2, ffn=1024, vocab=1000)


def _ops(rep, phase):
    return {o.name: o for o in rep.ops if o.phase == phase}


def test_one_block_stack_is_the_uniform_model():
    a = from_hf_config("qwen2.5-0.5b")
    b = a.replace(layer_types=("global",) * a.layers)
    ra, rb = evaluate(a, ORIN, Workload(2, 300, 20)), evaluate(b, ORIN, Workload(2, 300, 20))
    assert ra.values == rb.values
    assert [o.to_dict() for o in ra.ops] == [o.to_dict() for o in rb.ops]


@pytest.mark.parametrize("attention", ["unfused", "fused"])
def test_window_longer_than_every_context_costs_what_global_attention_costs(attention):
    wl = Workload(2, 200, 30, attention)
    local = TINY.replace(layer_types=("local", "global") * 3, window=4096)
    ref, rep = evaluate(TINY, ORIN, wl, tiles=True), evaluate(local, ORIN, wl, tiles=True)
    for k, v in ref.values.items():
        assert rep.values[k] == pytest.approx(v, rel=1e-12), k


@pytest.mark.parametrize(("s_in", "window", "s_out"), [(100, 110, 30), (100, 64, 20), (40, 41, 9), (10, 300, 5)])
def test_sliding_window_decode_equals_the_brute_force_sum_over_steps(s_in, window, s_out):
    arch = TINY.replace(layer_types=("local",) * 5 + ("global",), window=window)
    wl = Workload(1, s_in, s_out, "unfused")  # the hand formula counts the score matrix written
    rep = evaluate(arch, PURE, wl, "fp16", engine="ideal")  # pure roofline maxima
    dec = _ops(rep, "decode")
    nh, kv, hd, b = 8, 2, 64, 2.0
    pi, beta = PURE.roof("fp16")[1], PURE.memory_bandwidth
    secs = flops = 0.0
    for t in range(1, s_out + 1):
        C = min(s_in + t, window)
        f = 2 * C * nh * hd  # QK^T of one query against C cached keys
        by = nh * hd * b + C * kv * hd * b + nh * C * b  # q, the K cache, the scores written (unfused)
        secs += max(f / pi, by / beta)
        flops += f
    assert dec["attn_scores_local"].seconds == pytest.approx(5 * secs, rel=1e-12)
    assert dec["attn_scores_local"].flops == pytest.approx(5 * flops, rel=1e-12)
    # prefill: S_in queries against min(S_in, window) keys
    pre = _ops(rep, "prefill")["attn_scores_local"]
    assert pre.flops == 5 * 2 * s_in * min(s_in, window) * nh * hd
    # and the whole decode equals the step-by-step evaluation
    steps = decode_steps(arch, PURE, wl, engine="ideal")
    assert sum(s["seconds"] for s in steps) == pytest.approx(rep.decode_s, rel=1e-12)
    assert sum(s["bytes"] for s in steps) == pytest.approx(rep.decode_bytes, rel=1e-12)


def test_gemma3_1b_at_32k_on_orin_nano():
    a = from_hf_config(H.GEMMA3_1B)
    wl = Workload(1, 32768, 16, "fused")
    rep = evaluate(a, NANO, wl, "bf16")
    per_token = 2 * 1 * 256 * 2  # K and V, one KV head of 256, bf16
    kv = 4 * per_token * (32768 + 16) + 22 * per_token * 512
    assert rep.kv_cache_bytes == kv
    assert 145e6 < kv < 147e6  # the issue's ~146 MB (872 MB if every layer were global)
    assert evaluate(a.replace(layer_types=(), window=0), NANO, wl, "bf16").kv_cache_bytes == 26 * per_token * 32784
    # fused attention: no 32k x 32k score matrix in the workspace; one 8,192-token prefill chunk's activations
    assert rep.activation_bytes == 8192 * (2 * 1152 + 2 * 6912) * 2 + 4 * 262144
    assert rep.fits_in_memory


def test_mla_caches_the_latent():
    a = from_hf_config(H.DEEPSEEK_V2_LITE)
    wl = Workload(2, 1000, 10, "unfused")  # the hand count includes the scores written
    rep = evaluate(a, ORIN, wl, "bf16")
    assert rep.kv_cache_bytes == 27 * (512 + 64) * 2 * 2 * 1010
    dec = _ops(rep, "decode")
    cache_reads = sum(2 * (1000 + t) * 576 * 2 for t in range(1, 11))  # the latent + rope key, per step, batch 2
    q_reads = 10 * 2 * 16 * 576 * 2
    scores = sum(2 * 16 * (1000 + t) * 2 for t in range(1, 11))  # unfused scores written
    assert dec["mla_scores"].bytes == pytest.approx(27 * (cache_reads + q_reads + scores), rel=1e-12)
    assert "attn_scores" not in dec  # no GQA layer


def test_fused_mla_reads_its_latent_cache_once():
    """FlashMLA's values are the first kv_lora_rank columns of the latent tile its scores loaded: the fused decode
    reads the cache once; the unfused one reads the kv_lora part again for the values."""
    a = from_hf_config(H.DEEPSEEK_V2_LITE)
    fused = _ops(evaluate(a, ORIN, Workload(2, 1000, 10, "fused"), "bf16"), "decode")
    unf = _ops(evaluate(a, ORIN, Workload(2, 1000, 10, "unfused"), "bf16"), "decode")
    cache = sum(2 * (1000 + t) * 576 * 2 for t in range(1, 11))  # latent + rope key, per step, batch 2
    q_reads = 10 * 2 * 16 * 576 * 2
    out = 10 * 2 * 16 * 512 * 2  # the values' output per head over the latent
    assert fused["mla_scores"].bytes == pytest.approx(27 * (cache + q_reads), rel=1e-12)
    assert fused["mla_values"].bytes == pytest.approx(27 * out, rel=1e-12)
    value_cache = sum(2 * (1000 + t) * 512 * 2 for t in range(1, 11))
    scores = sum(2 * 16 * (1000 + t) * 2 for t in range(1, 11))  # unfused: the probabilities read back
    assert unf["mla_values"].bytes == pytest.approx(27 * (out + value_cache + scores), rel=1e-12)


def test_conv_layers_keep_a_constant_state():
    a = from_hf_config(H.LFM2_350M)
    short, long = (evaluate(a, ORIN, Workload(1, s, 8), "bf16") for s in (512, 8192))
    d = 1024
    for rep, s in ((short, 512), (long, 8192)):
        assert rep.kv_cache_bytes == 6 * 2 * 8 * 64 * 2 * (s + 8) + 10 * d * 2 * 2
    # the conv layers' decode cost does not grow with the context
    assert _ops(short, "decode")["mixer_scan"].seconds == pytest.approx(_ops(long, "decode")["mixer_scan"].seconds)
    assert _ops(short, "decode")["mixer_scan"].flops == 8 * 10 * (2 * d * 3 + 2 * d)


def test_bulk_table_of_stacks_equals_each_architecture():
    archs = [
        from_hf_config(H.GEMMA3_1B),
        from_hf_config(H.DEEPSEEK_V2_LITE),
        from_hf_config(H.LFM2_350M),
        from_hf_config(H.GRANITE_4_H_TINY),
        TINY,
    ]
    rows = [a.columns() for a in archs]
    cols = {k: np.array([r[k] for r in rows]) for k in rows[0]}
    for wl in (Workload(1, 700, 40), Workload(3, 300, 500, "fused")):
        bulk = evaluate_columns(cols, ORIN, wl, "w4a16kv8", chunk=2)
        for i, a in enumerate(archs):
            one = evaluate(a, ORIN, wl, "w4a16kv8")
            for k in ("prefill_s", "decode_s", "memory_bytes", "energy_j", "kv_cache_bytes", "params_total"):
                assert bulk[k][i] == pytest.approx(getattr(one, k), rel=1e-12), (a.name, k)


def test_space_searches_local_global_patterns():
    from rooflaw.arch import get_space

    sp = get_space("assistant-32k")
    assert sp.has_patterns
    # valid widths: d 1024 and 1536 x head_dim {128, 256} x kv {1, 2} x 2 ratios, d 1152 only at head_dim 128 with
    # one kv head (9 heads); x 3 depths x (all-global + 8 periods x 3 windows)
    assert sp.size == (8 + 8 + 2) * 3 * 25
    cols = sp.columns_at(np.arange(sp.size))
    for L, local in zip(cols["layers"], cols["local_layers"], strict=True):
        assert local == 0 or any(local == L - L // p for p in sp.global_every if p > 1)
    assert set(np.unique(cols["window"])) == {0, 512, 1024, 4096}
    assert set(np.unique(cols["layers"] - cols["local_layers"])) == {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 18, 22, 26}
    wl = Workload(1, 32768, 64, "fused")
    idx = np.array([0, 7, 40, sp.size - 1])
    sub = sp.columns_at(idx)
    bulk = evaluate_columns(sub, NANO, wl, "bf16")
    for j, i in enumerate(idx):
        row = {k: v[j] for k, v in sub.items()}
        arch = sp.architecture(row)
        assert sp.contains(arch)
        assert arch.count("local") == row["local_layers"]
        one = evaluate(arch, NANO, wl, "bf16")
        assert bulk["kv_cache_bytes"][j] == one.kv_cache_bytes
        assert bulk["decode_s"][j] == pytest.approx(one.decode_s, rel=1e-12)
        choice = {"layers": row["layers"], "d_model": row["d_model"], "head_dim": row["head_dim"],
                  "kv_heads": row["kv_heads"], "r_single": row["ffn"] / row["d_model"], "moe": (1, 1),
                  "pattern": tuple(int(x) for x in sp._pat[int(i) % len(sp._pat)])}  # fmt: skip
        assert sp.point(choice)["index"] == i


def test_stack_round_trips_through_the_spec_string():
    from rooflaw.arch import from_spec

    for cfg in (H.GEMMA3_1B, H.DEEPSEEK_V2_LITE, H.LFM2_350M):
        a = from_hf_config(cfg)
        assert from_spec(a.spec()) == a
    assert from_hf_config(H.GEMMA3_1B).pattern == "4 global + 22 local (window 512)"


@pytest.mark.parametrize("method", ["closed-form", "gp"])
def test_relaxations_refuse_pattern_spaces(method):
    from rooflaw.errors import RooflawError
    from rooflaw.solver import Problem, solve

    p = Problem("paper-2602.10377", NANO, space="assistant-32k", workload=Workload(1, 32768, 64, "fused"),
                precision="bf16", latency_budget=10.0)  # fmt: skip
    with pytest.raises(RooflawError, match="layer patterns"):
        solve(p, method)
