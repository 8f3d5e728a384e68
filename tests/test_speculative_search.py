"""Speculative decoding in the solvers: the vectorised option against the one-target evaluation, the joint pick
against brute force, the break-even acceptance, drafts from the space, the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
from cli_helpers import run_cli, space_file

from rooflaw import Architecture, Problem, Workload, api, get_device, load_architecture
from rooflaw.constraints.speculative import Draft, SpeculativeColumns, eagle_draft, evaluate_speculative
from rooflaw.solver.speculative import explain_speculative, space_drafts, speculative_options

ORIN = get_device("jetson-agx-orin-64gb")
TARGETS = [
    Architecture(layers=8, d_model=1024, heads=8, kv_heads=2, ffn=3072, vocab=32000, name="t1"),
    Architecture(layers=16, d_model=2048, heads=16, kv_heads=4, ffn=6144, vocab=32000, name="t2"),
    Architecture(layers=12, d_model=1536, heads=12, kv_heads=12, ffn=2048, experts=8, top_k=2, vocab=32000, name="t3"),
]
DRAFT = Architecture(layers=4, d_model=512, heads=8, kv_heads=2, ffn=1536, vocab=32000, name="d")


def _problem(space="paper", **kw):
    kw.setdefault("workload", Workload(1, 256, 24))
    return Problem(law="paper-2602.10377", device=ORIN, space=space, precision="w4a16", **kw)


def _table(archs):
    return {k: np.array([float(a.columns()[k]) for a in archs]) for k in archs[0].columns()}


@pytest.mark.parametrize("which", ["fixed", "eagle", "fitted"])
def test_option_columns_equal_the_one_target_evaluation(which):
    from rooflaw.constraints.acceptance import fitted_law

    prob = _problem()
    draft = eagle_draft(TARGETS[0], 1) if which == "eagle" else Draft(DRAFT, False, "d")
    alpha = None if which == "fitted" else 0.65
    cols = SpeculativeColumns(draft, 3, alpha, True)(_table(TARGETS), prob)
    for i, t in enumerate(TARGETS):
        d = eagle_draft(t, 1) if which == "eagle" else draft  # eagle heads are rebuilt on every target
        a = 0.65
        if which == "fitted":
            a = fitted_law().alpha(DRAFT.params_total, t.params_total, extrapolate=True)
            assert cols["alpha"][i] == pytest.approx(a)
        r = evaluate_speculative(t, d, ORIN, prob.workload, 3, a, "w4a16")
        for k, v in (("decode_s", r.decode_s), ("prefill_s", r.ttft_s), ("memory_bytes", r.memory_bytes),
                     ("energy_j", r.energy_j)):  # fmt: skip
            assert cols[k][i] == pytest.approx(v, rel=1e-9), (which, t.name, k)


def test_the_joint_pick_is_the_brute_force_best(tmp_path):
    space = space_file(tmp_path)
    prob = _problem(space=str(space), latency_budget="170ms")
    opts = speculative_options([Draft(DRAFT, False, "d")], (2, 4), 0.75)
    res = api.solve_joint(prob, api.JointSpace(options=opts))
    # brute force: every architecture of the space under every option, the lowest loss that meets the budget
    sp = prob.on_aligned_space().space if hasattr(prob, "on_aligned_space") else prob.space
    cols = sp.columns_at(np.arange(sp.size), dtype=np.float64)
    from rooflaw.objectives import law_inputs

    loss = np.broadcast_to(prob.law.evaluate(law_inputs(cols, tokens=prob.tokens)), (sp.size,))
    best = (np.inf, None)
    for o in opts:
        v = o.evaluate(cols, prob)
        ok = (
            (np.asarray(v["decode_s"]) <= 0.170)
            & np.asarray(v.get("valid", True))
            & (np.asarray(v["memory_bytes"]) <= ORIN.memory_capacity)
        )
        if ok.any():
            i = int(np.flatnonzero(ok)[np.argmin(loss[ok])])
            if loss[i] < best[0]:
                best = (loss[i], o.name)
    assert res.loss == pytest.approx(best[0]) and best[1] is not None


def test_breakeven_acceptance_is_where_the_draft_stops_paying():
    prob = _problem(workload=Workload(1, 512, 32))
    t = load_architecture("qwen3-4b")
    opt = speculative_options([Draft(load_architecture("qwen3-0.6b"), False, "q06")], (3,), 0.8, plain=False)[0]
    e = explain_speculative(prob, t, opt)
    assert e["draft_pays"] and e["speedup"] > 1
    a0 = e["breakeven_alpha"]
    assert 0 < a0 < 0.8
    plain = api.evaluate(t, ORIN, prob.workload, "w4a16").tpot_s
    at = evaluate_speculative(t, Draft(load_architecture("qwen3-0.6b")), ORIN, prob.workload, 3, a0, "w4a16")
    assert at.tpot_s == pytest.approx(plain, rel=1e-4)
    below = evaluate_speculative(t, Draft(load_architecture("qwen3-0.6b")), ORIN, prob.workload, 3, a0 - 0.05, "w4a16")
    assert below.tpot_s > plain
    assert e["alpha_needed"] is None  # no latency budget in this problem
    # with a budget between the two TPOTs the draft must be accepted often enough: check the bisection's α
    at_budget = evaluate_speculative(t, Draft(load_architecture("qwen3-0.6b")), ORIN, prob.workload, 3, 0.6, "w4a16")
    q = _problem(workload=prob.workload, latency_budget=at_budget.decode_s)
    need = explain_speculative(q, t, opt)["alpha_needed"]
    assert need == pytest.approx(0.6, abs=1e-5)
    # the closed-form γ* for the priced cost ratio is the brute-force argmax of τ/(γc + 1)
    g = np.arange(0, 65)
    ratio = (1 - 0.8 ** (g + 1)) / (0.2 * (g * e["cost_ratio"] + 1))
    assert e["optimal_gamma"] == int(g[np.argmax(ratio)])


def test_space_drafts_are_the_loss_size_front():
    from rooflaw.arch.architecture import param_counts
    from rooflaw.objectives import law_inputs

    prob = _problem()
    drafts = space_drafts(prob)
    assert 1 <= len(drafts) <= 6
    cols = prob.space.columns_at(np.arange(prob.space.size), dtype=np.float64)
    from rooflaw.constraints.roofline import complete_columns

    size = param_counts(complete_columns(cols))["total"]
    loss = np.broadcast_to(prob.law.evaluate(law_inputs(cols, tokens=prob.tokens)), size.shape)
    inside = np.broadcast_to(prob.law.in_domain(law_inputs(cols, tokens=prob.tokens)), size.shape)
    for d in drafts:
        n = d.arch.params_total
        lo = prob.law.loss(d.arch)
        assert not np.any(inside & (size < n) & (loss < lo - 1e-12)), d.name  # no smaller, better architecture
    sizes = [d.arch.params_total for d in drafts]
    assert sizes == sorted(sizes)


def test_cli_solve_speculative_reports_the_pick_and_its_explanation(capsys, tmp_path):
    space = space_file(tmp_path)
    args = ("solve", "--device", "jetson-agx-orin-64gb", "--space", str(space), "--precision", "w4a16",
            "--latency-budget", "170ms", "--output-tokens", "24", "--input-tokens", "256", "--method", "exhaustive",
            "--speculative", "--acceptance", "0.75", "--draft", f"{DRAFT_SPEC};eagle:1",
            "--draft-tokens", "2,4")  # fmt: skip
    code, out, err = run_cli(capsys, *args, "--json", "--explain")
    assert code == 0, err
    d = json.loads(out)
    assert d["option"] in {"no draft", *(f"{n} γ={g}" for n in (DRAFT_SPEC, "eagle:1") for g in (2, 4))}
    assert "speculative" in d["explain_joint"]


DRAFT_SPEC = "layers=4,d_model=512,heads=8,kv_heads=2,ffn=1536,vocab=32000"


@pytest.mark.parametrize(
    "extra,field",
    [
        (("--speculative",), "acceptance"),
        (("--draft", "qwen3-0.6b"), "acceptance"),  # a draft implies --speculative, which needs an acceptance
        (("--acceptance", "0.7"), "acceptance"),  # an acceptance needs a draft to search
        (("--speculative", "--acceptance", "0.7", "--draft-tokens", "0,2"), "draft-tokens"),
        (("--speculative", "--acceptance", "1.5"), "acceptance"),
        (("--speculative", "--acceptance", "0.7", "--draft", "qwen3-0.6b;;x"), "draft"),
    ],
)
def test_cli_bad_speculative_search_values_are_one_line_errors(capsys, extra, field):
    code, _, err = run_cli(capsys, "frontier", "--device", "jetson-agx-orin-64gb", *extra)
    assert code == 2 and err.strip().count("\n") == 0 and f"{field}=" in err


def test_cli_search_speculative_samples_the_draft_options(capsys, tmp_path):
    space = space_file(tmp_path)
    code, out, err = run_cli(capsys, "search", "--device", "jetson-agx-orin-64gb", "--space", str(space), "--precision",
                             "w4a16", "--latency-budget", "170ms", "--output-tokens", "24", "--input-tokens", "256",
                             "--draft", DRAFT_SPEC, "--draft-tokens", "2", "--acceptance", "0.7", "--n-trials", "12",
                             "--objectives", "loss", "--json")  # fmt: skip
    assert code == 0, err
    d = json.loads(out)
    assert d["combinations"] == 2 and d["joint_points"] == 2 * 32  # no draft + one draft × γ, over the 32 targets


def test_cli_evaluate_refuses_a_draft_with_a_system(capsys):
    code, _, err = run_cli(capsys, "evaluate", "--system", "hgx-h100", "--hf-config", "llama-3.1-8b", "--draft",
                           "eagle", "--acceptance", "0.7")  # fmt: skip
    assert code == 2 and "draft=" in err and err.strip().count("\n") == 0
