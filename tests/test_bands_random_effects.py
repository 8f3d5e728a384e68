"""Error bands from held-out residuals: the random-effects figures by hand, calibration by Monte Carlo, nested
coverage, the shipped bands equal to the fit command's output; and the efficiency fit's prior terms (the pooled
centre of the engines' kernel-class factors)."""

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from rooflaw.constraints import bands as BD
from rooflaw.constraints import fit_efficiency as fe
from rooflaw.constraints import fit_held_out as FH
from rooflaw.errors import RooflawError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DATA = Path("/work/shared/data/measured/published.csv")
needs_data = pytest.mark.skipif(not DATA.is_file(), reason="published.csv not present")


def _rows(ys: dict[tuple[str, str], list[float]]) -> list[dict[str, object]]:
    """Held-out rows with log(measured/predicted) = y, i.e. error = predicted/measured − 1 = e^−y − 1."""
    return [{"phase": p, "held_out": g, "error": math.exp(-y) - 1.0} for (p, g), v in ys.items() for y in v]


HAND = {("decode", "a"): [0.0, 0.2], ("decode", "b"): [0.4, 0.6], ("decode", "c"): [0.1], ("prefill", "a"): [0.3, 0.5]}


def test_random_effects_figures_by_hand():
    """Group means a 0.1, b 0.5, c 0.1 (decode), a 0.4 (prefill). Within: SS 0.02 + 0.02 + 0 + 0.02 over 3 dof ->
    σ² = 0.02. Decode centre 0.7/3; Σ (ȳ − μ)² = 2·(0.1 − 0.7/3)² + (0.5 − 0.7/3)² = 0.32/3, less σ²·(2/3)·(1/2 + 1/2
    + 1) = 0.08/3 -> 0.08 over 2 dof: τ² = 0.04. Decode var μ = (3·0.04 + 0.02·2)/9; prefill (one source)
    0.04 + 0.02/2. Student's t with 2 dof: t(0.9) = 0.8/sqrt(0.18)."""
    re = BD.random_effects(_rows(HAND))
    assert re.sigma2 == pytest.approx(0.02) and re.tau2 == pytest.approx(0.04) and re.df == 2
    assert re.centre == pytest.approx({"decode": 0.7 / 3, "prefill": 0.4})
    s_dec = math.sqrt(0.04 + 0.02 + (3 * 0.04 + 0.02 * 2) / 9)
    s_pre = math.sqrt(0.04 + 0.02 + 0.04 + 0.02 / 2)
    assert (re.spread("decode"), re.spread("prefill")) == pytest.approx((s_dec, s_pre))
    t9 = 0.8 / math.sqrt(0.18)
    bands = BD.from_rows(_rows(HAND))
    lo, hi = bands["decode"].band(0.8)
    assert (lo, hi) == pytest.approx((math.exp(0.7 / 3 - t9 * s_dec), math.exp(0.7 / 3 + t9 * s_dec)), rel=1e-9)
    assert bands["prefill"].at(0.5) == pytest.approx(math.exp(0.4), rel=1e-9) and bands["decode"].rows == 5


def test_one_group_per_phase_and_bad_rows():
    """One source per phase: no between-source spread to estimate, τ² = 0 on the within-source dof; a single row
    cannot make a band; an error at or below −1 (a negative prediction) is refused by name."""
    re = BD.random_effects(_rows({("decode", "a"): [0.0, 0.2, 0.4]}))
    assert re.tau2 == 0.0 and re.df == 2 and re.sigma2 == pytest.approx(0.04)
    with pytest.raises(RooflawError, match="rows"):
        BD.random_effects(_rows({("decode", "a"): [0.1]}))
    with pytest.raises(RooflawError, match="error"):
        BD.random_effects([{"phase": "decode", "held_out": "a", "error": -1.0}])


