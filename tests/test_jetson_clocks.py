"""Jetson GPU clocks (session 14): the kernel curves count their fixed GPU-side times (``kernel_s``, ``moe_s``, decode
waves, K steps) in SM cycles at the clock of the GPUs they were measured on; a Jetson prices them at its own GPU
clock, so a Jetson without ``boost_clock_mhz`` paid them at the reference GPU's clock (A100's 1410 MHz for an Orin,
1.1-2.3x too short). Checked against hand-computed ratios of the datasheet clocks."""

import pytest

from rooflaw import get_device
from rooflaw.constraints import curves_applied as CA
from rooflaw.constraints.engines import applied
from rooflaw.devices import list_devices

#: datasheet GPU max clocks, MHz (the FP32 rates in each catalog file: CUDA cores x 2 x clock)
CLOCKS_MHZ = {"jetson-orin-nano-8gb": 625.0, "jetson-orin-nano-8gb@Super": 1020.0, "jetson-orin-nx-16gb": 918.0,
              "jetson-agx-orin-32gb": 930.0, "jetson-agx-orin-64gb": 1300.0, "jetson-agx-orin-64gb@50W": 828.75,
              "jetson-agx-orin-64gb@15W": 420.75, "jetson-agx-thor": 1570.0}  # fmt: skip


def test_every_curves_priced_soc_has_its_clock():
    """A Jetson (an SoC priced by an architecture's kernel curves) without a clock would pay cycle-counted times at
    the reference GPU's clock: every catalog SoC with an architecture names its own."""
    socs = [d for d in list_devices(plugins=False) if d.kind == "soc" and d.architecture]
    assert socs
    assert all(d.clock for d in socs), [d.id for d in socs if not d.clock]


@pytest.mark.parametrize("dev_id", sorted(CLOCKS_MHZ))
def test_jetson_fixed_times_run_at_its_own_clock(dev_id):
    dev = get_device(dev_id)
    assert dev.clock == pytest.approx(CLOCKS_MHZ[dev_id] * 1e6)
    kc = CA.curves_of(dev)
    if kc is None or not kc.clock_mhz:
        pytest.skip("kernel curves not shipped")
    # kernel_s is cycles of the curves' clock written as seconds: on this device, x clock_mhz / its clock
    want = kc.kernel_s * kc.clock_mhz / CLOCKS_MHZ[dev_id]
    assert applied(dev, "tensorrt-llm").kernel_s == pytest.approx(want, rel=1e-12)


def test_orin_nano_super_mode_shortens_fixed_times_by_its_clock_ratio():
    """Super mode raises the GPU clock 625 -> 1020 MHz: every per-kernel fixed time shrinks by 1020/625 = 1.632."""
    base = applied(get_device("jetson-orin-nano-8gb"), "llama.cpp").kernel_s
    sup = applied(get_device("jetson-orin-nano-8gb@Super"), "llama.cpp").kernel_s
    assert base / sup == pytest.approx(1.632, rel=1e-9)
