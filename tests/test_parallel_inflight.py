"""In-flight batching under a layout (rooflaw.parallel.inflight): the steady state against a brute-force
simulation of the same schedule with the layout's step costs, one request in flight by hand, and bad input."""

import json

import pytest

import rooflaw as rl
from rooflaw.constraints.parallel.inflight import busiest_rank, prefix_attention_s
from rooflaw.constraints.serving import Schedule, simulate
from rooflaw.constraints.serving_queue import queue_wait_s

ARCH = "layers=4,d_model=1024,heads=16,kv_heads=4,ffn=2816,vocab=32000"
ENGINE = "tensorrt-llm"


@pytest.fixture(scope="module")
def setup():
    return rl.load_architecture(ARCH), rl.get_system("h100-sxm:2"), rl.parallel.parse_layout("tp=2")


def _layout(arch, sysm, lay, b, s_in, s_out):
    return rl.parallel.evaluate_layout(arch, sysm, lay, rl.Workload(b, s_in, s_out), "bf16", ENGINE)


def test_steady_state_matches_simulation_with_layout_steps(setup):
    arch, sysm, lay = setup
    C, P, O, T = 4, 300, 20, 256
    out = rl.parallel.inflight(arch, sysm, lay, rl.Workload(C, P, O), "bf16", ENGINE, token_budget=T)
    step = rl.parallel.layout_step_cost(arch, sysm, lay, "bf16", ENGINE, P, O, token_budget=T)
    brute = simulate(Schedule(C, P, O, T), step, n_requests=30 * C, warmup=10 * C)
    assert 1.0 / out["tokens_per_s"] == pytest.approx(brute, rel=0.02)
    assert out["tokens_per_s_per_device"] == pytest.approx(out["tokens_per_s"] / 2, rel=1e-12)
    # Little's law: C requests in flight, each latency_s long, O tokens each
    assert out["latency_s"] == pytest.approx(C * O / out["tokens_per_s"], rel=1e-12)


def test_one_request_is_its_prefill_then_decode_steps(setup):
    arch, sysm, lay = setup
    P, O = 500, 17
    out = rl.parallel.inflight(arch, sysm, lay, rl.Workload(1, P, O), "bf16", ENGINE)
    pre = _layout(arch, sysm, lay, 1, P, 1)["ttft_s"]
    dec = _layout(arch, sysm, lay, 1, P, O)["tpot_s"]
    assert out["ttft_s"] == pytest.approx(pre, rel=1e-9)
    assert out["tpot_s"] == pytest.approx(dec, rel=1e-9)
    assert out["latency_s"] == pytest.approx(pre + (O - 1) * dec, rel=1e-9)


def test_mixed_step_adds_decode_attention_to_the_prefill(setup):
    """A step of c prompt tokens beside n decoders costs more than either part alone and less than both."""
    arch, sysm, lay = setup
    P, O, c, n = 2000, 500, 1000, 64
    step = rl.parallel.layout_step_cost(arch, sysm, lay, "bf16", ENGINE, P, O)
    pre = _layout(arch, sysm, lay, 1, c + n, 1)["ttft_s"]
    dec = _layout(arch, sysm, lay, n, P, O)["tpot_s"]
    assert max(pre, dec) < step(c, n) < pre + dec
    assert step(0, n) == pytest.approx(dec, rel=1e-12)


def test_dp_replicas_add_throughput_not_per_device(setup):
    arch, _, _ = setup
    one = rl.parallel.inflight(arch, rl.get_system("h100-sxm:2"), "tp=2", rl.Workload(8, 200, 30), "bf16", ENGINE)
    two = rl.parallel.inflight(arch, rl.get_system("h100-sxm:4"), "tp=2,dp=2", rl.Workload(8, 200, 30), "bf16",
                               ENGINE)  # fmt: skip
    assert two["tokens_per_s"] == pytest.approx(2 * one["tokens_per_s"], rel=1e-9)
    assert two["tokens_per_s_per_device"] == pytest.approx(one["tokens_per_s_per_device"], rel=1e-9)


@pytest.mark.parametrize(
    "wl,budget,field", [(rl.Workload(16, 100, 10), 8, "token_budget"), (rl.Workload(2, 100, 1), 64, "output_tokens")]
)
def test_bad_input_names_the_field(setup, wl, budget, field):
    arch, sysm, lay = setup
    with pytest.raises(rl.RooflawError, match=field):
        rl.parallel.inflight(arch, sysm, lay, wl, "bf16", ENGINE, token_budget=budget)


