"""An engine's own-kernel factors apply only on the GPU architectures its published rows came from.

TensorRT Edge-LLM's factors are fitted on Jetson Thor (Blackwell) rows only; on a Jetson Orin (Ampere) its
GEMMs and attention are priced as the measured tables' kernels (the same rates as ``tensorrt-llm``), and only
its host overheads carry over. A profile with no ``fitted_on`` (a user's) applies its factors everywhere.
"""

from __future__ import annotations

import dataclasses

import pytest

from rooflaw.api import get_device, get_engine
from rooflaw.constraints.engines import applied


def _kernel_rates(a):
    """The kernel-class rates of an :class:`Applied`, flat: memory, each roof's compute fraction, mixed,
    attention, GEMV."""
    return [a.memory, *(a.compute[k] for k in sorted(a.compute)), a.mixed, a.attention, a.gemv]


def test_edge_llm_factors_stay_on_blackwell():
    edge = get_engine("tensorrt-edge-llm")
    assert edge.fitted_on and "ampere" not in edge.fitted_on
    orin, thor = get_device("jetson-agx-orin-64gb"), get_device("jetson-agx-thor")
    on_orin, trt_orin = applied(orin, "tensorrt-edge-llm"), applied(orin, "tensorrt-llm")
    # on Orin: the measured tables' kernel rates, exactly those tensorrt-llm gets
    assert sorted(on_orin.compute) == sorted(trt_orin.compute)
    assert _kernel_rates(on_orin) == pytest.approx(_kernel_rates(trt_orin))
    assert "stay on the architectures" in on_orin.engine_note
    # on Thor (fitted there): its own mixed-input factor, not the tables' rate
    if thor.architecture in edge.fitted_on:
        assert applied(thor, "tensorrt-edge-llm").mixed != pytest.approx(applied(thor, "tensorrt-llm").mixed)


def test_a_profile_without_fitted_on_applies_its_factors_everywhere():
    orin = get_device("jetson-agx-orin-64gb")
    mine = dataclasses.replace(get_engine("tensorrt-edge-llm"), name="mine", fitted_on=(), mixed_factor=0.5)
    base = applied(orin, dataclasses.replace(mine, mixed_factor=1.0))
    assert applied(orin, mine).mixed == pytest.approx(0.5 * base.mixed)
