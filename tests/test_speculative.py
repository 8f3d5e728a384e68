"""Speculative decoding: the acceptance process by Monte Carlo, the verification pass against the assembly's decode
step and a real torch decoder, γ* against brute force and a sympy derivation, the CLI."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from cli_helpers import run_cli

from rooflaw import Architecture, Workload, evaluate, get_device, load_architecture
from rooflaw.constraints.passes import pass_table
from rooflaw.constraints.speculative import (
    Draft,
    eagle_draft,
    evaluate_speculative,
    expected_tokens,
    optimal_draft_tokens,
    optimal_gamma_continuous,
    speedup_ratio,
    step_contexts,
)
from rooflaw.constraints.steps import decode_step_table

ORIN = get_device("jetson-agx-orin-64gb")
TINY = Architecture(layers=2, d_model=128, heads=4, kv_heads=2, ffn=256, vocab=1000, name="tiny")
SMALL = Architecture(layers=4, d_model=256, heads=4, kv_heads=2, ffn=512, vocab=1000, name="small")


# ---- the acceptance process -------------------------------------------------------------------------------------
def simulate_tokens(alpha: float, gamma: int, n: int, rng) -> np.ndarray:
    """Tokens emitted by n verification steps: the drafts accepted one by one with probability α until the first
    rejection, plus the target's own token (the correction, or the bonus token after γ acceptances)."""
    u = rng.random((n, gamma)) < alpha
    accepted = np.where(u.all(1), gamma, np.argmin(u, axis=1))
    return accepted + 1


@pytest.mark.parametrize("alpha,gamma", [(0.0, 3), (0.3, 1), (0.6, 4), (0.8, 7), (0.95, 16)])
def test_expected_tokens_match_a_monte_carlo_of_the_acceptance_process(alpha, gamma):
    rng = np.random.default_rng(1)
    toks = simulate_tokens(alpha, gamma, 200_000, rng)
    se = toks.std() / math.sqrt(toks.size)
    assert abs(toks.mean() - expected_tokens(alpha, gamma)) < 4 * se + 1e-12


def test_expected_tokens_limits():
    assert expected_tokens(0.0, 5) == 1.0
    assert expected_tokens(0.5, 0) == 1.0
    assert expected_tokens(0.5, 2) == pytest.approx(1 + 0.5 + 0.25)


def test_step_contexts_cover_the_output_tokens():
    cached, w = step_contexts(100, 50, 2.5)
    assert w.sum() == pytest.approx(20.0)
    assert cached[0] == 100 and cached[1] == 102.5
    cached, w = step_contexts(10, 7, 3.0)  # 7/3 = 2.33 steps: 3 steps, the last counted for 1/3
    assert len(w) == 3 and w[-1] == pytest.approx(1 / 3)


# ---- the verification pass ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("model", ["qwen3-0.6b", "gemma-3-1b", "deepseek-v2-lite", "lfm2-350m"])
@pytest.mark.parametrize("engine,precision", [(None, "w4a16"), ("ideal", "fp16"), ("llama.cpp", "w4a16")])
def test_a_one_token_pass_is_the_assemblys_decode_step(model, engine, precision):
    # q = 1 over S_in + t − 1 cached tokens is decode step t: the same operators, substitution and rates
    a = load_architecture(model)
    wl = Workload(3, 700, 40)
    tab = decode_step_table(a, ORIN, wl, precision, engine=engine)
    p = pass_table(a, ORIN, 3, 1, wl.input_tokens + tab["step"] - 1, precision, engine=engine)
    for k in ("seconds", "flops", "bytes"):
        np.testing.assert_allclose(p[k], tab[k], rtol=1e-12)


