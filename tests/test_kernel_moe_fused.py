"""TensorRT-LLM-gen's MoE flow (activation fused into the first grouped GEMM) launches four kernels, not five: which
``kernel_source`` names it, and the layer's fixed time one GEMM ``kernel_s`` shorter, by hand; vLLM's Marlin MoE
computes at the warp-level ``mma.sync`` rate on Hopper and Blackwell (``warp_mma``), by hand."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

import rooflaw as R
from rooflaw.constraints.kernels import KernelCurves
from rooflaw.constraints.kernels import moe as KM
from rooflaw.constraints.kernels.moe_fused import fused_activation, launches
from rooflaw.constraints.kernels.warp_mma import warp_share

SOURCES = [
    "vllm_unquantizedfusedmoe_flashinfer_trtllm_trtllmbf16experts",  # fused SwiGLU
    "vllm_compressedtensorsw4a4nvfp4moe_flashinfer_trtllm_trtllmnvfp4expertsmonolithic",  # fused
    "vllm_fp8moe_flashinfer_trtllm_trtllmfp8expertsmonolithic",  # DeepSeek block FP8: activation kernel of its own
    "vllm_unquantizedfusedmoe_flashinfer_cutlass_flashinferexperts",  # CUTLASS: five kernels
    "vllm_unquantizedfusedmoe_triton_tritonexperts",
    "moe_torch_flow",
]


def test_which_flows_fuse_the_activation():
    assert list(fused_activation(SOURCES)) == [True, True, False, False, False, False]
    assert list(launches(KM.KERNELS, fused_activation(SOURCES))) == [4, 4, 5, 5, 5, 5]


def test_a_fused_layer_is_one_launch_shorter_by_hand():
    """Same shape, rate 1 and fixed seconds for every row: the fused rows cost exactly one ``kernel_s`` less, in SM
    cycles at the curves' clock (B200 boost 1,980 MHz, curves at 1,500 MHz: 4 µs x 1500/1980)."""
    n = len(SOURCES)
    rows = pd.DataFrame({"num_tokens": 64, "hidden_size": 4096, "inter_size": 1536, "topk": 8, "num_experts": 128,
                         "moe_tp_size": 1, "moe_ep_size": 1, "distribution": "balanced", "moe_dtype": "bfloat16",
                         "kernel_source": SOURCES, "framework": "trtllm"}, index=range(n))  # fmt: skip
    curves = KernelCurves("blackwell", {"fp16": 0.8}, memory=0.85, kernel_s=4e-6, moe=0.5, moe_s=1e-5)
    curves = dataclasses.replace(curves, clock_mhz=1500.0)
    b200 = R.get_device("b200")
    t = KM.evaluate(KM.prepare(rows, b200), b200, curves)
    z = 1500.0 / 1980.0
    assert b200.clock == pytest.approx(1980e6)
    assert np.allclose(t[3:], t[3])  # the unfused rows: one price
    assert t[2] == pytest.approx(t[3], rel=1e-12)
    assert t[0] == pytest.approx(t[3] - 4e-6 * z, rel=1e-12)
    assert t[1] == pytest.approx(t[0], rel=1e-12)


def test_marlin_computes_at_the_warp_level_mma_rate_on_wide_mma_gpus():
    """vLLM's Marlin MoE (``mma.sync``) on B200: 2/3 x 4096 FLOP/clk/SM over the datasheet's 2,250 TFLOPS /
    (148 SMs x 1.98 GHz), by hand; 1 on Ada and Ampere, and for any other library; a compute-bound layer's time
    scales by its inverse."""
    b200, l40s, a100 = (R.get_device(d) for d in ("b200", "l40s", "a100-sxm-80gb"))
    want = (2 / 3 * 4096) / (2250e12 / (148 * 1.98e9))
    assert warp_share(b200, "marlin") == pytest.approx(want, rel=1e-12)
    assert 0.35 < want < 0.36
    assert warp_share(b200, "trtllm") == warp_share(l40s, "marlin") == warp_share(a100, "marlin") == 1.0
    big = dict(T=16384, d=4096, inter=14336, rows=32768.0, touched=8.0, padded=32768.0)
    hard = KernelCurves("blackwell", {"fp16": 0.8}, memory=0.85, kernel_s=0.0, moe=0.5)  # q = 0: the hard max
    t_c = 2 * 32768 * 3 * 4096 * 14336 / (2250e12 * 0.8 * 0.5)
    assert KM.layer_seconds(b200, hard, "bfloat16", *big.values(), topk=2) == pytest.approx(t_c, rel=0.05)
    rows = pd.DataFrame({"num_tokens": 16384, "hidden_size": 4096, "inter_size": 14336, "topk": 2, "num_experts": 8,
                         "moe_tp_size": 1, "moe_ep_size": 1, "distribution": "balanced", "moe_dtype": "int4_wo",
                         "kernel_source": ["vllm_compressedtensorswna16marlinmoe_marlin_marlinexperts",
                                           "vllm_unquantizedfusedmoe_triton_tritonexperts"],
                         "framework": "vllm"}, index=range(2))  # fmt: skip
    terms = KM.prepare(rows, b200)
    t = KM.evaluate(terms, b200, hard)
    one = lambda k, ec: KM.layer_seconds(  # noqa: E731
        b200, hard, "int4_wo", 16384, 4096, 14336, terms.rows[k], terms.touched[k], terms.padded[k],
        act_rows=terms.act_rows[k], topk=2, engine_compute=ec)  # fmt: skip
    assert t[0] == pytest.approx(one(0, want), rel=1e-12)  # the Marlin row: its compute at the share's rate
    assert t[1] == pytest.approx(one(1, 1.0), rel=1e-12)
    assert t[0] > 2.0 * t[1]  # compute-bound: ~1/share slower, less the element-wise bytes both move
