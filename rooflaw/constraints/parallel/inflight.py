"""In-flight (continuous) batching under a layout: the steady state of a replica kept at ``concurrency``
requests, prompts prefilled in chunks inside the decode steps (TensorRT-LLM's in-flight batching, vLLM's
chunked prefill) -- what a max-throughput benchmark (``trtllm-bench throughput``: every request queued, as many
in flight as fit) or a serving benchmark at a fixed concurrency measures.

The schedule is :class:`~rooflaw.constraints.serving.Schedule` (token budget per step, prompt chunks beside
``C − 1`` decoders, pure decode steps for the rest); a step's seconds come from the layout's serving model
(:func:`~.sweep.evaluate_layout`: shards, collectives, engine overheads). A step of ``c`` prompt tokens and ``n``
decoding sequences runs its linear layers once over ``c + n`` rows, weights read once: the prefill of ``c + n``
tokens as prompts of the schedule's length (each attends over its own prompt, not over the whole step), spread
over the layout's attention-DP groups (each prefills its own requests); under a pipeline without its fill and
drain (the bubble: the other micro-batches in flight keep every stage busy). A prompt longer than the step's room
for prompts (the token budget less the decoders) is prefilled in chunks, each attending over the prompt's earlier
chunks too: its tokens carry that prefix attention (:func:`prefix_attention_s`). Then, one after the other inside every
layer, the decode attention of the ``n`` sequences over their KV cache at the schedule's mean context: the part of
a decode step of ``n`` sequences that a decode step at a one-token context does not have. A pure decode step is
the decode step itself.

From the steady state (closed loop, Little's law): output tokens/s = 1 / seconds per output token; a request's
latency = C / requests per second; TTFT = the mixed steps that carry its prompt (when prompts overlap: the
latency less its O − 1 decode steps, waiting for budget included); TPOT = (latency − TTFT)/(O − 1).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache
from typing import Any

from ...devices.precision import Precision
from ...devices.system import System
from ...errors import bad
from ..serving import Schedule, StepCost
from ..serving_host import ServingHost
from ..serving_queue import queue_wait_s, service_s
from ..workload import Workload
from .layout import Layout, parse_layout
from .sweep import evaluate_layout, max_batch

#: How requests arrive (:func:`inflight`).
ARRIVALS = ("closed", "clients", "poisson")
#: TensorRT-LLM's default ``max_num_tokens`` (tokens one engine step may carry: decode tokens + prompt chunks).
TRTLLM_TOKEN_BUDGET = 8192


def layout_step_cost(arch: Any, system: System, layout: Layout, precision: str | Precision, engine: Any,
                     prompt_tokens: int, output_tokens: int, attention: str = "fused",
                     overlap: bool = False, host: ServingHost | None = None,
                     token_budget: int | None = None) -> StepCost:  # fmt: skip
    """``step_s(c, n)``: seconds of one engine step of ``c`` prompt tokens and ``n`` decoding sequences of one
    replica under ``layout`` (see the module docstring), plus ``host``'s seconds per step
    (:meth:`~..serving_host.ServingHost.per_step`: a stage's ``layers / pp`` layers; the step's sequences, the
    decoders and the ⌈c / prompt⌉ prompts, each attention-DP rank scheduling its share).

    ``token_budget`` (tokens per step; None: prompts priced as if never chunked): a step beside ``n`` decoders
    gives prompts ``token_budget − n`` tokens, and a prompt longer than that is prefilled in chunks, each chunk
    attending over the prompt's earlier chunks in the KV cache as well as over itself: each prompt token of such a
    step adds :func:`prefix_attention_s`'s seconds per token (spread over the prompt's tokens, so that a prompt's
    chunks together carry its whole causal attention, not that of as many self-contained prompts)."""

    groups = layout.attn_dp

    @cache
    def pre_seqs(b: int, s: int) -> float:
        w = Workload(b, s, 1, attention)
        out = evaluate_layout(arch, system, layout, w, precision, engine, overlap)
        return out["ttft_s"] * (1.0 - out["bubble_fraction"])  # pipelines: kept full by the other micro-batches

    def pre(k: int) -> float:
        # the step's k tokens are prompts (or a chunk of one) of the schedule's length, the decoders' rows spread
        # over them -- not one sequence of k tokens; attention-DP: every group prefills its own requests' share
        b = max(groups, round(k / min(prompt_tokens, k)))
        return pre_seqs(b, -(-k // b))

    @cache
    def dec(n: int, context: bool = True) -> float:
        w = Workload(n, prompt_tokens, output_tokens, attention) if context else Workload(n, 1, 2, attention)
        return evaluate_layout(arch, system, layout, w, precision, engine, overlap)["tpot_s"]

    def extra(c: int, n: int) -> float:
        if host is None:
            return 0.0
        return host.per_step(arch.layers / layout.pp, (n + -(-c // prompt_tokens)) / groups)

    @cache
    def prefix_per_token(chunk: int) -> float:
        # one prompt on each attention-DP group: seconds a group's prompt token adds for its chunks' prefixes
        return prefix_attention_s(pre_seqs, prompt_tokens, chunk, groups) / prompt_tokens

    def prefix(c: int, n: int) -> float:
        if token_budget is None or not c or token_budget - n >= prompt_tokens:
            return 0.0
        return c / groups * prefix_per_token(max(1, token_budget - n))

    def mixed(c: int, n: int, k: int) -> float:
        return pre(k) + (max(0.0, dec(n) - dec(n, False)) if n else 0.0) + prefix(c, n) + extra(c, n)

    def step(c: int, n: int) -> float:
        if not c:
            return dec(n) + extra(0, n) if n else 0.0
        if groups == 1:
            return mixed(c, n, c + n)
        busy, share = busiest_rank(c, n, prompt_tokens, groups, token_budget)
        quiet = dec(n) + extra(0, n) if n else 0.0
        return share * mixed(c, n, groups * busy) + (1.0 - share) * quiet

    return step


def busiest_rank(c: int, n: int, prompt_tokens: int, groups: int, token_budget: int | None) -> tuple[int, float]:
    """(tokens of the busiest of ``groups`` attention-DP ranks in a step that carries prompt tokens, share of the
    steps that carry any) for a steady state of ``c`` prompt tokens and ``n`` decoders per step (the replica's).

    A request lives on one rank, and a rank prefills greedily: a chunk of ``s = min(prompt, budget/groups − n/groups)``
    tokens (the whole prompt without a budget), so to carry its ``c/groups`` prompt tokens per step on average it
    prefills in a share ``q = min(1, c/(groups·s))`` of its steps; the ranks' steps are not in phase, and they meet
    at every MoE layer's dispatch (TensorRT-LLM pads each rank's tokens to the largest rank's for its all-gather
    MoE, ``use_dp_padding``), so a step runs at the busiest rank's ``⌈n/groups⌉ + s`` tokens on every rank
    whenever any rank prefills (a share ``1 − (1 − q)^groups`` of the steps) and is a decode step otherwise.
    ``q = 1`` (every rank prefills every step, ``s`` = the mean chunk) is the even split."""
    dec = -(-n // groups)
    room = prompt_tokens if token_budget is None else max(1, min(prompt_tokens, token_budget // groups - dec))
    per_rank = c / groups
    q = min(1.0, per_rank / room)
    chunk = room if q < 1.0 else math.ceil(per_rank)
    return dec + chunk, 1.0 - (1.0 - q) ** groups


def prefix_attention_s(prefill_s: Callable[[int, int], float], prompt_tokens: int, chunk: int,
                       groups: int = 1) -> float:  # fmt: skip
    """Seconds the attention of a prompt of ``prompt_tokens`` prefilled in chunks of at most ``chunk`` tokens adds
    for the chunks attending over the prompt's earlier chunks (in the KV cache), ``prefill_s(prompts, tokens)`` the
    seconds of a prefill of ``prompts`` prompts of ``tokens`` each, ``groups`` attention-DP groups each prefilling
    one such prompt. The ``m = ⌈prompt / chunk⌉`` chunks run the same linear layers as the whole prompt (the same
    rows) and, together, its causal attention; ``m`` self-contained prompts of ``prompt / m`` tokens run the same
    rows but attend only within themselves. The difference, prefill(1 prompt) − prefill(m prompts of prompt / m),
    is the prefix attention alone (at least 0); 0 when the prompt fits one chunk."""
    if chunk >= prompt_tokens:
        return 0.0
    m = -(-prompt_tokens // chunk)
    return max(0.0, prefill_s(groups, prompt_tokens) - prefill_s(groups * m, round(prompt_tokens / m)))


def trtllm_bench_settings(requests: float, input_tokens: int, output_tokens: int, pp: int = 1) -> tuple[int, int]:
    """``(max_batch_size, max_num_tokens)`` that ``trtllm-bench`` sets for a dataset of ``input_tokens`` /
    ``output_tokens`` when ``requests`` of them fit the KV cache (TensorRT-LLM ``bench/build/tuning.py``,
    ``finetune_setting``, unchanged from the 0.17 engine flow to the 1.x PyTorch flow): the batch
    ``min(requests, 4096)/pp`` rounded up (to 32 under 256, at least 64; to 128 under 1024; else to 256), the
    tokens per step that batch's share of prompts, ``batch·(1 + ISL/OSL)`` capped at 32,768 and rounded up (to 256,
    at least 2,048, under 4,096; to 512 under 8,192; else to 1,024) -- enough for the prompts that keep the
    batch full, not a fixed 8,192."""
    for key, v in (("input_tokens", input_tokens), ("output_tokens", output_tokens), ("pp", pp)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise bad(key, v, "must be a positive integer")
    if not (math.isfinite(requests) and requests > 0):
        raise bad("requests", requests, "must be a positive number (requests that fit the KV cache)")
    raw_bs = min(requests, 4096) / pp
    raw_token = min(raw_bs * (1 + input_tokens / output_tokens), 32768)
    if raw_bs < 256:
        max_bs = max(64, 32 * math.ceil(raw_bs / 32))
    elif raw_bs < 1024:
        max_bs = 128 * math.ceil(raw_bs / 128)
    else:
        max_bs = 256 * math.ceil(raw_bs / 256)
    if raw_token < 4096:
        max_token = max(2048, 256 * math.ceil(raw_token / 256))
    elif raw_token < 8192:
        max_token = 512 * math.ceil(raw_token / 512)
    else:
        max_token = 1024 * math.ceil(raw_token / 1024)
    return max_bs, max_token


def inflight(
    arch: Any,
    system: System,
    layout: str | Layout,
    workload: Workload,
    precision: str | Precision = "bf16",
    engine: Any = None,
    token_budget: int = TRTLLM_TOKEN_BUDGET,
    overlap: bool = False,
    arrivals: str = "closed",
    max_seqs: int | None = None,
    host: ServingHost | None = None,
) -> dict[str, float]:
    """Steady state of one replica (``layout``) of ``system`` holding ``workload.batch`` requests in flight, each
    ``workload.input_tokens`` in and ``workload.output_tokens`` out, with ``token_budget`` tokens per step.

    Returns (SI units): ``tokens_per_s`` (output tokens/s of every replica, ``layout.dp`` of them),
    ``tokens_per_s_per_device``, ``requests_per_s``, ``latency_s`` (a request's, arrival to last token),
    ``ttft_s``, ``tpot_s`` (mean seconds per output token after the first), ``step_s_decode`` (a pure decode step
    of ``batch`` sequences), ``wait_s`` (part of TTFT and latency).

    ``arrivals``: ``closed`` (the engine admits the next request the step one finishes: a max-throughput run, every
    request queued inside the engine), ``clients`` (``batch`` clients each sending its next request when its last
    one ends, over a network: requests land at any phase of the engine's steps, ``--max-concurrency`` /
    AIPerf's concurrency) or ``poisson`` (open loop at a request rate that keeps ``batch`` in flight on average).
    Under the last two a request arriving while the other ``batch − 1`` are in flight (none at ``batch`` 1) waits
    for the step in progress and for the prompts queued ahead of it
    (:func:`~rooflaw.constraints.serving_queue.queue_wait_s`: the mean residual Σ k·τ² / (2 Σ k·τ) of the
    schedule's steps, τ seconds, k per request, plus the Pollaczek–Khinchine queue of prompts the engine admits
    ``T − (batch − 1)`` tokens a step), those prompts arriving at (batch − 1) / latency per second, the latency
    including the wait itself (a fixed point).

    ``max_seqs``: the most requests the engine runs at once (its batch limit, or the requests whose KV cache fits:
    :func:`~.sweep.max_batch`); None: no limit. With more in flight the engine runs ``max_seqs`` of them and the
    rest wait outside for a slot: the steady state is that of ``max_seqs``, and by Little's law each request also
    waits ``latency · (batch − max_seqs) / max_seqs`` (in ``wait_s``, TTFT and latency; none of the arrival waits
    above, a queued request is admitted the step a slot frees).

    ``host``: host seconds outside the kernels (:class:`~..serving_host.ServingHost`; None: none): its per-step
    seconds join every step (:func:`layout_step_cost`), and under ``clients`` or ``poisson`` arrivals (a
    request through a server) its front end (:meth:`~..serving_host.ServingHost.front_end`) joins TTFT and
    latency."""
    if arrivals not in ARRIVALS:
        raise bad("arrivals", arrivals, f"must be one of {', '.join(ARRIVALS)}")
    lay = parse_layout(layout) if isinstance(layout, str) else layout
    C, P, O = workload.batch, workload.input_tokens, workload.output_tokens
    if max_seqs is not None:
        if isinstance(max_seqs, bool) or not isinstance(max_seqs, int) or max_seqs < 1:
            raise bad("max_seqs", max_seqs, "must be a positive integer or None")
        if max_seqs < C:  # the engine runs max_seqs; the others queue outside for a slot (Little's law)
            wl = Workload(max_seqs, P, O, workload.attention)
            out = inflight(arch, system, lay, wl, precision, engine, token_budget, overlap, "closed", host=host)
            queue = out["latency_s"] * (C - max_seqs) / max_seqs
            front = host.front_end(P) if host is not None and arrivals != "closed" else 0.0
            return {**out, "latency_s": out["latency_s"] + queue + front, "ttft_s": out["ttft_s"] + queue + front,
                    "wait_s": queue}  # fmt: skip
    if O < 2:
        raise bad("output_tokens", O, "in-flight batching needs at least 2 output tokens (a decode step)")
    if token_budget < C:
        raise bad("token_budget", token_budget, f"must be at least the requests in flight ({C})")
    step = layout_step_cost(arch, system, lay, precision, engine, P, O, workload.attention, overlap, host,
                            token_budget)  # fmt: skip
    sched = Schedule(C, P, O, token_budget)
    spt = sched.seconds_per_token(step)
    rate = 1.0 / spt  # output tokens/s of one replica
    latency = C * O * spt  # Little's law: C in flight, C·O/latency tokens/s
    chunk = token_budget - (C - 1)
    m = -(-P // chunk)
    if (C - 1) * m <= O - 1:  # decoders keep every step: the prompt rides m mixed steps beside C - 1 decoders
        rest = P - (m - 1) * chunk
        ttft = (m - 1) * step(chunk, C - 1) + step(rest, C - 1)
    else:  # prompts overlap: a request decodes one token a step (the mean step), the rest of its life is TTFT
        kinds = sched.steps()
        mean_step = sum(k * step(c, n) for c, n, k in kinds) / sum(k for _, _, k in kinds)
        ttft = max(0.0, latency - (O - 1) * mean_step)
    ttft = min(ttft, latency)
    tpot = (latency - ttft) / (O - 1)
    wait = 0.0
    if arrivals != "closed" and C > 1:  # others in flight keep steps running; one alone finds the server idle
        wait = _arrival_wait(sched, step, C - 1, latency)
    front = host.front_end(P) if host is not None and arrivals != "closed" else 0.0
    return dict(tokens_per_s=lay.dp * rate, tokens_per_s_per_device=rate / (lay.devices / lay.dp),
                requests_per_s=lay.dp * rate / O, latency_s=latency + wait + front, ttft_s=ttft + wait + front,
                tpot_s=tpot, step_s_decode=step(0, C), wait_s=wait)  # fmt: skip


def _arrival_wait(sched: Schedule, step: StepCost, others: int, latency: float) -> float:
    """Seconds a request arriving at a random moment waits (:func:`~..serving_queue.queue_wait_s`), the ``others``
    in flight sending prompts at ``others / (latency + wait)`` per second: the fixed point, by bisection (the wait
    falls as it lengthens the latency and so thins the arrivals)."""
    S = service_s(sched, step)
    gap = lambda w: queue_wait_s(sched, step, others / (latency + w)) - w  # noqa: E731  (decreasing in w)
    lo = max(0.0, others * S - latency) * (1 + 1e-9) + 1e-12  # below it prompts would arrive faster than served
    hi = max(2 * lo, latency, 1e-6)
    while gap(hi) > 0:
        hi *= 2
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if gap(mid) > 0 else (lo, mid)
    return hi


def max_throughput(
    arch: Any,
    system: System,
    layout: str | Layout,
    workload: Workload,
    precision: str | Precision = "bf16",
    engine: Any = None,
    token_budget: int | None = None,
    batch_cap: int | None = None,
    overlap: bool = False,
    host: ServingHost | None = None,
) -> dict[str, float]:
    """A max-throughput run (every request queued, ``trtllm-bench throughput``): :func:`inflight` at the largest
    batch whose weights and KV cache fit every device (:func:`~.sweep.max_batch` at the workload's lengths; the
    workload's batch is ignored), at most ``batch_cap`` (the engine's batch limit, when it has one). The tokens per
    step: ``token_budget``, or when None the ``max_num_tokens`` trtllm-bench sets for the requests that fit at the
    workload's lengths (:func:`trtllm_bench_settings`); it grows to the batch when smaller. ``host``: as in
    :func:`inflight` (requests queued inside the engine: no front end). Adds ``batch``. Raises
    when not even one request fits."""
    lay = parse_layout(layout) if isinstance(layout, str) else layout
    if batch_cap is not None and (isinstance(batch_cap, bool) or not isinstance(batch_cap, int) or batch_cap < 1):
        raise bad("batch_cap", batch_cap, "must be a positive integer or None")
    one = Workload(1, workload.input_tokens, workload.output_tokens, workload.attention)
    fits = max_batch(arch, system, lay, one, precision)
    if fits < 1:
        raise bad("batch", 0, f"not even one request of {workload.input_tokens}+{workload.output_tokens} tokens fits "
                  f"each device's memory under {lay.describe()}")  # fmt: skip
    b = min(fits, batch_cap) if batch_cap else fits
    if token_budget is None:
        token_budget = trtllm_bench_settings(float(fits), workload.input_tokens, workload.output_tokens, lay.pp)[1]
    wl = Workload(b, workload.input_tokens, workload.output_tokens, workload.attention)
    out = inflight(arch, system, lay, wl, precision, engine, max(token_budget, b), overlap, host=host)
    return {**out, "batch": float(b)}


__all__ = [
    "ARRIVALS",
    "TRTLLM_TOKEN_BUDGET",
    "busiest_rank",
    "inflight",
    "layout_step_cost",
    "max_throughput",
    "prefix_attention_s",
    "trtllm_bench_settings",
]
