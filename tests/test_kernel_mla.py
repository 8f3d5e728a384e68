"""MLA attention families (``rooflaw.constraints.kernels.mla``): hand-computed times and a fit recovering known
figures from rows they generated."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from rooflaw.constraints.kernels import FAMILIES, KernelCurves, family_of_table
from rooflaw.constraints.kernels import fit as KF
from rooflaw.constraints.kernels import mla as KM
from rooflaw.devices.device import Device

CURVES = KernelCurves(architecture="t", compute={"fp16": 0.5, "fp8": 0.4}, memory=0.8, kernel_s=2e-6)


def _dev(**kw) -> Device:
    base = dict(id="t", name="test gpu", peak_flops={"fp32": 1e13, "fp16": 1e15, "fp8": 2e15},
                memory_bandwidth=2e12, memory_capacity=8e10, sm_count=100, architecture="hopper")  # fmt: skip
    base.update(kw)
    return Device(**base)


def _rows(**kw) -> pd.DataFrame:
    base = {"batch_size": [8], "isl": [1], "step": [4095], "num_heads": [16], "mla_dtype": ["bfloat16"],
            "kv_cache_dtype": ["bfloat16"], "framework": ["trtllm"]}  # fmt: skip
    base.update(kw)
    return pd.DataFrame(base)


def _decode_rows(seed: int, n: int, batches, steps, heads) -> pd.DataFrame:
    """``n`` random generation_mla_perf rows (bf16 latent, bf16 or fp8 cache, TensorRT-LLM or vLLM)."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"batch_size": rng.choice(batches, n), "isl": 1, "step": rng.choice(steps, n),
                         "num_heads": rng.choice(heads, n), "mla_dtype": "bfloat16",
                         "kv_cache_dtype": rng.choice(["bfloat16", "fp8"], n),
                         "framework": rng.choice(["trtllm", "vllm"], n), "table": "generation_mla_perf"})  # fmt: skip


def test_mla_decode_reads_the_latent_once_for_all_heads():
    # DeepSeek-V3's MLA, absorbed: 16 heads score a 576-wide latent and sum a 512-wide one over L = 4096 cached
    # tokens of 8 sequences; the fp8 cache holds 576 bytes per token, read once per sequence (8 streams on 132 SMs)
    dev = _dev(sm_count=132)
    c = dataclasses.replace(CURVES, attention=0.5, attention_memory=0.9, decode_half_occupancy=0.25,
                            attention_softmax=8.0, decode_tile_s=1e-6)  # fmt: skip
    rows = _rows(kv_cache_dtype=["fp8"], tp_size=[8])
    flops = 2 * 8 * 16 * 4096 * (576 + 512)
    byts = 8 * 4096 * 576 * 1 + 8 * 16 * (576 + 512) * 2
    compute = flops / (1e15 * 0.5) + 8 * 16 * 4096 * 8.0 / 1e13
    # + the 2 us fixed time of the call's kernel and of FlashMLA's combine kernel (sm90)
    want = max(compute, byts * (1 + 0.25 / (8 / 132)) / (2e12 * 0.9)) + 1e-6 + 2e-6 + 2e-6
    assert KM.predict_generation(rows, dev, c)[0] * 1e-3 == pytest.approx(want, rel=1e-12)
    assert family_of_table("generation_mla_perf").name == "generation_mla"
    # the MLA kernels' own bandwidth fraction replaces the GQA decode kernels' where fitted
    want_own = max(compute, byts * (1 + 0.25 / (8 / 132)) / (2e12 * 0.6)) + 1e-6 + 2e-6 + 2e-6
    own = KM.predict_generation(rows, dev, dataclasses.replace(c, mla_memory=0.6))[0] * 1e-3
    assert own == pytest.approx(want_own, rel=1e-12)