def test_a_pass_of_q_tokens_reads_weights_and_cache_once_and_computes_q_logits():
    # hand-computed differences between a q-token pass and one decode step of the same model (fp16, ideal)
    a, q, c, b = TINY, 5, 300, 2
    p1 = pass_table(a, ORIN, b, 1, [c], "fp16", engine="ideal", attention="unfused", per_op=True)["ops"]
    pq = pass_table(a, ORIN, b, q, [c], "fp16", engine="ideal", attention="unfused", per_op=True)["ops"]
    L, d, V, kv, hd = a.layers, a.d_model, a.vocab, a.kv_heads * a.head_dim, a.head_dim
    # q_proj: weights once, activations q times
    assert pq["q_proj"][1][0] - p1["q_proj"][1][0] == pytest.approx(L * (q - 1) * b * (d + a.heads * hd) * 2)
    # attention: FLOPs for the q×(c+q) block vs 1×(c+1); K cache read once per sequence at context c+q
    assert pq["attn_scores"][0][0] == pytest.approx(L * 2 * b * q * (c + q) * a.heads * hd)
    kv_bytes = b * (c + q) * kv * 2 + b * q * a.heads * hd * 2 + b * a.heads * q * (c + q) * 2
    assert pq["attn_scores"][1][0] == pytest.approx(L * kv_bytes)
    # LM head: logits for every position of every sequence
    assert pq["lm_head"][0][0] == pytest.approx(2 * b * q * d * V)
    assert pq["lm_head"][1][0] == pytest.approx(V * d * 2 + b * q * d * 2 + 4 * b * q * V)


def test_zero_draft_tokens_or_zero_acceptance_is_plain_decoding():
    wl = Workload(2, 256, 64)
    base = evaluate(SMALL, ORIN, wl, "fp16")
    for gamma, alpha in ((0, 0.7), (3, 0.0)):
        r = evaluate_speculative(SMALL, Draft(TINY), ORIN, wl, gamma, alpha, "fp16")
        if gamma == 0:
            assert r.decode_s == pytest.approx(base.decode_s, rel=1e-12)
            assert r.energy_j == pytest.approx(base.energy_j, rel=1e-12)
            assert r.memory_bytes == pytest.approx(evaluate(SMALL, ORIN, wl, "fp16").memory_bytes)
        else:  # α = 0: one token per step, but the drafts and the wider pass are still paid
            assert r.expected_tokens_per_step == 1.0 and r.steps == pytest.approx(64)
            assert r.tpot_s > base.tpot_s


def test_speculative_time_matches_a_monte_carlo_of_whole_generations():
    # random acceptance over a whole generation (truncated at S_out), each step priced at its integer context
    wl, gamma, alpha = Workload(1, 200, 96), 4, 0.7
    r = evaluate_speculative(SMALL, Draft(TINY), ORIN, wl, gamma, alpha, "fp16")
    ctx = np.arange(wl.input_tokens, wl.input_tokens + wl.output_tokens + gamma + 1, dtype=float)
    ver = pass_table(SMALL, ORIN, 1, gamma + 1, ctx, "fp16")["seconds"]
    dr = pass_table(TINY, ORIN, 1, 1, ctx, "fp16")["seconds"]
    step_s = ver[: wl.output_tokens] + np.array([dr[g : g + gamma].sum() for g in range(wl.output_tokens)])
    rng = np.random.default_rng(7)
    runs = 4000
    toks = simulate_tokens(alpha, gamma, runs * wl.output_tokens, rng).reshape(runs, wl.output_tokens)
    done = np.cumsum(toks, axis=1)  # tokens after each step; a step runs while fewer than S_out were made
    started = np.concatenate([np.zeros((runs, 1), dtype=int), done[:, :-1]], axis=1)
    live = started < wl.output_tokens
    cost = np.where(live, step_s[np.minimum(started, wl.output_tokens - 1)], 0.0)
    mc = cost.sum(1).mean()
    # the model counts a fractional last step; a real run pays its last step whole (overshoot ≤ one step)
    assert r.decode_s == pytest.approx(mc, rel=0.03)


