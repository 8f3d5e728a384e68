"""GEMM kernel curves: the per-token activation quantiser of vLLM's fp8/int8 GEMMs against hand-computed values."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from rooflaw.constraints.kernels import KernelCurves
from rooflaw.constraints.kernels import gemm as KG
from rooflaw.devices.device import Device


def _dev(**kw) -> Device:
    base = dict(id="t", name="test gpu", peak_flops={"fp32": 1e13, "fp16": 1e15, "fp8": 2e15, "int8": 2e15},
                memory_bandwidth=2e12, memory_capacity=8e10, sm_count=4, architecture="hopper", clock=2e9)  # fmt: skip
    base.update(kw)
    return Device(**base)


CURVES = KernelCurves(architecture="t", compute={"fp16": 0.5, "fp8": 0.4}, memory=0.8, kernel_s=2e-6, clock_mhz=2000.0)
TOKEN = {"vllm/fp8": 1.5, "vllm/fp8/chunk": 0.5}  # int8 W8A8 takes fp8's (gemm.FALLBACK)


def _rows(m, k, dtype, framework) -> pd.DataFrame:
    return pd.DataFrame({"m": m, "n": 64, "k": k, "gemm_dtype": dtype, "framework": framework})


@pytest.mark.parametrize("clock, cycles", [(2e9, 1.0), (1e9, 2.0)])
def test_per_token_quantiser_by_hand(clock, cycles):
    """vLLM's fp8 and int8 W8A8 GEMMs add M · (token + chunk · ⌈K/2048⌉) µs of one SM over the SMs, in cycles of
    the curves' clock; TensorRT-LLM's, an unnamed engine's and bf16 GEMMs add nothing; the plain roofline drops it."""
    dev = _dev(clock=clock)
    m = [4096, 4096, 100, 4096, 4096, 4096, 4096]
    k = [4096, 2048, 2049, 4096, 4096, 4096, 4096]
    dt = ["fp8", "fp8", "fp8", "int8", "fp8", "fp8", "bfloat16"]
    fw = ["vllm", "vllm", "vllm", "vllm", "trtllm", "sglang", "vllm"]
    rows = _rows(m, k, dt, fw)
    with_tok = KG.predict(rows, dev, dataclasses.replace(CURVES, token_us=TOKEN)) * 1e-3
    without = KG.predict(rows, dev, CURVES) * 1e-3
    # chunks ⌈K/2048⌉: 2, 1, 2, 2; µs of one SM over 4 SMs
    hand = [4096 * (1.5 + 0.5 * 2) / 4, 4096 * (1.5 + 0.5) / 4, 100 * (1.5 + 0.5 * 2) / 4, 4096 * (1.5 + 0.5 * 2) / 4]
    want = [h * 1e-6 * cycles for h in hand] + [0.0, 0.0, 0.0]
    assert list(with_tok - without) == pytest.approx(want, rel=1e-9, abs=1e-15)
    # int8 with figures of its own takes them
    own = dataclasses.replace(CURVES, token_us={**TOKEN, "vllm/int8": 3.0, "vllm/int8/chunk": 0.0})
    got = (KG.predict(rows, dev, own) - KG.predict(rows, dev, CURVES))[3] * 1e-3
    assert got == pytest.approx(4096 * 3.0 / 4 * 1e-6 * cycles, rel=1e-9)
    plain = KG.predict(rows, dev, KG.plain_curves(dataclasses.replace(CURVES, token_us=TOKEN)))
    assert list(plain) == pytest.approx(list(KG.predict(rows, dev, KG.plain_curves(CURVES))), rel=1e-12)


def test_per_token_figures_are_fitted_only_where_the_quantiser_runs():
    rows = _rows([1, 2, 3, 4], [64] * 4, ["fp8", "fp8", "bfloat16", "fp8_block"], ["vllm", "trtllm", "vllm", "vllm"])
    used = KG.used_params(rows)
    assert [p for p in used if p.startswith("token_us.")] == ["token_us.vllm/fp8", "token_us.vllm/fp8/chunk"]
