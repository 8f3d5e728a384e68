"""Issue 28 (Reliability II), tests that catch the next wrong number: serving rates pinned by hand for TP, EP, PP
and Helix layouts and over a batch sweep, the EP all-to-all time computed by hand, and a study's identity that
holds the device's figures and the space (a resume on changed figures is refused, naming the field)."""

from __future__ import annotations

import dataclasses
import math

import pytest

import rooflaw as rl
from rooflaw.constraints.parallel.sweep import batch_sweep, evaluate_layout
from rooflaw.errors import RooflawError

B, S_IN, S_OUT = 64, 512, 32
#: layout -> (devices it occupies, model replicas), counted by hand from the layout text
LAYOUTS = {
    "tp=8": (8, 1),
    "tp=2,dp=4": (8, 4),
    "ep=8,dp_attn=8": (8, 1),
    "tp=2,ep=4": (8, 1),
    "pp=4,tp=2": (8, 1),
    "pp=2,tp=2,dp=2": (8, 2),
    "helix=kvp4,tpep8": (8, 1),
}


@pytest.fixture(scope="module")
def setup():
    return rl.from_hf_config("mixtral-8x7b"), rl.get_system("h100-sxm:8")


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_tokens_per_second_pinned_by_hand(setup, layout):
    arch, system = setup
    devices, replicas = LAYOUTS[layout]
    r = evaluate_layout(arch, system, layout, rl.Workload(B, S_IN, S_OUT), "bf16")
    assert r["devices"] == devices
    # one user receives S_out tokens over the decode: the rate is S_out / decode_s, one token per TPOT
    assert r["tokens_per_s_per_user"] == pytest.approx(S_OUT / r["decode_s"], rel=1e-12)
    assert r["tokens_per_s_per_user"] == pytest.approx(1.0 / r["tpot_s"], rel=1e-12)
    assert r["tpot_s"] == pytest.approx(r["decode_s"] / S_OUT, rel=1e-12)
    # every replica serves B users at that rate; the devices share it
    assert r["tokens_per_s"] == pytest.approx(replicas * B * S_OUT / r["decode_s"], rel=1e-12)
    assert r["tokens_per_s_per_device"] == pytest.approx(replicas * B * S_OUT / r["decode_s"] / devices, rel=1e-12)
    assert r["latency_s"] == pytest.approx(r["ttft_s"] + r["decode_s"], rel=1e-12)


def test_one_device_layout_rates_by_hand(setup):
    arch, _ = setup
    system = rl.get_system("h100-sxm:1")
    r = evaluate_layout(arch, system, "tp=1", rl.Workload(4, S_IN, S_OUT), "bf16")
    assert r["tokens_per_s_per_user"] == pytest.approx(S_OUT / r["decode_s"], rel=1e-12)
    assert r["tokens_per_s_per_device"] == pytest.approx(4 * S_OUT / r["decode_s"], rel=1e-12)


@pytest.mark.parametrize("layout", ["tp=2,dp=4", "pp=4,tp=2", "ep=8,dp_attn=8"])
def test_batch_sweep_rows_pinned_by_hand(setup, layout):
    arch, system = setup
    devices, replicas = LAYOUTS[layout]
    batches = [1, 8, 64]
    rows = batch_sweep(arch, system, layout, batches, rl.Workload(1, S_IN, S_OUT), "bf16")
    assert [row["batch"] for row in rows] == batches
    for row in rows:
        b = row["batch"]
        alone = evaluate_layout(arch, system, layout, rl.Workload(b, S_IN, S_OUT), "bf16")
        assert row["decode_s"] == pytest.approx(alone["decode_s"], rel=1e-12)  # each row at its own batch
        assert row["tokens_per_s_per_user"] == pytest.approx(S_OUT / row["decode_s"], rel=1e-12)
        assert row["tokens_per_s_per_user"] == pytest.approx(1.0 / row["tpot_s"], rel=1e-12)
        assert row["tokens_per_s_per_device"] == pytest.approx(replicas * b * S_OUT / row["decode_s"] / devices,
                                                               rel=1e-12)  # fmt: skip
    # a larger batch is never served faster per user
    rates = [row["tokens_per_s_per_user"] for row in rows]
    assert rates == sorted(rates, reverse=True)


def _a2a(nbytes: float, n: int, system) -> float:
    """All-to-all over a switch inside a node: one latency, then (n-1)/n of what a rank sends (collectives.py)."""
    return system.link_latency + (n - 1) / n * nbytes / system.link_bw


