"""Link energy of the collectives: every bit a layout's collectives and stage sends move, at the system's pJ/bit,
counted by hand for TP, EP across nodes and PP, and added to joules_per_token (nothing else changes)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import rooflaw as R
from rooflaw.constraints.parallel import collectives as C
from rooflaw.constraints.parallel import layout_columns
from rooflaw.constraints.roofline import complete_columns
from rooflaw.devices.system import get_system, system_catalog

# Llama-3-8B config.json: hidden 4096, 32 layers, 32 heads, 8 KV heads, FFN 14336; Mixtral-8x7B: 8 experts, top-2
LLAMA, MIX = R.load_architecture("llama-3-8b"), R.load_architecture("mixtral-8x7b")
WL = R.Workload(4, 512, 32)
BA = 2  # bf16 activations: bytes


def cols_of(arch):
    return complete_columns({k: np.array([float(v)]) for k, v in arch.columns().items()})


def with_pj(spec: str, link: float, net: float):
    return dataclasses.replace(get_system(spec), link_pj_per_bit=link, scale_out_pj_per_bit=net)


def test_every_catalog_system_states_its_link_energy_and_where_it_comes_from():
    for sid, entry in system_catalog().items():
        s = get_system(sid)
        assert s.link_pj_per_bit > 0 and s.scale_out_pj_per_bit > 0, sid
        assert entry["energy_provenance"] == "estimate" and entry["energy_source"], sid
    assert get_system("h100-sxm:8").link_pj_per_bit == 11.0  # 2 x 5.5 pJ/bit SerDes, GPU -> NVSwitch -> GPU


def test_tp_link_energy_by_hand():
    # TP=2 on one node: per layer two all-reduces (attention out, FFN out) of tokens*d*2 bytes; a 2-rank ring sends
    # 2(n-1)/n = 1 x the buffer per rank (and beats the tree, which sends 2x); two ranks; prefill + every decode step
    sys2 = with_pj("h100-sxm:2", 10.0, 0.0)
    r = layout_columns(cols_of(LLAMA), sys2, "tp=2", WL, "bf16")
    d, L = 4096, 32
    bytes_per_rank = L * 2 * (WL.batch * WL.input_tokens * d * BA + WL.output_tokens * WL.batch * d * BA)
    joules = 2 * bytes_per_rank * 8 * 10.0e-12
    assert r["link_joules_per_token"][0] == pytest.approx(joules / (WL.batch * WL.output_tokens), rel=1e-12)
    # the rest of the energy is untouched: the same layout on links that cost nothing
    free = layout_columns(cols_of(LLAMA), with_pj("h100-sxm:2", 0.0, 0.0), "tp=2", WL, "bf16")
    assert free["link_joules_per_token"][0] == 0.0
    assert r["joules_per_token"][0] - free["joules_per_token"][0] == pytest.approx(r["link_joules_per_token"][0],
                                                                                    rel=1e-9)  # fmt: skip
    for k in ("ttft_s", "decode_s", "memory_per_device_bytes", "comm_s_decode"):
        assert r[k][0] == free[k][0]


def test_ep_across_nodes_splits_link_and_network_energy_by_hand():
    # 16 ranks on nodes of 8: EP=16 with data-parallel attention. Each rank dispatches and combines its own tokens'
    # top_k copies (batch/16 sequences): an all-to-all sends 7/16 of it on the links, 8/16 on the network
    sys16 = with_pj("h100-sxm:16", 3.0, 40.0)
    wl = R.Workload(32, 256, 16)
    r = layout_columns(cols_of(MIX), sys16, "ep=16,dp_attn=16", wl, "bf16")
    d, L, k = 4096, 32, 2
    own = wl.batch // 16  # sequences per attention group
    msg_tokens = own * wl.input_tokens + wl.output_tokens * own  # prefill + every decode step
    per_layer_bytes = 2 * msg_tokens * k * d * BA  # dispatch + combine
    per_rank = L * per_layer_bytes * (7 / 16 * 3.0 + 8 / 16 * 40.0) * 8e-12
    assert r["link_joules_per_token"][0] == pytest.approx(16 * per_rank / (wl.batch * wl.output_tokens), rel=1e-12)


def test_pp_stage_sends_by_hand():
    # PP=2 alone: no collectives, one stage boundary; every token's activations cross it once in prefill and once
    # per decode step, from the one device of the stage's group
    sys2 = with_pj("h100-sxm:2", 7.0, 0.0)
    r = layout_columns(cols_of(LLAMA), sys2, "pp=2", WL, "bf16")
    d = 4096
    sends = WL.batch * WL.input_tokens + WL.output_tokens * WL.batch
    assert r["link_joules_per_token"][0] == pytest.approx(sends * d * BA * 8 * 7e-12 / (WL.batch * WL.output_tokens),
                                                           rel=1e-12)  # fmt: skip


def test_collective_energy_functions_match_the_traffic_they_time():
    s = with_pj("h100-sxm:8", 1.0, 1.0)
    big, small = np.array([1e9]), np.array([1e3])
    # ring for a large buffer (2(n-1)/n S), tree for a tiny one (2 S): the algorithm the time model picks
    assert C.all_reduce_j(big, 8, s)[0] == pytest.approx(2 * 7 / 8 * 1e9 * 8e-12)
    assert C.all_reduce_j(small, 8, s)[0] == pytest.approx(2 * 1e3 * 8e-12)
    assert C.all_to_all_j(big, 8, s)[0] == pytest.approx(7 / 8 * 1e9 * 8e-12)
    assert C.p2p_j(big, s, False)[0] == pytest.approx(1e9 * 8e-12)
    assert C.all_reduce_j(big, 1, s)[0] == 0.0
