"""Loss laws: built-in values, user expressions, law variables, posynomial detection."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy

from rooflaw.arch.architecture import Architecture
from rooflaw.errors import RooflawError
from rooflaw.objectives import VARIABLES, LossLaw, get_law, law_inputs, list_laws

PAPER = "paper-2602.10377"


def paper_inputs(l, d, r, rho, gqa):
    return {"l": l, "d": d, "r": r, "rho": rho, "d_m": d / gqa}


def test_paper_law_headline_value():
    law = get_law(PAPER)
    assert round(float(law.evaluate(paper_inputs(24, 1024, 4, 1, 4))), 4) == 3.4538


@pytest.mark.parametrize(
    ("args", "want"),
    [
        ((12, 2048, 1, 1 / 16, 4), 3.175),
        ((12, 2048, 1, 1, 4), 3.541),
        ((16, 3072, 0.75, 1 / 16, 4), 3.022),
    ],
)
def test_paper_law_digest_checks(args, want):
    # reference/paper-2602.10377.md §2.3 [check] values
    assert float(get_law(PAPER).evaluate(paper_inputs(*args))) == pytest.approx(want, abs=5e-4)


def test_paper_law_on_architecture_and_vectorised():
    law = get_law(PAPER)
    arch = Architecture(layers=24, d_model=1024, heads=16, kv_heads=4, ffn=4096)
    assert round(law.loss(arch), 4) == 3.4538
    l = np.linspace(4, 32, 1_000_000)
    out = law.evaluate({"l": l, "d": 1024.0, "r": 4.0, "rho": 1.0, "d_m": 256.0})
    assert out.shape == l.shape and np.all(np.diff(out) < 0)


def test_builtins_listed_with_metadata():
    names = list_laws()
    for n in (PAPER, "chinchilla-hoffmann", "chinchilla-epoch", "kaplan", "krajewski-moe", "krajewski-dense"):
        assert n in names
        law = get_law(n)
        assert isinstance(law, LossLaw) and law.source and law.validity
        assert all(math.isfinite(v) for v in law.params.values())
    assert "10B" in get_law(PAPER).validity


def test_chinchilla_hoffmann_value():
    law = get_law("chinchilla-hoffmann")
    n, d = 70e9, 1.4e12  # Chinchilla itself
    want = 1.6934 + 406.4 / n**0.33917 + 410.7 / d**0.28491
    assert float(law.evaluate({"N": n, "D": d})) == pytest.approx(want, rel=1e-12)


def test_kaplan_and_krajewski_values():
    k = get_law("kaplan")
    n, d = 1e9, 2e10
    want = ((8.8e13 / n) ** (0.076 / 0.095) + 5.4e13 / d) ** 0.095
    assert float(k.evaluate({"N_nonembed": n, "D": d})) == pytest.approx(want, rel=1e-12)
    m = get_law("krajewski-moe")
    want = 0.47 + (2.1 / 8**0.58 + 18.1) / n**0.115 + 30.8 / d**0.147
    assert float(m.evaluate({"G": 8, "N_active_nonembed": n, "D": d})) == pytest.approx(want, rel=1e-12)


def test_bound_expr_and_symbols():
    law = get_law("chinchilla-epoch")
    b = law.bound_expr()
    N, D = sympy.Symbol("N", positive=True), sympy.Symbol("D", positive=True)
    assert b.free_symbols == {N, D}
    assert float(b.subs({N: 1e9, D: 2e10})) == pytest.approx(float(law.evaluate({"N": 1e9, "D": 2e10})))
    assert "\\alpha" in law.latex()


def test_posynomial():
    assert get_law(PAPER).is_posynomial()
    assert get_law("chinchilla-epoch").is_posynomial()
    assert get_law("krajewski-moe").is_posynomial()
    assert not get_law("kaplan").is_posynomial()
    assert not get_law("E - A/N**alpha", values={"E": 2, "A": 1, "alpha": 0.3}).is_posynomial()


def test_user_expression_params_and_variables():
    law = get_law("E + A/N**alpha + B/D**beta")
    assert law.variables == ("N", "D")
    assert set(law.params) == {"E", "A", "alpha", "B", "beta"}
    moe = get_law("c + a/N**alpha + b*E**(-gamma)")
    assert "E" in moe.variables  # E multiplied/raised: the experts variable
    forced = get_law("E + A/N**alpha", params=["E"])
    assert forced.variables == ("N",)
    law2 = get_law("2 + A * l^(-a)", values={"A": 3.0, "a": 1.0})
    assert float(law2.evaluate({"l": 3.0})) == pytest.approx(3.0)


@pytest.mark.parametrize(
    ("text", "msg"),
    [
        ("E + A/N**", "does not parse"),
        ("E + foo(N)", "unknown function"),
        ("E + A/N.real", "not allowed"),
        ("A + B", "no law variable"),
        ("", "empty"),
        ("no-such-law", "no such built-in"),
        ("__import__('os')", "not allowed"),
        ("exp(N", "does not parse"),
    ],
)
def test_bad_expressions(text, msg):
    with pytest.raises(RooflawError, match=msg):
        get_law(text)


def test_law_inputs_from_columns():
    a = Architecture(layers=16, d_model=2048, heads=16, kv_heads=4, ffn=1024, experts=64, top_k=8, vocab=50304)
    x = law_inputs(a.columns(), tokens=1e10, precision="nvfp4")
    assert set(VARIABLES) <= set(x)
    assert (x["P_w"], x["P_a"], x["P_kv"]) == (4.5, 4.5, 4.5)  # 4-bit E2M1 + one 8-bit scale per 16
    assert x["l"] == 16 and x["d"] == 2048 and x["r"] == 8 * 1024 / 2048 and x["rho"] == 8 / 64
    assert x["gqa"] == 4 and x["d_m"] == 4 * 128 and x["E"] == 64 and x["K"] == 8 and x["G"] == 8
    assert x["N"] == a.params_total and x["N_active"] == a.params_active
    assert x["N_nonembed"] == a.params_total - 2 * 50304 * 2048
    assert x["D"] == 1e10
    # vectorised: arrays of candidates
    cols = {k: np.array([v, v]) for k, v in a.columns().items()}
    cols["layers"] = np.array([8, 16])
    xv = law_inputs(cols)
    assert xv["N"].shape == (2,) and xv["N"][1] == a.params_total and "D" not in xv


def test_missing_variable_named():
    with pytest.raises(RooflawError, match="needs D"):
        get_law("chinchilla-epoch").evaluate({"N": 1e9})
    a = Architecture(layers=4, d_model=256, heads=4)
    with pytest.raises(RooflawError, match="tokens"):
        get_law("chinchilla-epoch").loss(a)
    assert get_law("chinchilla-epoch").loss(a, tokens=1e9) > 1.8


def test_cli_laws(capsys):
    from rooflaw.cli import main

    assert main(["laws", "list", "--json"]) == 0
    assert PAPER in capsys.readouterr().out
    assert main(["laws", "show", PAPER, "--json"]) == 0
    out = capsys.readouterr().out
    assert "kappa_l" in out and "latex" in out
    assert main(["laws", "show", "no-such-law"]) == 2