def test_mla_decode_walk_only_before_hopper():
    # TensorRT-LLM on an Ampere/Ada device walks each of 8 sequences' 4096 cached tokens in one CTA (1e-7 s a token
    # at the curves' clock); the rest of the kernel (its latent stream at 0.9 of 2 TB/s, no occupancy ramp, and
    # the 2 us fixed time) blends with the walk as a p-norm, p = 3
    c = dataclasses.replace(CURVES, attention=0.5, attention_memory=0.9, decode_half_occupancy=0.25, mla_token_s=1e-7,
                            mla_walk_blend=3.0)  # fmt: skip
    walk = 4096 * 1e-7
    byts = 8 * 4096 * 576 * 2 + 8 * 16 * 1088 * 2
    rest = byts / (2e12 * 0.9) + 2e-6
    ampere = _dev(architecture="ampere")
    got = KM.predict_generation(_rows(), ampere, c)[0] * 1e-3
    assert got == pytest.approx((rest**3 + walk**3) ** (1 / 3), rel=1e-12)
    # Hopper's split kernels stream: no walk (and the occupancy ramp, 8 CTAs on 100 SMs); TensorRT-LLM's FlashMLA
    # path runs its combine kernel beside (2 us)
    stream = byts * (1 + 0.25 / 0.08) / (2e12 * 0.9) + 2e-6
    for fw, side in (("trtllm", 2e-6), ("vllm", 0.0)):
        hopper = KM.predict_generation(_rows(framework=[fw]), _dev(architecture="hopper"), c)[0] * 1e-3
        assert hopper == pytest.approx(stream + side, rel=1e-12)
    # vLLM's Triton kernel on Ampere: 8 sequences x 1 block of 16 heads x 4 KV splits = 32 CTAs, one wave, each
    # walking 1024 tokens
    vllm = KM.predict_generation(_rows(framework=["vllm"]), ampere, c)[0] * 1e-3
    assert vllm == pytest.approx((rest**3 + (walk / 4) ** 3) ** (1 / 3), rel=1e-12)
    # the walk's token time is SM cycles: a device at half the curves' clock takes twice as long a token
    slow = KM.predict_generation(_rows(), _dev(architecture="ada", clock=1e9), dataclasses.replace(c, clock_mhz=2000))
    assert slow[0] * 1e-3 == pytest.approx((rest**3 + (2 * walk) ** 3) ** (1 / 3), rel=1e-12)
    # the walking kernel's own rate divides the walk (and the kernel's math and prologues)
    cr = dataclasses.replace(c, rate={KM.walk_key("trtllm"): 0.5})
    assert KM.predict_generation(_rows(), ampere, cr)[0] * 1e-3 == pytest.approx((rest**3 + (2 * walk) ** 3) ** (1 / 3))


def test_mla_walk_layout_in_waves_whatever_the_dtype():
    # 100 SMs, one CTA each at a time, 4096 tokens: TensorRT-LLM's 8 or 150 sequences are 1 or 2 waves of CTAs walking
    # 4096 tokens, whatever the heads and KV dtype; vLLM's Triton kernel runs 8 x ceil(128 / 16) x 4 = 256 CTAs
    # (3 waves) of 1024 tokens
    c = dataclasses.replace(CURVES, mla_token_s=1e-7)
    rows = pd.concat([_rows(), _rows(num_heads=[128]), _rows(kv_cache_dtype=["fp8"]), _rows(batch_size=[150]),
                      _rows(num_heads=[128], framework=["vllm"])])  # fmt: skip
    t = KM.generation_terms(rows, _dev(architecture="ada"))
    assert KM.walk_seconds(t, c) == pytest.approx([4096e-7, 4096e-7, 4096e-7, 2 * 4096e-7, 3 * 1024e-7], rel=1e-12)
    assert t.walk.tolist() == [True] * 5


def test_mla_walk_figures_pool_into_generic():
    # the walk applies by the device's architecture, so its figures carry to a held-out Ampere/Ada GPU
    for name in ("mla_token_s", "mla_walk_blend", f"rate.{KM.walk_key('trtllm')}", f"rate.{KM.walk_key('vllm')}"):
        assert KF.pooled(name), name


def test_fit_recovers_known_mla_walk_figures():
    # rows an Ada device's walking TensorRT-LLM and vLLM (Triton) kernels would take under known figures
    dev = _dev(architecture="ada", sm_count=142, clock=2.52e9)
    base = dataclasses.replace(CURVES, attention=0.5, attention_memory=0.85, decode_half_occupancy=0.3,
                               decode_tile_s=2e-6, clock_mhz=2000.0)  # fmt: skip
    true = dataclasses.replace(base, mla_token_s=9e-8, mla_walk_blend=2.0, mla_memory=0.7,
                               rate={KM.walk_key("trtllm"): 0.45, KM.walk_key("vllm"): 0.6},
                               launch={"trtllm/generation_mla": 4e-6, "vllm/generation_mla": 2e-4})  # fmt: skip
    n = 600
    rows = _decode_rows(3, n, [1, 4, 16, 32, 64, 128, 512, 1024], [1, 15, 127, 1023, 8191, 32767], [1, 16, 128])
    rows["latency"] = KM.predict_generation(rows, dev, true)
    fam = FAMILIES["generation_mla"]
    prep = KF.Prepared(KF.GPU("syn", dev, []), rows, np.arange(n), fam.prepare(rows, dev))
    got = KF.fit_family(fam, [prep], base)
    for path in ("mla_token_s", "mla_walk_blend", "mla_memory", f"rate.{KM.walk_key('trtllm')}",
                 f"rate.{KM.walk_key('vllm')}",
                 "launch.trtllm/generation_mla", "launch.vllm/generation_mla"):  # fmt: skip
        assert KF.get_param(got, path) == pytest.approx(KF.get_param(true, path), rel=1e-3), path
    assert np.allclose(KM.predict_generation(rows, dev, got), rows["latency"], rtol=1e-6)


