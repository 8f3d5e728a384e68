"""Issue 28 (Reliability II), bad input: deep nesting, FIFOs, integers beyond a C long, NaN and other silently
accepted values, wrong API error types -- each a one-line error naming the field (CLI exit 2), never exit 1,
never a hang, never a silent exit 0."""

from __future__ import annotations

import json
import math
import os
import threading
from pathlib import Path

import pytest

import rooflaw as rl
from rooflaw.errors import ExternalError, RooflawError
from tests.cli_helpers import TINY_SPACE, run_cli
from tests.hf_configs import GEMMA3_1B

ROOT = Path(__file__).resolve().parents[1]
H100 = (ROOT / "rooflaw/devices/catalog/h100-sxm.toml").read_text()
DEEP = 3000  # deeper than Python's recursion limit: json/tomllib would raise RecursionError
BIG = "99999999999999999999"  # > 2**64


def _one_line_exit2(code: int, err: str, *words: str) -> None:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rooflaw: error: "), err
    for w in words:
        assert w in lines[0], (w, lines[0])


def _deep_json() -> str:
    return json.dumps(GEMMA3_1B)[:-1] + ', "x": ' + "[" * DEEP + "]" * DEEP + "}"


def _deep_toml(prefix: str = "") -> str:
    return prefix + "\nx = " + "[" * DEEP + "]" * DEEP + "\n"


@pytest.mark.parametrize(
    "kind",
    ["device", "device-json", "hf-config", "arch-json", "arch-toml", "space", "system"],
)
def test_deeply_nested_files_are_bad_input(tmp_path, capsys, kind):
    gemma = tmp_path / "gemma.json"
    gemma.write_text(json.dumps(GEMMA3_1B))
    if kind == "device":
        f = tmp_path / "dev.toml"
        f.write_text(_deep_toml(H100))
        args = ["evaluate", "--device", f, "--hf-config", gemma]
    elif kind == "device-json":
        f = tmp_path / "dev.json"
        f.write_text('{"id": "x", "nest": ' + "[" * DEEP + "]" * DEEP + "}")
        args = ["evaluate", "--device", f, "--hf-config", gemma]
    elif kind == "hf-config":
        f = tmp_path / "config.json"
        f.write_text(_deep_json())
        args = ["evaluate", "--device", "h100-sxm", "--hf-config", f]
    elif kind == "arch-json":
        f = tmp_path / "arch.json"
        f.write_text('{"layers": ' + "[" * DEEP + "]" * DEEP + "}")
        args = ["evaluate", "--device", "h100-sxm", "--arch-file", f]
    elif kind == "arch-toml":
        f = tmp_path / "arch.toml"
        f.write_text(_deep_toml("layers = 4"))
        args = ["evaluate", "--device", "h100-sxm", "--arch-file", f]
    elif kind == "space":
        f = tmp_path / "space.toml"
        f.write_text(_deep_toml(TINY_SPACE))
        args = ["frontier", "--device", "h100-sxm", "--space", f, "--n-jobs", "1"]
    else:
        f = tmp_path / "system.toml"
        f.write_text(_deep_toml('device = "h100-sxm"\ncount = 8'))
        args = ["evaluate", "--device", "h100-sxm", "--hf-config", gemma, "--system", f]
    code, _, err = run_cli(capsys, *args)
    _one_line_exit2(code, err, str(f), "levels deep")


def test_the_api_refuses_deep_files_and_mappings(tmp_path):
    f = tmp_path / "dev.toml"
    f.write_text(_deep_toml(H100))
    with pytest.raises(RooflawError, match="levels deep"):
        rl.load_device_file(f)
    g = tmp_path / "config.json"
    g.write_text(_deep_json())
    with pytest.raises(RooflawError, match="levels deep"):
        rl.from_hf_config(g)
    cfg: dict = dict(GEMMA3_1B)
    cur = cfg
    for _ in range(100):
        cur["x"] = {}
        cur = cur["x"]
    with pytest.raises(RooflawError, match="config.*levels deep"):
        rl.from_hf_config(cfg)
    with pytest.raises(RooflawError, match="text_config"):
        rl.from_hf_config({"model_type": "gemma3", "text_config": "a string"})


