"""The L40S, B300 and RTX PRO 6000 Server devices: they load, carry an architecture, and their figures are the
datasheet numbers cited in their files (dense halves of sparse figures where the vendor prints sparse)."""

from __future__ import annotations

import pytest

from rooflaw.devices.catalog import get_device, list_devices
from rooflaw.devices.device import ARCHITECTURES
from rooflaw.devices.system import get_system

# id -> (architecture, {dtype: dense TFLOP/s}, bandwidth GB/s, memory GB, power W), from the datasheets cited
# in the files: L40S datasheet (dense | sparse pairs), HGX B300 8-GPU table (/8, /2 where sparse),
# RTX PRO 6000 Server Edition datasheet (4 PFLOPS FP4 sparse).
EXPECTED = {
    "l40s": ("ada", {"fp16": 362.05, "fp8": 733, "int8": 733, "tf32": 183, "fp32": 91.6}, 864, 48, 350),
    "b300": ("blackwell", {"fp16": 36000 / 8 / 2, "fp8": 72000 / 8 / 2, "fp4": 108000 / 8, "tf32": 18000 / 16,
                           "fp32": 600 / 8}, 8000, 288, 1100),  # 2.3 TB / 8 = 288 GB HBM3e per GPU
    "rtx-pro-6000-server": ("blackwell", {"fp4": 4000 / 2, "fp32": 120}, 1597, 96, 600),
}  # fmt: skip


@pytest.mark.parametrize("dev_id", sorted(EXPECTED))
def test_new_device_figures(dev_id):
    arch, flops, bw, mem, power = EXPECTED[dev_id]
    d = get_device(dev_id)
    assert d.architecture == arch and d.kind == "gpu"
    for dtype, tflops in flops.items():
        assert d.peak(dtype) == pytest.approx(tflops * 1e12, rel=1e-9), dtype
    assert d.memory_bandwidth == pytest.approx(bw * 1e9)
    assert d.memory_capacity == pytest.approx(mem * 1e9)
    assert d.power_peak == pytest.approx(power)
    # a figure halved from a sparse one says so
    halved = [k for k, v in d.provenance.items() if k.startswith("peak_flops.") and v == "derived"]
    assert dev_id == "l40s" or halved


def test_rtx_pro_6000_tensor_ratios():
    """GB202: FP8 at half and FP16 at a quarter of the FP4 rate (the secondary figures agree with the datasheet's)."""
    d = get_device("rtx-pro-6000-server")
    assert d.peak("fp8") == pytest.approx(d.peak("fp4") / 2, rel=0.01)
    assert d.peak("fp16") == pytest.approx(d.peak("fp4") / 4, rel=0.01)


def test_every_gpu_and_soc_has_an_architecture():
    for d in list_devices():
        if d.kind in ("gpu", "soc") and d.vendor == "NVIDIA":
            assert d.architecture in ARCHITECTURES, d.id


@pytest.mark.parametrize("spec, link, gbs", [("b300:8", "NVLink 5", 900), ("l40s:8", "PCIe Gen4 x16", 32),
                                             ("rtx-pro-6000-server:8", "PCIe Gen5 x16", 64)])  # fmt: skip
def test_new_systems(spec, link, gbs):
    s = get_system(spec)
    assert s.link == link and s.link_bw == gbs * 1e9 and s.source.startswith("https://")
