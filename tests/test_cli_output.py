"""Output a person reads: 80-column tables that cut no number, units everywhere, one default precision, budgets
that need a unit, a hypervolume reference fixed by the problem."""

import inspect
import json

import pandas as pd
import pytest
import typer

from rooflaw import Problem, evaluate, get_device, parse_bytes, parse_time
from rooflaw.cli import app, main
from rooflaw.cli.common import DEFAULT_PRECISION, arch_table, console
from rooflaw.errors import RooflawError
from rooflaw.solver import search


def _out(capsys, *args):
    code = main(list(args))
    c = capsys.readouterr()
    return code, c.out, c.err


def test_devices_list_fits_80_columns_and_cuts_no_number(capsys):
    code, out, _ = _out(capsys, "devices", "list")
    assert code == 0
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "…" not in out
    h100 = get_device("h100-sxm")
    row = next(line for line in out.splitlines() if line.startswith("│ h100-sxm "))
    assert f"{h100.peak_flops['fp16'] / 1e12:.4g}" in row and f"{h100.memory_bandwidth / 1e9:.4g}" in row


def test_devices_list_wide_shows_every_column(capsys):
    code, out, _ = _out(capsys, "devices", "list", "--wide")
    assert code == 0 and "…" not in out
    for col in ("name", "provenance", "fp8", "fp4", "fp32"):
        assert col in out
    assert get_device("h100-sxm").name in out


def test_devices_list_chosen_columns(capsys):
    code, out, _ = _out(capsys, "devices", "list", "--columns", "id,fp8,name")
    header = next(line for line in out.splitlines() if "id" in line and "fp8" in line)
    assert "name" in header and "BW" not in header and "fp16" not in header
    code, _, err = _out(capsys, "devices", "list", "--columns", "id,nope")
    assert code == 2 and "columns=" in err and "provenance" in err


def test_gemm_prints_units(capsys):
    code, out, _ = _out(capsys, "gemm", "--m", "1", "--n", "4096", "--k", "4096", "--dtype", "fp16")
    assert code == 0
    assert "FLOP/B" in out and "µs" in out and "MB" in out and "%" in out
    assert max(len(line) for line in out.splitlines()) <= 80


def test_arch_table_tells_rows_apart_and_says_when_it_truncates():
    base = {"layers": 4, "d_model": 768, "heads": 6, "kv_heads": 1, "head_dim": 128, "ffn": 384, "experts": 1,
            "top_k": 1, "vocab": 32000, "loss": 4.0, "latency_s": 0.005}  # fmt: skip
    df = pd.DataFrame([{**base, "tied": t, "loss": 4.0 + i} for i, t in enumerate([0, 1, 0])])
    t, same = arch_table("rows", df, [("loss", lambda r: f"{r['loss']:.4f}")], 2)
    headers = [c.header for c in t.columns]
    assert headers == ["tied", "loss"]  # the only architecture column that differs
    assert "first 2 of 3" in t.title
    assert "l 4" in same and "d 768" in same and "vocab 32000" in same
    with console.capture() as cap:
        console.print(t)
    assert "yes" in cap.get() and "no" in cap.get()


def test_one_default_precision_everywhere():
    cmd = typer.main.get_command(app)
    seen = {}
    for name, sub in cmd.commands.items():
        subs = sub.commands.items() if hasattr(sub, "commands") else [(name, sub)]
        for n, c in subs:
            for p in c.params:
                if p.name == "precision":
                    seen[n] = p.default
    assert {"evaluate", "solve", "frontier", "search", "compare", "roofline", "breakdown"} <= set(seen)
    assert set(seen.values()) == {DEFAULT_PRECISION}
    assert inspect.signature(evaluate).parameters["precision"].default == DEFAULT_PRECISION
    # a Problem given no precision (nor a scenario) takes the same default
    assert Problem(device="jetson-agx-orin-64gb").precision.name == DEFAULT_PRECISION


@pytest.mark.parametrize("opt", ["--latency-budget", "--memory-budget", "--energy-budget"])
def test_bare_budget_needs_a_unit(capsys, opt):
    code, _, err = _out(capsys, "solve", "--device", "jetson-agx-orin-64gb", opt, "20")
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "needs a unit" in lines[0] and opt[2:] in lines[0]


def test_units_api():
    assert parse_time("20ms") == pytest.approx(0.02)
    assert parse_time(0.02) == 0.02  # a Python number is SI already
    assert parse_bytes("8GiB") == 8 * 2**30
    with pytest.raises(RooflawError, match="needs a unit"):
        parse_time("20")


def test_hypervolume_reference_is_fixed_by_the_problem():
    prob = Problem(law="paper-2602.10377", device=get_device("jetson-agx-orin-64gb"), latency_budget=0.05)
    a = search(prob, sampler="random", n_trials=12, seed=1)
    b = search(prob, sampler="random", n_trials=12, seed=2)
    assert a.reference_point == b.reference_point
    assert a.reference_point[1] == 0.05  # the latency budget
    free = Problem(law="paper-2602.10377", device=get_device("jetson-agx-orin-64gb"))
    c = search(free, sampler="random", n_trials=12, seed=3)
    assert c.reference_point[0] > c.frontier["loss"].max()


def test_search_table_fits_80_columns(capsys):
    code, out, _ = _out(capsys, "search", "--device", "jetson-agx-orin-64gb", "--n-trials", "15", "--sampler",
                        "random")  # fmt: skip
    assert code == 0
    assert max(len(line) for line in out.splitlines()) <= 80 and "…" not in out
    code, out, _ = _out(capsys, "search", "--device", "jetson-agx-orin-64gb", "--n-trials", "15", "--json")
    assert json.loads(out)["reference_point"]
