"""Issue 28 (Reliability II): a hypothesis fuzz target for every file parser (device, system, space, architecture,
Hugging Face config, the CSVs of ``fit`` and ``devices fit-efficiency``) and for the CLI options that take a
number, a size or a duration. Every outcome is a valid object (exit 0/3) or one line naming what is wrong (exit 2):
never another exception, a traceback, a hang or a silently changed value. Small budgets: the module runs in CI in
about 20 s."""

from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rooflaw as rl
from rooflaw.cli import main
from rooflaw.errors import RooflawError

ROOT = Path(__file__).resolve().parents[1]
H100_LINES = (ROOT / "rooflaw/devices/catalog/h100-sxm.toml").read_text().splitlines()
SLOW_OK = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
QUICK = settings(max_examples=12, deadline=None, suppress_health_check=SLOW_OK)

#: TOML values, hostile ones first: huge and negative integers, NaN/inf, nesting, strings where numbers go.
TOML_VALUES = st.one_of(
    st.sampled_from(["0", "-1", "1e400", "nan", "inf", "-inf", "99999999999999999999", str(2**63), "true", '"8"',
                     "[]", "[[[[1]]]]", "{}", '"\\u0000"', "1.5", "3", "[1, 2]", "[0, 0]", '"x"',
                     "[" * 40 + "]" * 40]),
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
)  # fmt: skip


def _one_line(e: BaseException) -> None:
    text = str(e)
    assert text and "\n" not in text, text


def _cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


def _cli_outcome(rc: int, err: str, allowed=(0, 2, 3)) -> None:
    assert rc in allowed, err
    assert "Traceback" not in err and "internal error" not in err, err
    if rc:
        assert len(err.strip().splitlines()) == 1, err


# ---- device files ---------------------------------------------------------------------------------------------
@QUICK
@given(st.lists(st.tuples(st.integers(0, len(H100_LINES) - 1), TOML_VALUES), min_size=1, max_size=4))
def test_fuzz_device_file(tmp_path_factory, edits):
    lines = list(H100_LINES)
    for i, value in edits:
        if " = " in lines[i] and not lines[i].lstrip().startswith("#"):
            lines[i] = lines[i].split(" = ", 1)[0] + " = " + value
    f = tmp_path_factory.mktemp("dev") / "d.toml"
    f.write_text("\n".join(lines) + "\n")
    try:
        dev = rl.load_device_file(f)
    except RooflawError as e:
        _one_line(e)
        return
    dev = dev[0] if isinstance(dev, list) else dev
    assert all(math.isfinite(v) and v > 0 for v in dev.peak_flops.values())
    assert 0 < dev.memory_bandwidth < math.inf and 0 < dev.memory_capacity < math.inf
    assert 0 < dev.sm_count <= 2**31 - 1 if dev.sm_count else True


# ---- system files ----------------------------------------------------------------------------------------------
SYSTEM_KEYS = ["count", "node_size", "link_gbs", "link_latency_us", "scale_out_gbs", "scale_out_latency_us",
               "link_pj_per_bit"]  # fmt: skip
SYSTEM_BASE = {"device": '"h100-sxm"', "count": "8", "node_size": "8", "link_gbs": "450", "link_latency_us": "2",
               "scale_out_gbs": "50", "scale_out_latency_us": "5"}  # fmt: skip


@QUICK
@given(st.dictionaries(st.sampled_from(SYSTEM_KEYS), TOML_VALUES, max_size=3))
def test_fuzz_system_file(tmp_path_factory, change):
    text = "\n".join(f"{k} = {v}" for k, v in {**SYSTEM_BASE, **change}.items()) + "\n"
    f = tmp_path_factory.mktemp("sys") / "s.toml"
    f.write_text(text)
    try:
        s = rl.get_system(str(f))
    except RooflawError as e:
        _one_line(e)
        return
    assert 1 <= s.count <= 2**20 and 1 <= s.node_size <= 2**20
    assert math.isfinite(s.link_bw) and s.link_bw > 0


# ---- space files -----------------------------------------------------------------------------------------------
SPACE_BASE = {"layers": "[2, 4]", "d_model": "[256]", "head_dim": "[64]", "kv_heads": "[1]", "moe": "[[1, 1]]",
              "r_single": "[2]"}  # fmt: skip


