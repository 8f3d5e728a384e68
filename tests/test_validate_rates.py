"""The calibrated CPU's rate curves (GEMM rate in M, GEMV bandwidth in K) and the clock of `validate`.

The curves are checked against hand-computed values, the calibration fits against synthetic timings drawn from
a known curve (so the fit must recover its parameters), and the device file round trip keeps them.
"""

import dataclasses
import math

import numpy as np
import pytest

from rooflaw import Workload, evaluate, load_device_file, save_device_toml
from rooflaw.api import from_mapping
from rooflaw.constraints.gemm import gemm, gemv_inverse_rate, rows_efficiency
from rooflaw.devices import calibrate_torch as ct
from rooflaw.devices.device import Device
from rooflaw.errors import RooflawError


def _cpu(**kw) -> Device:
    base = dict(id="c", name="c", peak_flops={"fp32": 7e10}, memory_bandwidth=1.6e10, memory_capacity=1e10,
                kind="cpu", tile=(1, 1), sm_count=1, vector_rate=5e9, kernel_overhead=1e-5)  # fmt: skip
    return Device(**(base | kw))


def test_rows_efficiency_hand_values():
    h = 22.0
    got = rows_efficiency(np.array([1.0, 8.0, 32.0, 128.0, 512.0]), h)
    want = [1.0, 8 * 150 / (128 * 30), 32 * 150 / (128 * 54), 1.0, 1.0]  # M(128+h)/(128(M+h)), capped at 1
    assert np.allclose(got, want, rtol=1e-15)
    assert np.all(rows_efficiency(np.array([3.0, 64.0]), 0.0) == 1.0)


def test_gemm_compute_time_follows_the_rows_curve():
    dev = _cpu(gemm_half_rows=22.0)
    for m in (16, 32, 128):
        c = gemm(m, 512, 384, dev, "fp32", tiles=True)
        eff = min(1.0, m * 150 / (128 * (m + 22)))
        assert c.compute_seconds == pytest.approx(2 * m * 512 * 384 / (7e10 * eff), rel=1e-12)
    # without the tile model the roof is the plain (128-row) rate
    assert gemm(32, 512, 384, dev, "fp32", tiles=False).compute_seconds == pytest.approx(2 * 32 * 512 * 384 / 7e10)


def test_gemv_inverse_rate_hand_values():
    inv_beta, k = 1 / 1.6e10, 754.0
    got = gemv_inverse_rate(np.array([1.0, 1.0, 1.0, 2.0]), np.array([1024.0, 512.0, 4096.0, 512.0]), 4.0, inv_beta, k)
    eff512 = 512 * (1024 + k) / (1024 * (512 + k))
    assert got == pytest.approx([4 * inv_beta / 2, 4 * inv_beta / (2 * eff512), 4 * inv_beta / 2, 0.0], rel=1e-12)
    assert np.all(gemv_inverse_rate(1.0, 512.0, 4.0, inv_beta, 0.0) == 0.0)


def test_decode_step_streams_short_rows_slower_with_tiles():
    """A d=512 decode step (K = 512 rows) on a device with a GEMV K curve: the weight GEMVs take
    weight bytes / (bandwidth × eff(512)); hand-computed against evaluate's per-operator table."""
    k = 754.0
    dev = _cpu(gemv_half_k=k)
    arch = from_mapping({"layers": 2, "d_model": 512, "heads": 8, "ffn": 1024, "vocab": 4096})
    wl = Workload(1, 16, 2)
    plain = evaluate(arch, dev, wl, "fp32", engine="torch-eager", tiles=True)
    flat = evaluate(arch, dataclasses.replace(dev, gemv_half_k=0.0), wl, "fp32", engine="torch-eager", tiles=True)
    q = {o.name: o.seconds for o in plain.ops if o.phase == "decode"}
    q0 = {o.name: o.seconds for o in flat.ops if o.phase == "decode"}
    eff = 512 * (1024 + k) / (1024 * (512 + k))
    # q_proj: 2 steps × 2 layers × 512×512 fp32 weights (+ 2 KB of activations, below the GEMV term)
    assert q["q_proj"] == pytest.approx(2 * 2 * 512 * 512 * 4 / (1.6e10 * eff), rel=1e-9)
    assert q0["q_proj"] == pytest.approx(2 * 2 * (512 * 512 + 2 * 512) * 4 / 1.6e10, rel=1e-9)
    assert plain.tpot_s > flat.tpot_s


