"""Achieved-performance model: fit recovers known parameters; the assembly applies them; ideal bounds."""

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from rooflaw import Workload, evaluate, from_hf_config, get_device
from rooflaw.constraints import fit_efficiency as fe
from rooflaw.constraints import fit_held_out as FH
from rooflaw.constraints.published import load_cases

DATA = Path("/work/shared/data/measured/published.csv")
for cand in (Path(__file__).resolve().parents[2] / "shared/data/measured/published.csv", DATA):
    if cand.is_file():
        DATA = cand
needs_data = pytest.mark.skipif(not DATA.is_file(), reason="published.csv not present")


@pytest.fixture(scope="module")
def smolhub():
    cases, _ = load_cases(DATA)
    return [c for c in cases if c.source == "SMOLHUB-NANO-SUPER"]


@needs_data
def test_fit_recovers_synthetic_truth(smolhub, monkeypatch):
    """Measurements generated from known figures are fitted back to them (products that are identified). The
    family fit of a device without kernel curves (the curves path: tests/test_truth_kernel_curves.py)."""
    from rooflaw.constraints import curves_applied

    monkeypatch.setattr(curves_applied, "curves_of", lambda dev: None)
    feats = [fe._features(c, get_device(c.device)) for c in smolhub]
    P = fe.FitParameters(smolhub, feats)
    truth = {("family", "jetson-ampere", "memory"): 0.6, ("family", "jetson-ampere", "kernel_s"): 8e-6,
             ("engine", "llama.cpp", "pass_s"): 2e-3, ("engine", "llama.cpp", "memory_factor"): 0.7,
             ("engine", "llama.cpp", "compute_factor"): 0.5}  # fmt: skip
    x = np.log([truth.get(k, 0.4) for k in P.names])
    synth = [dataclasses.replace(c, measured_s=fe._predict(x, P, c, f)) for c, f in zip(smolhub, feats, strict=False)]
    res = fe.fit(synth)
    got = res.families["jetson-ampere"]["memory"] * res.engines["llama.cpp"]["memory_factor"]
    assert got == pytest.approx(0.6 * 0.7, rel=0.06)  # weak priors pull the split a little
    # kernel_s and pass_s are nearly collinear over these 16-32-layer models; their sum per token is identified
    launches = 30 * 20 + 6  # SmolLM2-135M under llama.cpp's kernel count
    over = res.families["jetson-ampere"]["kernel_s"] * launches + res.engines["llama.cpp"]["pass_s"]
    assert over == pytest.approx(8e-6 * launches + 2e-3, rel=0.1)
    errs = [abs(r["error"]) for r in fe.errors(synth, res)]
    # through rooflaw.evaluate, not the fit's own predictor (which takes each op's mean decode step)
    assert max(errs) < 0.05 and float(np.median(errs)) < 0.01


@needs_data
def test_fitted_never_faster_than_ideal(smolhub):
    res = fe.fit(smolhub)
    for c in smolhub:
        assert fe.predict(c, res) >= fe.predict(c, None) * (1 - 1e-9)


def test_engine_ideal_is_pure_roofline_and_paper_ignores_engines():
    a, dev = from_hf_config("qwen3-1.7b"), get_device("jetson-agx-thor")
    w = Workload(1, 256, 8)
    bare = dataclasses.replace(dev, achieved={})
    ideal = evaluate(a, dev, w, "bf16", engine="ideal")
    assert ideal.total_s == pytest.approx(evaluate(a, bare, w, "bf16", engine="ideal").total_s)
    # memory-bound bs1 decode, efficiency 1: at least the weight bytes over the peak bandwidth
    assert ideal.tpot_s >= ideal.weight_bytes / dev.memory_bandwidth
    paper = {e: evaluate(a, dev, w, "bf16", preset="paper", engine=e).total_s for e in ("ideal", "llama.cpp")}
    assert paper["ideal"] == paper["llama.cpp"]
    assert evaluate(a, dev, w, "bf16").applied.engine == "tensorrt-llm"
    assert "fitted" in evaluate(a, dev, w, "bf16").provenance


