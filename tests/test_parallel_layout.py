"""Layouts: the one-device layout is the single-chip model; per-device memory of TP/EP/PP against hand counts
from the real configs; divisibility errors; fits / does not fit; serving metrics' relations."""

from __future__ import annotations

import numpy as np
import pytest

import rooflaw as R
from rooflaw.constraints.parallel import batch_sweep, evaluate_layout, layout_columns, max_batch, parse_layout
from rooflaw.constraints.parallel.layout import Layout
from rooflaw.constraints.parallel.serving import _sharded
from rooflaw.constraints.roofline import complete_columns
from rooflaw.constraints.scenario import Scenario
from rooflaw.devices.precision import Precision
from rooflaw.devices.system import get_system, single
from rooflaw.errors import RooflawError

H8 = get_system("h100-sxm:8")
# Llama-3-70B config.json: hidden 8192, 80 layers, 64 heads, 8 KV heads, intermediate 28672, vocab 128256, untied
L70 = dict(d=8192, L=80, h=64, kv=8, hd=128, ffn=28672, V=128256)
# Mixtral-8x7B: hidden 4096, 32 layers, 32 heads, 8 KV heads, intermediate 14336, 8 experts, top-2, vocab 32000
MIX = dict(d=4096, L=32, h=32, kv=8, hd=128, ffn=14336, E=8, V=32000)


def cols_of(arch):
    return complete_columns({k: np.array([float(v)]) for k, v in arch.columns().items()})


def test_parse_layouts():
    assert (parse_layout("tp=8").devices, parse_layout("tp=8").tp_attn) == (8, 8)
    ep = parse_layout("ep=8,dp_attn=8")
    assert (ep.devices, ep.tp_attn, ep.attn_dp) == (8, 1, 8)
    pp = parse_layout("pp=4,tp=2")
    assert (pp.devices, pp.pp, pp.tp) == (8, 4, 2)
    hx = parse_layout("helix=kvp4,tpep8")
    assert (hx.devices, hx.kvp, hx.helix, hx.tp_attn) == (8, 4, 8, 2)
    for bad in (
        "tp=0",
        "tp=x",
        "foo=2",
        "tp=2,tp=4",
        "helix=kvp3,tpep8",
        "helix=4",
        "dp_attn=2",
        "imbalance=0.5",
        "tp=2,chunk=64",
        "",
        "tp",
    ):
        with pytest.raises(RooflawError, match="layout"):
            parse_layout(bad)


def test_one_device_layout_is_the_single_chip_model_exactly():
    for name in ("llama-3-8b", "mixtral-8x7b", "gemma-3-1b", "deepseek-v2-lite", "lfm2-1.2b"):
        a = R.load_architecture(name)
        wl = R.Workload(4, 2048, 64)
        one = layout_columns(cols_of(a), single(R.get_device("h100-sxm")), "tp=1", wl, "bf16")
        ref = R.evaluate_columns(cols_of(a), R.get_device("h100-sxm"), wl, "bf16", backend="numpy")
        rep = R.evaluate(a, R.get_device("h100-sxm"), wl, "bf16")
        assert np.array_equal(one["ttft_s"], ref["prefill_s"]) and np.array_equal(one["decode_s"], ref["decode_s"])
        assert np.array_equal(one["memory_per_device_bytes"], ref["memory_bytes"])
        # and the one-architecture report (what `rooflaw evaluate` prints) is the per-operator single-chip report
        lay1 = evaluate_layout(a, single(R.get_device("h100-sxm")), "tp=1", wl)
        assert lay1["ttft_s"] == rep.prefill_s and lay1["decode_s"] == rep.decode_s
        assert lay1["memory_per_device_bytes"] == rep.memory_bytes and lay1["comm_s_decode"] == 0
        assert one["joules_per_token"][0] == ref["energy_j"][0] / (4 * 64)
        # the sharded path (per-operator groups, the shapes of a layout) at degree 1 agrees to rounding
        gen = _sharded(cols_of(a), Scenario(H8, wl, Precision.parse("bf16"), "full", None, Layout()), None)
        for k in ("ttft_s", "decode_s", "memory_per_device_bytes", "joules_per_token"):
            assert gen[k][0] == pytest.approx(one[k][0], rel=1e-12), (name, k)
        assert gen["comm_s_prefill"][0] == 0 and gen["comm_s_decode"][0] == 0