@pytest.mark.parametrize(("R", "h"), [(8e10, 22.0), (7e10, 39.5), (5e10, 0.0)])
def test_half_rows_fit_recovers_the_curve(monkeypatch, R, h):
    def fake_time(dtype, rows, budget, k=ct.PROBE_K):
        return 2.0 * rows * ct.PROBE_N * k / (R * rows / (rows + h))

    monkeypatch.setattr(ct, "_torch_linear_time", fake_time)
    rate_128 = R * 128 / (128 + h)
    assert ct._half_rows(0.01, rate_128) == pytest.approx(h, abs=1e-6)
    assert ct._half_rows(0.01, math.inf) == 0.0


@pytest.mark.parametrize("k_half", [754.0, 120.0, 0.0])
def test_gemv_half_k_fit_recovers_the_curve(monkeypatch, k_half):
    beta = 3.1e10  # long-row bandwidth; a K-long row streams at beta·K/(K + k½)

    def fake_time(dtype, rows, budget, k=ct.PROBE_K):
        return 4.0 * ct.PROBE_N * k / (beta * k / (k + k_half))

    monkeypatch.setattr(ct, "_torch_linear_time", fake_time)
    bw_1024 = beta * 1024 / (1024 + k_half)
    assert ct._gemv_half_k(0.01, bw_1024) == pytest.approx(k_half, abs=1e-6)


def test_device_file_round_trip_and_bad_values(tmp_path):
    d = _cpu(gemm_half_rows=39.5, gemv_half_k=754.0, provenance={"gemm_half_rows": "measured"})
    back = load_device_file(save_device_toml(d, tmp_path / "d.toml"))
    assert (back.gemm_half_rows, back.gemv_half_k, back.tile) == (39.5, 754.0, (1, 1))
    with pytest.raises(RooflawError, match="gemv_half_k"):
        _cpu(gemv_half_k=-1.0)
    with pytest.raises(RooflawError, match="gemm_half_rows"):
        _cpu(gemm_half_rows=math.nan)


def test_clock_context_and_bad_clock():
    assert ct.now.__call__() >= 0
    with ct.use_clock("cpu"):
        assert ct._clock[0] is ct.CLOCKS["cpu"]
    assert ct._clock[0] is ct.CLOCKS["wall"]
    with pytest.raises(RooflawError, match="clock"):
        ct.use_clock("sundial")


def test_gp_branch_charges_kernels_per_expert_with_its_coverage_stand_ins():
    """The posynomial engine overhead of a MoE branch under torch-eager: 11 kernels per expert with E = K/ρ in
    prefill and B·K in a decode step (the byte model's stand-ins), against the hand formula."""
    from rooflaw import Space
    from rooflaw.constraints.posynomial import build_branch, space_fixed

    dev, K, rho, l = _cpu(), 2.0, 0.25, 4.0
    space = Space(name="s", layers=[2, 4], d_model=[256, 512], head_dim=[64], kv_heads=["heads"], moe=[(8, 2)],
                  r_single=[2.0])  # fmt: skip
    bounds = {"l": (2, 4), "d": (256, 512), "r": (2, 2), "rho": (rho, rho), "gqa": (1, 1)}
    wl = Workload(2, 16, 3)
    x = {"l": l, "d": 256.0, "r": 2.0, "rho": rho, "gqa": 1.0}
    from rooflaw.devices.precision import Precision

    prec = Precision.parse("fp32")
    from rooflaw.constraints.scenario import Scenario

    eager = build_branch(Scenario(dev, wl, prec, engine="torch-eager"), space_fixed(space), "moe", K, 1, bounds)
    base = 1e-5 * (l * 38 + 13)
    assert eager.overhead_pre(x) == pytest.approx(base + 1e-5 * 11 * l * K / rho, rel=1e-12)
    assert eager.overhead_dec(x) == pytest.approx(3 * (base + 1e-5 * 11 * l * 2 * K), rel=1e-12)
    fused = build_branch(Scenario(dev, wl, prec, engine="vllm"), space_fixed(space), "moe", K, 1, bounds)
    # vllm: 4 kernels per MoE layer, none per expert
    assert fused.overhead_pre(x) == pytest.approx(1e-5 * (l * (9 + 4) + 4), rel=1e-12)