def _in_thread(fn, seconds: float = 20.0):
    """Run ``fn`` on a thread; fail (instead of hanging the suite) if it has not returned in ``seconds``."""
    box: dict = {}
    t = threading.Thread(target=lambda: box.setdefault("v", fn()), daemon=True)
    t.start()
    t.join(seconds)
    return t.is_alive(), box.get("v")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("kind", ["device", "hf-config", "arch-file", "space", "system", "fit", "fit-efficiency"])
def test_a_fifo_is_refused_before_it_is_opened(tmp_path, capsys, kind):
    fifo = tmp_path / ("input.toml" if kind in ("device", "space", "system") else "input.csv")
    if kind in ("hf-config", "arch-file"):
        fifo = tmp_path / "input.json"
    os.mkfifo(fifo)
    args = {
        "device": ["evaluate", "--device", fifo, "--hf-config", "gemma-3-1b"],
        "hf-config": ["evaluate", "--device", "h100-sxm", "--hf-config", fifo],
        "arch-file": ["evaluate", "--device", "h100-sxm", "--arch-file", fifo],
        "space": ["frontier", "--device", "h100-sxm", "--space", fifo, "--n-jobs", "1"],
        "system": ["evaluate", "--device", "h100-sxm", "--hf-config", "gemma-3-1b", "--system", fifo],
        "fit": ["fit", fifo, "--law", "chinchilla-hoffmann"],
        "fit-efficiency": ["devices", "fit-efficiency", fifo],
    }[kind]
    from rooflaw.cli import main

    hung, code = _in_thread(lambda: main([str(a) for a in args]))
    if hung:  # unblock the reader so the thread ends, then fail
        with open(fifo, "w"):
            pass
    assert not hung, f"{kind}: blocked on a FIFO"
    err = capsys.readouterr().err
    _one_line_exit2(code, err, "not a regular file", "FIFO")


def test_a_fifo_in_the_cache_directory_is_not_opened(tmp_path, monkeypatch):
    from rooflaw import cache

    d = tmp_path / "cache"
    monkeypatch.setenv("ROOFLAW_CACHE_DIR", str(d))
    monkeypatch.delenv("ROOFLAW_NO_CACHE", raising=False)
    cache.store("probe", {"a": 1})
    assert cache.load("probe") == {"a": 1}
    real = cache.cache_dir()
    assert real is not None
    (real / "probe.pkl").unlink()
    os.mkfifo(real / "probe.pkl")
    hung, value = _in_thread(lambda: cache.load("probe"), 10)
    assert not hung and value is None
    (real / "key").unlink()
    os.mkfifo(real / "key")
    hung, value = _in_thread(lambda: cache.load("probe"), 10)
    assert not hung and value is None


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_among_the_generated_kernels_is_removed_before_numba_opens_it(tmp_path):
    from rooflaw.cache import _drop_irregular

    pyc = tmp_path / "__pycache__"
    pyc.mkdir()
    os.mkfifo(tmp_path / "kern_abc.py")
    os.mkfifo(pyc / "kern_abc.f-1.py311.nbi")
    (pyc / "kern_abc.f-1.py311.nbc").write_bytes(b"ok")
    os.mkfifo(tmp_path / "other.py")  # another stem: not ours to touch here
    _drop_irregular(tmp_path, "kern_abc")
    assert not (tmp_path / "kern_abc.py").exists() and not (pyc / "kern_abc.f-1.py311.nbi").exists()
    assert (pyc / "kern_abc.f-1.py311.nbc").read_bytes() == b"ok" and (tmp_path / "other.py").exists()


def test_dev_zero_as_a_device_file_is_refused(capsys):
    if not Path("/dev/zero").exists():
        pytest.skip("needs /dev/zero")
    code, _, err = run_cli(capsys, "evaluate", "--device", "/dev/zero", "--hf-config", "gemma-3-1b")
    _one_line_exit2(code, err, "device", "not a regular file")


