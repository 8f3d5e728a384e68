"""Dequantising GEMMs of an ``mma.sync`` engine on Blackwell (session 14): TensorRT Edge-LLM's INT4 AWQ/GPTQ prefill
runs llm-awq's Ampere ``mma.sync`` GEMM, whose rate is the warp-level MMA's (taken as Hopper's, 2/3 of 4096
FLOP/clk/SM), not
``tcgen05``'s 8192 the datasheet's 16-bit peak counts. Checked against the hand-computed roof from Thor's SM count and
clock, and against engines and architectures it must leave alone."""

import pytest

from rooflaw import get_device
from rooflaw.constraints import curves_applied as CA
from rooflaw.constraints.engines import applied, get_engine


def _curves(dev_id):
    kc = CA.curves_of(get_device(dev_id))
    if kc is None:
        pytest.skip("kernel curves not shipped")
    return kc


def test_thor_mma_sync_roof_is_its_sms_times_clock_times_the_warp_mma_rate():
    """Thor: 20 SMs x 1.57 GHz x 2731 FLOP/clk = 85.8 TFLOPS (its datasheet peak is 8240 FLOP/clk/SM: a share of
    0.331)."""
    thor = get_device("jetson-agx-thor")
    share = CA.mixed_share(_curves("jetson-agx-thor"), "tensorrt-edge-llm", thor)
    assert share * thor.peak_flops["fp16"] == pytest.approx(20 * 1.57e9 * 4096 * 2 / 3, rel=1e-9)


KEEP = [("jetson-agx-thor", "vllm"), ("jetson-agx-thor", "tensorrt-llm"), ("jetson-agx-orin-64gb", "tensorrt-edge-llm"),
        ("a100-sxm-80gb", "llama.cpp")]  # fmt: skip


@pytest.mark.parametrize("dev_id,engine", KEEP)
def test_other_engines_and_ampere_keep_their_mixed_rate(dev_id, engine):
    """An engine not known to run mma.sync mixed-input GEMMs, or an Ampere GPU (mma.sync is its native tensor
    instruction, and its curves hold a measured mixed fraction), keeps the curves' rate."""
    assert CA.mixed_share(_curves(dev_id), engine, get_device(dev_id)) == 1.0


def test_thor_edge_llm_mixed_fraction_is_a_third_of_vllm_s():
    """The assembly's fraction (relative to the fp16 one): Edge-LLM's dequantising GEMMs at 1/3 of the rate vLLM's
    get on the same Thor, before any fitted engine factor (compared at the prior figures)."""
    thor = get_device("jetson-agx-thor")
    edge, vllm = applied(thor, "tensorrt-edge-llm"), applied(thor, "vllm")
    ratio = (edge.mixed * edge.compute["fp16"]) / (vllm.mixed * vllm.compute["fp16"])
    prof = get_engine("tensorrt-edge-llm")
    own = CA.own_kernel_factors(thor, prof)
    assert ratio == pytest.approx((prof.mixed_factor if own else 1.0) * 2731.0 / 8240.0, rel=2e-3)