def test_held_out_fits_without_exactly_the_held_out_group(monkeypatch):
    """Leave-one-X-out: each fit sees every case but those of one group, and predicts exactly those."""
    import rooflaw.constraints.published as pub

    a, prec = from_hf_config("smollm2-135m"), pub.Precision.parse("bf16")
    mk = [("S1", "jetson-orin-nano-8gb", "llama.cpp"), ("S1", "jetson-orin-nano-8gb@Super", "llama.cpp"),
          ("S2", "jetson-agx-thor", "tensorrt-llm"), ("S3", "jetson-agx-orin-64gb", "vllm")]  # fmt: skip
    cases = [pub.Case(f"R{i}", s, d, pub.FAMILY_OF[d.split("@")[0]], e, "smollm2-135m", a, prec, Workload(1, 8, 2),
                      "decode", 1e-3) for i, (s, d, e) in enumerate(mk)]  # fmt: skip
    seen: list[set[str]] = []

    def fake_fit(train, feats):  # each training case comes with its own precomputed features
        assert [f.beta for f in feats] == [fe._features(c, get_device(c.device)).beta for c in train]
        seen.append({c.row_id for c in train})

    monkeypatch.setattr(fe, "fit", fake_fit)
    monkeypatch.setattr(fe, "errors", lambda test, res: [{"row_id": c.row_id, "engine": c.engine,
                                                          "family": c.family, "phase": c.phase, "error": 0.0}
                                                         for c in test])  # fmt: skip
    rows = FH.held_out(cases, "source")
    assert seen == [{"R2", "R3"}, {"R0", "R1", "R3"}, {"R0", "R1", "R2"}]
    assert [(r["row_id"], r["held_out"]) for r in rows] == [("R0", "S1"), ("R1", "S1"), ("R2", "S2"), ("R3", "S3")]
    seen.clear()
    rows = FH.held_out(cases, "board")  # a board goes out with all its power modes
    assert seen[2] == {"R2", "R3"} and {r["row_id"] for r in rows if r["held_out"] == "jetson-orin-nano-8gb"} == {
        "R0", "R1"}  # fmt: skip
    cov = {r["row_id"]: FH.coverage(r) for r in rows}
    # Thor out: TensorRT and the Blackwell family leave with it; AGX Orin out: vLLM leaves, Ampere stays (Nano)
    assert cov == {"R0": "engine out", "R1": "engine out", "R2": "engine and family out", "R3": "engine out"}


def test_case_device_applies_the_rows_fp16_roof():
    import rooflaw.constraints.published as pub

    a = from_hf_config("llama-3-8b")
    c = pub.Case("R", "S", "rtx-4090", "datacenter-ampere-hopper", "llama.cpp", "llama-3-8b", a,
                 pub.Precision.parse("fp16"), Workload(1, 512, 1), "prefill", 1e-3, fp16_flops=330.3e12)  # fmt: skip
    dev = fe.case_device(c)
    assert dev.roof("fp16") == ("fp16", 330.3e12)
    assert dev.roof("fp32") == get_device("rtx-4090").roof("fp32")
    plain = dataclasses.replace(c, fp16_flops=None)
    # a compute-bound prefill: twice the roof, about half the pure-roofline time
    assert fe.predict(c, None) < 0.6 * fe.predict(plain, None)


@needs_data
def test_fit_predictor_equals_evaluate_for_served_and_cublas_rows():
    """The fit's own fast predictor and rooflaw.evaluate agree on the rows priced by the continuous-batching
    schedule (vLLM, concurrency 1 and 8) and by llama.cpp's FP16-accumulate cuBLAS path (RTX 4090 prompts)."""
    cases, _ = load_cases(DATA)
    pick = [c for c in cases if c.row_id in ("R0184", "R0185", "R0191")] + [c for c in cases if c.fp16_flops]
    feats = [fe._features(c, fe.case_device(c)) for c in pick]
    pick, P = fe.params_for(pick, feats)  # a device with kernel curves: its figures fixed
    x = np.log(np.linspace(0.3, 0.9, len(P.names)))  # arbitrary figures: the two paths must agree for any
    fams: dict = {}
    engs: dict = {}
    for (scope, owner, key), v in zip(P.names, np.exp(x), strict=True):
        (fams if scope == "family" else engs).setdefault(owner, {})[key] = float(v)
    res = fe.FitResult(fams, engs, {}, 0.0)
    for c, f in zip(pick, feats, strict=True):
        assert fe._predict(x, P, c, f) == pytest.approx(fe.predict(c, res), rel=1e-9), c.row_id


@needs_data
def test_flat_arrays_price_every_case_kind_as_the_per_case_predictor():
    """The fit's array evaluator (fit_arrays.FlatCases) gives _predict's seconds for one case of every engine,
    phase and schedule kind (batched prefill, GEMV decode, gpt-fast e2e, served e2e), at arbitrary figures."""
    from rooflaw.constraints.fit_arrays import FlatCases

    cases, _ = load_cases(DATA)
    pick = list({(c.engine, c.phase, c.concurrent, c.workload.batch > 1): c for c in cases}.values())
    assert {c.phase for c in pick} == {"prefill", "decode", "e2e"} and any(c.concurrent for c in pick)
    feats = [fe._features(c, fe.case_device(c)) for c in pick]
    pick, P = fe.params_for(pick, feats)  # a device with kernel curves: its figures fixed
    flat = FlatCases(P, pick, feats)
    for seed in range(3):
        x = np.log(np.random.default_rng(seed).uniform(0.05, 0.95, len(P.names)))
        want = [fe._predict(x, P, c, f) for c, f in zip(pick, feats, strict=True)]
        assert flat.predict(x) == pytest.approx(want, rel=1e-12)
