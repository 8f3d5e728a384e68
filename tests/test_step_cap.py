"""The assembly's nvfp4 GEMM fraction stays at the kernel family's large-GEMM rate (``curves_applied.step_cap``).

The family prices TensorRT-LLM's block-scaled GEMMs by a CTA's walk of K at their own step (SM cycles per 64 of K), so
a large GEMM runs at most the largest tile's FLOPs per step time; the assembly's one fraction per roof must not exceed
that. References by hand from the tile (256 × 128), K_STEP (64) and the B200 datasheet (9 PFLOPS dense fp4, 148 SMs).
"""

from __future__ import annotations

import dataclasses

import pytest

from rooflaw.constraints.curves_applied import step_cap
from rooflaw.constraints.engines import applied
from rooflaw.constraints.kernels import curves_for
from rooflaw.devices import get_device

B200 = get_device("b200")


def _curves(step_us: float, fp4: float):
    kc = curves_for(B200)
    return dataclasses.replace(kc, compute={**kc.compute, "fp4": fp4}, token_us={"trtllm/fp4/kstep": step_us},
                               clock_mhz=B200.clock / 1e6)  # fmt: skip


def test_step_cap_is_the_largest_tile_over_its_step_time_per_sm_peak():
    kc = _curves(0.1, 0.9)
    by_hand = (2 * 256 * 128 * 64 / 0.1e-6) / (9000e12 / 148)  # 0.6897
    assert step_cap(kc, B200, "fp4", "tensorrt-llm") == pytest.approx(by_hand, rel=1e-9)
    assert by_hand == pytest.approx(0.6897, abs=1e-4)
    # no step of its own: vLLM's GEMMs, bf16, or curves without the figure
    assert step_cap(kc, B200, "fp4", "vllm") == float("inf")
    assert step_cap(kc, B200, "fp16", "tensorrt-llm") == float("inf")
    assert step_cap(_curves(0.0, 0.9), B200, "fp4", "tensorrt-llm") == float("inf")


def test_step_time_counts_sm_cycles_of_the_device_clock():
    kc = dataclasses.replace(_curves(0.1, 0.9), clock_mhz=B200.clock / 1e6 / 2)  # the step is half as many cycles
    assert step_cap(kc, B200, "fp4", "tensorrt-llm") == pytest.approx(2 * 0.6897, abs=2e-4)


def test_applied_fp4_fraction_is_the_smaller_of_fit_and_step():
    ce = float(B200.compute_efficiency)
    capped = applied(B200, "tensorrt-llm", curves=_curves(0.1, 0.9)).compute["fp4"]
    assert capped == pytest.approx(min(1.0, 0.6897 * ce), abs=1e-4)
    free = applied(B200, "tensorrt-llm", curves=_curves(0.05, 0.5)).compute["fp4"]  # step cap 1.38 > 0.5
    assert free == pytest.approx(min(1.0, 0.5 * ce), rel=1e-9)