def test_mla_prefill_fp8_kv_runs_fp8_context_mla_from_hopper_on():
    # TensorRT-LLM with an fp8 KV cache on sm90+ quantises Q, K, V (bf16 read, fp8 written: 3 bytes per element of
    # the 192 + 192 + 128 per head and token) and runs the FMHA on the fp8 roof (0.4 of 2e15 instead of 0.5 of 1e15);
    # before Hopper (and in vLLM) the fp8 cache only halves the latent written beside the kernel
    c = dataclasses.replace(CURVES, attention=0.5, attention_fp8=0.4)
    B, S, H = 2, 1024, 16
    rows = pd.DataFrame({"batch_size": [B, B], "isl": [S, S], "num_heads": [H, H], "mla_dtype": ["bfloat16"] * 2,
                         "kv_cache_dtype": ["bfloat16", "fp8"], "framework": ["trtllm"] * 2})  # fmt: skip
    bw = 2e13 * 0.8
    latent16, latent8, quant = B * S * 576 * 2, B * S * 576 * 1, B * S * H * 512 * 3
    hopper = _dev(memory_bandwidth=2e13)
    t16, t8 = KM.predict_context(rows, hopper, c) * 1e-3
    mma16 = t16 - latent16 / bw - 2e-6  # the kernel's MMAs (they outlast its Q/K/V/O bytes here)
    assert mma16 > B * S * H * 2 * 2 * 512 * 2 / bw
    # (the quantise pass is one kernel more: a second kernel_s)
    assert t8 == pytest.approx(mma16 * (1e15 * 0.5) / (2e15 * 0.4) + (latent8 + quant) / bw + 2 * 2e-6, rel=1e-9)
    # the fp8 MLA kernel's own rate divides its math (and only the fp8 kernel's rows)
    c8 = dataclasses.replace(c, rate={"trtllm/context_mla/fp8": 0.5})
    r16, r8 = KM.predict_context(rows, hopper, c8) * 1e-3
    assert r16 == pytest.approx(t16, rel=1e-12)
    assert r8 == pytest.approx(t8 + mma16 * (1e15 * 0.5) / (2e15 * 0.4), rel=1e-9)
    used = FAMILIES["context_mla"].used
    assert "rate.trtllm/context_mla/fp8" in used(rows) and "rate.trtllm/context_mla/fp8" not in used(rows[:1])
    assert [p for p in used(rows.assign(framework="vllm")) if p.endswith("/fp8")] == ["launch.vllm/context_mla/fp8"]
    a16, a8 = KM.predict_context(rows, _dev(memory_bandwidth=2e13, architecture="ampere"), c) * 1e-3
    assert a16 == pytest.approx(t16, rel=1e-12)
    assert a8 == pytest.approx(t16 - (latent16 - latent8) / bw, rel=1e-12)
    v16, v8 = KM.predict_context(rows.assign(framework="vllm"), hopper, c) * 1e-3
    assert v8 == pytest.approx(v16 - (latent16 - latent8) / bw, rel=1e-12)
    # an engine's fp8 path's own fixed time per call, on its fp8-cache rows only (here vLLM's: 30 us)
    cv = dataclasses.replace(c, launch={"vllm/context_mla": 1e-5, "vllm/context_mla/fp8": 3e-5})
    f16, f8 = KM.predict_context(rows.assign(framework="vllm"), hopper, cv) * 1e-3
    assert f16 == pytest.approx(v16 + 1e-5, rel=1e-12)
    assert f8 == pytest.approx(v8 + 3e-5, rel=1e-12)


