"""The command line's answer cache (rooflaw.cli.answer_cache): a cached ``solve`` prints what the uncached
computation printed, a changed input is a miss, and a hit loads none of the numerical libraries.

Reference: the same command computed in this process with the answer cache off (the in-process default)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import run_cli

from rooflaw import cache
from rooflaw.cli import answer_cache

ROOT = Path(__file__).resolve().parents[1]
ARGS = ("solve", "--device", "jetson-agx-orin-64gb", "--latency-budget", "20ms")
#: What differs between two runs of one answer: how long it took, and (on a hit) the cache's own note.
TIMING = ("seconds", "timings", "answer_cache")


def _solve(capsys, *extra):
    code, out, err = run_cli(capsys, *ARGS, *extra)
    assert code == 0, err
    return out, err


@pytest.fixture
def answer_dir(tmp_path, monkeypatch):
    """The answer cache on, as on the command line, in a private cache directory."""
    d = tmp_path / "cache"
    monkeypatch.setenv("ROOFLAW_CACHE_DIR", str(d))
    monkeypatch.delenv("ROOFLAW_NO_CACHE", raising=False)
    monkeypatch.setattr(answer_cache, "enabled", True)
    return d


def _answers(d: Path) -> list[Path]:
    return sorted(d.glob("answer-solve-*.pkl"))


def test_cached_json_answer_equals_the_uncached_one(capsys, tmp_path, monkeypatch):
    reference, _ = _solve(capsys, "--json")  # the answer cache is off in-process: computed
    ref = json.loads(reference)
    d = tmp_path / "cache"
    monkeypatch.setenv("ROOFLAW_CACHE_DIR", str(d))
    monkeypatch.setattr(answer_cache, "enabled", True)
    first = json.loads(_solve(capsys, "--json")[0])  # a miss: computed and stored
    assert len(_answers(d)) == 1 and "answer_cache" not in first
    hit = json.loads(_solve(capsys, "--json")[0])
    assert hit["answer_cache"]["hit"] is True and hit["answer_cache"]["seconds"] >= 0
    strip = lambda o: {k: v for k, v in o.items() if k not in TIMING}  # noqa: E731
    assert strip(hit) == strip(first) == strip(ref)
    assert hit["architecture"] == ref["architecture"] and hit["loss"] == ref["loss"]


def test_cached_table_equals_the_uncached_one_but_for_the_timing_line(capsys, answer_dir):
    first, _ = _solve(capsys)
    hit, _ = _solve(capsys)
    timing = [ln for ln in hit.splitlines() if ln.startswith("solved in")]
    assert len(timing) == 1 and "read from the answer cache" in timing[0]
    assert [ln for ln in hit.splitlines() if not ln.startswith("solved in")] == [
        ln for ln in first.splitlines() if not ln.startswith("solved in")
    ]


def test_a_changed_budget_or_file_is_a_miss(capsys, answer_dir, tmp_path):
    a = json.loads(_solve(capsys, "--json")[0])
    b = json.loads(_solve(capsys, "--json", "--latency-budget", "25ms")[0])  # the last --latency-budget counts
    assert "answer_cache" not in b and len(_answers(answer_dir)) == 2
    assert b["latency_s"]["decode"] > a["latency_s"]["decode"]  # a looser budget buys a slower, better model
    catalog = ROOT / "rooflaw" / "devices" / "catalog" / "jetson-agx-orin-64gb.toml"
    device = tmp_path / "orin.toml"
    device.write_text(catalog.read_text())
    _solve(capsys, "--json", "--device", str(device))
    assert len(_answers(answer_dir)) == 3
    device.write_text(catalog.read_text().replace('name = "NVIDIA Jetson', 'name = "My Jetson', 1))  # other bytes
    again = json.loads(_solve(capsys, "--json", "--device", str(device))[0])
    assert "answer_cache" not in again and len(_answers(answer_dir)) == 4
    hit = json.loads(_solve(capsys, "--json", "--device", str(device))[0])
    assert hit["answer_cache"]["hit"] is True


def test_no_key_for_a_directory_option_in_process_or_when_the_cache_is_off(tmp_path, monkeypatch, answer_dir):
    assert answer_cache.answer_key("solve", {"space": "paper"}) is not None
    assert answer_cache.answer_key("solve", {"space": str(tmp_path)}) is None  # a directory: not hashed
    monkeypatch.setenv("ROOFLAW_NO_CACHE", "1")
    assert answer_cache.answer_key("solve", {"space": "paper"}) is None
    monkeypatch.delenv("ROOFLAW_NO_CACHE")
    monkeypatch.setattr(answer_cache, "enabled", False)
    assert answer_cache.answer_key("solve", {"space": "paper"}) is None


def test_key_follows_the_package_and_the_options(answer_dir, monkeypatch):
    k = answer_cache.answer_key("solve", {"device": "jetson-agx-orin-64gb", "latency_budget": "20ms"})
    assert k == answer_cache.answer_key("solve", {"latency_budget": "20ms", "device": "jetson-agx-orin-64gb"})
    assert k != answer_cache.answer_key("solve", {"device": "jetson-agx-orin-64gb", "latency_budget": "21ms"})
    monkeypatch.setattr(cache, "package_digest", lambda: "an edited package")
    assert k != answer_cache.answer_key("solve", {"device": "jetson-agx-orin-64gb", "latency_budget": "20ms"})


def test_a_hit_on_the_command_line_loads_no_numerical_library(capsys, answer_dir):
    first, _ = _solve(capsys)  # stored by this process
    probe = (
        "import sys; from rooflaw.cli import main; sys.argv = ['rooflaw', *sys.argv[1:]]; code = main(); "
        "heavy = sorted(m for m in ('numpy', 'sympy', 'pandas', 'scipy', 'cvxpy', 'optuna', 'numba', 'torch', "
        "'matplotlib', 'dask') if m in sys.modules); print('HEAVY', heavy, file=sys.stderr); sys.exit(code)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": os.environ.get("COLUMNS", "80")}
    p = subprocess.run([sys.executable, "-c", probe, *ARGS], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "HEAVY []" in p.stderr, p.stderr
    assert "read from the answer cache" in p.stdout
    assert "loss" in p.stdout and "8" in p.stdout


def test_warnings_travel_with_the_answer(answer_dir, capsys):
    """What a computed answer warned (e.g. a device without a vector roof) is warned again by a cached one."""
    import warnings

    rec = answer_cache.Recorder()
    with rec.catching_warnings():
        warnings.warn("device d gives no fp32 or vector figure", UserWarning, stacklevel=1)
        rec.print("an answer")
    key = answer_cache.answer_key("solve", {"device": "d"})
    answer_cache.store(key, rec)
    hit = answer_cache.load(key)
    assert hit is not None and hit.items == rec.items and hit.warnings == ["device d gives no fp32 or vector figure"]
    with pytest.warns(UserWarning, match="no fp32 or vector figure"):
        answer_cache.replay(hit, cached_seconds=0.001)
    assert "an answer" in capsys.readouterr().out