@QUICK
@given(st.dictionaries(st.sampled_from([*SPACE_BASE, "vocab", "tied", "ffn_align"]), TOML_VALUES, max_size=3))
def test_fuzz_space_file(tmp_path_factory, change):
    text = "\n".join(f"{k} = {v}" for k, v in {**SPACE_BASE, **change}.items()) + "\n"
    f = tmp_path_factory.mktemp("space") / "s.toml"
    f.write_text(text)
    try:
        sp = rl.Space.from_toml(f)
    except RooflawError as e:
        _one_line(e)
        return
    assert 0 <= sp.size <= 10**15
    if 0 < sp.size <= 64:
        cols = sp.columns_at(__import__("numpy").arange(sp.size))
        assert (cols["layers"] > 0).all() and (cols["d_model"] > 0).all()


# ---- architecture files and Hugging Face configs -------------------------------------------------------------
JSON_VALUES = st.one_of(
    st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.none(),
    st.text(max_size=4), st.lists(st.integers(-3, 9), max_size=3), st.dictionaries(st.text(max_size=2), st.none(),
                                                                                   max_size=2),
)  # fmt: skip
ARCH_KEYS = ["layers", "d_model", "heads", "kv_heads", "head_dim", "ffn", "experts", "top_k", "vocab", "tied"]


@QUICK
@given(st.dictionaries(st.sampled_from(ARCH_KEYS), JSON_VALUES, max_size=4), st.sampled_from([".json", ".toml"]))
def test_fuzz_architecture_file(tmp_path_factory, change, suffix):
    base = {"layers": 4, "d_model": 256, "heads": 4}
    data = {**base, **change}
    f = tmp_path_factory.mktemp("arch") / f"a{suffix}"
    if suffix == ".json":
        f.write_text(json.dumps(data))
    else:
        f.write_text("\n".join(f"{k} = {json.dumps(v)}" for k, v in data.items() if v is not None) + "\n")
    try:
        arch = rl.from_file(f)
    except RooflawError as e:
        _one_line(e)
        return
    assert 0 < arch.layers <= 2**31 - 1 and 0 < arch.d_model <= 2**31 - 1
    assert arch.params_total > 0 and math.isfinite(arch.params_total)


HF_KEYS = ["hidden_size", "num_attention_heads", "num_hidden_layers", "num_key_value_heads", "vocab_size",
           "intermediate_size", "head_dim", "sliding_window", "sliding_window_pattern", "text_config",
           "num_local_experts", "num_experts_per_tok", "tie_word_embeddings"]  # fmt: skip


@QUICK
@given(st.dictionaries(st.sampled_from(HF_KEYS), JSON_VALUES, max_size=3),
       st.sampled_from(["object", "string", "list", "number"]))  # fmt: skip
def test_fuzz_hf_config(tmp_path_factory, change, top):
    from tests.hf_configs import GEMMA3_1B

    data = {**GEMMA3_1B, **change}
    f = tmp_path_factory.mktemp("hf") / "config.json"
    f.write_text(json.dumps({"object": data, "string": "gemma", "list": [data], "number": 3}[top]))
    try:
        arch = rl.from_hf_config(f)
    except RooflawError as e:
        _one_line(e)
        return
    assert top == "object"
    assert 0 < arch.layers <= 2**31 - 1 and arch.params_total > 0


# ---- CSV tables: fit and fit-efficiency ------------------------------------------------------------------------
CSV_CELLS = st.sampled_from(["1", "2.5e9", "0", "-3", "nan", "inf", "", "x", "1e400", "99999999999999999999"])


@settings(max_examples=8, deadline=None, suppress_health_check=SLOW_OK)
@given(st.lists(st.tuples(CSV_CELLS, CSV_CELLS, CSV_CELLS), max_size=6), st.booleans())
def test_fuzz_fit_csv(tmp_path_factory, rows, header):
    f = tmp_path_factory.mktemp("fit") / "runs.csv"
    lines = (["N,D,loss"] if header else []) + [",".join(r) for r in rows]
    f.write_text("\n".join(lines) + "\n")
    rc, _, err = _cli(["fit", str(f), "--law", "chinchilla-hoffmann", "--json"])
    _cli_outcome(rc, err, (0, 2))


PUBLISHED = Path("/work/shared/data/measured/published.csv")
NUMBER_COLUMNS = ["batch", "input_tokens", "output_tokens", "prefill_ms", "decode_tok_s", "decode_ms_per_token"]