def test_mla_decode_streaming_kernels_own_wave_cost_and_fp8_rate():
    # Hopper, 8 sequences x 128 heads: the streaming kernel's CTAs hold 64 query heads each, 16 CTAs on 100 SMs (one
    # partial wave, paying all of mla_tile_s with decode_cta_share 0); its per-wave cost replaces the decode kernels'
    # (SM cycles: on a device at half the curves' clock a wave takes twice as long); an fp8 cache runs at the engine's
    # fp8-KV kernel's rate (math and prologues), the walking Ampere rows keep the decode kernels' prologues
    c = dataclasses.replace(CURVES, attention=0.5, attention_memory=0.9, decode_half_occupancy=0.25,
                            decode_tile_s=1e-6, mla_tile_s=5e-6, clock_mhz=2000.0)  # fmt: skip
    rows = _rows(num_heads=[128], step=[3], kv_cache_dtype=["bfloat16"])
    t = KM.generation_terms(rows, _dev(architecture="hopper"))
    assert t.streams.tolist() == [16.0]
    byts = 8 * 4 * 576 * 2 + 8 * 128 * 1088 * 2
    core = max(2 * 8 * 128 * 4 * 1088 / (1e15 * 0.5), byts * (1 + 0.25 / (16 / 100)) / (2e12 * 0.9))
    got = KM.predict_generation(rows, _dev(architecture="hopper", clock=2e9), c)[0] * 1e-3
    # decode_blend 1: stream and prologue add; FlashMLA's combine kernel one kernel_s (SM cycles too)
    assert got == pytest.approx(core + 5e-6 + 2e-6 + 2e-6, rel=1e-12)
    slow = KM.predict_generation(rows, _dev(architecture="hopper", clock=1e9), c)[0] * 1e-3
    assert slow == pytest.approx(core + 10e-6 + 2e-6 + 4e-6, rel=1e-12)
    # fp8 KV: the latent at 1 byte; the fp8-KV kernel's rate 0.5 doubles its math and its prologue
    r8 = _rows(num_heads=[128], step=[3], kv_cache_dtype=["fp8"])
    c8 = dataclasses.replace(c, rate={KM.fp8_key("trtllm"): 0.5})
    byts8 = 8 * 4 * 576 + 8 * 128 * 1088 * 2
    math8 = 2 * 8 * 128 * 4 * 1088 / (2e15 * 0.5)  # TensorRT-LLM's fp8-KV decode math on the fp8 roof (attention)
    core8 = max(math8 / 0.5, byts8 * (1 + 0.25 / (16 / 100)) / (2e12 * 0.9))
    got8 = KM.predict_generation(r8, _dev(architecture="hopper", clock=2e9), c8)[0] * 1e-3
    assert got8 == pytest.approx(core8 + 10e-6 + 2e-6 + 2e-6, rel=1e-12)
    # and its own fixed time per call where fitted (vLLM's FlashMLA path on an fp8 cache)
    c8f = dataclasses.replace(c8, launch={"trtllm/generation_mla": 1e-6, KM.fp8_key("trtllm"): 3e-5})
    got8f = KM.predict_generation(r8, _dev(architecture="hopper", clock=2e9), c8f)[0] * 1e-3
    assert got8f == pytest.approx(got8 + 3e-5, rel=1e-12)
    assert KM.predict_generation(rows, _dev(architecture="hopper", clock=2e9), c8f)[0] * 1e-3 == pytest.approx(
        got + 1e-6, rel=1e-12
    )
    # a bf16 row ignores the fp8 rate
    assert KM.predict_generation(rows, _dev(architecture="hopper", clock=2e9), c8)[0] * 1e-3 == pytest.approx(got)
    # the walking Ampere kernel (one CTA per sequence) keeps decode_tile_s: mla_tile_s changes nothing there
    amp = _dev(architecture="ampere", clock=2e9)
    cw = dataclasses.replace(c, mla_token_s=1e-7)
    assert KM.predict_generation(rows, amp, cw)[0] == pytest.approx(
        KM.predict_generation(rows, amp, dataclasses.replace(cw, mla_tile_s=0.0))[0], rel=1e-12
    )


