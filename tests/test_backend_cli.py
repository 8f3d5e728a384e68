"""``--backend`` on frontier, solve --method exhaustive and search: same answers on numpy and numba, defaults on."""

from __future__ import annotations

import json

import pytest
from same_values import same_array

from rooflaw.cli import main
from rooflaw.constraints import backends

needs_numba = pytest.mark.skipif(not backends.available(), reason="numba (the fast extra) is not installed")
# the defaults: full preset, the device's fitted engine profile, the law's fitted domain (no extrapolation)
COMMON = ("--device", "jetson-orin-nano-8gb", "--space", "paper", "--json")


def _json(capsys, *args) -> dict:
    code = main(list(args))
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


@needs_numba
def test_frontier_and_exhaustive_solve_same_on_both_backends(capsys, tmp_path):
    f, csv = {}, {}
    for b in ("numpy", "numba"):
        out = tmp_path / f"{b}.csv"
        f[b] = _json(capsys, "frontier", *COMMON, "--backend", b, "--out", str(out))
        csv[b] = out.read_text()
    assert csv["numba"] == csv["numpy"] and f["numba"]["frontier_size"] > 10
    keys = ("evaluated", "feasible", "frontier_size")
    assert [f["numba"][k] for k in keys] == [f["numpy"][k] for k in keys]
    s = {b: _json(capsys, "solve", *COMMON, "--method", "exhaustive", "--latency-budget", "50ms", "--backend", b)
         for b in ("numpy", "numba")}  # fmt: skip
    assert s["numba"]["architecture"] == s["numpy"]["architecture"] and s["numba"]["loss"] == s["numpy"]["loss"]


@needs_numba
def test_search_backend_gives_the_same_trials(capsys, tmp_path):
    import pandas as pd

    args = ("search", *COMMON, "--n-trials", "12", "--sampler", "random")
    res, trials = {}, {}
    for b in ("numpy", "numba"):
        res[b] = _json(capsys, *args, "--backend", b, "--out", str(tmp_path / f"{b}.csv"))
        trials[b] = pd.read_csv(tmp_path / f"{b}.csv")[["loss", "latency_s", "memory_bytes", "energy_j"]]
    assert len(trials["numpy"]) == 12 and list(trials["numba"]) == list(trials["numpy"])
    for c in trials["numpy"]:  # to libm's last bit against numpy's AVX-512 exp/log (tests/same_values.py)
        assert same_array(trials["numba"][c].to_numpy(), trials["numpy"][c].to_numpy()), c
    assert res["numba"]["hypervolume"] == pytest.approx(res["numpy"]["hypervolume"], rel=1e-12)


def test_bad_backend_is_one_line_exit_2(capsys):
    for cmd in (("search", "--n-trials", "2"), ("frontier",), ("solve", "--method", "exhaustive")):
        code = main([cmd[0], *COMMON, *cmd[1:], "--backend", "gpu"])
        err = capsys.readouterr().err
        assert code == 2 and "backend='gpu'" in err and "Traceback" not in err