@pytest.mark.skipif(not PUBLISHED.is_file(), reason="needs shared/data/measured/published.csv")
@settings(max_examples=8, deadline=None, suppress_health_check=SLOW_OK)
@given(st.lists(st.tuples(st.sampled_from(NUMBER_COLUMNS), CSV_CELLS), max_size=3))
def test_fuzz_fit_efficiency_csv(tmp_path_factory, edits):
    import csv

    from rooflaw.constraints.published import load_cases

    with PUBLISHED.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    use = [r for r in rows if r["use_for_validation"].startswith("Y") and r["prefill_ms"]][:2]
    use = [dict(use[0]), dict(use[1], **dict(edits))]
    f = tmp_path_factory.mktemp("pub") / "p.csv"
    with f.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(use)
    try:
        cases, _ = load_cases(f)
    except RooflawError as e:
        _one_line(e)
        return
    assert cases and all(math.isfinite(c.measured_s) and c.measured_s > 0 for c in cases)


# ---- CLI options that take a number, a size or a duration --------------------------------------------------------
NUMBERS = st.one_of(
    st.sampled_from(["0", "-1", "nan", "inf", "-inf", "1e400", "99999999999999999999", str(2**63), str(2**63 - 1),
                     "2**10", "1_000", "٣", "0x10", " 7", "", "1e-400", "-0"]),
    st.integers(-(2**66), 2**66).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)  # fmt: skip
UNITS = st.sampled_from(["", "ms", "s", "us", "GB", "GiB", "Gb", "MB", "J", "mJ", "kJ", "W", "%", "ns", "h"])
EVALUATE = ["evaluate", "--device", "jetson-orin-nano-8gb", "--arch", "layers=2,d_model=256,heads=4,kv_heads=1"]
NUMBER_OPTIONS = {
    "--batch": EVALUATE, "--input-tokens": EVALUATE, "--output-tokens": EVALUATE, "--tokens": EVALUATE,
    "--m": ["gemm", "--n", "64", "--k", "64"], "--n": ["gemm", "--m", "64", "--k", "64"],
    "--k": ["gemm", "--m", "64", "--n", "64"],
}  # fmt: skip
BUDGET_OPTIONS = ["--latency-budget", "--memory-budget", "--energy-budget"]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(NUMBER_OPTIONS)), NUMBERS)
def test_fuzz_cli_number_options(option, value):
    rc, out, err = _cli([*NUMBER_OPTIONS[option], f"{option}={value}", "--json"])
    _cli_outcome(rc, err, (0, 2))
    if rc == 0:  # accepted: the value used is exactly the value given (never clipped, wrapped or rounded)
        d = json.loads(out)
        used = d[option[2:]] if option in ("--m", "--n", "--k") else d["workload"].get(option[2:].replace("-", "_"))
        if option == "--tokens":
            return
        from decimal import Decimal

        assert Decimal(value.replace("_", "").strip()) == Decimal(used), (option, value, used)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(BUDGET_OPTIONS), NUMBERS, UNITS)
def test_fuzz_cli_size_and_duration_options(option, value, unit):
    from tests.cli_helpers import TINY_SPACE

    path = Path("/tmp") / "rooflaw-fuzz-tiny-space.toml"
    if not path.exists():
        path.write_text(TINY_SPACE)
    rc, _, err = _cli(["solve", "--device", "h100-sxm", "--space", str(path), "--method", "exhaustive",
                       f"{option}={value}{unit}", "--json"])  # fmt: skip
    _cli_outcome(rc, err, (0, 2, 3))


#: --n-trials values: hostile ones, and valid ones small enough to run (a valid 10⁹ would search for days)
TRIALS = st.one_of(st.sampled_from(["0", "-1", "nan", "1e400", "99999999999999999999", str(2**63), "2**3", "",
                                    "1.5", "٣"]), st.integers(-3, 4).map(str))  # fmt: skip


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.tuples(st.sampled_from(["--n-jobs", "--seed", "--workers", "--align"]), NUMBERS),
                 st.tuples(st.just("--n-trials"), TRIALS)))  # fmt: skip
def test_fuzz_cli_count_options(option_value):
    """Counts refused before any work: only the validation runs (a valid value is given a budget nothing meets)."""
    option, value = option_value
    from tests.cli_helpers import TINY_SPACE

    path = Path("/tmp") / "rooflaw-fuzz-tiny-space.toml"
    if not path.exists():
        path.write_text(TINY_SPACE)
    if option in ("--n-jobs", "--align"):
        argv = ["frontier", "--device", "h100-sxm", "--space", str(path), "--latency-budget", "1ns"]
    else:
        argv = ["search", "--device", "h100-sxm", "--space", str(path), "--latency-budget", "1ns", "--n-trials", "2"]
    rc, _, err = _cli([*argv, f"{option}={value}"])
    _cli_outcome(rc, err, (0, 2, 3))
