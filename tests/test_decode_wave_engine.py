"""The assembly's decode attention wave is the wave of the kernel the engine runs (``curves_applied.decode_wave_s``).

TensorRT-LLM on Blackwell decodes with the warp-specialised trtllm-gen kernel (no XQA on sm100), whose wave the
decode family fits as ``decode_ws_tile_s``; every other engine or GPU pays ``decode_tile_s``. The fixed figures
below are hand-set curves; the seconds are those figures times the device's cycle scale, as ``kernel_s``.
"""

from __future__ import annotations

import dataclasses

import pytest

from rooflaw.constraints.curves_applied import cycle_scale, decode_wave_s, stream_fields
from rooflaw.constraints.kernels import curves_for
from rooflaw.devices import get_device

B200, H100, THOR = get_device("b200"), get_device("h100-sxm"), get_device("jetson-agx-thor")


def _kc(dev, tile: float, ws: float):
    return dataclasses.replace(curves_for(dev), decode_tile_s=tile, decode_ws_tile_s=ws)


@pytest.mark.parametrize(
    "dev, engine, expect",
    [(B200, "tensorrt-llm", 3e-6), (THOR, "tensorrt-llm", 3e-6), (B200, "vllm", 8e-6), (H100, "tensorrt-llm", 8e-6),
     (B200, None, 8e-6)],
)  # fmt: skip
def test_wave_of_the_kernel_the_engine_runs(dev, engine, expect):
    assert decode_wave_s(_kc(dev, 8e-6, 3e-6), dev, engine) == expect


def test_without_a_fitted_warp_specialised_wave_every_engine_pays_decode_tile_s():
    assert decode_wave_s(_kc(B200, 8e-6, 0.0), B200, "tensorrt-llm") == 8e-6


def test_stream_fields_carry_it_in_device_cycles():
    kc = _kc(B200, 8e-6, 3e-6)
    cycles = cycle_scale(kc, B200)
    got = stream_fields(kc, 1.0, cycles, B200, "tensorrt-llm")["decode_tile_s"]
    assert got == pytest.approx(3e-6 * cycles, rel=1e-12)
    assert stream_fields(kc, 1.0, cycles, B200, "vllm")["decode_tile_s"] == pytest.approx(8e-6 * cycles, rel=1e-12)
