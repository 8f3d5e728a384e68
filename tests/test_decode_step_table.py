"""``decode_steps`` / ``decode_step_table``: the vectorised per-step table equals the per-step loop it replaced
(each step evaluated alone as a one-step decode at its own context), on dense, MoE, sliding-window, MLA and
hybrid stacks, both presets, tiles on and off, fused and unfused attention, and an engine profile."""

from __future__ import annotations

import numpy as np
import pytest
from cli_helpers import run_cli

from rooflaw import Workload, decode_steps, evaluate, from_hf_config, get_device
from rooflaw.constraints.steps import decode_step_table

ORIN = get_device("jetson-agx-orin-64gb")
H100 = get_device("h100-sxm")


def _loop(arch, dev, wl, precision="fp16", preset="full", tiles=False, engine=None):
    """The per-step loop ``decode_steps`` ran before it was vectorised."""
    rows = []
    for step in range(1, wl.output_tokens + 1):
        w = Workload(wl.batch, wl.input_tokens + step - 1, 1, wl.attention)
        rep = evaluate(arch, dev, w, precision, preset, tiles, engine)
        rows.append((step, wl.input_tokens + step, rep.decode_s, rep.decode_flops, rep.decode_bytes))
    return np.array(rows)


CASES = [
    ("qwen2.5-0.5b", ORIN, Workload(1, 100, 23), "fp16", "full", False, None),
    ("olmoe-1b-7b", H100, Workload(8, 333, 17, "unfused"), "int8", "full", True, None),
    ("gemma-3-1b", ORIN, Workload(2, 500, 40), "w4a16kv8", "full", False, "ideal"),  # window fills mid-decode
    ("deepseek-v2-lite", H100, Workload(4, 64, 11), "bf16", "full", False, None),  # MLA + MoE + dense first layer
    ("lfm2-350m", ORIN, Workload(1, 50, 9), "fp16", "full", True, None),  # short conv + attention hybrid
    ("llama-3.2-1b", ORIN, Workload(3, 200, 13), "fp16", "paper", False, None),
]


@pytest.mark.parametrize("name,dev,wl,prec,preset,tiles,engine", CASES, ids=[c[0] for c in CASES])
def test_table_equals_the_per_step_loop(name, dev, wl, prec, preset, tiles, engine):
    a = from_hf_config(name)
    ref = _loop(a, dev, wl, prec, preset, tiles, engine)
    tab = decode_step_table(a, dev, wl, prec, preset, tiles, engine, chunk=5)  # several chunks
    got = np.column_stack([tab[k] for k in ("step", "context", "seconds", "flops", "bytes")])
    assert got.shape == ref.shape
    np.testing.assert_array_equal(got[:, :2], ref[:, :2])
    np.testing.assert_allclose(got[:, 2:], ref[:, 2:], rtol=1e-13, atol=0)
    rows = decode_steps(a, dev, wl, prec, preset, tiles, engine)
    assert [r["step"] for r in rows] == list(range(1, wl.output_tokens + 1))
    assert all(isinstance(r["context"], int) for r in rows)
    assert [r["seconds"] for r in rows] == tab["seconds"].tolist()


def test_steps_sum_to_the_closed_form_decode_at_a_million_steps():
    # the closed-form sum over S_out steps (evaluate) and the per-step table agree at a size the loop never reached
    a = from_hf_config("qwen2.5-0.5b")
    wl = Workload(1, 128, 1_000_000)
    tab = decode_step_table(a, ORIN, wl)
    rep = evaluate(a, ORIN, wl)
    assert tab["context"][-1] == 128 + 1_000_000
    assert np.all(np.diff(tab["seconds"]) >= 0)  # a longer context never costs less
    assert tab["seconds"].sum() == pytest.approx(rep.decode_s, rel=1e-9)
    assert tab["flops"].sum() == pytest.approx(rep.decode_flops, rel=1e-9)
    assert tab["bytes"].sum() == pytest.approx(rep.decode_bytes, rel=1e-9)


QWEN = ("evaluate", "--hf-config", "qwen2.5-0.5b", "--device", "jetson-agx-orin-64gb")


def test_cli_steps_csv_and_summary_above_the_json_listing_limit(capsys, tmp_path):
    import json

    from rooflaw.cli import evaluate as ev

    n = ev.JSON_STEPS + 1
    path = tmp_path / "steps.csv"
    code, out, err = run_cli(capsys, *QWEN, "--output-tokens", str(n), "--steps-csv", str(path), "--json")
    assert code == 0, err
    d = json.loads(out)
    assert "steps" not in d  # too many to list in JSON: the summary and the CSV carry them
    s = d["steps_summary"]
    assert s["count"] == n and s["last_context"] == 1024 + n and s["listed_in_json"] is False
    assert s["seconds_total"] == pytest.approx(d["decode_s"], rel=1e-9)
    tab = np.loadtxt(path, delimiter=",", skiprows=1)
    assert tab.shape == (n, 5)
    np.testing.assert_array_equal(tab[:, 0], np.arange(1, n + 1))
    assert tab[:, 2].sum() == pytest.approx(d["decode_s"], rel=1e-9)
    assert path.read_text().splitlines()[0] == "step,context,seconds,flops,bytes"


def test_cli_steps_table_shows_both_ends(capsys):
    code, out, _ = run_cli(capsys, *QWEN, "--output-tokens", "1000", "--steps")
    assert code == 0
    assert "decode steps (1,000)" in out and "… 800 more" in out
    head, tail = out.split("… 800 more")
    assert " 1025 " in head and " 1124 " in head and " 1125 " not in out  # steps 1..100 (contexts 1025..1124)
    assert " 1925 " in tail and " 2024 " in tail and " 1924 " not in out  # steps 901..1000


def test_cli_steps_over_the_limit_is_refused_with_the_reason(capsys):
    from rooflaw.cli import evaluate as ev

    code, _, err = run_cli(capsys, *QWEN, "--output-tokens", str(ev.MAX_STEPS + 1), "--steps")
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "output-tokens" in err and f"{ev.MAX_STEPS:,}" in err
