"""--explain says where the answer sits at an edge (space, law domain) and which cost share binds."""

from __future__ import annotations

import pytest

import rooflaw as rl
from rooflaw.constraints import evaluate
from rooflaw.solver.explain_discrete import SHARES, cost_shares, edges, explain_discrete, explain_text


@pytest.fixture(scope="module")
def demo():
    prob = rl.Problem(device="jetson-agx-orin-64gb", latency_budget="20ms", phase="decode")
    return prob, rl.solve(prob, method="exhaustive")


def test_cost_shares_add_up_and_match_the_ops(demo):
    prob, res = demo
    rep = evaluate(res.architecture, prob.device, prob.workload, prob.precision, prob.preset, engine=prob.engine)
    sh = cost_shares(rep, "decode")
    assert set(sh) == set(SHARES) and sum(sh.values()) == pytest.approx(1.0)
    dec = [o for o in rep.ops if o.phase == "decode"]
    overhead = sum(o.seconds for o in dec if o.bound == "overhead")
    assert sh["overhead"] == pytest.approx(overhead / sum(o.seconds for o in dec))
    kv = sum(o.seconds for o in dec if o.name in ("attn_scores", "attn_values") and o.bound == "memory")
    assert sh["kv_cache"] == pytest.approx(kv / sum(o.seconds for o in dec))
    tot = cost_shares(rep, "total")
    assert sum(tot.values()) == pytest.approx(1.0)


def test_edges_of_space_and_law(demo):
    prob, res = demo
    a = res.architecture
    found = edges(prob, a)
    lo_l, hi_l = prob.law.domain["l"]
    if a.layers == lo_l:
        assert any(e.startswith("law: l = 4 is at the lower edge") for e in found)
    # a point in the middle of the law's domain and of the space has no edge there
    mid = rl.from_mapping({"layers": 16, "d_model": 1536, "heads": 12, "kv_heads": 4, "head_dim": 128,
                           "ffn": 1536, "experts": 4, "top_k": 1})  # fmt: skip
    assert not [e for e in edges(prob, mid) if e.startswith("law: l ") or e.startswith("space: layers")]


def test_explain_text_names_the_binding_share(demo):
    prob, res = demo
    ex = explain_discrete(prob, res)
    shares = {k: ex["cost_shares"][k] for k in SHARES}
    top = max(shares, key=shares.get)
    text = explain_text(ex, prob.phase)
    assert f"-> {top.replace('_', ' ')} binds" in text
    assert sum(ex["memory_shares"].values()) == pytest.approx(1.0)