def test_eagle_heads_share_the_targets_embedding_and_head():
    wl = Workload(1, 128, 32)
    d = eagle_draft(SMALL, 1)
    r = evaluate_speculative(SMALL, d, ORIN, wl, 3, 0.6, "fp16")
    own = evaluate(d.arch, ORIN, Workload(1, 128, 35), "fp16")
    head = (SMALL.vocab * SMALL.d_model) * 2 * 2  # untied embedding + LM head, fp16
    assert r.draft_memory_bytes == pytest.approx(own.memory_bytes - head)
    assert d.arch.layers == 1 and d.arch.d_model == SMALL.d_model


# ---- the optimal draft length ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("alpha", [0.2, 0.5, 0.7, 0.8, 0.9, 0.97])
@pytest.mark.parametrize("c", [0.01, 0.05, 0.1, 0.3, 0.6, 0.9, 1.5])
def test_optimal_gamma_is_the_brute_force_argmax(alpha, c):
    g = np.arange(0, 65)
    best = int(g[np.argmax(speedup_ratio(alpha, g, c))])
    assert optimal_draft_tokens(alpha, c) == best


def test_continuous_optimum_matches_a_numerical_maximum_and_sympys_stationary_point():
    import sympy as sp
    from scipy.optimize import minimize_scalar

    # sympy solves d/dγ [(1 − α^(γ+1)) / (γc + 1)] = 0 (α = e^(−k)) with the principal Lambert W; the root with
    # γ > 0 is on the lower branch W₋₁, which optimal_gamma_continuous uses
    k, c_, x = sp.symbols("k c gamma", positive=True)
    f = (1 - sp.exp(-k * (x + 1))) / (x * c_ + 1)
    (root,) = sp.solve(sp.numer(sp.together(sp.diff(f, x))), x)
    lower = root.replace(sp.LambertW, lambda z: sp.LambertW(z, -1))
    for alpha, c in ((0.8, 0.05), (0.6, 0.1), (0.9, 0.02), (0.5, 0.3)):
        g = optimal_gamma_continuous(alpha, c)
        num = minimize_scalar(lambda x, a=alpha, c=c: -float(speedup_ratio(a, x, c)), bounds=(0, 200), method="bounded")
        assert g == pytest.approx(num.x, abs=1e-4)
        assert float(lower.subs({k: -math.log(alpha), c_: c}).evalf(30)) == pytest.approx(g, rel=1e-10)
    # the draft does not pay when it costs as much as it is accepted (break-even α = c at γ = 1)
    assert optimal_draft_tokens(0.3, 0.35) == 0 and optimal_draft_tokens(0.35, 0.3) >= 1
    assert optimal_gamma_continuous(0.5, 2.0) == 0.0


