"""Prompts padded to the batch's longest (TensorRT Edge-LLM) versus packed: the expected longest prompt, which
published rows pay for it, and the fit's linearised padded prefill against rooflaw.evaluate at the padded length."""

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from rooflaw.constraints import fit_efficiency as fe
from rooflaw.constraints.engines import BUILTIN_ENGINES
from rooflaw.constraints.published import load_cases
from rooflaw.constraints.serving import expected_max_normal, padded_prompt_ratio
from rooflaw.errors import RooflawError

DATA = Path("/work/shared/data/measured/published.csv")
for cand in (Path(__file__).resolve().parents[2] / "shared/data/measured/published.csv", DATA):
    if cand.is_file():
        DATA = cand
needs_data = pytest.mark.skipif(not DATA.is_file(), reason="published.csv not present")


def test_expected_longest_of_normal_samples():
    """E[max of n standard normals]: 0 for one, 1/√π for two (closed form), and n = 8 by Monte Carlo."""
    assert expected_max_normal(1) == 0.0
    assert expected_max_normal(2) == pytest.approx(1 / math.sqrt(math.pi), rel=1e-9)
    draws = np.random.default_rng(0).standard_normal((100_000, 8)).max(axis=1)
    assert expected_max_normal(8) == pytest.approx(draws.mean(), abs=4 * draws.std() / math.sqrt(len(draws)))
    assert padded_prompt_ratio(8, 0.0) == 1.0 and padded_prompt_ratio(1, 0.7) == 1.0
    assert padded_prompt_ratio(8, 0.5) == pytest.approx(1 + 0.5 * expected_max_normal(8))
    with pytest.raises(RooflawError, match="spread"):
        padded_prompt_ratio(8, -0.1)


def test_only_edge_llm_pads():
    """TensorRT Edge-LLM pads each prompt to the batch's longest (its runtime's setUpForPrefillExecution); the
    others pack (TensorRT-LLM removes input padding; vLLM and llama.cpp pack tokens)."""
    pads = {n for n, e in BUILTIN_ENGINES.items() if e.padding == "longest"}
    assert pads == {"tensorrt-edge-llm"}


@needs_data
def test_padded_rows_and_the_fit_predictor_against_evaluate():
    """Only Edge-LLM's batch-8 prompts of dataset prompts are padded; the fit's linearised padded prefill agrees with
    rooflaw.evaluate at the padded prompt length (to the attention's S² curvature and the rounding of S_pad), and
    padding costs more than packing, at most the padded-to-mean token ratio more."""
    cases, _ = load_cases(DATA)
    padded = [c for c in cases if fe.padded(c)]
    assert padded and all(c.engine == "tensorrt-edge-llm" and c.workload.batch == 8 for c in padded)
    assert not any(fe.padded(c) for c in cases if c.source.startswith(("SMOLHUB", "JETSONAILAB", "XJD")))
    pick = padded[:3]
    feats = [fe._features(c, fe.case_device(c)) for c in pick]
    pick, P = fe.params_for(pick, feats)
    x = np.log(np.linspace(0.2, 0.8, len(P.names)))
    fams: dict = {}
    engs: dict = {}
    prompts: dict = {}
    for (scope, owner, key), v in zip(P.names, np.exp(x), strict=True):
        if scope == "prompts":
            prompts[key] = float(v)
        else:
            (fams if scope == "family" else engs).setdefault(owner, {})[key] = float(v)
    assert prompts.get("spread", 0) > 0
    res = fe.FitResult(fams, engs, {}, 0.0, prompts=prompts)
    packed = dataclasses.replace(res, prompts={"spread": 0.0})
    for c, f in zip(pick, feats, strict=True):
        got, want = fe._predict(x, P, c, f), fe.predict(c, res)
        assert got == pytest.approx(want, rel=0.02), c.row_id
        # padding adds work, at most in proportion to the padded tokens (weights are read once either way)
        assert 1.0 < want / fe.predict(c, packed) <= padded_prompt_ratio(8, prompts["spread"]) * 1.001