def test_cli_json_carries_the_inflight_steady_state(capsys, setup):
    from cli_helpers import run_cli

    arch, sysm, lay = setup
    code, out, _ = run_cli(capsys, "evaluate", "--arch", ARCH, "--system", "h100-sxm:2", "--layout", "tp=2",
                           "--batch", "1,16", "--input-tokens", "300", "--output-tokens", "20", "--engine", ENGINE,
                           "--json")  # fmt: skip
    assert code == 0
    sweep = json.loads(out)["sweep"]
    for row in sweep:
        ref = rl.parallel.inflight(arch, sysm, lay, rl.Workload(row["batch"], 300, 20), "fp16", ENGINE)
        assert row["inflight"] == pytest.approx(ref, rel=1e-12)


def test_a_step_prefills_prompts_not_one_long_sequence(setup):
    """Two prompts' tokens in one step attend over their own prompt each: the prefill of 2 sequences of P."""
    arch, sysm, lay = setup
    P = 500
    step = rl.parallel.layout_step_cost(arch, sysm, lay, "bf16", ENGINE, P, 50)
    assert step(2 * P, 0) == pytest.approx(_layout(arch, sysm, lay, 2, P, 1)["ttft_s"], rel=1e-12)
    assert step(2 * P, 0) < _layout(arch, sysm, lay, 1, 2 * P, 1)["ttft_s"]  # one 1000-token sequence: S² more


def test_attention_dp_steps_run_at_the_busiest_rank():
    """One 600-token prompt per step on average over 2 attention-DP ranks, no budget: each rank prefills a whole
    prompt (600 tokens) in half its steps, so 1 − 0.5² = 3/4 of the steps carry one, priced as both ranks at 600
    tokens (the MoE dispatch pads to the busiest rank), the rest (no decoders) cost nothing."""
    moe = rl.load_architecture("layers=4,d_model=1024,heads=16,kv_heads=4,ffn=1024,experts=8,top_k=2,vocab=32000")
    sysm = rl.get_system("h100-sxm:2")
    lay = rl.parallel.parse_layout("ep=2,dp_attn=2")
    step = rl.parallel.layout_step_cost(moe, sysm, lay, "bf16", ENGINE, 600, 50)
    busy = rl.parallel.evaluate_layout(moe, sysm, lay, rl.Workload(2, 600, 1), "bf16", ENGINE)["ttft_s"]
    even = rl.parallel.evaluate_layout(moe, sysm, lay, rl.Workload(2, 300, 1), "bf16", ENGINE)["ttft_s"]
    assert step(600, 0) == pytest.approx(0.75 * busy, rel=1e-12) and busy > even


def test_busiest_rank_by_hand():
    # 8 ranks, 512 prompt tokens and 1024 decoders per step, 1024-token prompts, 8 × 1151 tokens of budget:
    # 128 decoders a rank, chunks of min(1024, 1151 − 128) = 1023, prefilled in 64/1023 of a rank's steps
    tokens, share = busiest_rank(512, 1024, 1024, 8, 8 * 1151)
    assert tokens == 128 + 1023
    assert share == pytest.approx(0.40358, abs=5e-5)  # 1 − (959/1023)^8 = 1 − exp(8·ln 0.937439)
    # prompts fill every rank's budget every step: the even split (8 × 1024 = c + n)
    assert busiest_rank(4096, 4096, 1000, 8, 8192) == (1024, 1.0)
    # no budget: a rank prefills whole prompts
    assert busiest_rank(100, 0, 400, 2, None) == (400, pytest.approx(1 - (1 - 50 / 400) ** 2))


def test_poisson_arrivals_wait_the_mean_residual_step(setup):
    """Open loop: TTFT and latency grow by Σkτ²/(2Σkτ) over the schedule's steps plus the prompts queued ahead
    (tests/test_serving_queue.py: a little here, three 300-token prompts fit a step); throughput and TPOT do not."""
    arch, sysm, lay = setup
    C, P, O, T = 6, 300, 40, 1024
    wl = rl.Workload(C, P, O)
    closed = rl.parallel.inflight(arch, sysm, lay, wl, "bf16", ENGINE, token_budget=T)
    open_ = rl.parallel.inflight(arch, sysm, lay, wl, "bf16", ENGINE, token_budget=T, arrivals="poisson")
    step = rl.parallel.layout_step_cost(arch, sysm, lay, "bf16", ENGINE, P, O)
    taus = [(k, step(c, n)) for c, n, k in Schedule(C, P, O, T).steps()]
    wait = sum(k * t * t for k, t in taus) / (2 * sum(k * t for k, t in taus))
    queued = queue_wait_s(Schedule(C, P, O, T), step, (C - 1) / (closed["latency_s"] + open_["wait_s"]))
    assert open_["wait_s"] == pytest.approx(queued, rel=1e-6)
    assert wait < open_["wait_s"] < 1.05 * wait and wait > 0
    wait = open_["wait_s"]
    assert open_["ttft_s"] == pytest.approx(closed["ttft_s"] + wait, rel=1e-12)
    assert open_["tpot_s"] == pytest.approx(closed["tpot_s"], rel=1e-12)
    assert open_["tokens_per_s"] == pytest.approx(closed["tokens_per_s"], rel=1e-12)
    alone = rl.parallel.inflight(arch, sysm, lay, rl.Workload(1, P, O), "bf16", ENGINE, arrivals="poisson")
    assert alone["wait_s"] == 0.0  # nobody else's step to wait for
    with pytest.raises(rl.RooflawError, match="arrivals"):
        rl.parallel.inflight(arch, sysm, lay, wl, "bf16", ENGINE, arrivals="bursty")


