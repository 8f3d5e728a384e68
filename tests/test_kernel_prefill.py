"""Prefill attention's side kernels (:mod:`rooflaw.constraints.kernels.attention_prefill`): the kernel a table's
``kernel_source`` names runs at its own rate, against hand-computed times, and the fit recovers that rate."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from rooflaw.constraints.kernels import FAMILIES, KernelCurves
from rooflaw.constraints.kernels import attention as KA
from rooflaw.constraints.kernels import attention_prefill as KP
from rooflaw.constraints.kernels import fit as KF
from rooflaw.devices.device import Device


def _dev(**kw) -> Device:
    base = dict(id="t", name="test gpu", peak_flops={"fp32": 1e13, "fp16": 1e15, "fp8": 2e15},
                memory_bandwidth=2e12, memory_capacity=8e10, sm_count=64, architecture="hopper")  # fmt: skip
    base.update(kw)
    return Device(**base)


def _row(**kw) -> pd.DataFrame:
    base = dict(batch_size=[1], isl=[1024], num_heads=[8], num_key_value_heads=[8], head_dim=[128], window_size=[0],
                attn_dtype=["bfloat16"], kv_cache_dtype=["bfloat16"], framework=["vllm"])  # fmt: skip
    base.update({k: [v] for k, v in kw.items()})
    return pd.DataFrame(base)


def test_kernel_paths_name_the_side_kernels_only():
    rows = pd.DataFrame({"kernel_source": ["vllm_flash_attn_fa3", "vllm_flashinfer_trtllmdecode", "vllm_triton_attn",
                                           "vllm_flash_attn_fa4", "torch_flow_flashinfer", "torch_flow",
                                           "vllm_flashinfer_fidecode", "vllm_flashinfer_trtllmprefill"]})  # fmt: skip
    got = list(KP.kernel_paths(rows))
    assert got == ["", "decode", "triton", "fa4", "flashinfer", "", "decode", ""]
    assert list(KP.kernel_paths(pd.DataFrame({"isl": [1, 2]}))) == ["", ""]  # no column: the engine's own kernel


def test_side_kernel_runs_its_whole_kernel_at_its_own_rate():
    # B = 1, S = 1024, 8 heads of 128: 8 query tiles per head visit 1..8 key blocks, 36 blocks of 128 x 128 pairs a
    # head; 64 tiles on 64 SMs: one whole wave, tile and wave efficiency 1. Compute-bound at attention 0.5 of 1e15
    # (4.8 us of MMAs against 0.5 us for its 8.4 MB of Q, K, V, O at 0.8 of 20 TB/s).
    pairs = 36 * 128 * 128
    flops = 4 * 8 * 128 * pairs
    tile_s = 1e-6
    core = flops / (1e15 * 0.5) + 1 * tile_s  # the MMAs and one wave of tiles, at rate 1
    c = KernelCurves(architecture="t", compute={"fp16": 0.5}, memory=0.8, kernel_s=0.0, attention=0.5,
                     attention_tile_s=tile_s, rate={"vllm/context_attention": 1.25,
                                                    "vllm/context_attention/triton": 0.5})  # fmt: skip
    dev = _dev(memory_bandwidth=2e13)
    own = _row(kernel_source="vllm_flash_attn_fa3")
    side = _row(kernel_source="vllm_triton_attn")
    t_own = KA.predict_context(own, dev, c)[0] * 1e-3
    t_side = KA.predict_context(side, dev, c)[0] * 1e-3
    # the rest (RoPE and cache traffic beside the kernel) is the same for both: the difference is the kernel's
    assert t_side - t_own == pytest.approx(core / 0.5 - core / 1.25, rel=1e-9)
    # a side kernel the curves hold no rate for runs at the engine's; so does a table without kernel_source
    other = _row(kernel_source="vllm_flash_attn_fa4")
    assert KA.predict_context(other, dev, c)[0] == pytest.approx(t_own * 1e3, rel=1e-12)
    assert KA.predict_context(_row(), dev, c)[0] == pytest.approx(t_own * 1e3, rel=1e-12)
    # the rate is the engine's own kernel's: TensorRT-LLM's rows are untouched by vLLM's triton figure
    trt = _row(framework="trtllm", kernel_source="vllm_triton_attn")
    c1 = dataclasses.replace(c, rate={})
    assert KA.predict_context(trt, dev, c)[0] == pytest.approx(KA.predict_context(trt, dev, c1)[0], rel=1e-12)


def test_fit_recovers_a_side_kernels_rate():
    dev = _dev(sm_count=132)
    base = KernelCurves(architecture="x", compute={"fp16": 0.7}, memory=0.8, kernel_s=3e-6)
    true = dataclasses.replace(base, attention=0.55, attention_tile_s=2e-6,
                               rate={"vllm/context_attention": 1.2, "vllm/context_attention/triton": 0.3},
                               launch={"trtllm/context_attention": 9e-6, "vllm/context_attention": 5e-6})  # fmt: skip
    rng = np.random.default_rng(5)
    n = 400
    rows = pd.DataFrame({"batch_size": rng.choice([1, 8, 32], n), "isl": rng.choice([128, 1024, 4096], n),
                         "num_heads": 32, "num_key_value_heads": 8, "head_dim": rng.choice([64, 128], n),
                         "window_size": 0, "attn_dtype": "bfloat16", "kv_cache_dtype": "bfloat16",
                         "framework": rng.choice(["trtllm", "vllm"], n),
                         "table": "context_attention_perf"})  # fmt: skip
    rows["kernel_source"] = np.where((rows.framework == "vllm") & (rng.random(n) < 0.3), "vllm_triton_attn", "x")
    rows["latency"] = KA.predict_context(rows, dev, true)
    fam = FAMILIES["context_attention"]
    used = fam.used(rows)
    assert "rate.vllm/context_attention/triton" in used and not any("trtllm/context_attention/" in u for u in used)
    prep = KF.Prepared(KF.GPU("syn", dev, []), rows, np.arange(n), KA.context_terms(rows, dev))
    got = KF.fit_family(fam, [prep], base)
    for path in ("attention", "rate.vllm/context_attention", "rate.vllm/context_attention/triton"):
        assert KF.get_param(got, path) == pytest.approx(KF.get_param(true, path), rel=2e-3), path


def test_side_kernel_rates_are_an_architectures_own_not_pooled():
    # a side kernel's rate describes which library an architecture's engine hands a shape to: generic curves do not
    # fit it (a GPU they price runs those rows at its engine's rate); the engine's own and fp8-KV rates stay pooled
    assert not KF.pooled("rate.vllm/context_attention/triton")
    assert not KF.pooled("rate.trtllm/context_attention/flashinfer")
    assert KF.pooled("rate.vllm/context_attention") and KF.pooled("rate.vllm/context_attention/fp8")
    rows = pd.DataFrame({"batch_size": [1, 2], "isl": [512, 1], "num_heads": [8, 8], "num_key_value_heads": [8, 8],
                         "head_dim": [128, 128], "window_size": [0, 0], "attn_dtype": ["bfloat16"] * 2,
                         "kv_cache_dtype": ["bfloat16"] * 2, "framework": ["vllm"] * 2,
                         "kernel_source": ["vllm_flash_attn_fa3", "vllm_flashinfer_trtllmdecode"],
                         "table": ["context_attention_perf"] * 2})  # fmt: skip
    rows["latency"] = [0.05, 0.01]
    prep = KF.Prepared(KF.GPU("syn", _dev(), []), rows, np.arange(2), KA.context_terms(rows, _dev()))
    base = KernelCurves(architecture="generic", compute={"fp16": 0.7}, memory=0.8, kernel_s=3e-6)
    got = KF.fit_family(FAMILIES["context_attention"], [prep], base)
    assert "vllm/context_attention/decode" not in got.rate and "vllm/context_attention" in got.rate


def test_hopper_trtllm_kv_steps_by_head_dim():
    rows = pd.DataFrame({"framework": ["trtllm"] * 6 + ["vllm"], "head_dim": [64, 128, 192, 256, 128, 256, 64],
                         "attn_dtype": ["bfloat16"] * 4 + ["fp8"] * 2 + ["bfloat16"]})  # fmt: skip
    assert list(KP.kv_steps(rows, _dev(architecture="hopper"))) == [256, 128, 64, 64, 256, 128, 128]
    assert list(KP.kv_steps(rows, _dev(architecture="blackwell"))) == [128] * 7
    # a 128-token window at d = 64: 128-row query tiles visit 1.5 steps of 256 keys on average, not 2 blocks of 128
    S, W = np.array([8192.0]), np.array([128.0])
    assert KA.block_pairs(S, W, kv=np.array([256.0]))[0] / KA.block_pairs(S, W)[0] == pytest.approx(1.5, abs=0.02)


def test_vllm_fp8_kv_prefill_runs_fp8_math_on_its_flash_and_flashinfer_kernels():
    # vLLM (and the tables' collector) cast the query to fp8 over an fp8 KV cache for FlashAttention and FlashInfer:
    # those kernels' MMAs run on the fp8 roof though attn_dtype says bfloat16; Triton, a bf16 cache and TensorRT-LLM's
    # bf16-math rows stay on the fp16 roof
    rows = pd.DataFrame({"framework": ["vllm", "vllm", "vllm", "vllm", "trtllm", "trtllm"],
                         "kernel_source": ["vllm_flash_attn_fa3", "vllm_flashinfer_fiprefill", "vllm_triton_attn",
                                           "vllm_flash_attn_fa3", "torch_flow", "torch_flow"],
                         "kv_cache_dtype": ["fp8", "fp8", "fp8", "bfloat16", "fp8", "fp8"],
                         "attn_dtype": ["bfloat16"] * 5 + ["fp8"]})  # fmt: skip
    assert list(KP.fp8_math(rows)) == [True, True, False, False, False, True]
    # compute-bound on the MMAs alone: the fp8 row takes the fp8 roof at attention_fp8
    c = KernelCurves(architecture="x", compute={}, memory=1.0, kernel_s=0.0, attention=0.5, attention_fp8=0.25)
    dev = _dev(memory_bandwidth=1e18, architecture="blackwell")  # no Hopper FA3 tiles: the same pairs
    base = _row(batch_size=64, isl=4096, kv_cache_dtype="fp8", kernel_source="vllm_flash_attn_fa3")
    tri = base.assign(kernel_source=["vllm_triton_attn"])
    t_fa, t_tri = KA.predict_context(base, dev, c)[0], KA.predict_context(tri, dev, c)[0]
    assert t_fa / t_tri == pytest.approx((1e15 * 0.5) / (2e15 * 0.25), rel=1e-6)


def test_hopper_fa3_tiles_by_head_dim_and_fp8_query():
    # vLLM's FlashAttention-3 on Hopper: bf16 192 x 128 at d = 64, 128 x 128 at 128, 128 x 80 at 256; over an fp8 cache
    # (fp8 query) 192 x 160 at 64, 128 x 160 at 128; its FlashAttention-2 on another kernel source keeps 128 x 128
    rows = pd.DataFrame({"framework": ["vllm"] * 6, "head_dim": [64, 128, 256, 64, 128, 128],
                         "kernel_source": ["vllm_flash_attn_fa3"] * 5 + ["vllm_flash_attn"],
                         "kv_cache_dtype": ["bfloat16"] * 3 + ["fp8"] * 2 + ["bfloat16"],
                         "attn_dtype": ["bfloat16"] * 6})  # fmt: skip
    hop = _dev(architecture="hopper")
    assert list(KP.q_rows(rows, hop)) == [192, 128, 128, 192, 128, 128]
    assert list(KP.kv_steps(rows, hop)) == [128, 128, 80, 160, 160, 128]
    assert list(KP.q_rows(rows, _dev(architecture="blackwell"))) == [128] * 6
    # S = 256 causal, by hand: 192-row tiles of 128-key steps visit 192·256 + 64·256 = 65,536 pairs (128 x 128: 49,152)
    S, W = np.array([256.0]), np.array([0.0])
    assert KA.block_pairs(S, W, block=np.array([192.0]), kv=np.array([128.0]))[0] == 65536
    assert KA.block_pairs(S, W)[0] == 128 * 128 + 128 * 256
    # the wave count follows the tile: 8 heads of 256 rows in 192-row tiles are 16 tiles, one wave on 64 SMs
    t = KA.context_terms(_row(isl=256, head_dim=64, kernel_source="vllm_flash_attn_fa3"), hop)
    assert t.pairs[0] == 8 * 65536 and t.waves[0] == 1


def test_prefill_blend_rounds_the_ridge_and_zero_keeps_the_max():
    # a row at its ridge (math time = stream time): p = 2 gives sqrt(2) x either, p = 0 the larger (the old max); the
    # decode family keeps the max whatever prefill_blend says
    dev = _dev(l2_bytes=0.0)
    row = _row(batch_size=4, isl=2048)
    t = KA.context_terms(row, dev)
    base = KernelCurves(architecture="x", compute={}, memory=1.0, kernel_s=0.0, attention=1.0)
    tm = float(t.flops[0] / (1e15 * t.eff[0]))  # the MMAs alone (no softmax cost, rate 1)
    bw = float(t.bytes[0] / tm)  # the bandwidth that puts this row on its ridge
    ridge = dataclasses.replace(dev, memory_bandwidth=bw)
    prep = float(t.extra_bytes[0] / bw)
    got0 = KA.predict_context(row, ridge, base)[0] * 1e-3
    got2 = KA.predict_context(row, ridge, dataclasses.replace(base, prefill_blend=2.0))[0] * 1e-3
    assert got0 == pytest.approx(tm + prep, rel=1e-9) and got2 == pytest.approx(np.sqrt(2) * tm + prep, rel=1e-9)
    dec = row.assign(step=[1])
    assert KA.predict_generation(dec, dev, dataclasses.replace(base, prefill_blend=2.0))[0] == pytest.approx(
        KA.predict_generation(dec, dev, base)[0], rel=1e-12
    )


def test_tiles_and_kernel_s_are_sm_cycles_at_the_curves_clock():
    # B = 1, S = 1024, 8 heads: 64 query tiles on 64 SMs, one wave. Curves written at 2,000 MHz: a device at 1,000 MHz
    # (half the curves' clock) runs the wave's 2 us (1e-6 s / rate 0.5) and kernel_s 4 us in twice the seconds, 4 and
    # 8 us: 6 us more; the engine's launch extra (host work, 5 us) stays seconds; the rest (MMAs, stream) is unchanged.
    c = KernelCurves(architecture="t", compute={"fp16": 0.5}, memory=0.8, kernel_s=4e-6, attention=0.5,
                     attention_tile_s=1e-6, clock_mhz=2000.0, rate={"vllm/context_attention": 0.5},
                     launch={"vllm/context_attention": 5e-6})  # fmt: skip
    at_clock, half = _dev(clock=2.0e9), _dev(clock=1.0e9)
    t0 = KA.predict_context(_row(), at_clock, c)[0] * 1e-3
    t1 = KA.predict_context(_row(), half, c)[0] * 1e-3
    assert t1 - t0 == pytest.approx(2e-6 + 4e-6, rel=1e-9)
    # the launch extra does not scale: without it the difference is the same
    c0 = dataclasses.replace(c, launch={})
    assert KA.predict_context(_row(), half, c0)[0] - KA.predict_context(_row(), at_clock, c0)[0] == pytest.approx(
        (t1 - t0) * 1e3, rel=1e-9)  # fmt: skip
    # no clock on the device (or the curves): seconds as written
    assert KA.predict_context(_row(), _dev(), c)[0] == pytest.approx(t0 * 1e3, rel=1e-12)


def test_warp_specialised_kernels_pay_their_own_wave_in_sm_cycles():
    # B = 1, S = 1024, 8 heads on 64 SMs: 64 query tiles, one wave. Curves at 2,000 MHz: 1 us a wave of mma.sync tiles
    # (2,000 cycles), 3 us of warp-specialised ones (6,000 cycles); no kernel_s, TensorRT-LLM at rate 1. On a Hopper
    # device at the curves' clock the engine's own kernel (sm90 fmha_v2) pays 3 us over the same row without tiles; at
    # half the clock 6 us; its FlashInfer side kernel (d = 256 on Blackwell) and an Ada device pay 1 us (2 at half).
    c = KernelCurves(architecture="t", compute={"fp16": 0.5}, memory=0.8, kernel_s=0.0, attention=0.5,
                     attention_tile_s=1e-6, attention_ws_tile_s=3e-6, clock_mhz=2000.0)  # fmt: skip
    bare = dataclasses.replace(c, attention_tile_s=0.0, attention_ws_tile_s=0.0)
    own, side = _row(framework="trtllm", kernel_source="torch_flow"), _row(kernel_source="vllm_triton_attn")

    def extra(row, **dev) -> float:
        d = _dev(**dev)
        return (KA.predict_context(row, d, c)[0] - KA.predict_context(row, d, bare)[0]) * 1e-3

    for arch, ws in (("hopper", 3e-6), ("blackwell", 3e-6), ("ada", 1e-6), ("ampere", 1e-6)):
        assert extra(own, architecture=arch, clock=2.0e9) == pytest.approx(ws, rel=1e-9), arch
        assert extra(own, architecture=arch, clock=1.0e9) == pytest.approx(2 * ws, rel=1e-9), arch
    assert extra(side, architecture="blackwell", clock=1.0e9) == pytest.approx(2e-6, rel=1e-9)
    # without the warp-specialised figure (0), every kernel pays attention_tile_s
    c = dataclasses.replace(c, attention_ws_tile_s=0.0)
    assert extra(own, architecture="hopper", clock=2.0e9) == pytest.approx(1e-6, rel=1e-9)


def test_tile_params_follow_the_kernels_a_gpus_rows_run():
    """H100's rows (FlashAttention-3/-4, TensorRT-LLM) fit the warp-specialised wave only, B200's (trtllm-gen, and
    its Triton and FlashInfer side kernels) both, L40S's and A100's (FlashAttention-2, FlashInfer FA2) mma.sync's."""

    def rows(*src: str) -> pd.DataFrame:
        fw = ["vllm" if s.startswith("vllm") else "trtllm" for s in src]
        return pd.DataFrame({"framework": fw, "kernel_source": list(src)})

    assert KP.tile_params(rows("vllm_flash_attn_fa3", "vllm_flash_attn_fa4", "torch_flow")) == ("attention_ws_tile_s",)
    b200 = rows("vllm_flashinfer_trtllmprefill", "vllm_triton_attn", "torch_flow", "torch_flow_flashinfer")
    assert KP.tile_params(b200) == ("attention_tile_s", "attention_ws_tile_s")
    l40s = rows("vllm_flash_attn_fa2", "vllm_flashinfer_fiprefill", "torch_flow")
    assert KP.tile_params(l40s) == ("attention_tile_s",)
    assert KP.tile_params(rows("vllm_flash_attn", "torch_flow")) == ("attention_tile_s",)
