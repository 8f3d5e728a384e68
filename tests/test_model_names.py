"""A model read from a file or a Hugging Face model folder is named by its config, never by the folder it sits in."""

from __future__ import annotations

import json

import pytest

import rooflaw as rl
from rooflaw.arch.load import MODELS_DIR
from tests.cli_helpers import run_cli

QWEN = json.loads((MODELS_DIR / "qwen2.5-0.5b.json").read_text())


def _folder(tmp_path, **extra):
    d = tmp_path / "hf"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({**QWEN, **extra}))
    return d


@pytest.mark.parametrize(
    ("extra", "name"),
    [
        ({"_name_or_path": "Qwen/Qwen2.5-0.5B"}, "Qwen/Qwen2.5-0.5B"),  # a hub id, as is
        ({"_name_or_path": "/home/me/models/qwen-ft/"}, "qwen-ft"),  # a local path: its last component
        ({"architectures": ["Qwen2ForCausalLM"]}, "Qwen2ForCausalLM"),  # no name: the model class
        ({}, "qwen2"),  # nor a class: the model type
    ],
)
def test_folder_and_file_named_by_config(tmp_path, extra, name):
    d = _folder(tmp_path, **extra)
    assert rl.from_hf_config(d).name == name  # the folder
    assert rl.from_hf_config(d / "config.json").name == name  # the file
    assert rl.from_file(d / "config.json").name == name


def test_named_file_keeps_its_stem(tmp_path):
    p = tmp_path / "my-model.json"
    p.write_text(json.dumps(QWEN))
    assert rl.from_hf_config(p).name == "my-model"


def test_cli_takes_a_model_folder(tmp_path, capsys):
    d = _folder(tmp_path, _name_or_path="Qwen/Qwen2.5-0.5B")
    code, out, err = run_cli(capsys, "evaluate", "--device", "jetson-orin-nano-8gb", "--hf-config", d, "--json")
    assert code == 0, err
    got = json.loads(out)
    assert got["arch"]["name"] == "Qwen/Qwen2.5-0.5B"
    ref = rl.evaluate(rl.from_hf_config("qwen2.5-0.5b"), "jetson-orin-nano-8gb")
    assert got["params_total"] == ref.params_total and got["decode_s"] == pytest.approx(ref.decode_s)
    code, out, err = run_cli(capsys, "evaluate", "--device", "jetson-orin-nano-8gb", "--hf-config", d)
    assert code == 0 and out.startswith("Qwen/Qwen2.5-0.5B on ") and "hf on" not in out


def test_folder_without_config_is_one_line_error(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    code, out, err = run_cli(capsys, "evaluate", "--device", "jetson-orin-nano-8gb", "--hf-config", tmp_path / "empty")
    assert code == 2 and "config.json" in err and "no such file" in err and "Traceback" not in err
