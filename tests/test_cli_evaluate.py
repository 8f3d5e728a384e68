"""`rooflaw evaluate` and `rooflaw gemm`: JSON schema, numbers consistent with the API, exit codes."""

import json
import subprocess
import sys

import pytest
from cli_helpers import run_cli

from rooflaw import evaluate, from_hf_config, get_device

KEYS = {
    "params_total",
    "params_active",
    "weight_bytes",
    "kv_cache_bytes",
    "memory_bytes",
    "fits_in_memory",
    "prefill_s",
    "decode_s",
    "ttft_s",
    "tpot_s",
    "total_s",
    "energy_j",
    "preset",
    "device",
    "ops",
}


def test_evaluate_json_matches_api(capsys):
    code, out, _ = run_cli(
        capsys,
        "evaluate",
        "--hf-config",
        "qwen2.5-0.5b",
        "--device",
        "jetson-agx-orin-64gb",
        "--precision",
        "fp16",
        "--json",
    )
    assert code == 0
    d = json.loads(out)
    assert set(d) >= KEYS
    rep = evaluate(from_hf_config("qwen2.5-0.5b"), get_device("jetson-agx-orin-64gb"), precision="fp16")
    assert d["params_total"] == 494_032_768
    assert d["total_s"] == pytest.approx(rep.total_s)
    assert d["tpot_s"] == pytest.approx(d["decode_s"] / 16)
    assert {o["phase"] for o in d["ops"]} == {"prefill", "decode"}
    assert {"name", "phase", "flops", "bytes", "seconds", "bound"} <= set(d["ops"][0])
    assert sum(o["seconds"] for o in d["ops"]) == pytest.approx(d["total_s"])


def test_evaluate_spec_and_law(capsys):
    code, out, _ = run_cli(
        capsys,
        "evaluate",
        "--arch",
        "layers=24,d_model=1024,heads=8,kv_heads=2,head_dim=128,ffn=4096,vocab=32000",
        "--device",
        "h100-sxm",
        "--law",
        "paper-2602.10377",
        "--json",
    )
    assert code == 0
    d = json.loads(out)
    assert d["loss"] == pytest.approx(3.4538, abs=5e-5)


def test_evaluate_table_output(capsys):
    code, out, _ = run_cli(capsys, "evaluate", "--hf-config", "olmoe-1b-7b", "--device", "h100-sxm")
    assert code == 0
    assert "ffn_up" in out and "TPOT" in out


@pytest.mark.parametrize(
    "args, field",
    [
        (["--hf-config", "qwen2.5-0.5b", "--device", "jetson-orin-agx"], "device"),
        (["--hf-config", "qwen2.5-0.5b", "--device", "h100-sxm", "--precision", "int3"], "precision"),
        (["--hf-config", "qwen2.5-0.5b", "--device", "h100-sxm", "--input-tokens", "0"], "input_tokens"),
        (["--arch", "layers=2,d_model=64,heads=4,kv_heads=3", "--device", "h100-sxm"], "kv_heads"),
        (["--arch", "layers=2,d_model=64,heads=4,experts=2,top_k=3", "--device", "h100-sxm"], "top_k"),
        (["--hf-config", "/no/such/config.json", "--device", "h100-sxm"], "file"),
        (["--device", "h100-sxm"], "arch"),
        (["--hf-config", "qwen2.5-0.5b", "--device", "h100-sxm", "--preset", "exact"], "preset"),
    ],
)
def test_evaluate_bad_input_exits_2_with_one_line(capsys, args, field):
    code, out, err = run_cli(capsys, "evaluate", *args)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and field in lines[0] and "Traceback" not in err


def test_unsupported_model_type_exits_2(capsys, tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "gpt_neox", "hidden_size": 64}))
    code, _, err = run_cli(capsys, "evaluate", "--hf-config", str(cfg), "--device", "h100-sxm")
    assert code == 2 and "model_type" in err


def test_gemm_json_pins_correct_fp32_intensities(capsys):
    code, out, _ = run_cli(capsys, "gemm", "--m", "2048", "--n", "8192", "--k", "512", "--dtype", "fp32", "--json")
    assert code == 0
    d = json.loads(out)
    assert {"flops", "bytes", "arithmetic_intensity", "bound", "seconds", "tile_efficiency", "wave_efficiency"} <= set(
        d
    )
    assert d["arithmetic_intensity"] == pytest.approx(195.05, abs=0.005)
    assert d["bytes"] == (2048 * 512 + 512 * 8192 + 2048 * 8192) * 4


def test_console_script_runs_without_traceback():
    proc = subprocess.run(
        [sys.executable, "-m", "rooflaw", "evaluate", "--device", "nope", "--hf-config", "qwen2.5-0.5b"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "nope" in proc.stderr


@pytest.mark.parametrize("args", [["frontier", "--bogus"], ["evaluate", "--device", "h100-sxm", "--batch", "x"]])
def test_usage_errors_exit_2_without_traceback(capsys, args):
    code, _, err = run_cli(capsys, *args)
    assert code == 2
    assert "Traceback" not in err and err.startswith("rooflaw: error:") and len(err.strip().splitlines()) == 1


def test_evaluate_lists_every_decode_step(capsys):
    code, out, _ = run_cli(capsys, "evaluate", "--hf-config", "qwen2.5-0.5b", "--device", "jetson-agx-orin-64gb",
                        "--output-tokens", "5", "--steps", "--json")  # fmt: skip
    assert code == 0
    d = json.loads(out)
    assert [s["context"] for s in d["steps"]] == [1025, 1026, 1027, 1028, 1029]
    assert sum(s["seconds"] for s in d["steps"]) == pytest.approx(d["decode_s"])
    assert d["steps"][-1]["seconds"] > d["steps"][0]["seconds"]  # the KV cache grows
