"""TensorRT-LLM-gen's MoE flow (activation fused into the first grouped GEMM) launches four kernels, not five: which
``kernel_source`` names it, and the layer's fixed time one GEMM ``kernel_s`` shorter, by hand."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

import rooflaw as R
from rooflaw.constraints.kernels import KernelCurves
from rooflaw.constraints.kernels import moe as KM
from rooflaw.constraints.kernels.moe_fused import fused_activation, launches

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
