"""Chunked pipeline prefill priced by its schedule: the makespan formula against an event-by-event simulation, and a
long prompt's TTFT against a brute force that prices every chunk by evaluating the stage at each prompt length."""

from __future__ import annotations

import numpy as np
import pytest

import rooflaw as R
from rooflaw.constraints.parallel import collectives as C
from rooflaw.constraints.parallel import layout_columns
from rooflaw.constraints.parallel.serving import chunk_sizes, chunk_steps, pipeline_makespan
from rooflaw.constraints.roofline import complete_columns
from rooflaw.devices.system import get_system


def simulate(steps: np.ndarray, stages: int) -> float:
    """Chunk i enters stage s when stage s is free and stage s-1 has finished it: the schedule, one event at a time."""
    done = np.zeros((stages, len(steps)))
    for s in range(stages):
        for i, t in enumerate(steps):
            ready = max(done[s - 1, i] if s else 0.0, done[s, i - 1] if i else 0.0)
            done[s, i] = ready + t
    return float(done[-1, -1])


def test_makespan_equals_the_simulated_schedule():
    rng = np.random.default_rng(0)
    for _ in range(200):
        k, pp = int(rng.integers(1, 8)), int(rng.integers(1, 6))
        steps = rng.uniform(0.1, 3.0, (1, k))
        assert pipeline_makespan(steps, pp)[0] == pytest.approx(simulate(steps[0], pp), rel=1e-12)
    # equal chunks: the textbook (chunks + pp - 1) steps
    assert pipeline_makespan(np.full((1, 5), 2.0), 4)[0] == 2.0 * (5 + 4 - 1)


def test_chunk_steps_add_up_and_grow_with_the_context():
    sizes = chunk_sizes(10_000, 4096)
    assert sizes.tolist() == [4096, 4096, 1808]
    # quadratic context (FLOP-bound causal attention): A(S) ∝ S², so A(half) = A/4
    st = chunk_steps(np.array([10.0]), np.array([6.0]), np.array([1.5]), 8192, 4096, chunk_sizes(8192, 1024))
    assert st.sum() == pytest.approx(10.0)
    ctx = st[0] - 4.0 / 8  # minus each chunk's linear share
    np.testing.assert_allclose(ctx, 6.0 * (2 * np.arange(8) + 1) / 64)  # chunk i: (2i + 1) / k² of the context


def cols_of(arch):
    return complete_columns({k: np.array([float(v)]) for k, v in arch.columns().items()})


def test_long_prompt_ttft_against_chunks_priced_one_by_one():
    # Llama-3-8B, a 32K-token prompt in 8 chunks of 4096 over 4 stages of one H100 each. Brute force: a chunk's
    # stage time = the stage's unchunked prefill at the prompt length after it minus that before it (its queries
    # against every earlier key), each from the full model at that length; the schedule simulated event by event.
    a, sys4 = cols_of(R.load_architecture("llama-3-8b")), get_system("h100-sxm:4")
    S, chunk, pp = 32768, 4096, 4
    wl = lambda s: R.Workload(1, s, 16)  # noqa: E731

    def stage_prefill(s: int) -> float:  # one chunk: TTFT = pp x (stage prefill + its send)
        r = layout_columns(a, sys4, f"pp={pp},chunk={s}", wl(s), "bf16")
        return r["ttft_s"][0] / pp - C.p2p_sys(s * 4096 * 2, sys4, False)

    ends = np.arange(1, S // chunk + 1) * chunk
    t = np.array([stage_prefill(int(e)) for e in ends])
    steps = np.diff(np.concatenate([[0.0], t])) + C.p2p_sys(chunk * 4096 * 2, sys4, False)
    brute = simulate(steps, pp)
    got = layout_columns(a, sys4, f"pp={pp},chunk={chunk}", wl(S), "bf16")["ttft_s"][0]
    old = (len(ends) + pp - 1) * (t[-1] / len(ends) + C.p2p_sys(chunk * 4096 * 2, sys4, False))  # 1/chunks each
    assert got == pytest.approx(brute, rel=0.02)
    assert abs(got - brute) < abs(old - brute) / 3 and old < brute  # equal chunks understate the last ones
