"""How long a prompt waits before its prefill when requests reach an in-flight-batching engine at random moments
(an open loop at a request rate, or clients over a network whose requests land at any phase of the engine's
steps), and a brute-force simulation of the same engine with Poisson arrivals to check it.

The engine runs :class:`~rooflaw.constraints.serving.Schedule`'s steps back to back. A prompt that arrives
waits for

1. the step in progress: the mean residual of the steps' lengths as a random moment sees them,
   ``R = Σ k·τ² / (2·Σ k·τ)`` (τ seconds, k per request; long steps are more often the one in progress), and
2. the prompts queued ahead of it: a step carries at most ``T − (C − 1)`` prompt tokens beside the ``C − 1``
   other requests' decode tokens, so prompts are admitted as a single server admits work -- ``k = ⌊(T − (C − 1))
   / P⌋`` whole prompts a step (or one prompt over ``⌈P / (T − (C − 1))⌉`` steps) -- and each occupies
   ``S`` seconds of it: the step that carries ``k`` prompts divided by ``k`` (the chunked prompt's steps, summed).
   With prompts arriving at ``λ`` per second the server is busy ``ρ = λ·S`` and ``L_q = ρ² / (2·(1 − ρ))``
   prompts wait on average (Pollaczek–Khinchine, deterministic service), each ``S``:

       wait = R + L_q · S

Its first token then comes with the end of its own prefill step(s). :func:`simulate_arrivals` runs the schedule
request by request with exponential gaps between arrivals (seeded) and measures the mean time to first token.
"""

from __future__ import annotations

import math
import random
from collections import deque

from ..errors import bad
from .serving import Schedule, StepCost, apply_step, plan_step


def service_s(s: Schedule, step_s: StepCost) -> float:
    """Seconds of the engine one prompt occupies while ``s.concurrency − 1`` others decode (see the module
    docstring): a step carrying ``k`` whole prompts over ``k``, or the sum of a longer prompt's chunk steps."""
    C, P, T = s.concurrency, s.prompt_tokens, s.token_budget
    chunk = T - (C - 1)
    if chunk >= P:
        k = chunk // P
        return step_s(k * P, C - 1) / k
    m = math.ceil(P / chunk)
    return (m - 1) * step_s(chunk, C - 1) + step_s(P - (m - 1) * chunk, C - 1)


def residual_s(s: Schedule, step_s: StepCost) -> float:
    """Mean seconds left of the step in progress at a random moment: Σ k·τ² / (2·Σ k·τ) over the schedule's steps."""
    timed = [(k, step_s(c, n)) for c, n, k in s.steps()]
    total = sum(k * t for k, t in timed)
    return sum(k * t * t for k, t in timed) / (2 * total) if total > 0 else 0.0


def queue_wait_s(s: Schedule, step_s: StepCost, rate: float) -> float:
    """Mean seconds a prompt arriving at a random moment waits before its prefill, the other requests' prompts
    arriving at ``rate`` per second: the step in progress plus the prompts queued ahead (module docstring).
    Infinite when ``rate · S ≥ 1`` (prompts arrive faster than the engine admits them)."""
    if not (math.isfinite(rate) and rate >= 0):
        raise bad("rate", rate, "must be a finite number >= 0 (prompts per second)")
    S = service_s(s, step_s)
    rho = rate * S
    if rho >= 1:
        return math.inf
    return residual_s(s, step_s) + rho * rho / (2 * (1 - rho)) * S


def simulate_arrivals(s: Schedule, step_s: StepCost, rate: float, n_requests: int, warmup: int = 0,
                      seed: int = 0) -> dict[str, float]:  # fmt: skip
    """Brute force: requests of ``s.prompt_tokens`` in and ``s.output_tokens`` out arrive with exponential gaps
    (``rate`` per second, seeded); the engine admits and steps them as :func:`~.serving.simulate` does (running
    requests first, then waiting ones FIFO, ``s.token_budget`` tokens a step; idle until the next arrival when
    empty). ``s.concurrency`` is not used. Returns the means over requests ``warmup`` on: ``ttft_s`` (arrival to
    the end of the step that ran its last prompt chunk), ``latency_s`` (arrival to last token), ``in_flight``
    (Little's law: rate × latency)."""
    if not (math.isfinite(rate) and rate > 0):
        raise bad("rate", rate, "must be a positive finite number (requests per second)")
    if n_requests <= warmup:
        raise bad("n_requests", n_requests, f"must exceed warmup ({warmup})")
    P, O, T = s.prompt_tokens, s.output_tokens, s.token_budget
    rng = random.Random(seed)
    arrivals, t_arr = [], 0.0
    for _ in range(n_requests):
        t_arr += rng.expovariate(rate)
        arrivals.append(t_arr)
    first = [math.nan] * n_requests
    last = [math.nan] * n_requests
    nxt, t = 0, 0.0
    waiting: deque[list[int]] = deque()
    running: list[list[int]] = []  # [prompt tokens left, output tokens left, request]
    done = 0
    while done < n_requests:
        while nxt < n_requests and arrivals[nxt] <= t:
            waiting.append([P, O, nxt])
            nxt += 1
        if not running and not waiting:
            t = arrivals[nxt]
            continue
        prefill, decoding, plan = plan_step(running, waiting, T)
        t += step_s(prefill, decoding)
        firsts, finished = apply_step(running, plan)
        for r in firsts:
            first[r[2]] = t
        for r in finished:
            last[r[2]] = t
        done += len(finished)
    idx = range(warmup, n_requests)
    ttft = sum(first[i] - arrivals[i] for i in idx) / len(idx)
    latency = sum(last[i] - arrivals[i] for i in idx) / len(idx)
    return dict(ttft_s=ttft, latency_s=latency, in_flight=rate * latency)


__all__ = ["queue_wait_s", "residual_s", "service_s", "simulate_arrivals"]
