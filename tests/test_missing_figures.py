"""One rule for figures a device does not give: energy is n/a everywhere, an energy budget is refused up front
naming the missing field, and a missing vector roof is a stated fallback (one warning line per run)."""

from __future__ import annotations

import json
import warnings

import pytest

import rooflaw as rl
from rooflaw.errors import RooflawError, RooflawWarning
from tests.cli_helpers import run_cli

NPU = """schema = 1
id = "npu-x"
name = "Made-up NPU"
kind = "npu"
fp16_tflops = 40
bandwidth_gbs = 100
memory_gb = 8
"""


@pytest.fixture
def npu(tmp_path):
    p = tmp_path / "npu.toml"
    p.write_text(NPU)
    return p


def test_energy_is_na_in_every_output(npu, capsys):
    code, out, err = run_cli(capsys, "evaluate", "--device", npu, "--hf-config", "qwen2.5-0.5b", "--json")
    assert code == 0 and json.loads(out)["energy_j"] is None
    code, out, err = run_cli(capsys, "evaluate", "--device", npu, "--hf-config", "qwen2.5-0.5b")
    assert code == 0 and "n/a (device has no power figures)" in out and "nan" not in out
    code, out, err = run_cli(capsys, "solve", "--device", npu, "--latency-budget", "20ms", "--phase", "decode")
    assert code == 0 and "n/a (device has no power figures)" in out and "nan J" not in out
    code, out, err = run_cli(capsys, "solve", "--device", npu, "--latency-budget", "20ms", "--json")
    assert code == 0 and json.loads(out)["energy_j"] is None


@pytest.mark.parametrize("method", ["closed-form", "exhaustive", "optuna"])
def test_energy_budget_refused_up_front(npu, capsys, method):
    code, out, err = run_cli(capsys, "solve", "--device", npu, "--energy-budget", "2J", "--method", method)
    assert code == 2, err
    assert "energy_budget=2.0" in err and "power_peak_w" in err and "inf" not in err and "exhaustive" not in err


def test_energy_budget_refused_by_the_api(npu):
    dev = rl.load_device_file(npu)
    with pytest.raises(RooflawError, match="power_peak_w"):
        rl.Problem(device=dev, energy_budget="2J")
    rl.Problem(device="jetson-orin-nano-8gb", energy_budget="2J")  # a device with power: accepted


def test_vector_fallback_is_stated_once(npu, capsys):
    code, out, err = run_cli(capsys, "evaluate", "--device", npu, "--hf-config", "qwen2.5-0.5b")
    assert code == 0
    lines = [ln for ln in err.splitlines() if "no fp32 or vector figure" in ln]
    assert len(lines) == 1 and "fp16 roof (40 TFLOP/s" in lines[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RooflawWarning)  # a device with an fp32 roof: no such warning
        rl.evaluate(rl.from_hf_config("qwen2.5-0.5b"), "jetson-orin-nano-8gb")
    dev = rl.load_device_file(npu)
    assert dev.vector_flops == 40e12 and "fp32_tflops" in dev.vector_fallback
