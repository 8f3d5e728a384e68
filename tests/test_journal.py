"""rooflaw's journal file (``--storage study.log``): appends reach the file at once, under the lock, so other
processes read them; ``fsync`` is batched (at most one per interval, and one when asked)."""

from __future__ import annotations

import os
import subprocess
import sys

import optuna
import pytest

from rooflaw.solver.search.journal import journal_backend


def _add_trials(storage, n: int) -> None:
    study = optuna.create_study(storage=storage, study_name="s")
    for i in range(n):
        study.add_trial(optuna.trial.create_trial(params={"x": float(i)}, distributions={
            "x": optuna.distributions.FloatDistribution(0, 10)}, value=float(i)))  # fmt: skip


def test_journal_file_is_read_by_another_process_at_once(tmp_path):
    """Appends reach the file before their batched fsync: a second process sees every trial so far."""
    path = str(tmp_path / "j.log")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    _add_trials(optuna.storages.JournalStorage(journal_backend(path, sync_every_s=3600.0)), 5)  # no fsync meanwhile
    code = ("import optuna; from optuna.storages.journal import JournalFileBackend as B;"
            f"s = optuna.load_study(study_name='s', storage=optuna.storages.JournalStorage(B({path!r})));"
            "print(sorted(t.value for t in s.trials))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[0.0, 1.0, 2.0, 3.0, 4.0]"


@pytest.mark.parametrize(("every", "want"), [(3600.0, 0), (0.0, None)])
def test_fsync_is_batched(tmp_path, monkeypatch, every, want):
    """With a long interval no append calls fsync (``sync()`` then calls it once); with none, every append does."""
    calls = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: calls.append(fd) or real(fd))
    backend = journal_backend(str(tmp_path / "j.log"), sync_every_s=every)
    appends = []
    orig = backend.append_logs
    backend.append_logs = lambda logs: appends.append(len(logs)) or orig(logs)
    _add_trials(optuna.storages.JournalStorage(backend), 4)
    assert len(appends) >= 4
    assert len(calls) == (len(appends) if want is None else want)
    backend.sync()
    assert len(calls) == (len(appends) if want is None else 1)
