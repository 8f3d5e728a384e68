"""GEMM kernel curves: the per-token activation quantiser of vLLM's fp8/int8 GEMMs against hand-computed values."""

from __future__ import annotations

import dataclasses

import numpy as np
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


def test_library_fixed_seconds_by_hand():
    """vLLM's block-fp8 GEMM takes the fixed seconds of the kernel library its ``kernel_source`` names; a library
    without a figure, a row without ``kernel_source`` and the engine's other dtypes take the engine's figure; the
    difference between two rows of one shape is exactly the difference of their figures."""
    launch = {"vllm/fp8_block": 80e-6, "vllm/fp8_block/cutlass": 170e-6, "vllm/fp8_block/deepgemm": 90e-6,
              "trtllm/fp8_block": 3e-6}  # fmt: skip
    curves = dataclasses.replace(CURVES, compute={"fp16": 0.5, "fp8": 0.4, "fp8_block": 0.3}, launch=launch)
    src = ["CutlassFp8BlockScaledMMKernel", "DeepGemmFp8BlockScaledMMKernel", "TritonFp8BlockScaledMMKernel",
           "torch_flow", "CutlassFp8BlockScaledMMKernel"]  # fmt: skip
    rows = _rows([16] * 5, [4096] * 5, "fp8_block", ["vllm", "vllm", "vllm", "trtllm", "trtllm"])
    rows["kernel_source"] = src
    dev = _dev()
    got = KG.predict(rows, dev, curves) * 1e-3
    bare = KG.predict(rows, dev, dataclasses.replace(curves, launch={})) * 1e-3  # the same shape, no extra
    # TensorRT-LLM's block fp8 is not library-keyed: its CUTLASS row takes trtllm/fp8_block
    assert list(got - bare) == pytest.approx([170e-6, 90e-6, 80e-6, 3e-6, 3e-6], rel=1e-9)
    no_src = KG.predict(rows.drop(columns="kernel_source"), dev, curves) * 1e-3
    assert list(no_src - bare) == pytest.approx([80e-6, 80e-6, 80e-6, 3e-6, 3e-6], rel=1e-9)


def test_library_figures_are_fitted_per_library_and_the_engine_figure_is_their_median():
    rows = _rows([1] * 5, [64] * 5, "fp8_block", ["vllm"] * 4 + ["trtllm"])
    lib = ["Cutlass", "DeepGemm", "FlashInfer", "DeepGemm"]
    rows["kernel_source"] = [f"{x}Fp8BlockScaledMMKernel" for x in lib] + ["torch_flow"]
    launch = [p for p in KG.used_params(rows) if p.startswith("launch.")]
    assert launch == ["launch.trtllm/fp8_block", "launch.vllm/fp8_block/cutlass", "launch.vllm/fp8_block/deepgemm",
                      "launch.vllm/fp8_block/flashinfer"]  # fmt: skip
    fitted = {"vllm/fp8_block/cutlass": 170e-6, "vllm/fp8_block/deepgemm": 90e-6, "vllm/fp8_block/flashinfer": 60e-6,
              "trtllm/fp8_block": 3e-6, "vllm/fp8": 4e-6}  # fmt: skip
    seen = []

    def fit_one(fam, data, curves):
        seen.append(fam.fit)
        return dataclasses.replace(curves, launch=fitted)

    out = KG.FAMILY.fit(KG.FAMILY, [], CURVES, fit_one)
    assert seen == [None]  # the driver's one joint fit, not this hook again
    assert out.launch == {**fitted, "vllm/fp8_block": 90e-6}  # median of 170, 90, 60; the others untouched