# ---- the torch reference ----------------------------------------------------------------------------------------
def test_verification_pass_flops_and_bytes_match_a_torch_decoder():
    torch = pytest.importorskip("torch")
    from test_ref_bytes_torch import ARCHS, KERNEL_EXACT, S_IN, B, ByteCounter, Decoder
    from torch.utils.flop_counter import FlopCounterMode

    F = torch.nn.functional
    for name in ("dense-gqa-untied", "moe-top2"):
        a = ARCHS[name]
        q, pos = 3, S_IN + 1 - 3  # prefill pos tokens, then verify q tokens (the decoder's cache holds S_IN + 1)
        m = Decoder(a, torch.float32)
        ids = torch.randint(0, a.vocab, (B, pos + q), generator=torch.Generator().manual_seed(3))
        with torch.no_grad():
            m(ids[:, :pos], 0, ByteCounter(), m.causal_mask(pos, 0))
            m.touched = []
            mask = m.causal_mask(q, pos)
            with ByteCounter() as c, FlopCounterMode(display=False) as fc:
                m(ids[:, pos:], pos, c, mask)
            kernel = c.traffic()[0]
            xn = torch.randn(B, q, a.d_model)
            with ByteCounter() as ch, FlopCounterMode(display=False) as fh, ch.at("lm_head"):
                F.linear(xn, m.lm)
        res = pass_table(a, ORIN, B, q, [pos], "fp32", engine="device", attention="unfused", per_op=True)
        ops = {k: (v[0][0], v[1][0]) for k, v in res["ops"].items()}
        T = B * q
        for op in KERNEL_EXACT:
            if op not in ops or ops[op] == (0.0, 0.0) or op == "lm_head":
                continue
            extra = 8.0 * T if op == "embed" else 0.0  # the int64 token ids
            if op in ("ffn_up", "ffn_down") and a.experts > 1:  # expected vs touched experts (see test_ref_bytes)
                cov = a.experts * (1 - (1 - a.top_k / a.experts) ** T)
                w = (2 if op == "ffn_up" else 1) * a.d_model * a.ffn * 4
                extra = sum(n - cov for n in m.touched) * w
            assert kernel[op] == pytest.approx(ops[op][1] + extra, rel=1e-12), (name, op)
        assert ch.traffic()[0]["lm_head"] == pytest.approx(ops["lm_head"][1], rel=1e-12)
        assert fh.get_total_flops() == pytest.approx(ops["lm_head"][0], rel=1e-12)
        # FLOPs: every matmul of the pass; the decoder's own LM head computes the last position only
        matmuls = ("q_proj", "k_proj", "v_proj", "o_proj", "attn_scores", "attn_values", "ffn_up", "ffn_down", "router")
        want = sum(ops[k][0] for k in matmuls if k in ops) + 2 * B * a.d_model * a.vocab
        assert fc.get_total_flops() == pytest.approx(want, rel=1e-12), name


# ---- the CLI ----------------------------------------------------------------------------------------------------
def test_cli_evaluate_with_a_draft_reports_speculative_numbers(capsys):
    args = ("evaluate", "--hf-config", "qwen3-1.7b", "--device", "jetson-agx-orin-64gb", "--precision", "w4a16",
            "--input-tokens", "256", "--output-tokens", "64")  # fmt: skip
    code, out, _ = run_cli(capsys, *args, "--json")
    assert code == 0
    plain = json.loads(out)
    code, out, _ = run_cli(capsys, *args, "--json", "--draft", "qwen3-0.6b", "--draft-tokens", "3",
                           "--acceptance", "0.7")  # fmt: skip
    assert code == 0
    d = json.loads(out)
    s = d["speculative"]
    assert s["gamma"] == 3 and s["alpha"] == 0.7
    assert s["expected_tokens_per_step"] == pytest.approx(1 + 0.7 + 0.49 + 0.343)
    assert s["baseline_tpot_s"] == pytest.approx(plain["tpot_s"])
    assert d["tpot_s"] == pytest.approx(s["verification_steps"] * (s["draft_s_per_step"] + s["verify_s_per_step"]) / 64)
    assert d["tokens_per_s"]["decode"] == pytest.approx(1 / d["tpot_s"])
    assert d["memory_bytes"] > plain["memory_bytes"] and d["ttft_s"] > plain["ttft_s"]


@pytest.mark.parametrize(
    "extra,field",
    [
        (("--acceptance", "1"), "acceptance"),
        (("--acceptance", "-0.2"), "acceptance"),
        (("--acceptance", "often"), "acceptance"),
        (("--draft-tokens", "0"), "draft-tokens"),
        (("--draft-tokens", "65"), "draft-tokens"),
        (("--draft", "eagle:x"), "draft"),
        (("--draft", "no-such-model"), "draft"),
        (("--draft", "qwen3-0.6b", "--acceptance", "fitted"), "acceptance"),  # ratio 1: outside the law's domain
        (("--tiles",), "tiles"),
        (("--preset", "paper"), "preset"),
    ],
)
def test_cli_bad_speculative_values_are_one_line_errors(capsys, extra, field):
    args = ["evaluate", "--hf-config", "qwen3-0.6b", "--device", "jetson-agx-orin-64gb", *extra]
    if "--draft" not in extra:
        args += ["--draft", "eagle"]
    if "--acceptance" not in extra:
        args += ["--acceptance", "0.5"]
    code, out, err = run_cli(capsys, *args)
    assert code == 2
    assert err.strip().count("\n") == 0 and f"{field}=" in err


