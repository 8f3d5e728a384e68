"""Properties of sharding over random architectures: what TP and EP split adds back up to the single-chip weights,
plus exactly the replicated parts; the KV cache splits by TP up to kv_heads; pipeline sends count as communication."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rooflaw as R
from rooflaw.constraints.parallel import evaluate_layout

SYS = R.get_system("gb200:72")
WL = R.Workload(2, 256, 8)


@st.composite
def archs(draw):
    kv = draw(st.sampled_from([1, 2, 4, 8]))
    heads = kv * draw(st.sampled_from([1, 2, 4]))
    hd = draw(st.sampled_from([64, 128]))
    experts = draw(st.sampled_from([1, 4, 8]))
    return R.Architecture(
        layers=draw(st.integers(1, 6)), d_model=heads * hd, heads=heads, kv_heads=kv, head_dim=hd,
        ffn=512 * draw(st.integers(1, 8)), experts=experts, top_k=min(experts, draw(st.sampled_from([1, 2]))),
        vocab=draw(st.integers(1000, 50000)),
    )  # fmt: skip


@settings(max_examples=25, deadline=None)
@given(archs(), st.sampled_from([2, 4, 8]))
def test_tp_weights_add_up(a, t):
    if t > a.kv_heads:
        t = a.kv_heads
    if t == 1:
        return
    one = evaluate_layout(a, SYS, "tp=1", WL, "bf16")
    tp = evaluate_layout(a, SYS, f"tp={t}", WL, "bf16")
    replicated = a.layers * (2 * a.d_model + a.d_model * a.experts * a.is_moe) + a.d_model  # norms, router
    assert t * tp["weight_bytes_per_device"] == np.float64(one["weight_bytes_per_device"] + (t - 1) * 2 * replicated)
    assert t * tp["kv_cache_bytes_per_device"] == one["kv_cache_bytes_per_device"]


@settings(max_examples=25, deadline=None)
@given(archs(), st.sampled_from([2, 4]))
def test_ep_weights_add_up(a, e):
    if a.experts == 1 or a.experts % e:
        return
    one = evaluate_layout(a, SYS, "tp=1", WL, "bf16")
    ep = evaluate_layout(a, SYS, f"ep={e},dp_attn={e}", WL, "bf16")
    expert = 3 * a.d_model * a.ffn * a.layers * a.experts  # routed experts: split; everything else: replicated
    rest = one["weight_bytes_per_device"] / 2 - expert
    assert ep["weight_bytes_per_device"] == 2 * (rest + expert / e)


def test_pipeline_sends_are_communication():
    a = R.load_architecture("llama-3.1-8b")
    r = evaluate_layout(a, R.get_system("jetson-agx-orin-64gb:2"), "pp=2", R.Workload(1, 1024, 16), "bf16")
    hop = 50e-6 + 4096 * 2 / 1.25e9  # one activation vector over 10 GbE
    assert r["comm_s_decode"] == pytest.approx(2 * 16 * hop, rel=1e-12)  # pp stages × steps × one send