@pytest.mark.parametrize(
    "args, field",
    [
        (["evaluate", "--device", "h100-sxm", "--arch", f"layers=4,d_model=768,heads=12,ffn={BIG}"], "ffn"),
        (["evaluate", "--device", "h100-sxm", "--arch", f"layers={BIG},d_model=768,heads=12"], "layers"),
        (["gemm", "--m", str(2**63), "--n", "4", "--k", "4"], "m"),
        (["gemm", "--m", str(2**53 + 1), "--n", "4", "--k", "4"], "m"),
        (["solve", "--device", "h100-sxm", "--align", BIG], "align"),
        (["evaluate", "--device", "h100-sxm", "--hf-config", "gemma-3-1b", "--batch", BIG], "batch"),
        (["evaluate", "--device", "h100-sxm", "--hf-config", "gemma-3-1b", "--system", f"h100-sxm:{BIG}"], "system"),
        (["search", "--device", "h100-sxm", "--n-trials", BIG], "n-trials"),
        (["search", "--device", "h100-sxm", "--space", "paper", "--n-trials", "4", "--reference", "nan,1"],
         "reference"),
    ],
)  # fmt: skip
def test_out_of_range_numbers_are_refused_naming_the_field(capsys, args, field):
    code, _, err = run_cli(capsys, *args)
    _one_line_exit2(code, err, field)


@pytest.mark.parametrize(
    "edit, field",
    [
        (("sm_count = { value = 132,", f"sm_count = {{ value = {BIG},"), "sm_count"),
        (("tile = { value = [256, 128],", f"tile = {{ value = [{BIG}, 128],"), "tile"),
        (('id = "h100-sxm"', 'id = "' + "x" * 200 + '"'), "id"),
        (("bandwidth_gbs = 3350", "bandwidth_gbs = 0"), "bandwidth_gbs"),
        (("memory_gb = 80", "memory_gb = 0"), "memory_gb"),
    ],
)
def test_device_file_fields_out_of_range(tmp_path, capsys, edit, field):
    f = tmp_path / "dev.toml"
    assert edit[0] in H100
    f.write_text(H100.replace(edit[0], edit[1]))
    code, _, err = run_cli(capsys, "evaluate", "--device", f, "--hf-config", "gemma-3-1b")
    _one_line_exit2(code, err, field)
    with pytest.raises(RooflawError, match=field):
        rl.load_device_file(f)


def test_a_device_file_of_zero_bytes_and_a_long_device_id(tmp_path, capsys):
    f = tmp_path / "zeros.toml"
    f.write_bytes(b"\0" * 1000)
    code, _, err = run_cli(capsys, "evaluate", "--device", f, "--hf-config", "gemma-3-1b")
    _one_line_exit2(code, err, "device", "not valid TOML")
    for n in (200, 300, 5000):
        code, _, err = run_cli(capsys, "evaluate", "--device", "x" * n, "--hf-config", "gemma-3-1b")
        _one_line_exit2(code, err, "device")


def test_a_moe_pair_beyond_a_c_long_in_a_space(tmp_path, capsys):
    f = tmp_path / "s.toml"
    f.write_text(TINY_SPACE.replace("moe = [[1, 1]]", f"moe = [[{BIG}, 1]]"))
    code, _, err = run_cli(capsys, "frontier", "--device", "h100-sxm", "--space", f, "--n-jobs", "1")
    _one_line_exit2(code, err, "moe")


def test_hf_config_sliding_window_pattern_zero_is_refused(tmp_path, capsys):
    cfg = dict(GEMMA3_1B, sliding_window_pattern=0)
    with pytest.raises(RooflawError, match="sliding_window_pattern"):
        rl.from_hf_config(cfg)
    f = tmp_path / "config.json"
    f.write_text(json.dumps(cfg))
    code, _, err = run_cli(capsys, "evaluate", "--device", "h100-sxm", "--hf-config", f)
    _one_line_exit2(code, err, "sliding_window_pattern")
    f.write_text('"just a string"')
    code, _, err = run_cli(capsys, "evaluate", "--device", "h100-sxm", "--hf-config", f)
    _one_line_exit2(code, err, str(f))


