"""Optuna search: frontier hygiene, cache, determinism, resumable storages (kill -9 and resume), shared
PostgreSQL studies, measured objectives, bad input."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from rooflaw import RooflawError, get_device
from rooflaw.cli import main
from rooflaw.solver import FRONTIER_COLUMNS, Problem, frontier, search, solve_optuna
from rooflaw.solver.search.storage import open_storage

DEV = "jetson-orin-nano-8gb"
ARCH = ["layers", "d_model", "kv_heads", "head_dim", "ffn", "experts", "top_k"]


def problem(**kw):
    # the search is checked on the pure roofline (no fitted achieved-performance figures)
    dev = dataclasses.replace(get_device(DEV), achieved={})
    return Problem(law="paper-2602.10377", device=dev, space="paper", **kw)


def test_search_frontier_is_feasible_and_exact_values():
    prob = problem(latency_budget=0.05)
    res = search(prob, sampler="nsga2", n_trials=80, seed=1)
    t = res.trials
    assert len(t) == 80
    assert list(t.columns[:2]) == ["trial", "feasible"]
    assert list(t.columns[2 : 2 + len(FRONTIER_COLUMNS)]) == list(FRONTIER_COLUMNS)
    assert not t["feasible"].all()  # the budget excludes some candidates...
    assert res.frontier["feasible"].all()  # ...and they never reach the frontier
    assert (res.frontier["latency_s"] <= 0.05).all()
    # cache: each distinct point evaluated once
    assert res.evaluations == t["index"].nunique()
    assert t["cached"].sum() == len(t) - t["index"].nunique()
    # values equal the analytic model's
    ev = prob.evaluate(t[[c for c in ARCH + ["heads"]]].assign(vocab=32000, tied=0))
    np.testing.assert_allclose(ev["loss"], t["loss"], rtol=1e-12)
    np.testing.assert_allclose(ev["latency_s"], t["latency_s"], rtol=1e-12)
    # every search-frontier point is non-dominated among the trials; the exact frontier dominates-or-equals it
    exact = frontier(prob).frontier
    for r in res.frontier.itertuples():
        assert ((exact["loss"] <= r.loss + 1e-12) & (exact["latency_s"] <= r.latency_s + 1e-15)).any()
    d = res.to_dict()
    assert d["trials"] == 80 and d["frontier_size"] == len(res.frontier) > 0
    # 2-D hypervolume by hand: rectangles between consecutive frontier points (loss ascending) and the reference
    v = res.frontier[["loss", "latency_s"]].to_numpy(float)
    v = v[np.argsort(v[:, 0])]
    ref = d["reference_point"]
    widths = np.append(v[1:, 0], ref[0]) - v[:, 0]
    assert d["hypervolume"] == pytest.approx(float(np.sum(widths * (ref[1] - v[:, 1]))), rel=1e-12)


def test_search_is_deterministic():
    a = search(problem(), sampler="tpe", n_trials=30, seed=5).trials
    b = search(problem(), sampler="tpe", n_trials=30, seed=5).trials
    pd.testing.assert_frame_equal(a, b)


def test_solve_optuna_constrained_single_objective():
    prob = problem(latency_budget=0.03)
    res = solve_optuna(prob, n_trials=120, seed=0)
    assert res.method == "optuna"
    assert res.latency_s["decode"] <= 0.03
    assert prob.space.contains(res.architecture)


def test_journal_resume_keeps_trials(tmp_path):
    url = f"journal://{tmp_path / 'study.log'}"
    first = search(problem(), sampler="random", n_trials=12, seed=0, storage=url, study_name="s").trials
    again = search(problem(), sampler="random", n_trials=25, seed=0, storage=url, study_name="s")
    assert len(again.trials) == 25 and again.ran == 13
    pd.testing.assert_frame_equal(again.trials.iloc[:12].reset_index(drop=True), first)


def test_workers_share_one_study_without_loss_or_duplicates():
    res = search(problem(), sampler="random", n_trials=30, seed=0, workers=2)
    t = res.trials
    assert res.ran == len(t) and 30 <= len(t) <= 31
    assert t["trial"].is_unique


def _count_complete(db) -> int:
    try:
        with sqlite3.connect(db, timeout=5) as c:
            return c.execute("select count(*) from trials where state = 'COMPLETE'").fetchone()[0]
    except sqlite3.Error:
        return 0


def _cli(*args) -> list[str]:
    return [sys.executable, "-c", "import sys; from rooflaw.cli import main; sys.exit(main(sys.argv[1:]))", *args]


#: Trials of the killed and resumed study: enough that the kill (within ~50 ms of the 8th trial; a trial takes
#: 0.3-0.5 s under load) lands long before the end, and past TPE's 10 random start-up trials so that the resumed
#: sampler is fitted on trials of the killed run.
KILL_TRIALS = 40


def test_kill_hard_and_resume_sqlite(tmp_path):
    db = tmp_path / "s.db"
    url = f"sqlite:///{db}"
    args = _cli("search", "--device", DEV, "--sampler", "tpe", "--n-trials", str(KILL_TRIALS), "--seed", "0",
                "--storage", url, "--study-name", "resume", "--json")  # fmt: skip
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while _count_complete(db) < 8 and time.time() < deadline and p.poll() is None:
        time.sleep(0.05)
    assert p.poll() is None, "finished before it could be killed"
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    with sqlite3.connect(db) as c:
        before = c.execute(
            "select t.number, group_concat(p.param_name || '=' || p.param_value) from trials t "
            "join trial_params p on p.trial_id = t.trial_id where t.state = 'COMPLETE' group by t.number"
        ).fetchall()
    assert 8 <= len(before) < KILL_TRIALS
    out = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["trials"] == KILL_TRIALS and d["ran"] == KILL_TRIALS - len(before)
    with sqlite3.connect(db) as c:
        after = dict(
            c.execute(
                "select t.number, group_concat(p.param_name || '=' || p.param_value) from trials t "
                "join trial_params p on p.trial_id = t.trial_id where t.state = 'COMPLETE' group by t.number"
            ).fetchall()
        )
    for number, params in before:
        assert after[number] == params


def test_bad_input_exits_2_and_keeps_trials(tmp_path, capsys):
    assert main(["search", "--device", DEV, "--sampler", "annealing"]) == 2
    assert "unknown sampler" in capsys.readouterr().err
    assert main(["search", "--device", DEV, "--storage", f"sqlite:///{tmp_path}/no/such/dir/x.db"]) == 2
    assert "cannot open" in capsys.readouterr().err
    assert main(["search", "--device", DEV, "--storage", "postgresql://u@127.0.0.1:1/none", "--n-trials", "3"]) == 2
    err = capsys.readouterr().err
    assert "cannot open" in err and len(err.strip().splitlines()) == 1
    url = f"sqlite:///{tmp_path}/s.db"
    assert main(["search", "--device", DEV, "--n-trials", "10", "--storage", url, "--study-name", "x", "--json"]) == 0
    capsys.readouterr()
    rc = main(["search", "--device", DEV, "--n-trials", "20", "--storage", url, "--study-name", "x",
               "--objectives", "loss,latency,memory"])  # fmt: skip
    assert rc == 2
    err = capsys.readouterr().err
    assert "exists with objectives loss,latency" in err
    assert _count_complete(tmp_path / "s.db") == 10
    empty = tmp_path / "empty.toml"
    empty.write_text(
        "layers = [2]\nd_model = [768]\nhead_dim = [128]\nkv_heads = [4]\nmoe = [[1, 1]]\nr_single = [1]\n"
    )
    assert main(["search", "--device", DEV, "--space", str(empty)]) == 2
    with pytest.raises(RooflawError):
        open_storage("not a url")


def test_cli_search_outputs(tmp_path, capsys):
    out = tmp_path / "t.csv"
    rc = main(["search", "--device", DEV, "--sampler", "random", "--n-trials", "20", "--out", str(out), "--json",
               "--latency-budget", "200ms"])  # fmt: skip
    assert rc == 0
    d = json.loads(capsys.readouterr().out)
    assert d["trials"] == 20
    df = pd.read_csv(out)
    assert list(df.columns[: 2 + len(FRONTIER_COLUMNS)]) == ["trial", "feasible", *FRONTIER_COLUMNS]


def test_measured_objective_prunes_what_cannot_fit():
    calls = []

    def measure(arch, workload):
        calls.append(arch)
        return 1e-3 * arch.layers  # a fake "measured" latency

    prob = problem(memory_budget=2e9)
    res = search(prob, sampler="random", n_trials=40, seed=3, measure=measure)
    t = res.trials
    fits = t.drop_duplicates("index")
    fits = fits[fits["memory_bytes"] <= 2e9]
    assert len(calls) == len(fits) == res.measurements  # measured once per distinct point that fits
    assert all(prob.space.contains(a) for a in calls)
    m = t[t["measured"]]
    np.testing.assert_allclose(m["latency_s"], 1e-3 * m["layers"])
    assert not t.loc[~t["measured"], "feasible"].any()


def test_measure_spec_strings():
    from rooflaw.solver.search.measure import load_measure

    assert load_measure("math:sqrt")(4.0) == 2.0
    with pytest.raises(RooflawError):
        load_measure("no_such_module_xyz:f")
    with pytest.raises(RooflawError):
        load_measure("no-entry-point")


@pytest.mark.postgres
def test_postgres_many_workers_no_trial_lost_or_duplicated():
    url = os.environ.get("ROOFLAW_TEST_PG_URL")
    if not url:
        pytest.skip("ROOFLAW_TEST_PG_URL not set (start one with scripts/start_postgres.sh)")
    name = f"pg-{os.getpid()}-{time.time_ns()}"
    procs = [
        subprocess.Popen(
            _cli(
                "search",
                "--device",
                DEV,
                "--sampler",
                "tpe",
                "--n-trials",
                "40",
                "--seed",
                str(i),
                "--storage",
                url,
                "--study-name",
                name,
                "--json",
            ),  # fmt: skip
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(3)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_o, e) in zip(procs, outs, strict=True):
        assert p.returncode == 0, e
    ran = sum(json.loads(o)["ran"] for o, _ in outs)
    import optuna

    study = optuna.load_study(study_name=name, storage=open_storage(url))
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert ran == len(complete)  # every trial a worker ran is stored, once
    assert 40 <= len(complete) <= 42
    numbers = [t.number for t in study.trials]
    assert len(numbers) == len(set(numbers))
    assert len({t._trial_id for t in study.trials}) == len(study.trials)
