"""The ``generic`` curves (a GPU of an architecture with none): each pooled figure the median of the architectures'
fits, cycle figures compared in cycles; and leave-one-GPU-out prices the held-out GPU with the others' median."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rooflaw.constraints.kernels import FAMILIES, GENERIC, CollectiveCurve, KernelCurves
from rooflaw.constraints.kernels import fit as KF
from rooflaw.constraints.kernels import gemm as KG
from rooflaw.constraints.kernels.generic import determined, figures, median_curves
from rooflaw.constraints.kernels.tables import Table
from rooflaw.devices.device import Device


def test_median_of_three_architectures_by_hand():
    a = KernelCurves("ampere", compute={"fp16": 0.8}, memory=0.7, kernel_s=5e-6, clock_mhz=1000.0,
                     attention_l2=0.01, mla_token_s=1e-7, split_share={"vllm/generation_attention": 0.2},
                     collectives={"allreduce/nvlink": CollectiveCurve(1e-5, 0.3)})  # fmt: skip
    h = KernelCurves("hopper", compute={"fp16": 0.6, "fp8": 0.5}, memory=0.9, kernel_s=1e-6, clock_mhz=2000.0,
                     attention_l2=0.05, collectives={"allreduce/nvlink": CollectiveCurve(2e-5, 0.5)})  # fmt: skip
    b = KernelCurves("blackwell", compute={"fp16": 0.7, "fp8": 0.7}, memory=0.8, kernel_s=2e-6, clock_mhz=4000.0,
                     attention_l2=0.02)  # fmt: skip
    g = median_curves([a, h, b], clock_mhz=2000.0)
    assert g.architecture == GENERIC and g.clock_mhz == 2000.0
    assert g.compute == pytest.approx({"fp16": 0.7, "fp8": 0.6})  # fp8: the two that have it
    assert g.memory == pytest.approx(0.8) and g.attention_l2 == pytest.approx(0.02)
    # kernel_s in cycles: 5000, 2000, 8000 -> 5000 cycles at 2000 MHz = 2.5 µs (the seconds' median would be 2 µs)
    assert g.kernel_s == pytest.approx(2.5e-6)
    # a kernel's own figures (not pooled) stay at their defaults
    assert g.mla_token_s == 0.0 and g.split_share == {}
    assert g.collectives["allreduce/nvlink"].latency == pytest.approx(1.5e-5)
    assert g.collectives["allreduce/nvlink"].efficiency == pytest.approx(0.4)
    # NCCL's fixed times are SM cycles: 10 µs at 1000 MHz and 20 µs at 2000 MHz are 10k and 40k cycles -> 25k cycles
    # at 2000 MHz = 12.5 µs (the seconds' 15 µs); its hop is seconds (median 1.5 µs)
    a2, h2 = (
        dataclasses.replace(c, collectives={"nccl_allreduce/nvlink": CollectiveCurve(lat, 0.3, hop, 4e-5)})
        for c, lat, hop in ((a, 1e-5, 1e-6), (h, 2e-5, 2e-6))
    )
    gn = median_curves([a2, h2], clock_mhz=2000.0).collectives["nccl_allreduce/nvlink"]
    assert gn.latency == pytest.approx(12.5e-6) and gn.hop == pytest.approx(1.5e-6)
    assert gn.latency_large == pytest.approx(0.5 * (4e-5 * 1000 + 4e-5 * 2000) / 2000)  # 60k cycles at 2000 MHz
    assert set(figures(g)) >= {"compute.fp16", "compute.fp8", "collectives.allreduce/nvlink.hop"}
    # a figure an architecture's rows do not determine (its default) is left out of the median where that is known
    h, b = (dataclasses.replace(c, attention_fp8=v) for c, v in ((h, 0.3), (b, 0.5)))
    assert median_curves([a, h, b], 2000.0).attention_fp8 == pytest.approx(0.3)  # ampere's default 0 counted
    rest = {"attention_fp8", "memory"}
    fitted = {"ampere": {"memory"}, "hopper": rest, "blackwell": rest}
    g = median_curves([a, h, b], 2000.0, fitted)
    assert g.attention_fp8 == pytest.approx(0.4) and g.memory == pytest.approx(0.8)
    assert g.compute == {} and g.kernel_s == 0.0  # determined by none: defaults


def test_leave_one_out_prices_a_gpu_with_the_median_of_the_other_architectures():
    """Three architectures whose GEMMs reach 0.55, 0.7 and 0.85 of their fp16 peak (lognormal noise σ = 0.05): the
    middle one held out is priced by the median of the other two (0.7) to the noise level; the outer ones are off by
    the ratio of their own to the median of the other two (0.55/0.775 and 0.85/0.625) on these compute-bound GEMMs."""
    sigma, n = 0.05, 400
    rng = np.random.default_rng(3)
    sizes = np.array([1024, 4096, 8192])  # compute-bound GEMMs: their time is FLOPs over the fp16 rate
    gpus, true = [], {}
    for i, (arch, c) in enumerate((("ampere", 0.55), ("hopper", 0.7), ("blackwell", 0.85))):
        true[arch] = KernelCurves(architecture=arch, compute={"fp16": c}, memory=0.8, kernel_s=3e-6, half_rows=10.0)
        dev = Device(id=f"g{i}", name=f"g{i}", peak_flops={"fp16": (1 + i) * 4e14}, memory_bandwidth=(1 + i) * 1.5e12,
                     memory_capacity=80e9, sm_count=100 + 20 * i, architecture=arch)  # fmt: skip
        rows = _gemm_rows(rng.choice(sizes, n), rng.choice(sizes, n), rng.choice(sizes, n))
        rows["latency"] = KG.predict(rows, dev, true[arch]) * np.exp(rng.normal(0, sigma, n))
        gpus.append(KF.GPU(f"g{i}", dev, [Table(f"g{i}", "trtllm", "1", "gemm_perf", Path("."), rows)]))
    res = KF.fit_kernels(gpus, sample=n, held_out=True, families=[FAMILIES["gemm"]], generic="median")
    assert res.curves[GENERIC].compute["fp16"] == pytest.approx(0.7, rel=0.03)
    det = determined(gpus[:1])  # the GEMM figures bf16 rows set, nothing of attention's or fp8's
    assert {"compute.fp16", "memory", "kernel_s"} <= det and not det & {"attention", "compute.fp8", "moe"}
    assert res.held_out["g1"]["gemm"] == pytest.approx(sigma * 0.6745, abs=0.01)
    assert res.held_out["g0"]["gemm"] == pytest.approx(1 - 0.55 / 0.775, abs=0.04)
    assert res.held_out["g2"]["gemm"] == pytest.approx(0.85 / 0.625 - 1, abs=0.04)


def _gemm_rows(m: np.ndarray, n: np.ndarray, k: np.ndarray) -> pd.DataFrame:
    df = pd.DataFrame({"m": m, "n": n, "k": k, "gemm_dtype": "bfloat16", "framework": "trtllm"})
    df.insert(0, "table", "gemm_perf")
    df["version"], df["row"] = "1", np.arange(len(df))
    return df


def test_nested_coverage_by_hand():
    """Each GPU's rows against the band of the others' rows: identical GPUs as their quantiles say, disjoint ones
    all outside, one GPU alone has no band to be checked against."""
    from rooflaw.constraints.kernels.fit import nested_coverage

    same = np.linspace(0.8, 1.2, 11)
    # one other GPU: its plain 10 %/90 % quantiles, 0.84 and 1.16, hold 9 of the 11 rows
    assert nested_coverage({"a": same, "b": same.copy()}) == pytest.approx(9 / 11)
    assert nested_coverage({"a": np.ones(10), "b": np.full(10, 100.0)}) == 0.0
    assert np.isnan(nested_coverage({"a": same}))
