"""Continuous batching with chunked prefill: the output throughput of a server kept at ``concurrency``
requests in flight (``vllm bench serve --max-concurrency C``), as a steady state and as a brute-force
discrete-event simulation of the same schedule.

The schedule is vLLM's (V1 scheduler, chunked prefill on by default): every engine step has a budget of
``token_budget`` tokens (``max_num_batched_tokens``; 2048 is vLLM's default for the OpenAI server on a
GPU with less than 70 GiB of memory or on any A100). Running requests are served first, in arrival order: a decoding
request takes 1 token, a request still in its prompt takes the next chunk of its prompt that fits;
then waiting requests are admitted (FIFO) with a chunk each while budget is left. A request whose last
prompt chunk runs in a step emits its first output token there and decodes one token per step after.
The client sends a new request the moment one finishes, so ``concurrency`` are always in flight.

A step's time is a caller-supplied ``step_s(prefill_tokens, decode_sequences)``;
:func:`assembly_step_cost` builds it from the one cost model (:func:`rooflaw.evaluate`).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from ..errors import bad

#: vLLM's default ``max_num_batched_tokens`` with chunked prefill for the OpenAI-compatible server
#: (``EngineArgs.get_batch_defaults``: 2048; 8192 where the device reports >= 70 GiB and is not an A100).
VLLM_TOKEN_BUDGET = 2048

StepCost = Callable[[int, int], float]  #: (prefill tokens in the step, decoding sequences) -> seconds


@dataclass(frozen=True)
class Schedule:
    """``concurrency`` requests in flight, each ``prompt_tokens`` in and ``output_tokens`` out."""

    concurrency: int
    prompt_tokens: int
    output_tokens: int
    token_budget: int = VLLM_TOKEN_BUDGET

    def __post_init__(self) -> None:
        for key in ("concurrency", "prompt_tokens", "output_tokens", "token_budget"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise bad(key, v, "must be a positive integer")
        if self.token_budget < self.concurrency:
            raise bad("token_budget", self.token_budget, f"must be at least the concurrency ({self.concurrency})")

    def steps(self) -> list[tuple[int, int, float]]:
        """The steady state's steps per completed request: ``(prefill tokens, decoding sequences, count)``.

        With ``C − 1`` other requests decoding, a prompt is cut into chunks of ``T − (C − 1)`` tokens:
        ``m`` mixed steps, the last carrying the remainder. The other requests' ``O − 1`` decode tokens
        not carried by those mixed steps run in pure decode steps of ``C`` sequences. When the mixed steps
        alone would carry more decode tokens than a request needs (``(C − 1)·m > O − 1``), prompts overlap:
        in the steady state ``j`` requests finish per step, each spent ``p`` steps in its prompt and ``O − 1``
        decoding, so ``C = j·(p + O − 1)`` and every step carries ``j·P`` prompt tokens beside ``j·(O − 1)``
        decoders (``p = ⌈P / (T − j·(O − 1))⌉``, the steps its prompt takes beside them). When that exceeds
        the budget, every step is full: ``(P + O − 1)/T`` steps per request, each with ``T·(O − 1)/(P + O − 1)``
        decoders (the other requests wait for budget).
        """
        C, P, O, T = self.concurrency, self.prompt_tokens, self.output_tokens, self.token_budget
        chunk = T - (C - 1)
        m = math.ceil(P / chunk)
        rest = P - (m - 1) * chunk
        pure = (O - 1 - (C - 1) * m) / C
        if pure < 0:
            return self._overlapping()
        out = [(chunk, C - 1, float(m - 1)), (rest, C - 1, 1.0), (0, C, pure)]
        return [s for s in out if s[2] > 0]

    def _overlapping(self) -> list[tuple[int, int, float]]:
        """Prompts overlap (see :meth:`steps`): one step kind, ``1/j`` of them per request."""
        C, P, O, T = self.concurrency, self.prompt_tokens, self.output_tokens, self.token_budget
        p = 1
        for _ in range(8):  # p: the steps a prompt takes beside the decoders (a fixed point, reached at once)
            j = C / (p + O - 1)
            q = max(1, math.ceil(P / max(T - j * (O - 1), 1.0)))
            if q == p:
                break
            p = q
        if j * (P + O - 1) <= T:  # steps not full: every request in flight advances each step
            return _mixed(j * P, j * (O - 1), 1.0 / j, T, full=False)
        # prefill-bound: every step full, its T tokens shared
        return _mixed(T * P / (P + O - 1), T * (O - 1) / (P + O - 1), (P + O - 1) / T, T, full=True)

    def seconds_per_token(self, step_s: StepCost) -> float:
        """Steady-state seconds per output token (1 / aggregate output tokens/s)."""
        return sum(k * step_s(c, n) for c, n, k in self.steps()) / self.output_tokens


def _mixed(prompt: float, decoders: float, count: float, budget: int, full: bool) -> list[tuple[int, int, float]]:
    """Steps of a fractional mean composition (``prompt`` tokens, ``decoders``, ``count`` steps per request) as at
    most two whole ones, floor and ceil of the decoders, weighted so that the decode tokens per request stay exact;
    the prompt tokens fill the rest of the ``budget`` (``full``) or round with the decoders, within it."""
    lo = math.floor(decoders)
    f = decoders - lo
    kinds = [(lo, 1.0 - f), (lo + 1, f)] if f > 1e-12 else [(lo, 1.0)]
    out = []
    for i, (n, w) in enumerate(kinds):
        if full:
            c = budget - n
        elif len(kinds) == 1:
            c = round(prompt)
        else:
            c = math.ceil(prompt) if i else math.floor(prompt)
        out.append((max(0, min(c, budget - n)), n, count * w))
    return out


def plan_step(running: list[list[int]], waiting: deque[list[int]], budget: int,
              max_running: int | None = None) -> tuple[int, int, list[tuple[list[int], int]]]:  # fmt: skip
    """One engine step's admissions, for the brute-force simulations: running requests first (a decoding one takes
    one token, one still in its prompt a chunk), then waiting ones FIFO (moved to ``running``) while the step has
    tokens left (``budget``) and a slot (``max_running``; None: no limit). Requests are ``[prompt tokens left,
    output tokens left, ...]``. Returns (prompt tokens, decoding requests, [(request, tokens)])."""
    prefill, decoding, plan = 0, 0, []
    for r in running:
        if budget == 0:
            break
        k = min(r[0], budget) if r[0] else 1
        prefill += k if r[0] else 0
        decoding += 0 if r[0] else 1
        budget -= k
        plan.append((r, k))
    while waiting and budget > 0 and (max_running is None or len(running) < max_running):
        r = waiting.popleft()
        running.append(r)
        k = min(r[0], budget)
        prefill += k
        budget -= k
        plan.append((r, k))
    return prefill, decoding, plan


def apply_step(running: list[list[int]], plan: list[tuple[list[int], int]]) -> tuple[list[list[int]], list[list[int]]]:
    """Advance the requests of a step's ``plan`` (:func:`plan_step`): the last prompt chunk emits the first output
    token. Finished requests leave ``running``. Returns (requests that emitted their first token, finished ones)."""
    firsts, finished = [], []
    for r, k in plan:
        if r[0]:
            r[0] -= k
            if r[0] == 0:
                r[1] -= 1
                firsts.append(r)
        else:
            r[1] -= 1
        if r[1] == 0:
            running.remove(r)
            finished.append(r)
    return firsts, finished


def simulate(s: Schedule, step_s: StepCost, n_requests: int, warmup: int = 0, max_running: int | None = None) -> float:
    """Brute force: run the schedule step by step for ``n_requests`` requests; seconds per output token
    between the ``warmup``-th completion and the last (all of the run when ``warmup`` is 0). ``max_running``: the
    most requests the engine runs at once; the other clients' requests wait for a slot (None: no limit)."""
    C, P, O, T = s.concurrency, s.prompt_tokens, s.output_tokens, s.token_budget
    issued, done, t, t0 = 0, 0, 0.0, 0.0
    waiting: deque[list[int]] = deque()
    running: list[list[int]] = []  # [prompt tokens left, output tokens left]
    for _ in range(min(C, n_requests)):
        waiting.append([P, O])
        issued += 1
    while done < n_requests:
        prefill, decoding, plan = plan_step(running, waiting, T, max_running)
        t += step_s(prefill, decoding)
        for _ in apply_step(running, plan)[1]:
            done += 1
            if done == warmup:
                t0 = t
            if issued < n_requests:
                waiting.append([P, O])
                issued += 1
    return (t - t0) / ((n_requests - warmup) * O)


