"""``solve`` dispatcher and ``rooflaw solve``."""

from __future__ import annotations

import json

import pytest

from rooflaw import Infeasible, get_device, solve
from rooflaw.cli import main
from rooflaw.solver import Problem, closed_form

LAW = "paper-2602.10377"
DEV = get_device("jetson-agx-orin-64gb")


@pytest.mark.parametrize("method", ["closed-form", "gp"])
def test_solve_returns_feasible_aligned_architecture(method):
    p = Problem(LAW, DEV, latency_budget=0.02, phase="decode")
    res = solve(p, method, explain_result=True)
    assert res.architecture is not None and p.space.contains(res.architecture)
    assert res.latency_s["decode"] <= 0.02
    assert res.regime == "decode-latency" and res.binding == "latency"
    x, b = res.continuous, p.space.bounds()
    assert sorted(x) == sorted(b) and all(b[k][0] * (1 - 1e-9) <= x[k] <= b[k][1] * (1 + 1e-9) for k in b), x
    # the reported continuous loss is the law at the reported point
    assert res.continuous_loss == pytest.approx(float(p.law.evaluate({**x, "d_m": x["d"] / x["gqa"]})), rel=1e-12)
    if method == "closed-form":
        assert x == closed_form(p).x
    assert res.explain


def test_closed_form_explain_has_derivation_and_latex():
    res = solve(Problem(LAW, DEV, latency_budget=0.02, phase="decode", memory_budget=1e9), "closed-form",
                explain_result=True)  # fmt: skip
    assert "LaTeX" in res.explain and "l* =" in res.explain


def test_infeasible_names_binding_and_smallest():
    p = Problem(LAW, DEV, latency_budget=0.002, phase="decode")
    with pytest.raises(Infeasible) as e:
        solve(p, "closed-form")
    assert e.value.binding == "latency" and e.value.smallest > 0.002
    assert "for every architecture in space 'paper'" in str(e.value)


def _run(capsys, *args):
    rc = main(["solve", "--device", "jetson-agx-orin-64gb", *args])
    return rc, capsys.readouterr()


def test_cli_json(capsys):
    rc, out = _run(capsys, "--latency-budget", "20ms", "--phase", "decode", "--json")
    assert rc == 0
    obj = json.loads(out.out)
    for k in ("method", "regime", "binding", "continuous", "architecture", "loss", "perplexity", "latency_s",
              "memory_bytes", "energy_j", "seconds"):  # fmt: skip
        assert k in obj
    assert set(obj["latency_s"]) >= {"prefill", "decode", "total"}
    assert set(obj["architecture"]) >= {"layers", "d_model", "heads", "kv_heads", "head_dim", "ffn", "experts", "top_k"}


def test_cli_explain_and_gp(capsys):
    rc, out = _run(capsys, "--latency-budget", "50ms", "--phase", "total", "--memory-budget", "2GB", "--method", "gp",
                   "--explain")  # fmt: skip
    assert rc == 0 and "geometric program" in out.out


def test_cli_exit_codes(capsys):
    assert _run(capsys, "--latency-budget", "1ms")[0] == 3
    rc, out = _run(capsys, "--latency-budget", "1ms")
    assert "decode latency ≥" in out.err
    assert _run(capsys, "--latency-budget", "-1ms")[0] == 2
    assert _run(capsys, "--latency-budget", "20ms", "--phase", "sideways")[0] == 2
    assert _run(capsys, "--latency-budget", "20ms", "--method", "magic")[0] == 2


def test_infeasible_relaxation_reports_the_discrete_space_minimum_under_the_full_model():
    import pytest as _pt

    from rooflaw import get_device
    from rooflaw.errors import Infeasible
    from rooflaw.solver import Problem, solve

    dev = get_device("jetson-agx-orin-64gb")
    p = Problem("paper-2602.10377", dev, latency_budget=1e-3, phase="decode")
    frame = p.space.to_frame()
    smallest = float(p.evaluate(frame)["decode_s"][p.evaluate(frame)["memory_bytes"] <= dev.memory_capacity].min())
    for method in ("closed-form", "gp"):
        with _pt.raises(Infeasible) as e:
            solve(p, method)
        assert e.value.binding == "latency"
        assert e.value.smallest == _pt.approx(smallest, rel=1e-9)
        assert f"{smallest * 1e3:.4g} ms" in str(e.value)
