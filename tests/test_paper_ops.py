"""The ``paper-ops`` preset against the paper's App. D tables (Eq. 16, Tables 8-15), computed by hand.

One configuration of the paper space -- l = 16, d = 2048, 16 heads of 128, gqa = 4 (d_m = 512), ffn = 2048
(r = 1), E = 16, K = 1 (ρ = 1/16) -- on the Jetson AGX Orin 64GB (π = 42.5 TFLOP/s FP16, β = 204.8 GB/s),
B = 1, S_in = 1024, S_out = 16, FP16 (b = 2 bytes). Every operator's FLOPs and bytes are written below in the
paper's own variables (d, gqa, r, ρ, n_h, S) straight from the tables, summed in plain Python with a loop over the
16 decode steps (rooflaw sums max(a + b·t, c + e·t) in closed form instead).
"""

from __future__ import annotations

import numpy as np
import pytest

import rooflaw

L, D, NH, GQA, R, RHO = 16, 2048, 16, 4, 1.0, 1 / 16
B, S_IN, S_OUT, BYTES = 1, 1024, 16, 2
PI, BETA = 42.5e12, 204.8e9


def table_ops(tokens: int, sq: int, ctx: int, b_s: float = BYTES, b: float = BYTES) -> dict[str, tuple[float, float]]:
    """(FLOPs, bytes) of one layer per App. D table; ``tokens`` = B·S_q, attended context ``ctx``."""
    d, dm = D, D / GQA
    experts = 1 / RHO
    read = min(experts, tokens * 1)  # K = 1: experts the pass's tokens are routed to
    return {
        # Tables 8-9: projections, weights + activation load/store; K/V store into the KV cache
        "q_proj": (2 * tokens * d * d, d * d * b + 2 * tokens * d * b),
        "k_proj": (2 * tokens * d * d / GQA, d * d * b / GQA + tokens * d * b + tokens * d * b / GQA),
        "v_proj": (2 * tokens * d * d / GQA, d * d * b / GQA + tokens * d * b + tokens * d * b / GQA),
        # Table 10: QK^T -- load Q, load the K cache, store the scores
        "qk_scores": (2 * B * sq * ctx * d, tokens * d * b + B * ctx * dm * b + B * NH * sq * ctx * b_s),
        # Table 11: softmax, ~5 ops per element, load + store
        "softmax": (5 * B * NH * sq * ctx, 2 * B * NH * sq * ctx * b_s),
        # Table 12: scores·V -- load the scores and the V cache, store the output
        "scores_v": (2 * B * sq * ctx * d, B * NH * sq * ctx * b_s + B * ctx * dm * b + tokens * d * b),
        "o_proj": (2 * tokens * d * d, d * d * b + 2 * tokens * d * b),
        # Tables 14-15: 3 projections, 6·T·r·d² FLOPs; weights 3·r_single·d²·b per expert read
        "ffn": (6 * tokens * R * d * d, 3 * (R / 1) * d * d * b * read + 2 * tokens * d * b),
    }


def roof(ops: dict[str, tuple[float, float]], pi: float = PI) -> float:
    return sum(max(f / pi, by / BETA) for f, by in ops.values())  # Eq. 16


ARCH = rooflaw.Architecture(layers=L, d_model=D, heads=NH, kv_heads=NH // GQA, ffn=int(R * D), experts=16, top_k=1)


@pytest.fixture(scope="module")
def report():
    dev = rooflaw.get_device("jetson-agx-orin-64gb")
    assert (dev.peak_flops["fp16"], dev.memory_bandwidth) == (PI, BETA)
    return rooflaw.evaluate(ARCH, dev, rooflaw.Workload(B, S_IN, S_OUT), "fp16", "paper-ops")


def test_prefill_matches_tables(report):
    ops = table_ops(B * S_IN, S_IN, S_IN)
    got = {o.name: o for o in report.ops if o.phase == "prefill"}
    assert set(got) == set(ops)
    for name, (f, by) in ops.items():
        assert got[name].flops == pytest.approx(L * f, rel=1e-12), name
        assert got[name].bytes == pytest.approx(L * by, rel=1e-12), name
    # printed values, by hand: Q projection 2·1024·2048² = 8,589,934,592 FLOPs per layer; the MoE FFN reads all
    # 16 experts' 3·2048² weights in prefill = 201,326,592 weight bytes + 2·1024·2048·2 activation bytes
    assert got["q_proj"].flops == 16 * 8_589_934_592
    assert got["ffn"].bytes == 16 * (16 * 3 * 2048 * 2048 * 2 + 2 * 1024 * 2048 * 2)
    assert report.prefill_s == pytest.approx(L * roof(ops), rel=1e-12)
    # the projections are compute-bound, the MoE FFN (all experts read, 64 FLOP/byte) and the attention memory-bound
    assert got["q_proj"].bound == "compute" and got["ffn"].bound == "memory" and got["softmax"].bound == "memory"


def test_decode_matches_tables_step_by_step(report):
    total = flops = 0.0
    for t in range(1, S_OUT + 1):
        ops = table_ops(B, 1, S_IN + t)
        total += L * roof(ops)
        flops += L * sum(f for f, _ in ops.values())
    assert report.decode_s == pytest.approx(total, rel=1e-12)
    assert report.decode_flops == pytest.approx(flops, rel=1e-12)
    # batch-1 decode reads only the K = 1 active expert (Table 14's 3·r·d²·b_w)
    ffn = next(o for o in report.ops if o.phase == "decode" and o.name == "ffn")
    assert ffn.bytes == pytest.approx(L * S_OUT * (3 * D * D * BYTES + 2 * D * BYTES))


def test_memory_is_eq41(report):
    # Eq. 41: l·ξ_W^all·d²·b_w, ξ_W^all = 2 + 2/gqa + 3r/ρ; no KV cache, no embeddings
    assert report.memory_bytes == pytest.approx(L * (2 + 2 / GQA + 3 * R / RHO) * D * D * BYTES)


def test_int8_keeps_scores_in_16_bits():
    """INT8: linear layers on the INT8 roof with 1-byte tensors, the score matrix and softmax stay 2-byte."""
    dev = rooflaw.get_device("jetson-agx-orin-64gb")
    rep = rooflaw.evaluate(ARCH, dev, rooflaw.Workload(B, S_IN, S_OUT), "int8", "paper-ops")
    ops = table_ops(B * S_IN, S_IN, S_IN, b_s=2, b=1)
    pi8 = dev.peak_flops["int8"]
    assert rep.prefill_s == pytest.approx(L * roof(ops, pi8), rel=1e-12)
    fp16 = rooflaw.evaluate(ARCH, dev, rooflaw.Workload(B, S_IN, S_OUT), "fp16", "paper-ops")
    assert 1.0 < fp16.prefill_s / rep.prefill_s < 2.0


def test_bulk_path_equals_per_operator_path(report):
    dev = rooflaw.get_device("jetson-agx-orin-64gb")
    space = rooflaw.get_space("paper")
    cols = space.columns_at(np.arange(0, space.size, 97), np.float64)
    wl = rooflaw.Workload(B, S_IN, S_OUT)
    bulk = rooflaw.evaluate_columns(cols, dev, wl, "fp16", "paper-ops")
    for i in (0, 5, len(cols["layers"]) - 1):
        a = space.architecture({k: v[i] for k, v in cols.items()})
        one = rooflaw.evaluate(a, dev, wl, "fp16", "paper-ops")
        assert bulk["total_s"][i] == pytest.approx(one.total_s, rel=1e-12)
