"""Decode attention's partial-wave prologues (``decode_cta_share``) and L2 terms (``decode_l2``,
:mod:`rooflaw.constraints.kernels.attention_decode`) against hand-computed seconds."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from rooflaw.constraints.kernels import FAMILIES, KernelCurves
from rooflaw.constraints.kernels import attention as KA
from rooflaw.constraints.kernels import fit as KF
from rooflaw.constraints.kernels import mla as KM
from rooflaw.devices.device import Device


def _dev(**kw) -> Device:
    base = dict(id="t", name="test gpu", peak_flops={"fp32": 1e13, "fp16": 1e15, "fp8": 2e15},
                memory_bandwidth=2e12, memory_capacity=8e10, sm_count=100, architecture="hopper",
                clock=1.5e9)  # fmt: skip
    base.update(kw)
    return Device(**base)


def _rows(**kw) -> pd.DataFrame:
    base = {"batch_size": [1], "isl": [1], "step": [8191], "num_heads": [64], "num_key_value_heads": [1],
            "head_dim": [128], "window_size": [0], "attn_dtype": ["bfloat16"], "kv_cache_dtype": ["bfloat16"],
            "framework": ["trtllm"]}  # fmt: skip
    base.update({k: [v] for k, v in kw.items()})
    return pd.DataFrame(base)


#: 0.9 of the 2 TB/s DRAM; no split-KV, no occupancy ramp, no prologues: the memory terms alone, plus kernel_s
CURVES = KernelCurves(architecture="t", compute={}, memory=0.8, kernel_s=2e-6, attention=0.5, attention_memory=0.9)
DRAM = 2e12 * 0.9
KV = 8192 * 2 * 128 * 2.0  # one KV head's K and V of 8192 cached tokens, bf16


def ms(rows: pd.DataFrame, dev: Device, c: KernelCurves) -> float:
    return float(KA.predict_generation(rows, dev, c)[0])


def test_a_partial_wave_pays_its_ctas_share_of_the_prologue():
    # 1 sequence x 8 KV heads (8 query heads each: one CTA a KV head) of 2 cached tokens on 100 SMs: 8 CTAs, a
    # partial wave that pays 1 - c + c·8/100 of decode_tile_s; 250 x 8 = 2,000 CTAs are 20 whole waves, unchanged;
    # 260 x 8 = 2,080 are 20.8 waves: 21 - c·0.2
    c = dataclasses.replace(CURVES, decode_tile_s=1e-3)  # the prologues dominate the stream (p = 1 for one wave)
    dev = _dev()
    few = _rows(batch_size=1, num_key_value_heads=8, step=1, framework="vllm")  # TensorRT-LLM's would not run XQA
    byts = 8 * 2 * 2 * 128 * 2.0 + 2 * 64 * 128 * 2.0
    for share in (0.0, 0.4, 1.0):
        cs = dataclasses.replace(c, decode_cta_share=share)
        want = byts / DRAM + 1e-3 * (1 - share + share * 8 / 100) + 2e-6
        assert ms(few, dev, cs) * 1e-3 == pytest.approx(want, rel=1e-12), share
    whole, part = few.assign(batch_size=[250]), few.assign(batch_size=[260])
    c4 = dataclasses.replace(c, decode_cta_share=0.4)
    base = dataclasses.replace(c, decode_tile_s=0.0)
    assert (ms(whole, dev, c4) - ms(whole, dev, base)) * 1e-3 == pytest.approx(20e-3, rel=1e-6)
    assert (ms(part, dev, c4) - ms(part, dev, base)) * 1e-3 == pytest.approx((21 - 0.4 * 0.2) * 1e-3, rel=1e-3)


def test_query_head_ctas_reread_their_kv_head_through_l2():
    # 64 query heads on one KV head: TensorRT-LLM's masked-MHA kernel runs 64 CTAs, each reading the head's K and V
    # (64 x KV bytes through the L2, the first from DRAM); at 20 bytes per SM-cycle the L2 moves 100 x 1.5 GHz x 20
    # = 3 TB/s, so the 268 MB take 89.5 µs where DRAM's 4.2 MB take 2.3 µs; vLLM's kernel reads the head once
    dev = _dev()
    rows = _rows()
    q_o = 2 * 64 * 128 * 2.0
    c = dataclasses.replace(CURVES, decode_l2=20.0)
    assert ms(rows, dev, c) * 1e-3 == pytest.approx(64 * KV / 3e12 + 2e-6, rel=1e-12)
    assert ms(rows, dev, CURVES) * 1e-3 == pytest.approx((KV + q_o) / DRAM + 2e-6, rel=1e-12)  # 0: no L2 term
    vllm = rows.assign(framework=["vllm"])
    assert ms(vllm, dev, c) * 1e-3 == pytest.approx((KV + q_o) / DRAM + 2e-6, rel=1e-12)
    # an L2 slower than DRAM is not: DRAM's bytes pass through it (5 B/SM-cycle = 0.75 TB/s -> DRAM's 1.8 TB/s)
    slow = dataclasses.replace(CURVES, decode_l2=5.0)
    assert ms(rows, dev, slow) * 1e-3 == pytest.approx(64 * KV / DRAM + 2e-6, rel=1e-12)
    # XQA's 32-head group: 2 CTAs of 16 heads, each reading the head: 2 x KV bytes through the L2 at 3 TB/s, less
    # than the DRAM time of the head once: DRAM sets it
    x32 = rows.assign(num_heads=[32])
    want = max((KV + 2 * 32 * 128 * 2.0) / DRAM, 2 * KV / 3e12) + 2e-6
    assert ms(x32, dev, c) * 1e-3 == pytest.approx(want, rel=1e-12)


def test_a_working_set_resident_in_l2_streams_at_the_l2_rate():
    # 1 sequence x 8 KV heads of 1,024 tokens: 4.2 MB, in a 50 MB L2 it streams at 3 TB/s, not DRAM's 1.8; a device
    # with a 2 MB L2 reads it from DRAM; the clock scales the rate (1 GHz: 2 TB/s)
    rows = _rows(num_heads=64, num_key_value_heads=8, step=1023, framework="vllm")
    byts = 8 * 1024 * 2 * 128 * 2.0 + 2 * 64 * 128 * 2.0
    c = dataclasses.replace(CURVES, decode_l2=20.0)
    assert ms(rows, _dev(l2_bytes=50e6), c) * 1e-3 == pytest.approx(byts / 3e12 + 2e-6, rel=1e-12)
    assert ms(rows, _dev(l2_bytes=2e6), c) * 1e-3 == pytest.approx(byts / DRAM + 2e-6, rel=1e-12)
    assert ms(rows, _dev(l2_bytes=50e6, clock=1e9), c) * 1e-3 == pytest.approx(byts / 2e12 + 2e-6, rel=1e-12)


def test_the_new_figures_are_fitted_and_pooled_and_mla_keeps_its_own():
    used = FAMILIES["generation_attention"].used(_rows())
    assert {"decode_cta_share", "decode_l2"} <= set(used)
    assert KF.pooled("decode_l2") and KF.pooled("decode_cta_share")
    assert "decode_l2" in KF._FRESH and KF._BOUNDS["decode_l2"][1] == 0.0
    # MLA decode keeps the prefill's attention_l2 (decode_l2 is decode attention's)
    mla = pd.DataFrame({"batch_size": [4], "isl": [1], "step": [4095], "num_heads": [128],
                        "kv_cache_dtype": ["bfloat16"], "framework": ["trtllm"]})  # fmt: skip
    dev = _dev(l2_bytes=50e6)
    got = KM.predict_generation(mla, dev, dataclasses.replace(CURVES, decode_l2=20.0))
    assert np.allclose(got, KM.predict_generation(mla, dev, CURVES), rtol=1e-12, equal_nan=True)


def test_xqa_caps_its_split_count_at_the_root_of_eight_times_it():
    # one sequence x 8 KV heads (8 query heads each) of 32,768 cached tokens on 100 SMs, chunks of 128 tokens: 256
    # chunks a stream; XQA keeps sqrt(8 x 256) = 45.25 of them (TensorRT-LLM's computeMultiBlockCount), vLLM's
    # kernel all it may: decode_split 8 x 100 SMs / 8 streams = 100; CTAs per SM 8·45.25/100 and 8·100/100
    c = dataclasses.replace(CURVES, decode_split=8.0, decode_split_tokens=128.0)
    rows = _rows(num_key_value_heads=8, step=32767)
    xqa = KA.decode_occupancy(KA.generation_terms(rows, _dev()), c)
    vllm = KA.decode_occupancy(KA.generation_terms(rows.assign(framework=["vllm"]), _dev()), c)
    assert xqa[0] == pytest.approx(8 * np.sqrt(8 * 256) / 100, rel=1e-12)
    assert vllm[0] == pytest.approx(8.0, rel=1e-12)
    # a short context is below the cap (2 chunks: sqrt(16) = 4 > 2): 4 sequences x 8 KV heads split in 2 each
    short = _rows(batch_size=4, num_key_value_heads=8, step=255)
    assert KA.decode_occupancy(KA.generation_terms(short, _dev()), c)[0] == pytest.approx(32 * 2 / 100, rel=1e-12)


def test_flash_attention_2_with_a_window_runs_a_cta_per_query_head():
    # 64 query heads on one KV head, 8,192 cached tokens inside a 16,384-token window: FlashAttention-2 does not pack
    # the group with a local window, so 64 CTAs each read the head's K and V (64 x KV bytes through the L2 at
    # 100 x 1.5 GHz x 20 = 3 TB/s, as the masked-MHA test above); without a window, or FlashAttention-3, one CTA
    rows = _rows(framework="vllm", kernel_source="vllm_flash_attn_fa2", window_size=16384)
    c = dataclasses.replace(CURVES, decode_l2=20.0)
    q_o = 2 * 64 * 128 * 2.0
    assert ms(rows, _dev(), c) * 1e-3 == pytest.approx(64 * KV / 3e12 + 2e-6, rel=1e-12)
    assert KA.generation_terms(rows, _dev()).streams[0] == 64
    for other in (rows.assign(window_size=[0]), rows.assign(kernel_source=["vllm_flash_attn_fa3"])):
        assert ms(other, _dev(), c) * 1e-3 == pytest.approx((KV + q_o) / DRAM + 2e-6, rel=1e-12)
        assert KA.generation_terms(other, _dev()).streams[0] == 1


def test_a_decode_side_kernel_runs_at_its_own_rate_and_is_not_pooled():
    # vLLM's Triton kernel (a head dim its backend lacks), fp8 KV, 8 CTAs on 100 SMs: one wave whose 1 ms prologue
    # dominates (p = 1: stream + prologue); at its own rate 0.5 the prologue takes 2 ms, whatever the engine's fp8-KV
    # kernel's rate (4); the engine's own kernel keeps that rate (0.25 ms)
    rows = _rows(framework="vllm", kernel_source="vllm_triton_attn", kv_cache_dtype="fp8", num_key_value_heads=8,
                 step=1)  # fmt: skip
    c = dataclasses.replace(CURVES, decode_tile_s=1e-3, rate={"vllm/generation_attention/fp8": 4.0})
    side = dataclasses.replace(c, rate={**c.rate, "vllm/generation_attention/triton": 0.5})
    stream = ms(rows, _dev(), dataclasses.replace(c, decode_tile_s=0.0)) * 1e-3
    assert ms(rows, _dev(), side) * 1e-3 - stream == pytest.approx(2e-3, rel=1e-9)
    own = rows.assign(kernel_source=["vllm_flashinfer_fidecode"])
    assert ms(own, _dev(), side) * 1e-3 - stream == pytest.approx(0.25e-3, rel=1e-9)
    assert "rate.vllm/generation_attention/triton" in FAMILIES["generation_attention"].used(rows)
    # a side kernel's and an fp8-KV decode kernel's rates are an architecture's kernel's: not pooled; the engine's is
    unpooled = ("rate.vllm/generation_attention/triton", "rate.vllm/generation_attention/fp8",
                "rate.trtllm/generation_attention/fp8/mha")  # fmt: skip
    assert not any(KF.pooled(n) for n in unpooled)
    assert KF.pooled("rate.vllm/generation_attention") and KF.pooled("rate.vllm/context_attention/fp8")


def test_tensorrt_llm_runs_masked_mha_where_xqa_would_not_fill_the_sms():
    # 8 KV heads of 8 query heads, 2 cached tokens (one 128-token chunk) on 100 SMs: 1 sequence makes 8 x 4 = 32 < 100
    # block slots, so TensorRT-LLM runs its masked-MHA kernel (a CTA per query head: 64 streams); 4 sequences make
    # 128 >= 100: XQA (a CTA per KV head: 32 streams); 1 sequence of 512 tokens (4 chunks) too; vLLM never falls back
    rows = _rows(num_key_value_heads=8, step=1)
    one = KA.generation_terms(rows, _dev())
    assert one.mha[0] and one.streams[0] == 64
    for other in (rows.assign(batch_size=[4]), rows.assign(step=[511])):
        t = KA.generation_terms(other, _dev())
        assert not t.mha[0] and t.streams[0] == other.batch_size[0] * 8
    assert KA.generation_terms(rows.assign(framework=["vllm"]), _dev()).streams[0] == 8


def test_blackwell_runs_trtllm_gen_not_xqa_so_neither_heuristic_applies():
    # TensorRT-LLM's XqaDispatcher runs trtllm-gen kernels on sm100: the one-sequence row above keeps a CTA per KV head
    # (8 streams) and the 32,768-token context splits as far as the waves allow (100 ways), as vLLM's kernel does
    bw = _dev(architecture="blackwell")
    one = KA.generation_terms(_rows(num_key_value_heads=8, step=1), bw)
    assert not one.mha[0] and one.streams[0] == 8
    c = dataclasses.replace(CURVES, decode_split=8.0, decode_split_tokens=128.0)
    long = KA.generation_terms(_rows(num_key_value_heads=8, step=32767), bw)
    assert KA.decode_occupancy(long, c)[0] == pytest.approx(8.0, rel=1e-12)


def test_trtllm_gen_kernel_pays_its_own_wave_cost():
    # the trtllm-gen decode kernel: TensorRT-LLM's own on sm100 (not its FlashInfer side kernel), vLLM's FlashInfer
    # trtllm decode anywhere; 2048 sequences x 8 KV heads = 16,384 CTAs on 100 SMs: 164 waves (163.84, no partial-wave
    # share), 1 µs each with decode_ws_tile_s = 1e-6 where the kernel runs, 5 µs (decode_tile_s) where it does not
    rows = _rows(batch_size=2048, num_heads=32, num_key_value_heads=8, step=1, kernel_source="torch_flow")
    c = dataclasses.replace(CURVES, decode_tile_s=5e-6, decode_ws_tile_s=1e-6)
    bw, hop = _dev(architecture="blackwell"), _dev()
    cases = [(rows, bw, True), (rows, hop, False), (rows.assign(kernel_source=["torch_flow_flashinfer"]), bw, False),
             (rows.assign(framework=["vllm"], kernel_source=["vllm_flashinfer_trtllmdecode"]), hop, True),
             (rows.assign(framework=["vllm"], kernel_source=["vllm_flash_attn_fa3"]), bw, False)]  # fmt: skip
    for r, dev, gen in cases:
        t = KA.generation_terms(r, dev)
        assert bool(t.ws[0]) is gen
        assert KA.decode_prologues(t, c)[0] == pytest.approx(164 * (1e-6 if gen else 5e-6), rel=1e-12)
    # unfitted (0): the GQA kernels' decode_tile_s; fitted only from rows that hold vLLM's trtllm-gen decode
    t = KA.generation_terms(rows, bw)
    assert KA.decode_prologues(t, dataclasses.replace(c, decode_ws_tile_s=0.0))[0] == pytest.approx(820e-6)
    used = FAMILIES["generation_attention"].used
    assert "decode_ws_tile_s" in used(cases[3][0]) and "decode_ws_tile_s" not in used(rows.assign(framework=["vllm"]))


def test_hopper_fp8_kv_xqa_applies_rope_itself_one_kernel_less():
    # supportConfigQGMMA: sm90, fp8 KV, d <= 256, group <= 32 -> mha_sm90, which applies RoPE in the kernel: the op's
    # fixed time is one kernel_s (2 µs here) less than the same row's on Ada or with a bf16 cache (two kernels)
    rows = _rows(batch_size=64, num_heads=32, num_key_value_heads=8, step=8191, kv_cache_dtype="fp8")
    c = dataclasses.replace(CURVES, decode_tile_s=1e-6)
    hop, ada = KA.predict_generation(rows, _dev(), c)[0], KA.predict_generation(rows, _dev(architecture="ada"), c)[0]
    assert (ada - hop) * 1e-3 == pytest.approx(2e-6, rel=1e-9)
    for other in (rows.assign(kv_cache_dtype=["bfloat16"]), rows.assign(head_dim=[512]), rows.assign(num_heads=[512])):
        assert not KA.generation_terms(other, _dev()).fused[0]
    assert KA.generation_terms(rows, _dev()).ws[0] and not KA.generation_terms(rows, _dev(architecture="ada")).ws[0]


def test_warp_specialised_wave_cost_is_pooled_sm_cycles():
    # an architecture's figure that carries: H100's fp8-KV XQA and B200's trtllm-gen both ~3k cycles a wave
    from rooflaw.constraints.kernels import generic

    assert KF.pooled("decode_ws_tile_s") and "decode_ws_tile_s" in generic.CYCLES