def _all_reduce(nbytes: float, n: int, system) -> float:
    """The faster of ring (2(n-1)·α + 2(n-1)/n·S/bw) and tree (2⌈log2 n⌉·α + 2·S/bw), as NCCL's tuner picks."""
    a, bw = system.link_latency, system.link_bw
    return min(2 * (n - 1) * a + 2 * (n - 1) / n * nbytes / bw, 2 * math.ceil(math.log2(n)) * a + 2 * nbytes / bw)


@pytest.mark.parametrize("layout, ep, tp", [("ep=8,dp_attn=8", 8, 1), ("tp=2,ep=4", 4, 2)])
def test_ep_communication_time_by_hand(setup, layout, ep, tp, monkeypatch):
    # the alpha-beta collectives of the system file, by hand (the fitted-curve path: test_kernel_collectives.py)
    from rooflaw.constraints.parallel import collectives

    monkeypatch.setattr(collectives, "system_curves", lambda system: None)
    """Two all-to-alls (dispatch, combine) per MoE layer of tokens·top_k·d·bytes/tp over ep ranks, plus (tp > 1)
    the all-reduce of the expert outputs over tp; prefill moves every prompt token, each decode step one."""
    arch, system = setup
    assert arch.experts == 8 and arch.top_k == 2 and arch.d_model == 4096 and arch.layers == 32
    b_a = 2.0  # bf16 activations
    attn_groups = 8 // tp  # data-parallel attention groups (dp_attn defaults to ep)
    seqs = math.ceil(B / attn_groups)  # sequences one attention group holds

    def per_layer(tokens_attn: float, tokens_ffn: float) -> float:
        t = 2 * _a2a(tokens_attn / tp * arch.top_k * arch.d_model * b_a, ep, system)
        if tp > 1:  # the attention's own TP all-reduce, and the expert outputs' over tp
            t += _all_reduce(tokens_attn * arch.d_model * b_a, tp, system)
            t += _all_reduce(tokens_ffn * arch.top_k / ep * arch.d_model * b_a, tp, system)
        return t

    r = evaluate_layout(arch, system, layout, rl.Workload(B, S_IN, S_OUT), "bf16")
    assert r["comm_s_prefill"] == pytest.approx(arch.layers * per_layer(seqs * S_IN, B * S_IN), rel=1e-9)
    assert r["comm_s_decode"] == pytest.approx(S_OUT * arch.layers * per_layer(seqs, B), rel=1e-9)
    assert r["comm_s_prefill"] > 0 and r["comm_s_decode"] > 0


# ---- a study's identity -------------------------------------------------------------------------------------
def _problem(device):
    return rl.Problem(law="paper-2602.10377", device=device, space="paper")


def test_a_study_resumed_on_changed_device_figures_is_refused_naming_the_field(tmp_path):
    from rooflaw.solver import search

    url = f"sqlite:///{tmp_path / 's.db'}"
    dev = rl.get_device("h100-sxm")
    search(_problem(dev), sampler="random", n_trials=4, seed=0, storage=url, study_name="s")
    faster = dataclasses.replace(dev, memory_bandwidth=2 * dev.memory_bandwidth)  # same id, other figures
    with pytest.raises(RooflawError, match=r"memory_bandwidth") as e:
        search(_problem(faster), sampler="random", n_trials=4, seed=0, storage=url, study_name="s")
    assert "\n" not in str(e.value)
    search(_problem(dev), sampler="random", n_trials=6, seed=0, storage=url, study_name="s")  # the same resumes


def test_a_study_resumed_on_an_edited_space_is_refused_naming_the_dimension(tmp_path):
    from rooflaw.solver import search

    url = f"sqlite:///{tmp_path / 's.db'}"
    dev = rl.get_device("h100-sxm")
    space = rl.get_space("paper")
    search(rl.Problem(law="paper-2602.10377", device=dev, space=space), sampler="random", n_trials=4, seed=0,
           storage=url, study_name="s")  # fmt: skip
    dims = {k: v for k, v in space.to_dict().items() if k not in ("size", "name")}
    edited = rl.Space.from_mapping({**dims, "layers": list(dims["layers"])[:-1]}, name="paper")
    with pytest.raises(RooflawError, match=r"space\.layers"):
        search(rl.Problem(law="paper-2602.10377", device=dev, space=edited), sampler="random", n_trials=4, seed=0,
               storage=url, study_name="s")  # fmt: skip


def test_the_default_study_name_differs_when_the_figures_differ():
    from rooflaw.solver.search import safety

    dev = rl.get_device("h100-sxm")
    faster = dataclasses.replace(dev, memory_bandwidth=2 * dev.memory_bandwidth)
    a = safety.fingerprint(safety.study_definition(_problem(dev), ("loss", "latency")))
    b = safety.fingerprint(safety.study_definition(_problem(faster), ("loss", "latency")))
    assert a != b