def test_a_pipeline_step_is_kept_full_by_the_other_micro_batches():
    """Under pp a step's prefill costs the stages' busy time (TTFT less the fill/drain bubble), not the makespan."""
    arch = rl.load_architecture(ARCH)
    sysm, lay = rl.get_system("h100-sxm:2"), rl.parallel.parse_layout("pp=2,chunk=256")
    P = 1024
    step = rl.parallel.layout_step_cost(arch, sysm, lay, "bf16", ENGINE, P, 50)
    one = rl.parallel.evaluate_layout(arch, sysm, lay, rl.Workload(1, P, 1), "bf16", ENGINE)
    assert one["bubble_fraction"] > 0
    assert step(P, 0) == pytest.approx(one["ttft_s"] * (1 - one["bubble_fraction"]), rel=1e-12)
    assert step(P, 0) < one["ttft_s"]


def test_max_throughput_is_inflight_at_the_largest_batch_that_fits(setup):
    arch, sysm, lay = setup
    wl = rl.Workload(1, 2000, 500)
    fits = rl.parallel.max_batch(arch, sysm, lay, wl, "bf16")
    # trtllm-bench's budget for the requests that fit: min(fits, 4096)·(1 + 2000/500), at most 32,768
    budget = min(32768, 1024 * -(-min(fits, 4096) * 5 // 1024))
    for cap in (None, 64):
        b = min(fits, cap) if cap else fits
        got = rl.parallel.max_throughput(arch, sysm, lay, wl, "bf16", ENGINE, batch_cap=cap)
        ref = rl.parallel.inflight(arch, sysm, lay, rl.Workload(b, 2000, 500), "bf16", ENGINE, max(budget, b))
        assert got["batch"] == b and got["tokens_per_s"] == pytest.approx(ref["tokens_per_s"], rel=1e-12)
    fixed = rl.parallel.max_throughput(arch, sysm, lay, wl, "bf16", ENGINE, token_budget=8192, batch_cap=64)
    ref = rl.parallel.inflight(arch, sysm, lay, rl.Workload(64, 2000, 500), "bf16", ENGINE, 8192)
    assert fixed["tokens_per_s"] == pytest.approx(ref["tokens_per_s"], rel=1e-12)
    with pytest.raises(rl.RooflawError, match="batch_cap"):
        rl.parallel.max_throughput(arch, sysm, lay, wl, "bf16", ENGINE, batch_cap=0)
    big = rl.load_architecture("llama-3.1-70b")  # 141 GB of bf16 weights: nothing fits one H100
    with pytest.raises(rl.RooflawError, match="fits"):
        rl.parallel.max_throughput(big, rl.get_system("h100-sxm:1"), "tp=1", wl, "bf16", ENGINE)


@pytest.mark.parametrize(
    "requests,isl,osl,pp,expected",
    [
        # hand-computed from trtllm-bench's finetune_setting (TensorRT-LLM bench/build/tuning.py)
        (1645.3, 1000, 1000, 1, (1792, 3328)),  # bs: 256*ceil(1645.3/256); tokens 3290.6 -> 256*ceil(/256)
        (926.0, 2048, 128, 1, (1024, 16384)),  # bs: 128*ceil(926/128); tokens 926*17 = 15742 -> 1024*ceil(/1024)
        (5000.0, 2048, 128, 1, (4096, 32768)),  # both capped: 4096 requests, 32,768 tokens
        (40.0, 128, 2048, 1, (64, 2048)),  # at least 64 requests and 2,048 tokens
        (200.0, 1000, 1000, 1, (224, 2048)),  # 32*ceil(200/32); 400 tokens -> the 2,048 floor
        (2162.0, 1000, 1000, 4, (640, 2048)),  # pp 4: 540.5 per stage -> 128*ceil; 1081 tokens -> 2,048
        (3000.0, 1000, 1000, 1, (3072, 6144)),  # 6000 tokens -> 512*ceil(6000/512)
    ],
)
def test_trtllm_bench_settings_by_hand(requests, isl, osl, pp, expected):
    assert rl.parallel.trtllm_bench_settings(requests, isl, osl, pp) == expected


def test_trtllm_bench_settings_bad_input():
    with pytest.raises(rl.RooflawError, match="requests"):
        rl.parallel.trtllm_bench_settings(0.0, 100, 100)
    with pytest.raises(rl.RooflawError, match="output_tokens"):
        rl.parallel.trtllm_bench_settings(10.0, 100, 0)


def test_more_in_flight_than_the_engine_runs_queue_for_a_slot(setup):
    """12 clients, 4 slots: the engine's steady state is 4 requests' (against a brute-force run of 12 clients and 4
    slots), and by Little's law each request also waits 8/4 of the 4-slot latency outside."""
    arch, sysm, lay = setup
    C, M, P, O, T = 12, 4, 300, 20, 256
    out = rl.parallel.inflight(arch, sysm, lay, rl.Workload(C, P, O), "bf16", ENGINE, T, max_seqs=M)
    four = rl.parallel.inflight(arch, sysm, lay, rl.Workload(M, P, O), "bf16", ENGINE, T)
    step = rl.parallel.layout_step_cost(arch, sysm, lay, "bf16", ENGINE, P, O)
    brute = simulate(Schedule(C, P, O, T), step, n_requests=30 * C, warmup=10 * C, max_running=M)
    assert 1.0 / out["tokens_per_s"] == pytest.approx(brute, rel=0.03)
    assert out["latency_s"] == pytest.approx(C * O * brute, rel=0.03)  # Little's law on the brute-force run
    assert out["tokens_per_s"] == pytest.approx(four["tokens_per_s"], rel=1e-12)
    assert out["wait_s"] == pytest.approx(four["latency_s"] * (C - M) / M, rel=1e-12)
    assert out["ttft_s"] == pytest.approx(four["ttft_s"] + out["wait_s"], rel=1e-12)
    same = rl.parallel.inflight(arch, sysm, lay, rl.Workload(M, P, O), "bf16", ENGINE, T, max_seqs=M)
    assert same == four
    with pytest.raises(rl.RooflawError, match="max_seqs"):
        rl.parallel.inflight(arch, sysm, lay, rl.Workload(C, P, O), "bf16", ENGINE, T, max_seqs=0)


def test_prefix_attention_of_chunks_by_brute_force():
    """A prefill of b prompts of s tokens costing b·(a·s + q·s²/2) seconds (linear rows, causal attention): chunks
    of a P-token prompt attend over the tokens before them, q·Σ s_i·p_i over the chunks (s_i tokens at offset p_i),
    summed here chunk by chunk."""
    a, q = 3e-6, 2e-9
    prefill = lambda b, s: b * (a * s + q * s * s / 2)  # noqa: E731
    P, chunk = 12000, 3000
    brute = sum(q * chunk * p for p in range(0, P, chunk))
    assert prefix_attention_s(prefill, P, chunk) == pytest.approx(brute, rel=1e-12)
    # attention-DP: two groups, each prefilling its own prompt at once (the same seconds)
    two = lambda b, s: b / 2 * (a * s + q * s * s / 2)  # noqa: E731
    assert prefix_attention_s(two, P, chunk, groups=2) == pytest.approx(brute, rel=1e-12)
    assert prefix_attention_s(prefill, P, P) == 0.0


def test_a_chunked_prompt_costs_its_whole_causal_prefill():
    """One request alone, its 16k-token prompt in 2k-token chunks: the chunks together cost the unchunked prefill
    (the same rows, the same causal attention), not eight self-contained 2k prompts."""
    arch = rl.load_architecture("llama-3.1-8b")
    sysm, lay = rl.get_system("h100-sxm:1"), rl.parallel.parse_layout("tp=1")
    P, O, T = 16384, 4, 2048
    out = rl.parallel.inflight(arch, sysm, lay, rl.Workload(1, P, O), "bf16", ENGINE, token_budget=T)
    whole = _layout(arch, sysm, lay, 1, P, 1)["ttft_s"]
    apart = (P // T) * _layout(arch, sysm, lay, 1, T, 1)["ttft_s"]
    assert out["ttft_s"] == pytest.approx(whole, rel=0.03)
    assert apart < 0.9 * whole  # what the chunks cost without their prefixes
