"""`rooflaw evaluate --system/--layout/--batch sweep/--max-batch/--pareto-plot`: JSON fields, API agreement, exits."""

import json
from pathlib import Path

import pytest
from cli_helpers import run_cli

import rooflaw as R

MODELS = Path(R.__file__).parent / "arch" / "models"
SERVING_KEYS = {
    "memory_per_device_bytes",
    "comm_s_prefill",
    "comm_s_decode",
    "tokens_per_s",
    "tokens_per_s_per_user",
    "tokens_per_s_per_device",
    "joules_per_token",
    "ttft_s",
    "tpot_s",
    "fits",
    "notes",
    "layout",
}


def test_system_layout_json_matches_api(capsys):
    code, out, _ = run_cli(
        capsys,
        "evaluate",
        "--hf-config",
        str(MODELS / "llama-3-70b.json"),
        "--system",
        "h100-sxm:8",
        "--layout",
        "tp=8",
        "--precision",
        "bf16",
        "--batch",
        "8",
        "--json",
    )
    assert code == 0
    d = json.loads(out)
    assert set(d) >= SERVING_KEYS and d["fits"] and d["devices"] == 8
    ref = R.evaluate_layout(
        R.from_hf_config(MODELS / "llama-3-70b.json"),
        R.get_system("h100-sxm:8"),
        "tp=8",
        R.Workload(8, 1024, 16),
        "bf16",
    )
    for k in ("ttft_s", "tpot_s", "memory_per_device_bytes", "comm_s_decode", "tokens_per_s_per_device"):
        assert d[k] == ref[k]


def test_one_device_does_not_fit_and_sweep_with_max_batch_and_plot(capsys, tmp_path):
    code, out, _ = run_cli(
        capsys,
        "evaluate",
        "--hf-config",
        str(MODELS / "mixtral-8x7b.json"),
        "--system",
        "h100-sxm:1",
        "--precision",
        "bf16",
        "--json",
        "--max-batch",
    )
    d = json.loads(out)
    assert code == 0 and not d["fits"] and d["max_batch"] == 0
    png = tmp_path / "pareto.png"
    code, out, _ = run_cli(
        capsys,
        "evaluate",
        "--hf-config",
        str(MODELS / "mixtral-8x7b.json"),
        "--system",
        "h100-sxm:8",
        "--layout",
        "ep=8,dp_attn=8",
        "--precision",
        "bf16",
        "--batch",
        "8:64",
        "--max-batch",
        "--pareto-plot",
        str(png),
        "--json",
    )
    d = json.loads(out)
    assert code == 0 and [r["batch"] for r in d["sweep"]] == [8, 16, 32, 64] and d["max_batch"] > 64
    assert png.stat().st_size > 1000 and d["pareto_batches"]
    assert all(r["tokens_per_s"] > 0 for r in d["sweep"])


def test_table_output(capsys):
    code, out, _ = run_cli(
        capsys,
        "evaluate",
        "--hf-config",
        str(MODELS / "llama-3-8b.json"),
        "--system",
        "gb200:72",
        "--layout",
        "tp=16",
        "--batch",
        "1,4",
        "--max-batch",
    )
    assert code == 0 and "replicated 2x" in out and "largest batch" in out


@pytest.mark.parametrize(
    "args, word",
    [
        (["--layout", "tp=3"], "does not divide heads"),
        (["--layout", "tp=16"], "needs 16 devices"),
        (["--layout", "ep=8"], "needs an MoE"),
        (["--layout", "bogus=1"], "unknown key"),
        (["--batch", "0"], "batch"),
        (["--batch", "8", "--layout", "tp=8", "--steps"], "steps"),
        (["--layout", "tp=8", "--preset", "paper"], "preset"),
    ],
)
def test_bad_serving_input_exits_2(capsys, args, word):
    code, _, err = run_cli(
        capsys, "evaluate", "--hf-config", str(MODELS / "llama-3-70b.json"), "--system", "h100-sxm:8", *args
    )
    assert code == 2 and word in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_bad_system_exits_2(capsys):
    code, _, err = run_cli(capsys, "evaluate", "--hf-config", str(MODELS / "llama-3-70b.json"), "--system", "mi300x:8")
    assert code == 2 and "no interconnect" in err


def test_devices_systems_lists_the_catalog(capsys):
    code, out, _ = run_cli(capsys, "devices", "systems", "--json")
    ids = [s["id"] for s in json.loads(out)]
    assert code == 0 and {"hgx-h100", "gb200-nvl72", "jetson-orin-pair", "l4-pcie-8"} <= set(ids)
    assert all(s["source"].startswith("https://") for s in json.loads(out))