def test_generic_curves_fit_block_fp8_on_the_engine_figure():
    """The pooled ``generic`` fit sees no library: every vLLM block-fp8 row on ``launch["vllm/fp8_block"]``."""
    from rooflaw.constraints.kernels.fit import Prepared

    rows = _rows([1, 8, 64, 1], [4096] * 4, "fp8_block", ["vllm", "vllm", "vllm", "trtllm"])
    rows["kernel_source"] = ["CutlassFp8BlockScaledMMKernel", "DeepGemmFp8BlockScaledMMKernel",
                             "CutlassFp8BlockScaledMMKernel", "torch_flow"]  # fmt: skip
    dev = _dev()
    terms = KG.terms(rows, dev)
    assert sorted(terms.fixed_labels) == [("fp8_block", "trtllm", ""), ("fp8_block", "vllm", "cutlass"),
                                          ("fp8_block", "vllm", "deepgemm")]  # fmt: skip
    prepared = Prepared(gpu=None, rows=rows, sample=np.arange(4), sample_terms=terms)
    seen = {}

    def fit_one(fam, data, curves):
        seen["used"] = [p for p in fam.used(data[0].rows) if p.startswith("launch.")]
        seen["terms"] = data[0].sample_terms
        return curves

    KG.FAMILY.fit(KG.FAMILY, [prepared], dataclasses.replace(CURVES, architecture="generic"), fit_one)
    assert seen["used"] == ["launch.trtllm/fp8_block", "launch.vllm/fp8_block"]
    t = seen["terms"]
    assert [t.fixed_labels[g] for g in t.fixed_group] == [("fp8_block", "vllm", "")] * 3 + [("fp8_block", "trtllm", "")]
    curves = dataclasses.replace(CURVES, compute={"fp16": 0.5, "fp8": 0.4, "fp8_block": 0.3},
                                 launch={"vllm/fp8_block": 1e-4, "vllm/fp8_block/cutlass": 5e-4})  # fmt: skip
    assert list(KG.seconds(t, dev, curves)) == pytest.approx(list(KG.predict(rows.drop(columns="kernel_source"), dev,
                                                                           curves) * 1e-3), rel=1e-12)  # fmt: skip


def test_small_m_cuda_core_kernel_fixed_seconds_by_hand():
    """TensorRT-LLM's SmoothQuant and weight-only GEMMs of at most 4 rows take ``launch["trtllm/<key>/gemv"]`` (its
    CUDA-core kernel), from 5 rows the engine's figure; other engines' and dtypes' rows are not keyed by M; the
    figure is fitted only where such rows exist, and a table without ``kernel_source`` keys them all the same."""
    launch = {"trtllm/int8": 7e-6, "trtllm/int8/gemv": 2e-6, "trtllm/mixed": 9e-6, "trtllm/mixed/gemv": 4e-6,
              "trtllm/fp8": 10e-6}  # fmt: skip
    curves = dataclasses.replace(CURVES, launch=launch)
    dt = ["sq", "sq", "int4_wo", "int8_wo", "int8_wo", "fp8", "sq"]
    rows = _rows([1, 5, 4, 2, 8, 1, 4], [4096] * 7, dt, ["trtllm"] * 6 + ["vllm"])
    dev = _dev()
    got = KG.predict(rows, dev, curves) * 1e-3
    bare = KG.predict(rows, dev, dataclasses.replace(curves, launch={})) * 1e-3
    # vLLM's int8 has no figure of its own: the smallest any engine shows for int8 (TensorRT-LLM's 7 µs)
    assert list(got - bare) == pytest.approx([2e-6, 7e-6, 4e-6, 4e-6, 9e-6, 10e-6, 7e-6], rel=1e-9)
    used = [p for p in KG.used_params(rows) if p.startswith("launch.")]
    assert used == ["launch.trtllm/fp8", "launch.trtllm/int8", "launch.trtllm/int8/gemv", "launch.trtllm/mixed",
                    "launch.trtllm/mixed/gemv", "launch.vllm/int8"]  # fmt: skip
    big = [p for p in KG.used_params(rows[rows.m > 4]) if p.startswith("launch.")]
    assert big == ["launch.trtllm/int8", "launch.trtllm/mixed"]


