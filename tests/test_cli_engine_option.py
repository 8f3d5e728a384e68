"""``--engine`` on ``compare`` and ``plot``: the named profile prices the model (and the space), as on ``evaluate``."""

from __future__ import annotations

import json

import pytest

from rooflaw import Problem, evaluate, from_spec, get_device
from rooflaw.cli import main

DEV = "jetson-agx-orin-64gb"
SPEC = "layers=4,d_model=512,heads=8,kv_heads=2,head_dim=64,ffn=1536,vocab=32000"


def test_compare_engine_prices_model_and_space(capsys, tmp_path):
    space = tmp_path / "tiny.toml"
    space.write_text('name = "tiny"\nlayers = [2, 4, 8]\nd_model = [256, 512, 1024]\nhead_dim = [64]\n'
                     'kv_heads = [2]\nmoe = [[1, 1]]\nr_single = [3]\nvocab = [32000]\ntied = [false]\n'
                     '[fixed]\ngated = true\n')  # fmt: skip
    args = ["compare", "--arch", SPEC, "--device", DEV, "--space", str(space), "--n-jobs", "1", "--json"]
    res = {}
    for eng in ("ideal", "llama.cpp"):
        assert main([*args, "--engine", eng]) == 0
        res[eng] = json.loads(capsys.readouterr().out)
        assert res[eng]["engine"] == eng
        rep = evaluate(from_spec(SPEC), get_device(DEV), engine=eng)
        assert res[eng]["model"]["latency_s"] == pytest.approx(rep.values["decode_s"], rel=1e-12)
    assert main(args) == 0  # the default is the device's own engine
    assert json.loads(capsys.readouterr().out)["engine"] == Problem(device=DEV).engine == "tensorrt-llm"
    # the pure roofline is faster than a fitted engine, for the model and for the space's fastest point
    assert res["ideal"]["model"]["latency_s"] < res["llama.cpp"]["model"]["latency_s"]
    assert main([*args, "--engine", "warp-drive"]) == 2
    assert "engine='warp-drive'" in capsys.readouterr().err


@pytest.mark.parametrize("eng", ["ideal", "gpt-fast"])
def test_plot_breakdown_engine(capsys, tmp_path, eng):
    out = tmp_path / "b.svg"
    assert main(["plot", "breakdown", "--device", DEV, "--arch", SPEC, "--engine", eng, "--out", str(out)]) == 0
    rep = evaluate(from_spec(SPEC), get_device(DEV), engine=eng)
    text = capsys.readouterr().out
    assert f"prefill {rep.values['prefill_s'] * 1e3:.4g} ms, decode {rep.values['decode_s'] * 1e3:.4g} ms" in text


def test_plot_roofline_engine_and_bad_engine(capsys, tmp_path):
    out = tmp_path / "r.svg"
    assert main(["plot", "roofline", "--device", DEV, "--arch", SPEC, "--engine", "ideal", "--out", str(out)]) == 0
    assert out.stat().st_size > 0
    bad = tmp_path / "bad.svg"
    assert main(["plot", "roofline", "--device", DEV, "--arch", SPEC, "--engine", "warp-drive", "--out", str(bad)]) == 2
    assert "engine='warp-drive'" in capsys.readouterr().err and not bad.exists()
