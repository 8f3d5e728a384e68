"""Stale RUNNING trials from other hosts: a trial tagged by another machine cannot be checked by pid, so its
heartbeat decides. Faked in SQLite: trials tagged ``otherhost:<pid>`` with an old, a fresh, or no heartbeat."""

from __future__ import annotations

import socket
import time

import optuna
import pytest
from optuna.trial import TrialState

from rooflaw import Problem, search
from rooflaw.solver.search import safety

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _study(tmp_path):
    return optuna.create_study(storage=f"sqlite:///{tmp_path / 's.db'}", study_name="s")


def _running(study, owner=None, heartbeat=None):
    t = study.ask()
    if owner is not None:
        t.set_user_attr("owner", owner)
    if heartbeat is not None:
        t.set_user_attr("heartbeat", heartbeat)
    return t.number


def _states(study):
    return {t.number: t.state for t in study.get_trials(deepcopy=False)}


def test_other_hosts_trials_are_judged_by_their_heartbeat(tmp_path):
    study = _study(tmp_path)
    now = time.time()
    old = _running(study, "build-node-7:4242", now - safety.STALE_HEARTBEAT_S - 30)
    fresh = _running(study, "build-node-7:4243", now - 5)
    # pid 1 exists on this host too: another host's tag must not be checked against local pids
    old_pid1 = _running(study, "gpu-box:1", now - 10 * safety.STALE_HEARTBEAT_S)
    here_alive = _running(study, f"{socket.gethostname()}:1", now - 10 * safety.STALE_HEARTBEAT_S)
    assert safety.fail_stale_running(study) == 2
    st = _states(study)
    assert st[old] == TrialState.FAIL and st[old_pid1] == TrialState.FAIL
    assert st[fresh] == TrialState.RUNNING
    assert st[here_alive] == TrialState.RUNNING  # pid 1 lives on this host: its owner is alive


def test_a_trial_without_a_heartbeat_falls_back_to_its_start_time(tmp_path, monkeypatch):
    study = _study(tmp_path)
    legacy = _running(study, "old-version-host:99")  # tagged by a rooflaw that wrote no heartbeat
    assert safety.fail_stale_running(study) == 0  # just started
    monkeypatch.setattr(safety.time, "time", lambda: time.time_ns() / 1e9 + safety.STALE_HEARTBEAT_S + 60)
    assert safety.fail_stale_running(study) == 1
    assert _states(study)[legacy] == TrialState.FAIL


def test_a_dead_local_owner_is_failed_at_once_whatever_its_heartbeat(tmp_path):
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()  # a pid that no longer runs
    study = _study(tmp_path)
    n = _running(study, f"{socket.gethostname()}:{p.pid}", time.time())
    assert safety.fail_stale_running(study) == 1
    assert _states(study)[n] == TrialState.FAIL


def test_the_heartbeat_is_refreshed_while_a_long_trial_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(safety, "HEARTBEAT_S", 0.05)
    url = f"sqlite:///{tmp_path / 's.db'}"
    seen = []

    def slow(arch, workload):  # a measured objective that takes a while
        study = optuna.load_study(study_name="s", storage=url)
        t = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))[0]
        first = later = t.user_attrs["heartbeat"]
        # poll (no fixed sleep: a loaded CI machine delays the beating thread): the beat must move past first + 0.2 s
        # while the trial still runs, i.e. it is beaten again and again, not once at the start
        deadline = time.monotonic() + 20.0
        while later <= first + 0.2 and time.monotonic() < deadline:
            time.sleep(0.05)
            later = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))[0].user_attrs["heartbeat"]
        seen.append((first, later, t.user_attrs["owner"]))
        return 0.01

    prob = Problem(device="jetson-agx-orin-64gb", latency_budget="1s")
    search(prob, sampler="random", n_trials=2, seed=0, storage=url, study_name="s", measure=slow)
    assert seen, "the measured objective never ran"
    first, later, owner = seen[0]
    assert later > first + 0.2  # beaten again while the trial ran (within 20 s even on a loaded machine)
    assert owner.rpartition(":")[0] == socket.gethostname()
    done = optuna.load_study(study_name="s", storage=url).get_trials(deepcopy=False)
    assert all(t.state != TrialState.RUNNING for t in done)


@pytest.mark.parametrize("beat_age,failed", [(1.0, 0), (safety.STALE_HEARTBEAT_S + 5, 1)])
def test_resume_fails_a_silent_other_host_trial(tmp_path, beat_age, failed):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    prob = Problem(device="jetson-agx-orin-64gb", latency_budget="1s")
    search(prob, sampler="random", n_trials=3, seed=0, storage=url, study_name="r")
    study = optuna.load_study(study_name="r", storage=url)
    t = study.ask()
    t.set_user_attr("owner", "elsewhere:77")
    t.set_user_attr("heartbeat", time.time() - beat_age)
    res = search(prob, sampler="random", n_trials=4, seed=0, storage=url, study_name="r")
    assert res.extra.get("stale_trials_failed", 0) == failed
    st = {x.number: x.state for x in optuna.load_study(study_name="r", storage=url).get_trials(deepcopy=False)}
    assert st[t.number] == (TrialState.FAIL if failed else TrialState.RUNNING)


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/stat"), reason="needs procfs to see a zombie")
def test_a_zombie_owner_on_this_host_is_dead(tmp_path):
    """A killed worker that nobody reaped yet is a zombie: kill(pid, 0) still succeeds, but its trial is stale."""
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.time() + 30
    while time.time() < deadline:  # exited, not waited for: a zombie
        with open(f"/proc/{child.pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                break
        time.sleep(0.05)
    try:
        study = _study(tmp_path)
        zombie = _running(study, f"{socket.gethostname()}:{child.pid}", time.time())
        live = _running(study, f"{socket.gethostname()}:1", time.time())
        assert safety.fail_stale_running(study) == 1
        st = _states(study)
        assert st[zombie] == TrialState.FAIL and st[live] == TrialState.RUNNING
    finally:
        child.wait()
