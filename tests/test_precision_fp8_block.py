"""Block-scaled FP8 (``fp8_block``, DeepSeek-V3/R1's own checkpoints) prices its linear layers with the kernel
tables' block-scaled rates, not per-tensor FP8's: hand-computed references from the shipped Hopper curves and the
H100's datasheet fp8 peak."""

from __future__ import annotations

import pytest

from rooflaw.constraints import assembly as A
from rooflaw.constraints import curves_applied as CA
from rooflaw.constraints import device_rates as DR
from rooflaw.constraints.engines import applied
from rooflaw.devices.catalog import get_device
from rooflaw.devices.precision import Precision


def test_parse_and_keys():
    p = Precision.parse("wfp8_blockafp8kvfp8")
    assert p.weights.name == "fp8_block" and p.activations.name == "fp8" and p.kv.name == "fp8"
    assert p.weights.bytes == pytest.approx(1.0 + 4.0 / (128 * 128))  # an fp32 scale per 128x128 block
    assert p.linear_dtype == "fp8" and p.linear_key == "fp8_block"
    assert Precision.parse("fp8").linear_key == "fp8"
    assert Precision.parse("w4a16").linear_key == "fp16"  # a block format only where its own roof runs


def test_hopper_linear_and_moe_rates_take_the_block_scaled_fractions():
    dev = get_device("h100-sxm")
    kc = CA.curves_of(dev)
    if kc is None or "fp8_block" not in kc.compute:
        pytest.skip("no Hopper kernel curves with a block-scaled fp8 fraction shipped")
    app = applied(dev, "tensorrt-llm")
    block, plain = Precision.parse("wfp8_blockafp8kvfp8"), Precision.parse("fp8")
    peak = float(dev.peak_flops["fp8"])
    frac = min(min(1.0, kc.compute["fp8_block"] * float(dev.compute_efficiency)),
               CA.step_cap(kc, dev, "fp8_block", "tensorrt-llm"))  # fmt: skip
    r_block, r_plain = A.rates(dev, block, app), A.rates(dev, plain, app)
    assert r_block.inv["linear"] == pytest.approx(1.0 / (peak * frac), rel=1e-9)
    assert r_plain.inv["linear"] == pytest.approx(1.0 / (peak * app.compute["fp8"]), rel=1e-9)
    assert r_block.inv["linear"] > 1.1 * r_plain.inv["linear"]  # Hopper: block scaling costs >10 % of the rate
    moe = dict(kc.moe_compute or {})
    assert DR.moe_fraction(app, block) == pytest.approx(kc.moe * moe.get("fp8_block", 1.0), rel=1e-9)
    assert DR.moe_fraction(app, plain) == pytest.approx(kc.moe * moe.get("fp8", 1.0), rel=1e-9)