def test_api_arguments_of_the_wrong_type_raise_rooflaw_error():
    with pytest.raises(RooflawError, match="problem"):
        rl.solve("not a problem")
    with pytest.raises(RooflawError, match="fields"):
        rl.from_mapping([])
    law = rl.get_law("chinchilla-hoffmann")
    with pytest.raises(RooflawError, match="data"):
        rl.fit_law(law, 42)
    with pytest.raises(RooflawError, match="data"):
        rl.fit_law(law, {"N": 1.0, "D": 2.0, "loss": 3.0})


def test_hypervolume_refuses_nan_points_and_references():
    assert rl.hypervolume([[1.0, 2.0]], [3.0, 3.0]) == pytest.approx(2.0)  # (3-1)·(3-2)
    with pytest.raises(RooflawError, match="points"):
        rl.hypervolume([[math.nan, 1.0], [1.0, 2.0]], [3.0, 3.0])
    for ref in ([math.nan, 3.0], [math.inf, 3.0]):
        with pytest.raises(RooflawError, match="reference"):
            rl.hypervolume([[1.0, 2.0]], ref)


def test_save_device_toml_refuses_a_missing_directory_and_reports_a_full_disk(tmp_path):
    dev = rl.get_device("h100-sxm")
    with pytest.raises(RooflawError, match="does not exist") as e:
        rl.save_device_toml(dev, tmp_path / "missing" / "d.toml")
    assert not isinstance(e.value, ExternalError)
    assert not (tmp_path / "missing").exists()
    if Path("/dev/full").exists():
        with pytest.raises(ExternalError, match="No space left"):
            rl.save_device_toml(dev, "/dev/full")
    p = rl.save_device_toml(dev, tmp_path / "d.toml")
    assert rl.load_device_file(p).memory_bandwidth == dev.memory_bandwidth


def test_calibrate_out_onto_a_full_disk_exits_4(tmp_path):
    """Writing the measured device fails for a reason outside the user's input: exit 4 (docs/errors.md)."""
    if not Path("/dev/full").exists():
        pytest.skip("needs /dev/full")
    from rooflaw.cli import devices as cli_devices

    dev = rl.get_device("h100-sxm")
    out = tmp_path / "measured.toml"
    out.symlink_to("/dev/full")  # every write there fails with ENOSPC, as on a full disk
    with pytest.raises(ExternalError, match="No space left"):
        cli_devices._write_and_show(dev, out, as_json=True)


PUBLISHED = Path("/work/shared/data/measured/published.csv")


@pytest.mark.skipif(not PUBLISHED.is_file(), reason="needs shared/data/measured/published.csv")
@pytest.mark.parametrize("value", ["nan", "inf", "-5", "0"])
def test_fit_efficiency_refuses_bad_latencies(tmp_path, capsys, value):
    import csv

    with PUBLISHED.open(newline="") as f:
        rows = list(csv.DictReader(f))
    use = [r for r in rows if r["use_for_validation"].startswith("Y") and r["prefill_ms"]][:2]
    use[1] = dict(use[1], prefill_ms=value)
    out = tmp_path / "p.csv"
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(use)
    code, _, err = run_cli(capsys, "devices", "fit-efficiency", out, "--json")
    _one_line_exit2(code, err, "prefill_ms", use[1]["row_id"])
    out.write_text(",".join(rows[0]) + "\n")  # the header only
    code, _, err = run_cli(capsys, "devices", "fit-efficiency", out, "--json")
    _one_line_exit2(code, err, "no usable measurement")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_validate_measured_report_is_read_safely(tmp_path):
    from rooflaw.validate_cuda import measured_rows

    fifo = tmp_path / "report.json"
    os.mkfifo(fifo)
    hung, _ = _in_thread(lambda: pytest.raises(RooflawError, measured_rows, str(fifo)), 10)
    assert not hung
    deep = tmp_path / "deep.json"
    deep.write_text('{"configs": ' + "[" * DEEP + "]" * DEEP + "}")
    with pytest.raises(RooflawError, match="levels deep"):
        measured_rows(str(deep))
