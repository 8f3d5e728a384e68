"""The precision-aware law wrapper (Kumar et al. 2024, arXiv:2411.04330) against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rooflaw import Architecture, Problem, RooflawError, get_law
from rooflaw.cli import main
from rooflaw.objectives import law_inputs
from rooflaw.objectives.precision_law import KUMAR_GAMMA, bind_precision, precision_aware, precision_bits

# Chinchilla (Hoffmann approach 3) and the γ's of the wrapper, typed again here (not read from the code).
E, A, B, ALPHA, BETA = 1.6934, 406.4, 410.7, 0.33917, 0.28491
G_W, G_A, G_KV = 2.6745, 2.2102, 0.9578


def test_constants_are_the_published_ones():
    assert KUMAR_GAMMA == {"gamma_w": G_W, "gamma_a": G_A, "gamma_kv": G_KV}
    assert "arXiv:2411.04330" in get_law("chinchilla-precision").source


def test_bits_include_scale_overhead():
    # NVFP4: 4-bit E2M1 + one FP8 scale per 16 values = 4 + 8/16 = 4.5; MXFP4: 4 + 8/32; int4 g128 fp16: 4 + 16/128
    assert precision_bits("nvfp4") == {"P_w": 4.5, "P_a": 4.5, "P_kv": 4.5}
    assert precision_bits("mxfp4")["P_w"] == 4.25 and precision_bits("int4")["P_w"] == 4.125
    assert precision_bits("w=nvfp4,a=fp8,kv=bf16") == {"P_w": 4.5, "P_a": 8.0, "P_kv": 16.0}


def test_effective_parameter_factor_by_hand():
    # f(P) = (1 − e^(−P/γ_w))(1 − e^(−P/γ_a))(1 − e^(−P/γ_kv)), worked out once with a calculator:
    # nvfp4 (4.5 b): (1 − e^−1.68256)(1 − e^−2.03601)(1 − e^−4.69827) = 0.814102 · 0.869483 · 0.990897 = 0.701374
    # bf16 (16 b):   (1 − e^−5.98243)(1 − e^−7.23916)(1 − e^−16.7050) = 0.997477 · 0.999283 · 1.000000 = 0.996761
    law = get_law("chinchilla-precision")
    n, d = 1e9, 2e10
    for bits, f in ((4.5, 0.701374), (16.0, 0.996761)):
        got = float(law.evaluate({"N": n, "D": d, "P_w": bits, "P_a": bits, "P_kv": bits}))
        assert got == pytest.approx(E + A / (n * f) ** ALPHA + B / d**BETA, rel=2e-6)


def test_bf16_to_nvfp4_raises_loss_by_the_laws_amount():
    a = Architecture(layers=24, d_model=2048, heads=16, kv_heads=4, ffn=5632, vocab=32000)
    n, d = float(a.params_total), 1e11
    fb = math.prod(1 - math.exp(-16 / g) for g in (G_W, G_A, G_KV))
    fn = math.prod(1 - math.exp(-4.5 / g) for g in (G_W, G_A, G_KV))
    expected = A * n**-ALPHA * (fn**-ALPHA - fb**-ALPHA)
    loss = {p: Problem(law="chinchilla-precision", device="h100-sxm", precision=p, tokens=d).law.loss(a, d)
            for p in ("bf16", "nvfp4")}  # fmt: skip
    assert loss["nvfp4"] - loss["bf16"] == pytest.approx(expected, rel=1e-9)
    assert 0.02 < expected < 0.06  # the size of the effect at 1.3B parameters, 100B tokens
    # weights only (activations and KV cache stay bf16): only the γ_w factor moves
    w_only = Problem(law="precision-w(chinchilla-hoffmann)", device="h100-sxm", precision="w=nvfp4,a=bf16,kv=bf16",
                     tokens=d).law.loss(a, d)  # fmt: skip
    fw = 1 - math.exp(-4.5 / G_W)
    assert w_only == pytest.approx(E + A / (n * fw) ** ALPHA + B / d**BETA, rel=1e-12)


def test_wrapper_over_other_laws_and_its_refusals():
    kap = get_law("precision(kaplan)")
    assert kap.variables == ("N_nonembed", "D", "P_w", "P_a", "P_kv")
    base = get_law("kaplan")
    x = {"N_nonembed": 1e8, "D": 1e10}
    f = math.prod(1 - math.exp(-8 / g) for g in (G_W, G_A, G_KV))
    assert float(kap.evaluate(x | {"P_w": 8, "P_a": 8, "P_kv": 8})) == pytest.approx(
        float(base.evaluate({"N_nonembed": 1e8 * f, "D": 1e10})), rel=1e-12)  # fmt: skip
    with pytest.raises(RooflawError, match="no parameter-count variable"):
        get_law("precision(paper-2602.10377)")
    with pytest.raises(RooflawError, match="no such built-in"):
        get_law("precision(nope-law)")
    with pytest.raises(RooflawError, match="parts"):
        precision_aware(base, ("w", "q"))
    # a user expression may use the bits directly (parsed by the ast whitelist, never evaluated)
    user = get_law("E + A/(N*(1 - exp(-P_w/g)))**alpha", values={"E": 1.7, "A": 400, "alpha": 0.34, "g": 2.6745})
    assert "P_w" in user.variables


def test_problem_binds_bits_and_guards_the_fitted_range():
    p = Problem(law="chinchilla-precision", device="h100-sxm", precision="nvfp4", tokens=1e11)
    assert p.law.variables == ("N", "D") and p.law.unbound is get_law("chinchilla-precision")
    assert bind_precision(p.law, "fp8").name.endswith("[P_w 8, P_a 8, P_kv 8]")  # rebinds from the unbound law
    with pytest.raises(RooflawError, match="P_w = 32"):
        Problem(law="chinchilla-precision", device="h100-sxm", precision="fp32", tokens=1e11)
    Problem(law="chinchilla-precision", device="h100-sxm", precision="fp32", tokens=1e11, allow_extrapolation=True)
    # a law without bits is untouched
    q = Problem(law="chinchilla-hoffmann", device="h100-sxm", precision="nvfp4", tokens=1e11)
    assert q.law is get_law("chinchilla-hoffmann")


def test_frontier_and_cli_use_the_bound_law():
    a = Architecture(layers=8, d_model=1024, heads=8, kv_heads=2, ffn=2816, vocab=32000)
    x = law_inputs(a.columns(), tokens=1e11, precision="fp8")
    direct = float(get_law("chinchilla-precision").evaluate(x))
    p = Problem(law="chinchilla-precision", device="h100-sxm", precision="fp8", tokens=1e11)
    assert float(p.evaluate({k: [v] for k, v in a.columns().items()})["loss"].iloc[0]) == pytest.approx(
        direct, rel=1e-12
    )
    assert np.isfinite(direct)
    assert main(["laws", "show", "precision(chinchilla-epoch)", "--json"]) == 0
    assert main(["frontier", "--device", "h100-sxm", "--law", "precision(paper-2602.10377)"]) == 2


def test_paper_repro_guideline4(tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import paper_repro

    c = paper_repro.run(["guideline_precision"], tmp_path, quick=True, log=lambda *a: None)["guideline_precision"]
    gs = (G_W, G_A, G_KV)
    f = {b: math.prod(1 - math.exp(-x / g) for x, g in zip(b, gs, strict=True)) for b in [(16, 16, 16), (4.5, 4.5, 8)]}
    # equal loss <=> equal N_eff: 0.996761 / 0.707656 (nvfp4 weights+activations, fp8 KV) = 1.40854
    assert c["nvfp4"]["params_for_equal_loss_vs_bf16"] == pytest.approx(f[(16, 16, 16)] / f[(4.5, 4.5, 8)], rel=1e-12)
    assert c["nvfp4"]["params_for_equal_loss_vs_bf16"] == pytest.approx(1.40854, abs=1e-4)
    assert c["nvfp4"]["weight_bytes_for_equal_loss_vs_bf16"] == pytest.approx(1.40854 * 4.5 / 16, abs=1e-4)
    # the lower precision still decodes faster at equal loss, and owns most of the joint frontier
    # on GB300 these small architectures decode at the kernel curves' per-kernel latency, not at the weight bytes:
    # the median equal-loss speed-up is below 1 (session 12: NVFP4 0.96, FP8 0.94), NVFP4 ahead of FP8, and the
    # larger targets, where the bytes dominate, still gain (range up to 1.27 / 1.20)
    assert c["nvfp4"]["decode_speedup_vs_bf16_median"] > c["fp8"]["decode_speedup_vs_bf16_median"]
    assert c["nvfp4"]["decode_speedup_vs_bf16_range"][1] > c["fp8"]["decode_speedup_vs_bf16_range"][1] > 1.1
    assert 0.25 < c["nvfp4"]["joint_frontier_share"] < 1  # 44 % on session 12's curves (78 % before the curves)
    assert (tmp_path / "guideline4_precision.png").stat().st_size > 10_000
    assert "section:guideline_precision" in (tmp_path / "REPORT.md").read_text()
