"""An engine's dequantising GEMV (its CUDA-core kernel for small decode batches) has its own fitted factor, not the
tensor-core ``compute_factor``: the assembly's GEMV rate is the vector roof × the curves' fp32 fraction × it."""

import dataclasses

import pytest

from rooflaw import get_device
from rooflaw.constraints.assembly import rates
from rooflaw.constraints.engines import applied, get_engine
from rooflaw.devices.precision import FORMATS, Precision


def _awq():
    return Precision(FORMATS["awq"], FORMATS["fp16"], FORMATS["fp16"])


def test_gemv_rate_takes_the_gemv_factor_not_the_compute_factor():
    dev = get_device("jetson-agx-thor")
    base = get_engine("tensorrt-edge-llm")
    prov = {**base.provenance, "compute_factor": "fitted", "gemv_factor": "fitted"}
    one = dataclasses.replace(base, compute_factor=0.8, gemv_factor=0.25, provenance=prov)
    two = dataclasses.replace(one, compute_factor=0.4)  # the tensor-core factor alone moves: the GEMV stays
    r1, r2 = rates(dev, _awq(), applied(dev, one)), rates(dev, _awq(), applied(dev, two))
    assert r1.inv_gemv == pytest.approx(r2.inv_gemv, rel=1e-12)
    assert r1.inv_gemv == pytest.approx(1.0 / (dev.vector_flops * 0.25), rel=1e-12)  # curves' fp32 fraction: 1
    assert r2.inv["linear"] == pytest.approx(r1.inv["linear"], rel=1e-12)  # W4A16 GEMM: its mixed_factor
    assert r2.inv["vector"] == pytest.approx(2 * r1.inv["vector"], rel=1e-12)  # elementwise: the compute factor


def test_without_a_fitted_gemv_factor_the_gemv_keeps_the_compute_factor():
    dev = get_device("jetson-agx-thor")
    base = get_engine("tensorrt-edge-llm")
    prof = dataclasses.replace(base, compute_factor=0.5, gemv_factor=0.1, provenance={"compute_factor": "fitted"})
    r = rates(dev, _awq(), applied(dev, prof))
    assert r.inv_gemv == pytest.approx(1.0 / (dev.vector_flops * 0.5), rel=1e-12)
