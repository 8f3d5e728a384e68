"""A prompt's wait under random arrivals (rooflaw.constraints.serving_queue): the closed form against a brute-force
simulation of the engine with Poisson arrivals, the service time by hand, and the in-flight steady state's use of
it (a fixed point, none for a lone request)."""

import math

import pytest

import rooflaw as rl
from rooflaw.constraints.serving import Schedule
from rooflaw.constraints.serving_queue import queue_wait_s, residual_s, service_s, simulate_arrivals


def linear_step(c: int, n: int) -> float:
    """A step of c prompt tokens and n decoders: 10 ms + 70 µs a prompt token + 100 µs a decoder."""
    return 0.01 + 7e-5 * c + 1e-4 * n


@pytest.mark.parametrize("rate", [1.5, 2.0])
def test_wait_matches_a_simulation_with_poisson_arrivals(rate):
    """5000-token prompts, one a step (8192-token budget): the prompts queue. The closed form (step in progress +
    Pollaczek-Khinchine queue of prompts) is within 12 % of the simulated mean TTFT; the step in progress alone
    misses it by more than 20 % at these loads (rho 0.54 and 0.73)."""
    P, O, T = 5000, 500, 8192
    sim = simulate_arrivals(Schedule(1, P, O, T), linear_step, rate, n_requests=3000, warmup=300, seed=1)
    C = round(sim["in_flight"])
    s = Schedule(C, P, O, T)
    own = linear_step(P, C - 1)  # its own prefill step, beside the other requests' decode tokens
    assert queue_wait_s(s, linear_step, rate) + own == pytest.approx(sim["ttft_s"], rel=0.12)
    assert residual_s(s, linear_step) + own < 0.8 * sim["ttft_s"]


def test_service_by_hand():
    # 1000-token prompts, 9 others decoding, 4096 tokens a step: 4 whole prompts fit (4087 // 1000)
    s = Schedule(10, 1000, 100, 4096)
    assert service_s(s, linear_step) == pytest.approx((0.01 + 7e-5 * 4000 + 1e-4 * 9) / 4, rel=1e-12)
    # a 5000-token prompt over 2048-token steps beside 7 decoders: chunks of 2041, 2041 and 918 tokens
    s = Schedule(8, 5000, 100, 2048)
    ref = 2 * (0.01 + 7e-5 * 2041 + 1e-4 * 7) + (0.01 + 7e-5 * 918 + 1e-4 * 7)
    assert service_s(s, linear_step) == pytest.approx(ref, rel=1e-12)


def test_wait_limits_and_bad_input():
    s = Schedule(20, 5000, 500, 8192)
    S = service_s(s, linear_step)
    assert queue_wait_s(s, linear_step, 0.0) == pytest.approx(residual_s(s, linear_step), rel=1e-12)
    assert math.isinf(queue_wait_s(s, linear_step, 1.0 / S))  # prompts arrive as fast as they are served
    with pytest.raises(rl.RooflawError, match="rate"):
        queue_wait_s(s, linear_step, -1.0)
    with pytest.raises(rl.RooflawError, match="rate"):
        simulate_arrivals(s, linear_step, 0.0, 10)


def test_inflight_clients_wait_is_the_fixed_point():
    """Under ``clients`` arrivals the wait is the closed form at the arrival rate it implies itself, (C - 1) /
    (latency without the wait + the wait); a lone request waits for nothing; ``closed`` never waits."""
    arch = rl.load_architecture("layers=4,d_model=1024,heads=16,kv_heads=4,ffn=2816,vocab=32000")
    sysm, lay, C, P, O, T = rl.get_system("h100-sxm:2"), "tp=2", 12, 3000, 50, 4096
    wl = rl.Workload(C, P, O)
    closed = rl.parallel.inflight(arch, sysm, lay, wl, "bf16", "tensorrt-llm", T)
    out = rl.parallel.inflight(arch, sysm, lay, wl, "bf16", "tensorrt-llm", T, arrivals="clients")
    assert closed["wait_s"] == 0
    step = rl.parallel.layout_step_cost(arch, sysm, rl.parallel.parse_layout(lay), "bf16", "tensorrt-llm", P, O)
    s = Schedule(C, P, O, T)
    w = out["wait_s"]
    assert w > residual_s(s, step) > 0
    assert w == pytest.approx(queue_wait_s(s, step, (C - 1) / (closed["latency_s"] + w)), rel=1e-6)
    assert out["ttft_s"] == pytest.approx(closed["ttft_s"] + w, rel=1e-12)
    assert out["tokens_per_s"] == pytest.approx(closed["tokens_per_s"], rel=1e-12)
    alone = rl.parallel.inflight(arch, sysm, lay, rl.Workload(1, P, O), "bf16", "tensorrt-llm", arrivals="clients")
    assert alone["wait_s"] == 0