def test_band_holds_its_level_for_a_new_source_monte_carlo():
    """Rows drawn from the model the bands assume (source shift τ = 0.25, row noise σ = 0.1, 7 sources of 2-9 rows):
    the 80 % band built from them holds 80 % of the rows of a new source drawn the same way (1 000 draws)."""
    rng = np.random.default_rng(7)
    inside = n = 0
    for _ in range(1000):
        ys = {("decode", f"s{i}"): list(0.1 + rng.normal(0, 0.25) + rng.normal(0, 0.1, rng.integers(2, 10)))
              for i in range(7)}  # fmt: skip
        re = BD.random_effects(_rows(ys))
        half = stats.t.ppf(0.9, re.df) * re.spread("decode")
        new = 0.1 + rng.normal(0, 0.25) + rng.normal(0, 0.1, 5)
        inside += int(np.sum(np.abs(new - re.centre["decode"]) <= half))
        n += 5
    assert inside / n == pytest.approx(0.80, abs=0.03)


def test_coverage_bands_each_source_without_it():
    """Coverage counts each source's rows against the band rebuilt without it: from the other sources' rows, or from
    ``nested`` rows. Source c (y 0.1) against a and b's band; a nested set far off moves every row out."""
    rows = _rows(HAND)
    cov = BD.coverage(rows)
    want = {"decode": [0, 0], "prefill": [0, 0]}
    for g in ("a", "b", "c"):
        bands = BD.from_rows([r for r in rows if r["held_out"] != g])
        for r in (r for r in rows if r["held_out"] == g):
            b = bands.get(str(r["phase"]))
            if b is None:  # prefill: only a has it
                continue
            x = 1.0 / (1.0 + float(r["error"]))
            want[str(r["phase"])][0] += int(b.at(0.1) <= x <= b.at(0.9))
            want[str(r["phase"])][1] += 1
    assert cov["decode"]["rows"] == 5 and "prefill" not in cov
    assert cov["decode"]["inside"] == want["decode"][0]
    far = _rows({("decode", "x"): [3.0, 3.1], ("decode", "y"): [3.2, 3.0]})
    cov_far = BD.coverage(rows, nested={"a": far, "b": far, "c": far})
    assert cov_far["decode"] == {"rows": 5, "inside": 0, "share": 0.0}


def test_bands_toml_round_trip(tmp_path):
    bands = BD.from_rows(_rows(HAND), "hand rows")
    p = tmp_path / "bands.toml"
    BD.write(bands, "hand rows", "by hand", p)
    data = tomllib.loads(p.read_text(encoding="utf-8"))
    assert data["phase"]["decode"]["df"] == 2
    assert data["phase"]["decode"]["ratio"] == pytest.approx(bands["decode"].ratio, rel=1e-3)
    assert data["phase"]["prefill"]["centre"] == pytest.approx(0.4, rel=1e-3)


# ---- the efficiency fit's priors ---------------------------------------------------------------------------------
def test_prior_residuals_by_hand():
    """A figure one spread factor above its median costs 1 (log 2 / log 2 for a factor-2 prior, not log 2 / log log
    2); a pooled factor's median is the shared centre, whose own prior residual follows it."""
    mu = np.log([1.0, 3e-4, 1.0])  # a pooled factor, pass_s, the shared centre
    sd = np.log([2.0, 5.0, 2.0])
    z = np.log([0.5, 3e-4 * 5.0, 0.25])
    r = fe.prior_residuals(z, mu, sd, np.array([1.0, 0.0]))
    # factor 0.5 around centre 0.25: log 2 / log 2 = 1; pass_s × 5: 1; centre 0.25 around 1: −2
    assert r == pytest.approx([1.0, 1.0, -2.0])
    assert fe.prior_residuals(z[:2], mu[:2], sd[:2], np.array([0.0, 0.0])) == pytest.approx([-1.0, 1.0])