def test_quantised_key_without_a_figure_takes_the_engines_median_extra():
    """A non-bf16 GEMM key the curves have no figure for (nor its fallback chain's, short of bf16) costs its
    engine's median extra over the quantised keys it has (10, 6, 2 µs -> 6 µs); bf16 stays without one; an
    engine without any figure gets the smallest median (an unknown engine, as for a key with figures)."""
    launch = {"trtllm/fp8": 10e-6, "trtllm/fp4": 6e-6, "trtllm/fp8_block": 2e-6, "vllm/fp8": 3e-6,
              "vllm/fp8_block": 100e-6, "vllm/fp8_block/cutlass": 170e-6}  # fmt: skip
    c = dataclasses.replace(CURVES, launch=launch)
    assert KG.launch_s(c, "mixed", "trtllm") == pytest.approx(2e-6 + 6e-6)
    assert KG.launch_s(c, "mixed", "vllm") == pytest.approx(2e-6 + (3e-6 + 100e-6) / 2)  # library keys left out
    assert KG.launch_s(c, "mixed", "sglang") == pytest.approx(2e-6 + 6e-6)
    assert KG.launch_s(c, "fp16", "trtllm") == pytest.approx(2e-6)
    assert KG.launch_s(c, "int8", "trtllm") == pytest.approx(2e-6 + 10e-6)  # int8 -> fp8's own figure
    assert KG.launch_s(dataclasses.replace(c, launch={}), "mixed", "trtllm") == pytest.approx(2e-6)


@pytest.mark.parametrize("clock, cycles", [(2e9, 1.0), (1e9, 2.0)])
def test_own_step_kernels_walk_all_of_k(clock, cycles):
    """TensorRT-LLM's block-fp8, nvfp4 and SmoothQuant GEMMs never split K: a one-wave GEMM's compute time is
    ⌈K/64⌉ of their own step (``token_us[".../kstep"]`` µs at the curves' clock) once that bounds it; vLLM's block
    fp8 still splits K and steps at ``kstep_s``; without the figure the kernel steps at ``kstep_s`` too."""
    dev = _dev(clock=clock, peak_flops={"fp32": 1e13, "fp16": 1e15, "fp8": 2e15, "fp4": 4e15, "int8": 2e15})
    rows = _rows([16, 16, 16, 16], [64_000] * 4, ["fp8_block", "nvfp4", "fp8_block", "sq"],
                 ["trtllm", "trtllm", "vllm", "trtllm"])  # fmt: skip
    rows["n"] = 128
    steps = {"trtllm/fp8_block/kstep": 1.0, "trtllm/fp4/kstep": 0.5, "trtllm/int8/kstep": 2.0}
    curves = dataclasses.replace(CURVES, compute={"fp16": 0.5, "fp8": 0.4}, kstep_s=1e-8, split_s=1e-6,
                                 token_us=steps)  # fmt: skip
    t = KG.terms(rows, dev)
    tc, _, _ = KG.parts(t, dev, curves)
    assert tc[[0, 1, 3]] == pytest.approx([1000 * 1e-6 * cycles, 1000 * 0.5e-6 * cycles, 1000 * 2e-6 * cycles],
                                          rel=1e-12)  # fmt: skip
    # vLLM's: split over up to 32 ways (4 SMs, 4 tiles of 64×64 → 1 wave) at kstep_s: far below one µs a step
    assert tc[2] < 1000 * 1e-8 * cycles
    bare, _, _ = KG.parts(t, dev, dataclasses.replace(curves, token_us={}))
    assert bare[0] == pytest.approx(1000 * 1e-8 * cycles, rel=1e-12)  # whole K at kstep_s: no split candidate
    used = [p for p in KG.used_params(rows) if p.startswith("token_us.")]
    assert used == ["token_us.trtllm/fp4/kstep", "token_us.trtllm/fp8_block/kstep", "token_us.trtllm/int8/kstep"]
