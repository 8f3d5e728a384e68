"""Laws know the domain they were fitted on: evaluation warns outside it, frontier/search/solve keep to it unless
told to extrapolate, fitted laws take the range of their data, and relaxations that cannot take a law say which
method can."""

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from rooflaw import Problem, fit_law, get_device, get_law, get_space, solve
from rooflaw.cli import main
from rooflaw.solver import frontier, pareto_mask

# these tests check explanations and the domain guard, not the physics: the pure roofline (no fitted
# achieved-performance figures), as in the other solver tests
ORIN = dataclasses.replace(get_device("jetson-agx-orin-64gb"), achieved={})

SPACE = """
name = "straddle"
description = "a space that straddles the paper law's domain"
layers = [2, 4, 8, 36]
d_model = [512, 768, 1024]
head_dim = [128]
kv_heads = [1, "heads"]
moe = [[1, 1], [8, 1], [16, 4], [32, 1]]
r_single = [1, 2]
ffn_align = 128
vocab = [32000]
tied = [false]

[fixed]
gated = true
"""


@pytest.fixture(scope="module")
def space(tmp_path_factory):
    p = tmp_path_factory.mktemp("space") / "straddle.toml"
    p.write_text(SPACE)
    return get_space(str(p))


def test_builtin_domains_are_the_published_ranges():
    assert get_law("paper-2602.10377").domain == {"l": (4, 32), "d": (768, 3072), "E": (1, 16), "K": (1, 2)}
    for name in ("chinchilla-hoffmann", "chinchilla-epoch"):
        assert get_law(name).domain == {"N": (7e7, 1.6e10), "D": (5e9, 5e11)}
    assert get_law("kaplan").domain["N_nonembed"] == (768, 1.5e9)
    assert get_law("paper-2602.10377").to_dict()["domain"]["E"] == [1, 16]


def _by_hand(df: pd.DataFrame) -> np.ndarray:
    """The paper law's domain written out independently of LossLaw.in_domain."""
    return ((df["layers"] >= 4) & (df["layers"] <= 32) & (df["d_model"] >= 768) & (df["d_model"] <= 3072)
            & (df["experts"] <= 16) & (df["top_k"] <= 2)).to_numpy()  # fmt: skip


@pytest.mark.parametrize("allow", [False, True])
def test_frontier_excludes_exactly_the_out_of_domain_rows(space, allow):
    prob = Problem(law="paper-2602.10377", device=ORIN, space=space,
                   allow_extrapolation=allow)  # fmt: skip
    allp = prob.evaluate(space.columns_at(np.arange(space.size, dtype=np.int64), np.float64))
    inside = _by_hand(allp)
    assert 0 < inside.sum() < len(allp)
    assert (allp["in_domain"].to_numpy() == inside).all()
    keep = allp[(allp["memory_bytes"] <= prob.capacity) & (inside | allow)]
    brute = keep[pareto_mask(keep[["loss", "latency_s"]].to_numpy())]
    res = frontier(prob, ("loss", "latency"), n_jobs=1)
    got = res.frontier
    assert res.feasible == len(keep)
    key = ["layers", "d_model", "kv_heads", "ffn", "experts", "top_k"]
    assert sorted(map(tuple, got[key].to_numpy().tolist())) == sorted(map(tuple, brute[key].to_numpy().tolist()))
    if not allow:
        assert _by_hand(got).all()
    else:
        assert not _by_hand(got).all()  # without the guard the frontier reaches outside (2 layers, 32 experts)


def test_solvers_keep_to_the_domain(space):
    # 20 ms: on the kernel-fitted figures the fastest decode inside the law's domain is 10.7 ms
    prob = Problem(law="paper-2602.10377", device=ORIN, space=space,
                   latency_budget=0.02)  # fmt: skip
    for method in ("closed-form", "exhaustive"):
        a = solve(prob, method).architecture
        assert 4 <= a.layers <= 32 and a.d_model >= 768 and a.experts <= 16 and a.top_k <= 2, method
    loose = Problem(law="paper-2602.10377", device=ORIN, space=space,
                    latency_budget=0.02, allow_extrapolation=True)  # fmt: skip
    assert solve(loose, "exhaustive").loss <= solve(prob, "exhaustive").loss


def test_fitted_law_takes_the_range_of_its_data():
    truth = get_law("chinchilla-hoffmann")
    N, D = np.meshgrid(np.geomspace(1e8, 3e9, 6), np.geomspace(2e9, 6e10, 5))
    df = pd.DataFrame({"N": N.ravel(), "D": D.ravel()})
    df["loss"] = truth.evaluate({"N": df["N"], "D": df["D"]})
    res = fit_law("E + A/N**alpha + B/D**beta", df, starts=64)
    assert res.law.domain["N"] == pytest.approx((1e8, 3e9))
    assert res.law.domain["D"] == pytest.approx((2e9, 6e10))
    assert res.law.in_domain({"N": np.array([5e7, 1e9]), "D": np.array([1e10, 1e10])}).tolist() == [False, True]


def test_evaluate_warns_outside_the_domain(capsys):
    assert main(["evaluate", "--hf-config", "olmoe-1b-7b", "--device", "h100-sxm", "--law", "paper-2602.10377"]) == 0
    err = capsys.readouterr().err
    assert "outside the domain" in err and "E = 64" in err
    assert main(["evaluate", "--hf-config", "olmoe-1b-7b", "--device", "h100-sxm", "--law", "paper-2602.10377",
                 "--json"]) == 0  # fmt: skip
    d = json.loads(capsys.readouterr().out)
    assert any(s.startswith("E = 64") for s in d["outside_law_domain"])


def test_tokens_outside_the_domain_exit_2_and_gp_suggests_a_method(capsys):
    base = ["solve", "--device", "jetson-agx-orin-64gb", "--latency-budget", "20ms", "--law", "chinchilla-hoffmann"]
    assert main([*base, "--tokens", "1e13"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "tokens=" in err[0] and "--allow-extrapolation" in err[0]


def test_relaxation_errors_name_the_methods_that_work():
    from rooflaw.errors import RooflawError
    from rooflaw.solver.solve import _unsupported

    e = _unsupported(RooflawError("law chinchilla-hoffmann is not a posynomial in l, d, r, rho, gqa"), "gp")
    assert str(e).endswith("use --method closed-form, exhaustive or optuna")
    kept = RooflawError("law krajewski-moe uses G: ...; use --method exhaustive or optuna")
    assert _unsupported(kept, "closed-form") is kept


def test_laws_over_parameter_counts_evaluate_on_partial_columns():
    # rounding hands Problem.evaluate only the columns it varies; N used to be missing ("needs N")
    prob = Problem(law="chinchilla-hoffmann", device=ORIN, tokens=1e11)
    cols = {"layers": [12.0], "d_model": [1024.0], "heads": [8.0], "kv_heads": [2.0], "head_dim": [128.0],
            "ffn": [4096.0], "experts": [1.0], "top_k": [1.0]}  # fmt: skip
    df = prob.evaluate(cols)
    from rooflaw import from_spec

    a = from_spec("layers=12,d_model=1024,heads=8,kv_heads=2,head_dim=128,ffn=4096,vocab=32000")
    assert df["loss"].iloc[0] == pytest.approx(prob.law.loss(a, tokens=1e11))
