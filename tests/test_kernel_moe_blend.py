"""The MoE layer's compute/streaming blend per device (``kernels/moe_blend.py``): q = x/(x + moe_serial_gbps), x the
device's DRAM GB/s per SM, in the family, its fit and the assembly's applied rates."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import least_squares

import rooflaw as R
from rooflaw.constraints.kernels import FAMILIES, KernelCurves
from rooflaw.constraints.kernels import moe as KM
from rooflaw.constraints.kernels import moe_blend as MB

BASE = dict(architecture="hopper", compute={"fp16": 0.8, "fp8": 0.7}, memory=0.8, kernel_s=3e-6, moe=0.6,
            moe_memory=0.9, moe_s=2e-5)  # fmt: skip


def test_serial_by_hand():
    """H100 SXM: 3.35 TB/s over 132 SMs = 25.38 GB/s per SM; L40S 864 GB/s over 142 = 6.08. At h = 25.38 q is 1/2 on
    H100 and 6.08/31.46 on L40S; h = 0 (curves fitted before the figure) keeps the constant moe_serial everywhere."""
    h100, l40s = R.get_device("h100-sxm"), R.get_device("l40s")
    assert MB.bandwidth_per_sm(h100) == pytest.approx(3350 / 132)
    c = KernelCurves(**BASE, moe_serial=0.3, moe_serial_gbps=3350 / 132)
    assert MB.serial(c, h100) == pytest.approx(0.5)
    assert MB.serial(c, l40s) == pytest.approx((864 / 142) / (864 / 142 + 3350 / 132))
    assert MB.serial(c, None) == 0.3  # no device: the curves' own q
    assert MB.serial(dataclasses.replace(c, moe_serial_gbps=0.0), h100) == 0.3
    assert MB.serial(c, dataclasses.replace(h100, sm_count=None)) == 0.3


@pytest.mark.parametrize("dev_id", ["h100-sxm", "l40s", "b200"])
def test_layer_blends_at_the_devices_q(dev_id):
    """The layer with moe_serial_gbps = h prices as the constant-q layer at q = x/(x + h) of its device."""
    dev = R.get_device(dev_id)
    rows, touched, padded, _ = KM.expected_load(1024, 64, 8, 1, "balanced")
    shape = ("bfloat16", 1024, 4096, 1536, rows, touched, padded)
    h = 20.0
    x = dev.memory_bandwidth / 1e9 / dev.sm_count
    got = KM.layer_seconds(dev, KernelCurves(**BASE, moe_serial_gbps=h), *shape)
    assert got == pytest.approx(KM.layer_seconds(dev, KernelCurves(**BASE, moe_serial=x / (x + h)), *shape), rel=1e-12)
    assert got != pytest.approx(KM.layer_seconds(dev, KernelCurves(**BASE, moe_serial=0.0), *shape), rel=1e-3)


def test_fit_hook_writes_the_q_of_the_fitted_gpus():
    """``fit_serial`` runs the joint fit it is handed, then sets moe_serial to q at the geometric mean bandwidth per
    SM of the fitted GPUs (H100 and L40S: sqrt(25.38 · 6.08) = 12.42 GB/s; h = 12.42 gives 1/2)."""
    x = np.sqrt((3350 / 132) * (864 / 142))
    data = [SimpleNamespace(gpu=SimpleNamespace(device=R.get_device(d))) for d in ("h100-sxm", "l40s")]
    seen = []

    def fit_one(fam, d, c):
        seen.append(fam.fit)
        return dataclasses.replace(c, moe_serial_gbps=x)

    out = MB.fit_serial(FAMILIES["moe"], data, KernelCurves(**BASE), fit_one)
    assert seen == [None] and FAMILIES["moe"].fit is MB.fit_serial
    assert out.moe_serial == pytest.approx(0.5) and out.moe_serial_gbps == pytest.approx(x)


def test_fit_recovers_h_from_two_gpus():
    """Synthetic layers (2 % noise) on H100 and L40S from a known h = 15 GB/s per SM: least squares on the log ratio
    over both GPUs' rows finds h; one q per GPU would not tell them apart, one h does."""
    rng = np.random.default_rng(3)
    n = 80
    table = pd.DataFrame({"num_tokens": rng.choice([256, 1024, 4096, 16384], n), "hidden_size": 4096,
                          "inter_size": rng.choice([768, 1536], n), "topk": 8, "num_experts": 64, "moe_tp_size": 1,
                          "moe_ep_size": 1, "distribution": "balanced", "moe_dtype": "bfloat16",
                          "kernel_source": "moe_torch_flow"})  # fmt: skip
    devs = [R.get_device("h100-sxm"), R.get_device("l40s")]
    terms = KM.prepare(table)
    cv = lambda h: KernelCurves(**BASE, moe_serial_gbps=float(h))  # noqa: E731
    meas = [KM.evaluate(terms, d, cv(15.0)) * np.exp(rng.normal(0, 0.02, n)) for d in devs]

    def resid(x):
        return np.concatenate([np.log(KM.evaluate(terms, d, cv(x[0])) / m) for d, m in zip(devs, meas, strict=True)])

    fit = least_squares(resid, [40.0], bounds=([0.5], [500.0]))
    assert fit.x[0] == pytest.approx(15.0, rel=0.15)


