"""The 16-bit GEMV roof: a one-token bf16 ``F.linear`` measured by calibrate, used for 16-bit decode GEMVs.

On a CPU without native bf16 math a decode step's bf16 GEMV converts every weight and streams far below the
fp32 GEMV's bytes/s; pricing it as half the fp32 GEMV's bytes under-predicted bf16 decode by 22-37 %.
Checked here: the calibration fit recovers a known curve, the decode time of a 16-bit projection is its weight
bytes over the 16-bit GEMV rate (hand-computed), fp32 models and uncalibrated devices are untouched, and the
device file keeps the figures.
"""

import dataclasses

import pytest

from rooflaw import Workload, evaluate, load_device_file, save_device_toml
from rooflaw.api import from_mapping
from rooflaw.devices import calibrate_torch as ct
from rooflaw.devices.device import Device
from rooflaw.errors import RooflawError

BW16, K16 = 9.1e9, 91.0


def _cpu(**kw) -> Device:
    base = dict(id="c", name="c", peak_flops={"fp32": 7e10, "fp16": 1e10}, memory_bandwidth=1.8e10,
                memory_capacity=1e10, kind="cpu", tile=(1, 1), sm_count=1, vector_rate=5e9,
                kernel_overhead=1e-5, gemv_half_k=1200.0)  # fmt: skip
    return Device(**(base | kw))


def _decode_ops(dev: Device, precision: str) -> dict[str, float]:
    arch = from_mapping({"layers": 2, "d_model": 512, "heads": 8, "ffn": 1024, "vocab": 4096})
    rep = evaluate(arch, dev, Workload(1, 16, 2), precision, engine="torch-eager", tiles=True)
    return {o.name: o.seconds for o in rep.ops if o.phase == "decode"}


def test_bf16_decode_gemv_streams_at_the_16bit_roof():
    dev = _cpu(gemv16_bandwidth=BW16, gemv16_half_k=K16)
    q = _decode_ops(dev, "bf16")
    eff = 512 * (1024 + K16) / (1024 * (512 + K16))  # the 16-bit K curve at K = 512, relative to K = 1024
    # q_proj: 2 steps × 2 layers × a 512×512 bf16 weight, streamed at the 16-bit GEMV rate
    assert q["q_proj"] == pytest.approx(2 * 2 * 512 * 512 * 2 / (BW16 * eff), rel=1e-9)
    # ffn_down reads K = 1024 rows: the measured rate itself
    assert q["ffn_down"] == pytest.approx(2 * 2 * 1024 * 512 * 2 / BW16, rel=1e-9)
    # the LM head (torch-eager keeps it in the weights' format): K = 512 as well
    assert q["lm_head"] == pytest.approx(2 * 4096 * 512 * 2 / (BW16 * eff), rel=1e-9)


def test_16bit_roof_leaves_fp32_and_uncalibrated_devices_alone():
    dev = _cpu(gemv16_bandwidth=BW16, gemv16_half_k=K16)
    assert _decode_ops(dev, "fp32") == _decode_ops(_cpu(), "fp32")
    # without the figure a bf16 GEMV stays on the fp16 roof and the fp32 GEMV's K curve: slower roof, smaller time
    old = _decode_ops(_cpu(), "bf16")
    new = _decode_ops(dev, "bf16")
    assert new["q_proj"] > old["q_proj"]
    eff32 = 512 * (1024 + 1200.0) / (1024 * (512 + 1200.0))
    assert old["q_proj"] == pytest.approx(
        max(2 * 2 * 2 * 512 * 512 / 1e10, 2 * 2 * 512 * 512 * 2 / (1.8e10 * eff32)), rel=1e-9
    )
    # a flat 16-bit curve (half-K 0): every GEMV at the measured rate
    flat = _decode_ops(dataclasses.replace(dev, gemv16_half_k=0.0), "bf16")
    assert flat["q_proj"] == pytest.approx(2 * 2 * 512 * 512 * 2 / BW16, rel=1e-9)


@pytest.mark.parametrize("k_half", [91.0, 600.0, 0.0])
def test_bf16_gemv_fit_recovers_the_curve(monkeypatch, k_half):
    beta = 9.5e9  # long-row bf16 bandwidth: a K-long row streams at beta·K/(K + k½)

    def fake_time(dtype, rows, budget, k=ct.PROBE_K):
        assert dtype == "bfloat16" and rows == 1
        return 2.0 * ct.PROBE_N * k / (beta * k / (k + k_half))

    monkeypatch.setattr(ct, "_torch_linear_time", fake_time)
    bw_1024 = ct._gemv_bandwidth(0.01, "bfloat16")
    assert bw_1024 == pytest.approx(beta * 1024 / (1024 + k_half), rel=1e-12)
    assert ct._gemv_half_k(0.01, bw_1024, "bfloat16") == pytest.approx(k_half, abs=1e-6)


def test_device_file_keeps_the_16bit_roof_and_rejects_bad_values(tmp_path):
    d = _cpu(gemv16_bandwidth=BW16, gemv16_half_k=K16, provenance={"gemv16_bandwidth": "measured"})
    back = load_device_file(save_device_toml(d, tmp_path / "d.toml"))
    assert (back.gemv16_bandwidth, back.gemv16_half_k) == pytest.approx((BW16, K16), rel=1e-12)
    assert back.provenance["gemv16_bandwidth"] == "measured"
    with pytest.raises(RooflawError, match="gemv16_bandwidth"):
        _cpu(gemv16_bandwidth=-1.0)
    with pytest.raises(RooflawError, match="gemv16_half_k"):
        _cpu(gemv16_half_k=float("nan"))