def test_fit_recovers_streaming_mla_decode_figures():
    # rows a Hopper device's streaming TensorRT-LLM and vLLM kernels would take under known figures
    dev = _dev(architecture="hopper", sm_count=132, clock=1.98e9)
    base = dataclasses.replace(CURVES, attention=0.5, attention_memory=0.85, decode_half_occupancy=0.3,
                               decode_tile_s=2e-6, clock_mhz=2000.0)  # fmt: skip
    true = dataclasses.replace(base, mla_memory=0.75, mla_tile_s=6e-6,
                               rate={"vllm/generation_mla": 0.8, KM.fp8_key("trtllm"): 1.3, KM.fp8_key("vllm"): 0.6},
                               launch={"trtllm/generation_mla": 4e-6, "vllm/generation_mla": 1.5e-4,
                                       KM.fp8_key("trtllm"): 6e-6, KM.fp8_key("vllm"): 1.9e-4})  # fmt: skip
    n = 600
    rows = _decode_rows(5, n, [1, 4, 16, 64, 256, 1024], [1, 127, 1023, 8191, 32767], [16, 64, 128])
    rows["latency"] = KM.predict_generation(rows, dev, true)
    fam = FAMILIES["generation_mla"]
    prep = KF.Prepared(KF.GPU("syn", dev, []), rows, np.arange(n), fam.prepare(rows, dev))
    got = KF.fit_family(fam, [prep], base)
    for path in (
        "mla_memory",
        "mla_tile_s",
        "rate.vllm/generation_mla",
        f"rate.{KM.fp8_key('trtllm')}",
        f"rate.{KM.fp8_key('vllm')}",
        "launch.trtllm/generation_mla",
        "launch.vllm/generation_mla",
        f"launch.{KM.fp8_key('trtllm')}",
        f"launch.{KM.fp8_key('vllm')}",
    ):
        assert KF.get_param(got, path) == pytest.approx(KF.get_param(true, path), rel=1e-3), path
    assert KF.pooled("mla_tile_s") and KF.pooled(f"rate.{KM.fp8_key('vllm')}")
    assert not KF.pooled(f"launch.{KM.fp8_key('vllm')}")  # an engine's fp8 path's own fixed time, as a library's


def test_mla_decode_side_kernels_only_for_trtllm_flashmla_on_hopper():
    # TensorRT-LLM's sm90 MLA decode (FlashMLA) runs a combine kernel after its split-KV kernel: the same row on a
    # Hopper device takes exactly one kernel_s (2 us, SM cycles: 4 us at half the curves' clock) longer than on one
    # whose kernel reduces its splits itself (Blackwell's trtllm-gen: the same streaming terms otherwise); vLLM's
    # rows and the walking Ampere ones take none
    c = dataclasses.replace(CURVES, attention=0.5, attention_memory=0.9, decode_tile_s=1e-6, clock_mhz=2000.0)
    rows = pd.concat([_rows(), _rows(framework=["vllm"]), _rows(kv_cache_dtype=["fp8"], num_heads=[128])])
    for clock, side in ((2e9, 2e-6), (1e9, 4e-6)):
        hop = KM.predict_generation(rows, _dev(architecture="hopper", clock=clock), c) * 1e-3
        bw = KM.predict_generation(rows, _dev(architecture="blackwell", clock=clock), c) * 1e-3
        assert hop - bw == pytest.approx([side, 0.0, side], rel=1e-9, abs=1e-15)
    assert KM.generation_terms(rows, _dev(architecture="ampere")).side_kernels.tolist() == [0.0, 0.0, 0.0]
    assert KM.generation_terms(rows, _dev(architecture="hopper")).side_kernels.tolist() == [1.0, 0.0, 1.0]


def test_vllm_mla_prefill_op_up_projects_the_latent(monkeypatch):
    # vLLM's MLA prefill op runs kv_b_proj itself: 2 sequences x 1024 tokens x 16 heads, a GEMM of 2048 tokens x 512
    # -> 16 x 256 (8.59 GFLOP at 0.5 of 1 PFLOP/s: 17.2 us, above its 23.1 MB at 0.8 of 2 TB/s: 14.4 us), two kernels
    # (2 x 2 us), and the copy assembling K (2048 x 16 x (128 + 128 + 64) x 2 bytes = 21.0 MB at 1.6 TB/s: 13.1 us)
    c = dataclasses.replace(CURVES, attention=0.5, attention_tile_s=1e-6)
    rows = _rows(batch_size=[2], isl=[1024], step=[0], num_heads=[16], framework=["vllm"])
    dev = _dev()
    with_proj = KM.predict_context(rows, dev, c)[0] * 1e-3
    monkeypatch.setattr(KM, "PROJECTING_ENGINES", ())
    without = KM.predict_context(rows, dev, c)[0] * 1e-3
    gemm = max(2 * 2048 * 512 * 16 * 256 / (1e15 * 0.5), (2048 * 512 + 512 * 4096 + 2048 * 4096) * 2 / (2e12 * 0.8))
    assert with_proj - without == pytest.approx(gemm + 2 * 2e-6 + 2048 * 16 * 320 * 2 / (2e12 * 0.8), rel=1e-9)
    # TensorRT-LLM's op takes the decompressed K and V as inputs: no projection
    trt = rows.assign(framework="trtllm")
    assert KM.projection(trt)[0].tolist() == [0.0]
