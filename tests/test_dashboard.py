"""Optuna Dashboard on a study rooflaw wrote: objective names and each trial's architecture and figures, read back
through the dashboard's HTTP API (a real ``optuna-dashboard`` process on 127.0.0.1, a free port, always killed)."""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from cli_helpers import run_cli, space_file

from rooflaw.solver.search.dashboard import architecture_text, metric_names

pytest.importorskip("optuna_dashboard", reason="optuna-dashboard is not installed (the dev extra)")

DEVICE = "jetson-orin-nano-8gb"
WAIT_S = 60  # the dashboard starts in ~1-3 s; a loaded CI machine gets more


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as r:  # noqa: S310 - a loopback URL this test built
        return json.loads(r.read().decode())


@pytest.fixture
def study(tmp_path, capsys):
    """A study rooflaw wrote to a journal file, and the trials rooflaw reported (CSV)."""
    space = space_file(tmp_path)  # 32 architectures
    log, out = tmp_path / "study.log", tmp_path / "trials.csv"
    code, text, err = run_cli(capsys, "search", "--device", DEVICE, "--space", space, "--allow-extrapolation",
                              "--n-trials", "12", "--storage", f"journal:///{log}", "--study-name", "rl-dash",
                              "--out", out, "--json")  # fmt: skip
    assert code == 0, err
    return log, list(csv.DictReader(out.open())), json.loads(text)


def test_dashboard_reads_names_architectures_and_figures(study):
    log, trials, summary = study
    port = free_port()
    # the console script beside this Python (a venv's bin/ may not be on PATH), else its module
    exe = shutil.which("optuna-dashboard", path=os.path.dirname(sys.executable)) or shutil.which("optuna-dashboard")
    cmd = [exe] if exe else [sys.executable, "-m", "optuna_dashboard._cli"]
    proc = subprocess.Popen(
        [*cmd, str(log), "--host", "127.0.0.1", "--port", str(port), "--quiet", "--server", "wsgiref"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}"
        deadline, listed = time.monotonic() + WAIT_S, None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                listed = get_json(f"{base}/api/studies")
                break
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.2)
        assert listed is not None, f"dashboard did not answer in {WAIT_S} s: {proc.poll()} {proc.stderr.read1()!r}"
        (s,) = [x for x in listed["study_summaries"] if x["study_name"] == "rl-dash"]
        assert s["directions"] == ["minimize", "minimize"]
        detail = get_json(f"{base}/api/studies/{s['study_id']}")
        assert detail["objective_names"] == ["loss", "decode latency (s)"]
        done = [t for t in detail["trials"] if t["state"].lower() == "complete"]
        assert len(done) == len(trials) == summary["trials"] == 12
        for t, row in zip(sorted(done, key=lambda t: t["number"]), trials, strict=True):
            attrs = {a["key"]: a["value"] for a in t["user_attrs"]}
            assert t["number"] == int(row["trial"])
            assert attrs["architecture"] == architecture_text(
                {
                    k: float(row[k])
                    for k in (
                        "layers",
                        "d_model",
                        "heads",
                        "kv_heads",
                        "head_dim",
                        "ffn",
                        "experts",
                        "top_k",
                        "vocab",
                        "tied",
                    )
                }
            )
            assert math.isclose(float(attrs["loss"]), float(row["loss"]), rel_tol=1e-12)
            assert math.isclose(float(attrs["latency_s"]), float(row["latency_s"]), rel_tol=1e-12)
            assert math.isclose(float(attrs["memory_bytes"]), float(row["memory_bytes"]), rel_tol=1e-12)
            assert attrs["feasible"] == row["feasible"]
            assert [float(v) for v in t["values"]] == [float(row["loss"]), float(row["latency_s"])]
        with urllib.request.urlopen(f"{base}/csv/{s['study_id']}", timeout=10) as r:  # noqa: S310
            header = r.read().decode().splitlines()[0]
        assert "loss" in header and "decode latency (s)" in header
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def test_metric_names_follow_objectives_and_phase():
    assert metric_names(("loss", "latency", "memory", "energy"), "prefill") == [
        "loss", "prefill latency (s)", "memory (bytes)", "energy (J)"]  # fmt: skip
    assert metric_names(("loss", "throughput"), "decode") == ["loss", "throughput (tokens/s)"]