@needs_data
def test_pooled_centre_is_where_its_gradient_vanishes():
    """On SMOLHUB's rows (llama.cpp: dense GEMM, dequantising GEMM and unfused attention factors) the fitted centre
    makes the robust loss's derivative in it zero: Σ_k ρ'(r_k) r_k = ρ'(r_c) r_c, with r_k = log(f_k / c) / log 2,
    r_c = log c / log 2 and soft-L1's weight ρ'(r) = 1 / sqrt(1 + r²)."""
    from rooflaw.constraints.published import load_cases

    cases, _ = load_cases(DATA)
    res = fe.fit([c for c in cases if c.source == "SMOLHUB-NANO-SUPER"])
    c = res.factor_mean
    f = [res.engines["llama.cpp"][k] for k in fe.POOLED if k in res.engines["llama.cpp"]]
    assert len(f) == 3 and c != 1.0
    r = [math.log(x / c) / math.log(2.0) for x in f]
    rc = math.log(c) / math.log(2.0)
    lhs = sum(x / math.sqrt(1 + x * x) for x in r)
    assert lhs == pytest.approx(rc / math.sqrt(1 + rc * rc), abs=2e-3)
    # the dense-GEMM factor, which no SMOLHUB row exercises (GGUF: every linear layer dequantises), sits at the centre
    assert res.engines["llama.cpp"]["compute_factor"] == pytest.approx(c, rel=1e-3) and min(f) < c


@needs_data
def test_shipped_bands_are_the_fit_command_output():
    """bands.toml holds the bands of the leave-one-source-out residuals of the current fit (what ``devices
    fit-efficiency --write-catalog`` writes)."""
    from rooflaw.constraints.published import load_cases

    cases, _ = load_cases(DATA)
    want = BD.from_rows(FH.held_out(cases, "source"))
    got = BD.shipped()
    assert set(got) == set(want)
    for p, b in want.items():
        assert got[p].ratio == pytest.approx(b.ratio, rel=2e-3), p
        assert (got[p].centre, got[p].spread, got[p].df) == pytest.approx((b.centre, b.spread, b.df), rel=2e-3)


def test_an_engine_no_row_ran_on_gets_its_priors():
    """A fit whose rows never ran an engine (its only source or board held out) prices it at the figures' priors --
    host overheads at their medians, an own-kernel engine's class factors at the shared centre -- not at the pure
    roofline's zero overheads and unit factors; an engine the curves measured (vLLM) keeps its kernels at 1."""
    res = fe.FitResult({}, {}, {}, 0.0, factor_mean=0.4)
    edge = res.engine("tensorrt-edge-llm")
    assert (edge.pass_s, edge.layer_s) == (fe.PRIORS["pass_s"][0], fe.PRIORS["layer_s"][0])
    assert (edge.compute_factor, edge.mixed_factor, edge.gemv_factor, edge.memory_factor) == (0.4, 0.4, 0.4, 1.0)
    assert edge.attention_factor == 1.0  # fused attention: no factor of its own
    assert edge.provenance["gemv_factor"] == "prior"
    assert res.engine("llama.cpp").attention_factor == 0.4  # unfused attention
    vllm = res.engine("vllm")
    assert (vllm.compute_factor, vllm.mixed_factor, vllm.pass_s) == (1.0, 1.0, fe.PRIORS["pass_s"][0])
    fitted = fe.FitResult({}, {"vllm": {"pass_s": 1e-3}}, {}, 0.0, factor_mean=0.4).engine("vllm")
    assert fitted.pass_s == 1e-3 and fitted.layer_s == 0.0  # a fitted engine keeps exactly its fitted figures


@needs_data
def test_unfitted_prompt_spread_takes_its_prior():
    """A padded batch-8 prefill predicted by a fit without padded rows pads to the prior spread's expected longest
    prompt (0.3: serving.padded_prompt_ratio), not to equal prompts."""
    import dataclasses

    from rooflaw.constraints.published import load_cases
    from rooflaw.constraints.serving import padded_prompt_ratio

    cases, _ = load_cases(DATA)
    c = next(c for c in cases if fe.padded(c))
    res = fe.FitResult({}, {}, {}, 0.0, factor_mean=0.4)
    s_pad = round(c.workload.input_tokens * padded_prompt_ratio(c.workload.batch, fe.PRIORS["spread"][0]))
    assert s_pad > c.workload.input_tokens
    at_prior = dataclasses.replace(res, prompts={"spread": fe.PRIORS["spread"][0]})
    assert fe.predict(c, res) == pytest.approx(fe.predict(c, at_prior), rel=1e-12)
    assert fe.predict(c, res) > fe.predict(c, dataclasses.replace(res, prompts={"spread": 0.0}))