def test_cli_a_draft_needs_an_acceptance_and_an_acceptance_needs_a_draft(capsys):
    base = ("evaluate", "--hf-config", "qwen3-0.6b", "--device", "jetson-agx-orin-64gb")
    code, _, err = run_cli(capsys, *base, "--draft", "eagle")
    assert code == 2 and "acceptance=" in err
    code, _, err = run_cli(capsys, *base, "--acceptance", "0.6")
    assert code == 2 and "draft=" in err


# ---- the fitted acceptance law -------------------------------------------------------------------------------------
def test_acceptance_rows_cite_their_sources_and_the_law_refits_them():
    from rooflaw.constraints.acceptance import fitted_law, leave_one_out, load_acceptance_rows

    rows = load_acceptance_rows()
    assert len(rows) >= 6 and all(r.source.startswith("https://") for r in rows)
    assert all(0 < r.alpha < 1 and r.params_draft < r.params_target for r in rows)
    law = fitted_law()
    # an independent fit: scipy's least squares on the same logit residuals
    from scipy.optimize import least_squares

    x = np.array([math.log(r.params_target / r.params_draft) for r in rows])
    y = np.log(np.array([r.alpha for r in rows]) / (1 - np.array([r.alpha for r in rows])))
    sol = least_squares(lambda p: p[0] + p[1] * x - y, [0.0, 0.0])
    assert (law.a, law.b) == pytest.approx(tuple(sol.x), abs=1e-6)
    loo = leave_one_out(rows)
    assert law.loo_median_abs_error == pytest.approx(float(np.median(loo)))
    # leave-one-out by hand for the first row
    keep = np.arange(len(rows)) != 0
    s0 = least_squares(lambda p: p[0] + p[1] * x[keep] - y[keep], [0.0, 0.0]).x
    assert loo[0] == pytest.approx(abs(1 / (1 + math.exp(-(s0[0] + s0[1] * x[0]))) - rows[0].alpha), abs=1e-6)


def test_fitted_acceptance_refuses_pairs_outside_its_domain_and_eagle_heads():
    from rooflaw import RooflawError
    from rooflaw.constraints.acceptance import fitted_acceptance, fitted_law

    law = fitted_law()
    lo, hi = (math.exp(v) for v in law.domain)
    assert 0 < law.alpha(1.0, lo * 1.0001) < 1
    with pytest.raises(RooflawError, match="outside the fitted domain"):
        law.alpha(1.0, hi * 2)
    assert 0 < law.alpha(1.0, hi * 2, extrapolate=True) < 1
    with pytest.raises(RooflawError, match="eagle"):
        fitted_acceptance(eagle_draft(SMALL), SMALL)


def test_cli_fitted_acceptance_reports_the_law_it_used(capsys):
    from rooflaw.constraints.acceptance import fitted_law

    code, out, err = run_cli(capsys, "evaluate", "--hf-config", "qwen3-8b", "--device", "jetson-agx-orin-64gb",
                             "--precision", "w4a16", "--draft", "qwen3-0.6b", "--acceptance", "fitted",
                             "--json")  # fmt: skip
    assert code == 0, err
    s = json.loads(out)["speculative"]
    law = fitted_law()
    t, d = load_architecture("qwen3-8b"), load_architecture("qwen3-0.6b")
    assert s["acceptance_source"] == "fitted" and s["alpha"] == pytest.approx(law.alpha(d.params_total, t.params_total))
    assert s["acceptance_law"]["loo_median_abs_error"] == pytest.approx(law.loo_median_abs_error)
