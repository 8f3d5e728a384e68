"""A fused prefill attention kernel's blocks, query tiles, waves and blend in the one assembly
(constraints.fused_prefill), against the kernel curves' prefill family (an independent, per-tile loop) and by hand."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import sympy as sp

from rooflaw.arch import Architecture
from rooflaw.constraints import Workload
from rooflaw.constraints import fused_prefill as FP
from rooflaw.constraints.curves_applied import prefill_wave_s
from rooflaw.constraints.kernels import curves_for
from rooflaw.constraints.kernels.attention import block_pairs, causal_pairs
from rooflaw.constraints.kernels.attention_prefill import query_tiles
from rooflaw.constraints.roofline import evaluate
from rooflaw.constraints.streams import SMS
from rooflaw.constraints.symbols import ARCH, B, S_in, unfused
from rooflaw.devices import get_device

S_, C_, b_ = sp.symbols("S C b", positive=True)
VISITED = sp.lambdify((S_, C_, b_), FP.visited_pairs(S_, C_, b_), modules="numpy")


@pytest.mark.parametrize("window", [0, 100, 128, 129, 256, 1000])
def test_block_pairs_closed_form_equals_the_per_tile_loop(window):
    """The closed form of the pairs the 128 x 128 block kernel visits equals the prefill family's loop over query
    tiles (:func:`block_pairs`) for every prompt length, with or without a window; at block 1 it is the exact causal
    count (:func:`causal_pairs`)."""
    S = np.array([1, 2, 37, 64, 127, 128, 129, 255, 256, 257, 500, 512, 1000, 1024, 1025, 3000], dtype=float)
    C = np.minimum(S, window) if window else S
    got = np.array([VISITED(s, c, 128.0) for s, c in zip(S, C, strict=True)])
    np.testing.assert_array_equal(got, block_pairs(S, np.full_like(S, window), 128, 128))
    exact = np.array([VISITED(s, c, 1.0) for s, c in zip(S, C, strict=True)])
    np.testing.assert_array_equal(exact, causal_pairs(S, np.full_like(S, window)))


def test_block_pairs_by_hand():
    """S = 512: 4 tiles, tile i visits (i + 1) key blocks: 128²·10 = 163,840 pairs (+25 % on 512·513/2 = 131,328);
    S = 1,000 with a 256-token window: tiles 0-1 visit 1 and 2 blocks, tiles 2-6 three each (from block i - 2, m =
    ⌈255/128⌉ = 2), the last (104 rows) keys 640 to 1,000: 128²·(1 + 2 + 3·5) + 104·360."""
    assert VISITED(512.0, 512.0, 128.0) == 128 * 128 * 10
    assert VISITED(1000.0, 256.0, 128.0) == 128 * 128 * 18 + 104 * 360
    masked = float(FP.masked_pairs(sp.Integer(512), sp.Integer(512)).xreplace({FP.ATTN_BLOCK: 128}).replace(
        FP.blocked, lambda x: x))  # fmt: skip
    assert masked == 512 * 512 - 128 * 128 * 10
    assert FP.drop_blocks(FP.masked_pairs(S_, S_)) == S_ * (S_ - 1) / 2


@pytest.mark.parametrize("dev_id", ["h100-sxm", "l40s"])
def test_tile_efficiency_equals_the_prefill_familys(dev_id):
    """1 / the query tiles' tile × wave efficiency equals the family's :func:`query_tiles` (tile rows the power of
    two ≥ S, 8 to 128, waves over the device's SMs) for short and long prompts and few and many heads."""
    dev = get_device(dev_id)
    S = np.array([1, 5, 8, 9, 16, 17, 33, 64, 65, 100, 128, 129, 1000, 4097], dtype=float)
    for bh in (1.0, 8.0, 64.0, 1000.0):
        te, we = query_tiles(S, bh, np.full_like(S, 128.0), dev)
        subs = {B: 1, ARCH["heads"]: bh, SMS: float(dev.sm_count), FP.ATTN_BLOCK: 128, unfused: 0}
        expr = FP.inv_tile_efficiency().xreplace(subs).replace(FP.O.nonzero, sp.sign)
        got = np.array([float(expr.xreplace({S_in: s})) for s in S])
        np.testing.assert_allclose(got, 1.0 / (te * we), rtol=1e-12)


@pytest.mark.parametrize("dev_id", ["h100-sxm", "l40s"])
def test_prefill_attention_by_hand(dev_id):
    """One layer, batch 16, 1,024-token prompts, 32 heads of 128 on 8 KV heads, bf16, TensorRT-LLM: QKᵀ runs
    2·16·32·128·589,824 FLOPs (128²·(1 + … + 8) block pairs) at the curves' ``attention`` fraction of the fp16 peak
    and its 16·32·8 = 4,096 query tiles in ⌈4096/SMs⌉ waves (efficiency 4096/(waves·SMs)); the kernel's softmax,
    16·32·589,824 pairs × ``attention_softmax`` on the fp32 peak (half to each matmul op), joins the matmuls by the
    ``softmax_overlap`` p-norm (H100: p = 3.22; L40S: p = 1, in series), then the math blends with its bytes (Q and
    K) at ``prefill_blend``, plus the waves × ``attention_tile_s``; ·V the same without the waves; the assembly's own
    softmax op (5 FLOP a pair on the vector roof) costs nothing."""
    dev = get_device(dev_id)
    kc = curves_for(dev)
    arch = Architecture(layers=1, d_model=4096, heads=32, kv_heads=8, head_dim=128, ffn=256, vocab=256)
    rep = evaluate(arch, dev, Workload(16, 1024, 1), "bf16", engine="tensorrt-llm")
    ops = {o.name: o for o in rep.ops if o.phase == "prefill"}
    flops = 2 * 16 * 32 * 128 * 589824
    assert ops["attn_scores"].flops == flops
    waves = math.ceil(4096 / dev.sm_count)
    tc = flops / (dev.roof("fp16")[1] * kc.attention) * (waves * dev.sm_count) / 4096
    ts = 16 * 32 * 589824 * kc.attention_softmax / dev.roof("fp32")[1] / 2  # each op's half of the softmax
    ps = kc.softmax_overlap
    math_s = (tc**ps + ts**ps) ** (1 / ps)
    if dev_id == "l40s":  # Ada: FlashAttention-2-style, the softmax in series with the matmuls
        assert ps == 1.0 and math_s == pytest.approx(tc + ts, rel=1e-12)
    else:  # Hopper: hidden in part under the matmuls, more than the max, less than the sum
        assert ps > 1.0 and max(tc, ts) < math_s < tc + ts
    tm = (16 * 1024 * 4096 * 2 + 16 * 1024 * 1024 * 2) / (dev.memory_bandwidth * dev.memory_efficiency * kc.memory)
    p = kc.prefill_blend
    core = (math_s**p + tm**p) ** (1 / p)
    z = kc.clock_mhz * 1e6 / dev.clock  # the tiles are SM cycles at the curves' clock (1: the device's own curves)
    # TensorRT-LLM on Hopper runs its warp-specialised sm90 FMHA (its own wave where fitted), on Ada fmha_v2's mma.sync
    tile = (kc.attention_ws_tile_s or kc.attention_tile_s) if dev_id == "h100-sxm" else kc.attention_tile_s
    assert ops["attn_scores"].seconds == pytest.approx(core + waves * tile * z, rel=1e-9)
    assert ops["attn_values"].seconds == pytest.approx(core, rel=1e-9)
    assert ops["softmax"].seconds == 0.0 and ops["softmax"].flops == 5 * 16 * 32 * 589824


def test_faster_sfus_reach_the_assemblys_softmax():
    """B300 (32 exponentials per SM-clock, twice B200's): the softmax seconds a pair the assembly's rates carry are
    ``attention_softmax`` / the fp32 peak × :func:`softmax_scale` (< 1), and evaluate's prefill attention is faster
    than on the same device with 16 exponentials per SM-clock -- by the p-norm of the matmuls and the two softmaxes."""
    from rooflaw.constraints.engines import applied
    from rooflaw.constraints.kernels.sfu import softmax_scale

    b300 = get_device("b300")
    slow_dev = dataclasses.replace(b300, ex2_per_clk_sm=None)
    kc = curves_for(b300)
    scale = softmax_scale(kc.attention_softmax, b300)
    assert 0.5 < scale < 1.0
    per_pair = kc.attention_softmax / b300.roof("fp32")[1]
    assert applied(b300, "tensorrt-llm").softmax_pair_s == pytest.approx(per_pair * scale, rel=1e-12)
    assert applied(slow_dev, "tensorrt-llm").softmax_pair_s == pytest.approx(per_pair, rel=1e-12)
    arch = Architecture(layers=1, d_model=4096, heads=32, kv_heads=8, head_dim=128, ffn=256, vocab=256)

    def values_s(dev):
        rep = evaluate(arch, dev, Workload(16, 4096, 1), "bf16", engine="tensorrt-llm")
        return next(o.seconds for o in rep.ops if o.phase == "prefill" and o.name == "attn_values")

    def by_hand(per_pair_s):  # ·V: 128²·(1 + … + 32) block pairs a head, 16·32·32 query tiles over the SMs
        P = 16 * 32 * 128 * 128 * 32 * 33 / 2
        waves = math.ceil(16 * 32 * 32 / b300.sm_count)
        tc = 2 * P * 128 / (b300.roof("fp16")[1] * kc.attention) * waves * b300.sm_count / (16 * 32 * 32)
        ts, ps = P * per_pair_s / 2, kc.softmax_overlap
        tm = (16 * 4096 * 1024 * 2 + 16 * 4096 * 4096 * 2) / (b300.memory_bandwidth * b300.memory_efficiency
                                                                * kc.memory)  # fmt: skip
        m, p = (tc**ps + ts**ps) ** (1 / ps), kc.prefill_blend
        return (m**p + tm**p) ** (1 / p)

    fast, slow = values_s(b300), values_s(slow_dev)
    assert fast == pytest.approx(by_hand(per_pair * scale), rel=1e-9)
    assert slow == pytest.approx(by_hand(per_pair), rel=1e-9)
    assert fast < slow


def test_no_curves_or_unfused_keep_exact_pairs_and_the_hard_max():
    """Without kernel curves (Apple M4 Max) the pairs are the causal ones and nothing is added; unfused attention on a
    GPU with curves stores its scores (separate kernels: no tiles, waves or blend)."""
    arch = Architecture(layers=1, d_model=4096, heads=32, kv_heads=8, head_dim=128, ffn=256, vocab=256)
    m4 = evaluate(arch, get_device("apple-m4-max"), Workload(2, 512, 1), "bf16")
    op = next(o for o in m4.ops if o.name == "attn_scores" and o.phase == "prefill")
    assert op.flops == 2 * 2 * 32 * 128 * 512 * 513 / 2
    h100 = get_device("h100-sxm")
    unf = evaluate(arch, h100, Workload(2, 512, 1, "unfused"), "bf16", engine="tensorrt-llm")
    op = next(o for o in unf.ops if o.name == "attn_scores" and o.phase == "prefill")
    kc = curves_for(h100)
    tc = op.flops / (h100.roof("fp16")[1] * kc.attention)
    assert op.flops == 2 * 2 * 32 * 128 * 512 * 512
    assert op.seconds == pytest.approx(max(tc, op.bytes / (h100.memory_bandwidth * h100.memory_efficiency * kc.memory)))
    assert math.isfinite(op.seconds)
    # both keep the assembly's own softmax op in series (no fused kernel's softmax p-norm)
    for rep in (m4, unf):
        sm = next(o for o in rep.ops if o.name == "softmax" and o.phase == "prefill")
        assert sm.seconds > 0 and sm.flops == 5 * 2 * 32 * (512 * 513 / 2 if rep is m4 else 512 * 512)


def test_a_device_at_half_the_curves_clock_takes_twice_the_tile_seconds():
    """H100 with its boost clock halved (990 MHz against the Hopper curves' 1,980): the fused kernel's QKᵀ op (which
    carries the kernel's waves) costs exactly ``waves · attention_tile_s`` more -- the waves' seconds doubled -- and
    the ·V op nothing more (batch 16, 1,024-token prompts, 32 heads: ⌈4096/132⌉ = 32 waves)."""
    dev = get_device("h100-sxm")
    slow = dataclasses.replace(dev, clock=dev.clock / 2)
    kc = curves_for(dev)
    assert kc.clock_mhz * 1e6 == pytest.approx(dev.clock)
    arch = Architecture(layers=1, d_model=4096, heads=32, kv_heads=8, head_dim=128, ffn=256, vocab=256)
    ops = [{o.name: o.seconds for o in evaluate(arch, d, Workload(16, 1024, 1), "bf16", engine="tensorrt-llm").ops
            if o.phase == "prefill"} for d in (dev, slow)]  # fmt: skip
    waves = math.ceil(16 * 32 * 8 / dev.sm_count)
    tile = kc.attention_ws_tile_s or kc.attention_tile_s  # TensorRT-LLM's warp-specialised sm90 FMHA
    assert ops[1]["attn_scores"] - ops[0]["attn_scores"] == pytest.approx(waves * tile, rel=1e-9)
    assert ops[1]["attn_values"] == pytest.approx(ops[0]["attn_values"], rel=1e-12)


def test_the_engines_warp_specialised_prefill_kernels_take_their_own_wave():
    """Hopper and Blackwell: TensorRT-LLM (sm90 fmha_v2, trtllm-gen) and vLLM (FlashAttention-3, FlashInfer's
    trtllm-gen) run warp-specialised kernels, ``attention_ws_tile_s`` a wave; Ada's and Ampere's engines, and an engine
    the kernel tables do not measure (llama.cpp's mma.sync kernels), ``attention_tile_s``; curves without the
    warp-specialised figure (0) give every kernel ``attention_tile_s``."""
    kc = dataclasses.replace(curves_for(get_device("h100-sxm")), attention_tile_s=1.5e-6, attention_ws_tile_s=3.5e-6)
    for dev_id, engine, want in (("h100-sxm", "tensorrt-llm", 3.5e-6), ("h100-sxm", "vllm", 3.5e-6),
                                 ("b200", "vllm", 3.5e-6), ("h100-sxm", "llama.cpp", 1.5e-6),
                                 ("l40s", "tensorrt-llm", 1.5e-6), ("a100-sxm-80gb", "vllm", 1.5e-6)):  # fmt: skip
        assert prefill_wave_s(kc, get_device(dev_id), engine) == want, (dev_id, engine)
    assert prefill_wave_s(dataclasses.replace(kc, attention_ws_tile_s=0.0), get_device("b200"), "vllm") == 1.5e-6


def test_a_wave_figure_the_curves_gpus_did_not_determine_takes_the_other():
    """The shipped Hopper curves fit only the warp-specialised wave (the H100's rows all run such kernels), so their
    ``attention_tile_s`` is 0: an engine running an ``mma.sync`` prefill kernel on an H200 (llama.cpp) pays the one
    Hopper wave the data gives, not a free wave; curves with both figures keep each."""
    kc = curves_for(get_device("h200-sxm"))
    assert kc.attention_tile_s == 0.0 < kc.attention_ws_tile_s  # what the H100's rows determine
    assert prefill_wave_s(kc, get_device("h200-sxm"), "llama.cpp") == kc.attention_ws_tile_s
    only_tile = dataclasses.replace(kc, attention_tile_s=1.5e-6, attention_ws_tile_s=0.0)
    assert prefill_wave_s(only_tile, get_device("h200-sxm"), "tensorrt-llm") == 1.5e-6