def test_assembly_reads_the_devices_q():
    """The applied rates the one assembly reads (``engines.applied``) carry q of the device, as the family prices it,
    not a constant; without the figure they keep the curves' moe_serial."""
    from rooflaw.constraints.engines import applied

    kc = KernelCurves(**BASE, moe_serial=0.9, moe_serial_gbps=10.0)
    for dev_id in ("h100-sxm", "l40s"):
        dev = R.get_device(dev_id)
        x = dev.memory_bandwidth / 1e9 / dev.sm_count
        assert applied(dev, "tensorrt-llm", curves=kc).moe_serial == pytest.approx(x / (x + 10.0))
        plain = dataclasses.replace(kc, moe_serial_gbps=0.0)
        assert applied(dev, "tensorrt-llm", curves=plain).moe_serial == pytest.approx(0.9)


def test_catalog_round_trips_the_figure():
    """The shipped catalog's writer and reader carry moe_serial_gbps (absent in an older catalog: 0, constant q)."""
    import tomllib

    from rooflaw.constraints.kernels import curves_from_dict
    from rooflaw.constraints.kernels.catalog_file import curves_table

    c = KernelCurves(**BASE, moe_serial=0.4, moe_serial_gbps=17.5)
    back = curves_from_dict("hopper", tomllib.loads(curves_table(c))["curves"]["hopper"])
    assert (back.moe_serial_gbps, back.moe_serial) == (17.5, 0.4)
    assert curves_from_dict("hopper", {"memory": 0.8, "kernel_s": 3e-6}).moe_serial_gbps == 0.0


DATA = Path("/work/shared/data/measured/published.csv")


@pytest.mark.skipif(not DATA.is_file(), reason="published.csv not present")
def test_efficiency_fit_blends_at_each_devices_q(monkeypatch):
    """With moe_serial_gbps set, the published MoE cases priced by kernel curves (Jetson Thor and Orin: bandwidths per
    SM unlike their curves' fitted GPUs) hold their own device's q: the efficiency fit's flat arrays, per-case
    predictor and predict agree, the fixed figures differ per device."""
    from fit_helpers import assert_flat_fit_matches

    from rooflaw.constraints import curves_applied as CA
    from rooflaw.constraints import fit_efficiency as fe
    from rooflaw.constraints.published import load_cases

    real = CA.curves_of
    monkeypatch.setattr(CA, "curves_of", lambda d: None if real(d) is None else
                        dataclasses.replace(real(d), moe_serial_gbps=12.0))  # fmt: skip
    cases, _ = load_cases(DATA)
    by_dev: dict = {}
    for c in cases:
        if c.arch.experts > 1 and CA.curves_of(fe.case_device(c)) is not None:
            by_dev.setdefault(c.device, []).append(c)
    pick = [c for cs in by_dev.values() for c in cs[:3]]
    feats = [fe._features(c, fe.case_device(c)) for c in pick]
    for c, f in zip(pick, feats, strict=True):
        x = MB.bandwidth_per_sm(fe.case_device(c))
        assert f.moe_q == pytest.approx(x / (x + 12.0))
    _, P = fe.params_for(pick, feats)
    qs = {k: v for k, v in P.fixed.items() if k[2].startswith("moe_serial@")}
    assert len(set(qs.values())) == len({c.device for c in pick}) >= 2
    assert_flat_fit_matches(pick, feats, seed=4, rel=lambda c: 0.02 if fe.padded(c) else 1e-9)
