"""Random hostile inputs thrown at the API and the CLI: every outcome is a valid object or a one-line
``RooflawError`` -- never another exception, a hang, a silently altered value or code from the input running."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rooflaw.arch.load import from_hf_config, from_spec
from rooflaw.arch.space import Space
from rooflaw.cli import main
from rooflaw.devices.catalog import parse_device_dict
from rooflaw.errors import Infeasible, RooflawError
from rooflaw.objectives.law import parse_law
from rooflaw.units import parse_bytes, parse_time

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MARKER = "/tmp/rooflaw-hypothesis-marker"

LAW_ALPHABET = "NDElrdAaBb()+-*/^.0123456789e _,[]'\"ｅｖａｌ:@"
LAW_WORDS = st.sampled_from(["N", "D", "E", "A", "alpha", "l", "d", "r", "rho", "log", "exp", "sqrt", "max", "eval",
                             "__import__", "open", "10", "0.34", "1e400", "**", "*", "/", "+", "-", "(", ")", ",",
                             "lambda", ".", "__class__", "'x'", "[", "]", "ｅｖａｌ", "^", "0"])  # fmt: skip


def _one_line(e: BaseException) -> None:
    assert "\n" not in str(e) and str(e)


@FAST
@given(st.one_of(st.text(LAW_ALPHABET, max_size=40), st.lists(LAW_WORDS, max_size=14).map("".join)))
def test_random_law_text_parses_or_is_refused(text):
    try:
        law = parse_law(text)
    except RooflawError as e:
        _one_line(e)
        return
    finally:
        assert not os.path.exists(MARKER)
    assert law.variables and not law.expr.has(__import__("sympy").I)
    vals = {k: 1.5 for k in law.params}
    x = {v: np.array([2.0, 3e9]) for v in law.variables}
    y = law.with_params(vals).evaluate(x)
    assert y.dtype == float and y.shape == (2,)  # a real array: complex values would be NaN, never cast


HF_KEYS = ["hidden_size", "num_attention_heads", "num_hidden_layers", "num_key_value_heads", "vocab_size",
           "intermediate_size", "head_dim", "tie_word_embeddings"]  # fmt: skip
ANY_VALUE = st.one_of(
    st.integers(-3, 5000), st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.text(max_size=5),
    st.lists(st.integers(0, 9), max_size=2), st.none(),
)  # fmt: skip


@FAST
@given(st.dictionaries(st.sampled_from(HF_KEYS), ANY_VALUE, max_size=5))
def test_random_hf_configs_import_exactly_or_are_refused(change):
    cfg = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4, "num_hidden_layers": 2,
           "num_key_value_heads": 1, "vocab_size": 1000, "intermediate_size": 512, **change}  # fmt: skip
    try:
        a = from_hf_config(cfg)
    except RooflawError as e:
        _one_line(e)
        return
    # accepted: every count is exactly what the file says (no truncation, no bool, no 0 -> MHA)
    for key, got in (("hidden_size", a.d_model), ("num_hidden_layers", a.layers), ("vocab_size", a.vocab),
                     ("num_attention_heads", a.heads), ("intermediate_size", a.ffn)):  # fmt: skip
        v = cfg[key]
        assert not isinstance(v, bool) and float(v) == got
    kv = cfg.get("num_key_value_heads")
    assert a.kv_heads == (a.heads if kv is None else kv)


@FAST
@given(st.lists(st.tuples(st.sampled_from(["layers", "d_model", "heads", "kv_heads", "ffn", "experts", "top_k",
                                           "vocab", "tied", "colour", ""]),
                          st.sampled_from(["2", "4", "0", "-1", "2.5", "true", "1e30", "x", "", "256", "nan"])),
                max_size=7))  # fmt: skip
def test_random_arch_specs(pairs):
    spec = ",".join(f"{k}={v}" for k, v in pairs)
    try:
        a = from_spec(spec)
    except RooflawError as e:
        _one_line(e)
        return
    for k, v in pairs:
        if k in ("layers", "d_model", "heads"):
            assert getattr(a, k) == int(v)


DIM = st.one_of(
    st.lists(st.integers(1, 600), min_size=1, max_size=4),
    st.builds(lambda a, n, s: {"start": a, "stop": a + n, "step": s}, st.integers(1, 300), st.integers(0, 10**13),
              st.integers(1, 10**6)),
    st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.text(max_size=2)),
             min_size=1, max_size=2),
)  # fmt: skip


@FAST
@given(DIM, DIM, st.lists(st.sampled_from([32, 64, 128]), min_size=1, max_size=2, unique=True),
       st.lists(st.floats(0.01, 1e40), min_size=1, max_size=3))  # fmt: skip
def test_random_spaces_are_sized_exactly_or_refused(layers, d_model, head_dim, r_single):
    data = {"layers": layers, "d_model": d_model, "head_dim": head_dim, "kv_heads": [1, "heads"],
            "moe": [[1, 1], [4, 2]], "r_single": r_single}  # fmt: skip
    try:
        sp = Space.from_mapping(data, name="h")
    except RooflawError as e:
        _one_line(e)
        return
    # brute force: distinct valid (d, head_dim, kv, ffn) widths x (E, K) x layers
    widths = set()
    for d in sp.d_model:
        for hd in sp.head_dim:
            if d % hd == 0:
                h = d // hd
                for kv in {1, h}:
                    for r in sp.r_single:
                        widths.add((d, hd, kv, int(sp.ffn_for(d, r))))
    assert sp.size == len(widths) * 2 * len(sp.layers)
    assert all(0 < f <= 2**31 for *_, f in widths)


UNITS = st.sampled_from(["ms", "s", "us", "GB", "Gb", "gb", "MiB", "", "J"])


@FAST
@given(st.one_of(st.text(max_size=8), st.floats(allow_nan=True, allow_infinity=True),
                 st.builds(lambda x, u: f"{x}{u}", st.floats(-1e3, 1e300), UNITS)))  # fmt: skip
def test_random_units(text):
    for parse in (parse_time, parse_bytes):
        try:
            v = parse(text, "budget")
        except RooflawError as e:
            _one_line(e)
            continue
        assert math.isfinite(v) and v > 0


DEVICE_FIELDS = st.fixed_dictionaries(
    {"id": st.just("h")},
    optional={k: ANY_VALUE for k in ("fp16_tflops", "fp32_tflops", "fp8_tflops", "fp8_tops", "bandwidth_gbs",
                                     "memory_gb", "power_idle_w", "power_peak_w", "energy_per_flop_pj", "tile",
                                     "sm_count")},
)  # fmt: skip


@FAST
@given(DEVICE_FIELDS)
def test_random_device_files(data):
    try:
        devs = parse_device_dict(dict(data), where="h.toml")
    except RooflawError as e:
        _one_line(e)
        return
    for d in devs:
        assert all(math.isfinite(v) and v > 0 for v in d.peak_flops.values())
        assert math.isfinite(d.memory_bandwidth) and math.isfinite(d.memory_capacity)
        if d.power_idle is not None and d.power_peak is not None:
            assert d.power_idle <= d.power_peak


TINY = {"layers": [2, 4, 8], "d_model": [256, 512], "head_dim": [64], "kv_heads": [1, "heads"],
        "moe": [[1, 1], [4, 1]], "r_single": [1, 2]}  # fmt: skip


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.floats(1e-6, 1.0), st.floats(1e6, 1e10), st.sampled_from(["prefill", "decode", "total"]))
def test_random_budgets_match_brute_force(latency, memory, phase):
    from rooflaw import api
    from rooflaw.solver import Problem, solve

    sp = Space.from_mapping(TINY, name="tiny")
    prob = Problem(law=api.get_law("paper-2602.10377"), device=api.get_device("jetson-orin-nano-8gb"), space=sp,
                   latency_budget=latency, memory_budget=memory, phase=phase)  # fmt: skip
    df = prob.evaluate(sp.columns_at(np.arange(sp.size)))
    feasible = df[df["feasible"]]
    try:
        res = solve(prob, "exhaustive")
    except Infeasible as e:
        _one_line(e)
        assert feasible.empty
        return
    assert not feasible.empty
    assert res.loss == pytest.approx(float(feasible["loss"].min()), rel=1e-9)


CLI_ARGS = st.lists(st.sampled_from([
    ["--batch", "0"], ["--batch", "3"], ["--input-tokens", "-5"], ["--output-tokens", "2"], ["--precision", "int8"],
    ["--precision", "fp3"], ["--law", "2 + 400/N**0.3"], ["--law", "(ｅｖａｌ)('1')"], ["--law", "10**10**10"],
    ["--tokens", "nan"], ["--attention", "fused"], ["--attention", "magic"], ["--preset", "paper"], ["--json"],
]), max_size=4)  # fmt: skip


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(CLI_ARGS)
def test_random_cli_evaluate(opts):
    import contextlib
    import io

    argv = ["evaluate", "--device", "jetson-orin-nano-8gb", "--arch", "layers=2,d_model=256,heads=4,kv_heads=1"]
    for o in opts:
        argv += o
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    assert rc in (0, 2)
    assert "Traceback" not in err.getvalue()
    if rc:
        assert len(err.getvalue().strip().splitlines()) == 1
    elif "--json" in argv:
        text = out.getvalue()
        json.loads(text)
        assert "NaN" not in text and "Infinity" not in text
