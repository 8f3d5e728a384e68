"""Second hostile audit of issue #12's list (round 2): the options added or changed since the first audit
(--steps-csv, --n-jobs/--workers caps, fit's numeric options and seeds, GP budgets) and the contract on each:
exit code, one line on stderr starting ``rooflaw:``, no traceback, NaN/Infinity never in ``--json``."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from cli_helpers import TINY_SPACE

from rooflaw.cli import main

DEV = "jetson-orin-nano-8gb"
ARCH = "layers=2,d_model=256,heads=4,kv_heads=1,ffn=512"
EV = ["evaluate", "--device", DEV, "--arch", ARCH]
NOPOWER = 'id = "nopower"\nfp16_tflops = 10\nfp32_tflops = 1\nbandwidth_gbs = 100\nmemory_gb = 8\n'
LAW = "E + A/N**alpha + B/D**beta"


@pytest.fixture(scope="module")
def f(tmp_path_factory):
    d = tmp_path_factory.mktemp("audit")
    rng = np.random.default_rng(0)
    N, D = 10 ** rng.uniform(7.5, 10, 60), 10 ** rng.uniform(9, 11.5, 60)
    pd.DataFrame({"N": N, "D": D, "loss": 1.9 + 300 / N**0.31 + 900 / D**0.29}).to_csv(d / "runs.csv", index=False)
    (d / "tiny.toml").write_text(TINY_SPACE)
    (d / "nopower.toml").write_text(NOPOWER)
    return {"dir": str(d), **{k: str(d / n) for k, n in (("runs", "runs.csv"), ("tiny", "tiny.toml"),
                                                       ("nopower", "nopower.toml"))}}  # fmt: skip


def _fill(a, f):
    for k, v in f.items():
        a = a.replace("{" + k + "}", v)
    return a


FIT = ["fit", "{runs}", "--law", LAW]
CASES = [
    # evaluate --steps / --steps-csv
    ("steps-ok-json", [*EV, "--output-tokens", "300", "--steps", "--json"], 0),
    ("steps-csv-missing-dir", [*EV, "--steps-csv", "{dir}/no/such/dir/s.csv"], 2),
    ("steps-csv-is-dir", [*EV, "--steps-csv", "{dir}"], 2),
    ("steps-csv-dev-full", [*EV, "--steps-csv", "/dev/full"], 4),
    ("steps-too-many", [*EV, "--output-tokens", "20000000", "--steps"], 2),
    ("output-tokens-huge-no-steps", [*EV, "--output-tokens", "1000000000000", "--json"], 0),
    ("input-tokens-int64-overflow", [*EV, "--input-tokens", "99999999999999999999999", "--json"], 2),
    ("batch-float-text", [*EV, "--batch", "1e30"], 2),
    ("engine-unknown", [*EV, "--engine", "tensorrt"], 2),
    ("engine-empty", [*EV, "--engine", ""], 2),
    # process counts
    ("compare-n-jobs-zero", ["compare", "--device", DEV, "--arch", ARCH, "--space", "{tiny}", "--n-jobs", "0"], 2),
    ("compare-n-jobs-huge", ["compare", "--device", DEV, "--arch", ARCH, "--space", "{tiny}", "--n-jobs", "4096"], 2),
    ("frontier-n-jobs-very-negative", ["frontier", "--device", DEV, "--space", "{tiny}", "--n-jobs", "-4096"], 2),
    ("search-workers-huge", ["search", "--device", DEV, "--space", "{tiny}", "--workers", "4096"], 2),
    ("search-workers-zero", ["search", "--device", DEV, "--space", "{tiny}", "--workers", "0"], 2),
    # fit's numbers
    ("fit-ok-json", [*FIT, "--starts", "16", "--json"], 0),
    ("fit-starts-zero", [*FIT, "--starts", "0"], 2),
    ("fit-starts-negative", [*FIT, "--starts", "-5"], 2),
    ("fit-starts-text", [*FIT, "--starts", "many"], 2),
    ("fit-delta-nan", [*FIT, "--huber-delta", "nan"], 2),
    ("fit-delta-negative", [*FIT, "--huber-delta", "-1"], 2),
    ("fit-delta-inf", [*FIT, "--huber-delta", "inf"], 2),
    ("fit-holdout-above-one", [*FIT, "--holdout", "1.5"], 2),
    ("fit-holdout-nan", [*FIT, "--holdout", "nan"], 2),
    ("fit-holdout-leaves-too-few", [*FIT, "--holdout", "0.99"], 2),
    ("fit-bootstrap-one", [*FIT, "--starts", "8", "--bootstrap", "1"], 2),
    ("fit-bootstrap-negative", [*FIT, "--bootstrap", "-3"], 2),
    ("fit-seed-negative", [*FIT, "--starts", "8", "--seed", "-1"], 2),
    ("fit-method-unknown", [*FIT, "--method", "adam"], 2),
    ("fit-map-overflow", ["fit", "{runs}", "--law", LAW, "--map", "N=N**400"], 2),
    ("fit-map-self-inject", ["fit", "{runs}", "--law", LAW, "--map", "N=__import__('os').getpid()"], 2),
    # search seeds and GP budgets
    ("search-seed-negative", ["search", "--device", DEV, "--space", "{tiny}", "--seed", "-1", "--n-trials", "3"], 2),
    ("gp-unmeetable", ["solve", "--device", DEV, "--method", "gp", "--latency-budget", "1us"], 3),
    ("gp-energy-no-power", ["solve", "--device", "{nopower}", "--method", "gp", "--energy-budget", "1J"], 2),
    (
        "gp-law-not-posynomial",
        ["solve", "--device", DEV, "--method", "gp", "--law", "E - A/l**a", "--latency-budget", "20ms"],
        2,
    ),  # fmt: skip
    (
        "gp-long-decode-ok",
        [
            "solve",
            "--device",
            DEV,
            "--method",
            "gp",
            "--output-tokens",
            "2048",
            "--latency-budget",
            "20s",
            "--phase",
            "total",
            "--json",
        ],
        0,
    ),  # fmt: skip
]


def test_audit_counts():
    assert len(CASES) == len({c[0] for c in CASES}) >= 30


@pytest.mark.parametrize(("name", "argv", "code"), CASES, ids=[c[0] for c in CASES])
def test_hostile_round_two(name, argv, code, f, capsys):
    rc = main([_fill(a, f) for a in argv])
    out, err = capsys.readouterr()
    assert rc == code, f"{name}: exit {rc}, expected {code}; stderr: {err.strip()[:300]}"
    assert "Traceback" not in out + err
    if code:
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("rooflaw:"), err
    elif "--json" in argv:
        json.loads(out)
        assert "NaN" not in out and "Infinity" not in out
