"""Disaggregated serving: the rate-matched model against a discrete-event simulation of the two pools, the KV cache
by hand, the split the joint search picks against brute force, aggregated serving unchanged, the grammar."""

from __future__ import annotations

import json

import numpy as np
import pytest
from cli_helpers import run_cli

from rooflaw import Workload, api, load_architecture
from rooflaw.constraints.parallel.disagg import (
    disagg_columns,
    kv_bytes,
    parse_disagg,
    simulate,
    splits,
)
from rooflaw.solver.discrete.layout_options import disagg_options

SYS = api.get_system("hgx-h100")
LLAMA = load_architecture("llama-3.1-8b")


def _cols(a):
    return {k: np.array([float(v)]) for k, v in a.columns().items()}


def test_kv_bytes_by_hand():
    # Llama-3.1-8B: 32 layers, 8 KV heads of 128, K and V, fp8 KV cache (1 byte), 2048 prompt tokens
    b = kv_bytes(_cols(LLAMA), SYS.device, 2048, "fp8")
    assert float(b[0]) == 2 * 32 * 8 * 128 * 1 * 2048


@pytest.mark.parametrize(
    "text,wl",
    [
        ("prefill=tp=1x2,decode=tp=2x3", Workload(32, 2048, 256)),  # decode-bound
        ("prefill=tp=1x1,decode=tp=1x7", Workload(64, 8192, 64)),  # prefill-bound
        ("prefill=tp=2x1,decode=tp=2x3", Workload(8, 4096, 512)),
    ],
)
def test_tokens_per_s_match_a_discrete_event_simulation_of_two_pools(text, wl):
    d = parse_disagg(text)
    r = {k: float(v[0]) for k, v in disagg_columns(_cols(LLAMA), SYS, d, wl, "fp8").items()}
    streams = min(d.prefill.layout.devices, d.decode.layout.devices)
    channels = max(1, min(d.prefill.devices, d.decode.devices) // streams)
    n = 3000
    sim = simulate(d.prefill.replicas, r["prefill_s"], d.decode.replicas, wl.batch, wl.output_tokens * r["tpot_s"],
                   channels, r["kv_transfer_s"], n, warmup=n // 3)  # fmt: skip
    assert sim == pytest.approx(r["rate"], rel=0.02)
    assert r["tokens_per_s"] == pytest.approx(r["rate"] * wl.output_tokens)
    assert r["tokens_per_s_per_device"] == pytest.approx(r["tokens_per_s"] / d.devices)


def test_a_link_bound_split_is_limited_by_the_transfer():
    # one slow channel: the simulated rate is the link's, and the model names it as the bound
    rate = simulate(4, 0.01, 4, 64, 1.0, 1, 0.05, 2000, warmup=500)
    assert rate == pytest.approx(1 / 0.05, rel=0.02)


def test_the_joint_search_picks_the_best_split():
    wl = Workload(32, 2048, 256)
    opts = disagg_options(SYS, "prefill=tp=1,decode=tp=2")
    assert len(opts) == len(splits(SYS, "tp=1", "tp=2")) == 3
    best = max(splits(SYS, "tp=1", "tp=2"), key=lambda d: disagg_columns(_cols(LLAMA), SYS, d, wl, "fp8")
               ["tokens_per_s"][0])  # fmt: skip
    prob = api.Problem(law="paper-2602.10377", device="h100-sxm", space="paper", precision="fp8", workload=wl)
    cols = _cols(LLAMA)
    tps = {o.name: float(o.evaluate(cols, prob)["tokens_per_s"][0]) for o in opts}
    assert max(tps, key=tps.get) == f"disagg {best.describe()}"
    # and the search over the joint space keeps, for a fixed architecture, the split of highest throughput
    res = api.joint_frontier(prob, api.JointSpace(options=tuple(opts)), "loss,throughput")
    top = res.frontier.loc[res.frontier["loss"].idxmin()]
    same = {k: float(top[k]) for k in ("layers", "d_model", "heads", "kv_heads", "ffn")}
    arch_cols = {k: np.array([v]) for k, v in same.items()}
    arch_cols.update(head_dim=np.array([float(top["head_dim"])]), vocab=np.array([float(top["vocab"])]),
                     experts=np.array([float(top["experts"])]), top_k=np.array([float(top["top_k"])]))  # fmt: skip
    tps_top = {o.name: float(o.evaluate(arch_cols, prob)["tokens_per_s"][0]) for o in opts}
    assert top["option"] == max(tps_top, key=tps_top.get)


def test_aggregated_serving_is_unchanged_by_disaggregation(capsys):
    args = ("evaluate", "--system", "hgx-h100", "--hf-config", "llama-3.1-8b", "--precision", "fp8", "--batch", "32",
            "--input-tokens", "2048", "--output-tokens", "256", "--layout", "tp=4,dp=2", "--json")  # fmt: skip
    code, out, _ = run_cli(capsys, *args)
    assert code == 0
    d = json.loads(out)
    assert "disagg" not in d
    ref = api.evaluate_layout(LLAMA, SYS, api.parse_layout("tp=4,dp=2"), Workload(32, 2048, 256), "fp8", None, False)
    for k in ("ttft_s", "tpot_s", "tokens_per_s", "tokens_per_s_per_device", "memory_per_device_bytes"):
        assert d[k] == ref[k], k


@pytest.mark.parametrize(
    "text",
    [
        "prefill=tp=2",
        "decode=tp=2,prefill=tp=2",
        "prefill=tp=4x2,decode=tp=8",
        "prefill=foo,decode=tp=2",
        "prefill=tp=2x0,decode=tp=2",
    ],  # fmt: skip
)
def test_cli_bad_disagg_is_a_one_line_error(capsys, text):
    code, _, err = run_cli(capsys, "evaluate", "--system", "hgx-h100", "--hf-config", "llama-3.1-8b", "--disagg", text)
    assert code == 2 and err.strip().count("\n") == 0 and "disagg=" in err


def test_cli_disagg_reports_rates_and_the_chosen_split(capsys):
    code, out, _ = run_cli(capsys, "evaluate", "--system", "hgx-h100", "--hf-config", "llama-3.1-8b", "--precision",
                           "fp8", "--batch", "32", "--input-tokens", "2048", "--output-tokens", "256", "--disagg",
                           "prefill=tp=1,decode=tp=2", "--json")  # fmt: skip
    assert code == 0
    d = json.loads(out)
    assert d["split_chosen"] and d["devices"] <= 8
    assert d["rate"] == pytest.approx(min(d["prefill_rate"], d["decode_rate"], d["link_rate"]))
    assert d["ttft_s"] == pytest.approx(d["prefill_s"] + d["kv_transfer_s"])


def test_cli_frontier_searches_the_splits_with_the_layouts(capsys, tmp_path):
    from cli_helpers import space_file

    space = space_file(tmp_path)
    code, out, err = run_cli(capsys, "frontier", "--device", "h100-sxm", "--system", "hgx-h100", "--space", str(space),
                             "--layouts", "tp=8;disagg:prefill=tp=1,decode=tp=2", "--precision", "fp8", "--batch",
                             "32", "--input-tokens", "2048", "--output-tokens", "256", "--objectives",
                             "loss,latency,throughput", "--json", "--out", str(tmp_path / "f.csv"))  # fmt: skip
    assert code == 0, err
    d = json.loads(out)
    assert d["combinations"] == 1 + len(splits(SYS, "tp=1", "tp=2"))  # tp=8 and every maximal split
    import pandas as pd

    names = set(pd.read_csv(tmp_path / "f.csv")["option"])
    assert names and names <= {"tp=8", *(f"disagg {s.describe()}" for s in splits(SYS, "tp=1", "tp=2"))}
    assert any(n.startswith("disagg") for n in names)  # a split is on the loss-latency-throughput frontier