def assembly_step_cost(arch, device, precision, engine, prompt_tokens: int, output_tokens: int,
                       attention: str = "fused") -> StepCost:  # fmt: skip
    """A step's seconds from the one cost model: a step of ``c`` prompt tokens and ``n`` decoding sequences
    takes ``max(prefill of c + n tokens, decode step of n sequences)`` -- its GEMMs process ``c + n`` rows
    over weights read once, and it streams at least the ``n`` sequences' weights and KV cache (decode at
    the schedule's mean context ``prompt + output/2``)."""
    from .roofline import evaluate
    from .scenario import Scenario
    from .workload import Workload

    sc = Scenario.of(device, None, precision, "full", engine)  # rates and energy derived once for every step

    @cache
    def pre(k: int) -> float:
        return evaluate(arch, sc.with_workload(Workload(1, k, 1, attention))).prefill_s

    @cache
    def dec(n: int) -> float:
        return evaluate(arch, sc.with_workload(Workload(n, prompt_tokens, output_tokens, attention))).tpot_s

    def step(c: int, n: int) -> float:
        return max(pre(c + n) if c else 0.0, dec(n) if n else 0.0)

    return step


@cache
def expected_max_normal(n: int) -> float:
    """E[max of ``n`` independent standard normals] (0 for n = 1; 1/√π for 2; ≈ 1.4236 for 8), by quadrature of
    n·x·φ(x)·Φ(x)^(n−1)."""
    if n < 1:
        raise bad("batch", n, "must be a positive integer")
    if n == 1:
        return 0.0
    from scipy import integrate, stats

    f = lambda x: n * x * stats.norm.pdf(x) * stats.norm.cdf(x) ** (n - 1)  # noqa: E731
    return float(integrate.quad(f, -12.0, 12.0, limit=200)[0])


def padded_prompt_ratio(batch: int, spread: float) -> float:
    """Tokens an engine that pads a batch's prompts to the longest one prefills, over the packed tokens: the
    expected longest of ``batch`` prompts whose lengths have coefficient of variation ``spread`` (normal), over
    their mean: 1 + spread·E[max of ``batch`` standard normals]. Equal prompts (spread 0) or one sequence: 1."""
    if not (math.isfinite(spread) and spread >= 0):
        raise bad("spread", spread, "must be a finite number >= 0")
    return 1.0 + spread * expected_max_normal(int(batch))