def _dense_layer_params(c):
    attn = c["d"] * c["h"] * c["hd"] * 2 + 2 * c["d"] * c["kv"] * c["hd"]
    return attn, 3 * c["d"] * c["ffn"], 2 * c["d"]


def test_llama3_70b_does_not_fit_one_h100_and_tp8_memory_by_hand():
    a = R.load_architecture("llama-3-70b")
    wl = R.Workload(1, 1024, 1024)
    one = evaluate_layout(a, get_system("h100-sxm:1"), "tp=1", wl)
    assert not one["fits"] and one["memory_per_device_bytes"] > 140e9
    r = evaluate_layout(a, H8, "tp=8", wl)
    assert r["fits"] and r["valid"]
    attn, ffn, norms = _dense_layer_params(L70)
    per_dev = L70["L"] * (attn / 8 + ffn / 8 + norms) + 2 * L70["V"] * L70["d"] / 8 + L70["d"]
    assert r["weight_bytes_per_device"] == 2 * per_dev  # bf16
    assert r["kv_cache_bytes_per_device"] == 2 * L70["L"] * 1 * L70["hd"] * 2 * (1024 + 1024)  # one KV head
    assert r["comm_s_decode"] > 0 and r["tokens_per_s"] > 0
    # the largest batch that fits, by hand: weights + per-sequence KV cache and fp32 logits + the workspace of one
    # prefill chunk of 8,192 tokens (engines prefill in chunks while the others decode; batch ≥ 8 fills a chunk)
    per_seq = r["kv_cache_bytes_per_device"] + 4 * L70["V"] / 8
    chunk = 8192 * (2 * L70["d"] + 2 * L70["ffn"] / 8) * 2
    assert max_batch(a, H8, "tp=8", wl) == int((80e9 - 2 * per_dev - chunk) // per_seq)
    assert max_batch(a, get_system("h100-sxm:1"), "tp=1", wl) == 0


def test_pp_memory_by_hand_and_stage_balance():
    a = R.load_architecture("llama-3-70b")
    r = evaluate_layout(a, H8, "pp=4", R.Workload(1, 4096, 16))
    attn, ffn, norms = _dense_layer_params(L70)
    # the busiest stage: 20 layers, charged with the embedding and the LM head (stated convention)
    assert r["weight_bytes_per_device"] == 2 * (20 * (attn + ffn + norms) + 2 * L70["V"] * L70["d"] + L70["d"])
    assert r["stage_balance"] == 1.0 and 0 < r["bubble_fraction"] < 1
    # an irregular stack: DeepSeek-V2-Lite has 27 layers (first dense) -> 7,7,7,6 over 4 stages
    d = evaluate_layout(R.load_architecture("deepseek-v2-lite"), H8, "pp=4", R.Workload(1, 4096, 16))
    assert [s["layers"] for s in d["stages"]] == [7, 7, 7, 6] and d["stages"][0]["dense_layers"] == 1
    assert d["stage_balance"] < 0.99


def test_mixtral_ep_and_tp():
    a = R.load_architecture("mixtral-8x7b")
    wl = R.Workload(8, 1024, 128)
    assert not evaluate_layout(a, get_system("h100-sxm:1"), "tp=1", wl)["fits"]
    ep = evaluate_layout(a, H8, "ep=8,dp_attn=8", wl)
    tp = evaluate_layout(a, H8, "tp=8", wl)
    assert ep["fits"] and tp["fits"] and ep["tokens_per_s"] > 0 and tp["tokens_per_s"] > 0
    c = MIX
    attn = c["d"] * c["h"] * c["hd"] * 2 + 2 * c["d"] * c["kv"] * c["hd"]
    expert = 3 * c["d"] * c["ffn"]
    per_dev = c["L"] * (attn + c["d"] * c["E"] + 2 * c["d"] + expert * c["E"] / 8) + 2 * c["V"] * c["d"] + c["d"]
    assert ep["weight_bytes_per_device"] == 2 * per_dev  # attention replicated (DP), one expert per device
    assert ep["kv_cache_bytes_per_device"] == 2 * c["L"] * c["kv"] * c["hd"] * 2 * 1152 * 1  # 8 seqs / 8 devices
    assert ep["comm_s_decode"] > 0 and any("imbalance" in n for n in ep["notes"])
    worse = evaluate_layout(a, H8, "ep=8,dp_attn=8,imbalance=1.5", R.Workload(64, 1024, 128))
    base = evaluate_layout(a, H8, "ep=8,dp_attn=8", R.Workload(64, 1024, 128))
    assert worse["tpot_s"] > base["tpot_s"]


def test_kv_replication_beyond_kv_heads_is_said():
    a = R.load_architecture("llama-3-8b")  # 32 heads, 8 KV heads
    r = evaluate_layout(a, get_system("h100-sxm:16"), "tp=16", R.Workload(1, 1024, 16))
    assert r["kv_replication"] == 2 and any("replicated 2x" in n for n in r["notes"])
    assert r["kv_cache_bytes_per_device"] == 2 * 32 * 1 * 128 * 2 * 1040  # one whole KV head per device
    m = evaluate_layout(R.load_architecture("deepseek-v2-lite"), H8, "tp=2", R.Workload(1, 1024, 16))
    assert m["kv_replication"] == 2 and any("MLA" in n for n in m["notes"])


def test_helix_shards_kv_along_the_sequence():
    a = R.load_architecture("llama-3-70b")  # 8 KV heads
    wl = R.Workload(8, 131072, 16)
    nvl = get_system("gb200:72")
    tp8, tp32 = evaluate_layout(a, nvl, "tp=8", wl), evaluate_layout(a, nvl, "tp=32", wl)
    hx = evaluate_layout(a, nvl, "helix=kvp4,tpep32", wl)
    # one KV head per device (8 heads over 32/4 = 8 ways), a quarter of the prompt's tokens (+ the generated ones)
    assert hx["kv_cache_bytes_per_device"] == 2 * 80 * 1 * 128 * 2 * 8 * (131072 // 4 + 16)
    assert tp32["kv_cache_bytes_per_device"] == tp8["kv_cache_bytes_per_device"]  # replicated beyond kv_heads
    assert hx["tpot_s"] < min(tp8["tpot_s"], tp32["tpot_s"])
    with pytest.raises(RooflawError, match="exceeds kv_heads"):
        evaluate_layout(a, nvl, "helix=kvp2,tpep32", wl)


@pytest.mark.parametrize(
    "model, layout, system, word",
    [
        ("llama-3-70b", "tp=3", "h100-sxm:8", "does not divide heads"),
        ("llama-3-70b", "ep=8", "h100-sxm:8", "needs an MoE"),
        ("mixtral-8x7b", "ep=3,dp_attn=3", "h100-sxm:8", "ep does not divide experts"),
        ("smollm2-135m", "pp=64", "gb200:72", "exceeds layers"),
        ("llama-3-70b", "tp=16", "h100-sxm:8", "needs 16 devices"),
    ],
)
def test_layouts_that_do_not_divide(model, layout, system, word):
    with pytest.raises(RooflawError, match=word):
        evaluate_layout(R.load_architecture(model), get_system(system), layout, R.Workload(1, 128, 4))


def test_batch_sweep_pareto_and_tp_comm_grows_with_batch():
    a = R.load_architecture("llama-3-70b")
    # 1,024 sequences of 1,280 tokens: 53.7 GB of KV cache per device + 17.6 GB of weights + one prefill chunk's
    # workspace fit 80 GB; 2,048 do not
    rows = batch_sweep(a, H8, "tp=8", [1, 8, 64, 256, 1024, 2048], R.Workload(1, 1024, 256))
    assert [r["fits"] for r in rows] == [True, True, True, True, True, False]
    fit = [r for r in rows if r["fits"]]
    assert all(r["pareto"] for r in fit) and not rows[-1]["pareto"]
    per_dev = [r["tokens_per_s_per_device"] for r in fit]
    per_user = [r["tokens_per_s_per_user"] for r in fit]
    assert per_dev == sorted(per_dev) and per_user == sorted(per_user, reverse=True)
    comm = [r["comm_s_decode"] for r in rows]
    assert comm == sorted(comm)


def test_vectorised_table_matches_row_by_row():
    space = R.get_space("paper").sample(32, seed=0) if hasattr(R.get_space("paper"), "sample") else None
    a = R.load_architecture("llama-3-8b")
    b = R.load_architecture("qwen3-8b")
    both = {k: np.array([float(a.columns()[k]), float(b.columns()[k])]) for k in a.columns()}
    wl = R.Workload(4, 512, 32)
    tab = layout_columns(both, H8, "tp=4", wl)
    for i, arch in enumerate((a, b)):
        row = layout_columns(cols_of(arch), H8, "tp=4", wl)
        for k in ("ttft_s", "decode_s", "memory_per_device_bytes", "comm_s_decode", "joules_per_token"):
            assert tab[k][i] == pytest.approx(row[k][0], rel=1e-12)
    del space


def test_layout_cost_columns_for_a_joint_search():
    from types import SimpleNamespace

    from rooflaw.constraints.parallel.option import layout_cost_columns

    a, b = R.load_architecture("llama-3-70b"), R.load_architecture("mixtral-8x7b")
    both = {k: np.array([float(a.columns()[k]), float(b.columns()[k])]) for k in a.columns()}
    wl = R.Workload(64, 1024, 64)
    prob = SimpleNamespace(device=H8.device, workload=wl, precision=Precision.parse("bf16"))
    ref = layout_columns(both, H8, "tp=8", wl, "bf16")
    got = layout_cost_columns(H8, "tp=8")(both, prob)
    assert np.array_equal(got["prefill_s"], ref["ttft_s"]) and np.array_equal(
        got["memory_bytes"], ref["memory_per_device_bytes"]
    )
    assert got["params_total"][0] == a.params_total and got["params_total"][1] == b.params_total
    assert got["valid"].all()
    floor = float(ref["tokens_per_s_per_device"].mean())  # between the two: one passes, one does not
    cut = layout_cost_columns(H8, "tp=8", min_tokens_per_s_per_device=floor)(both, prob)["valid"]
    assert list(cut) == list(ref["tokens_per_s_per_device"] >= floor) and cut.sum() == 1
    ep = layout_cost_columns(H8, "ep=8,dp_attn=8")(both, prob)["valid"]
    assert list(ep) == [False, True]  # a dense model has no experts to spread
    with pytest.raises(RooflawError, match="problem's device"):
        layout_cost_columns(get_system("b200:8"), "tp=8")(both, prob)


def test_overlap_hides_communication_behind_compute():
    a = R.load_architecture("llama-3-70b")
    wl = R.Workload(16, 1024, 32)
    no = evaluate_layout(a, H8, "tp=8", wl)
    yes = evaluate_layout(a, H8, "tp=8", wl, overlap=True)
    assert yes["comm_s_decode"] == no["comm_s_decode"] > 0
    assert yes["decode_s"] == pytest.approx(no["decode_s"] - no["comm_s_decode"], rel=1e-12)  # compute-dominated
    assert any("fully overlapped" in n for n in yes["notes"])
