"""Serving a model under a layout on a :class:`~rooflaw.devices.system.System`: per-phase time, memory per
device, communication, throughput and energy per token -- vectorised over architecture columns.

Compute and memory time per device come from the one assembly (:mod:`..roofline`, the per-operator path)
applied to the sharded shapes of :mod:`.shard`; communication from :mod:`.collectives`:

- attention TP: one all-reduce of the layer output (tokens·d_model·b_c) over ``tp_attn`` devices per layer;
- dense FFN TP: one all-reduce over ``tp`` per layer; EP: dispatch + combine all-to-all per layer, each device
  sending its own tokens' top_k copies (tokens·top_k·d_model, split over its TP peers: the dispatch at b_a, the
  GEMM input's format, the combine at b_c);

``b_c`` (:func:`stream_bytes`) is the residual stream's bytes per element: 16-bit unless the activations are wider.
An 8- or 4-bit activation format is the GEMMs' input, quantised inside each layer; what TP all-reduces (the
partial outputs of the row-parallel GEMMs), what EP combines and what a pipeline stage sends stay 16-bit.
- Helix: an all-to-all of the partial attention outputs and their log-sum-exp (fp32) over ``kvp`` devices,
  then one all-reduce over all N devices, then the FFN's TP all-reduce or EP all-to-all over N;
- PP: a point-to-point send of the activations per stage boundary (over the network when the replica spans
  nodes).

``overlap=False`` (default): a phase takes compute + communication; ``overlap=True``: max of the two (perfect
overlap, an upper bound on what overlapping kernels achieve). Pipelines: prefill in chunks of ``chunk``
tokens scheduled through the pp stages (:func:`pipeline_makespan`); each chunk's stage time is its share of the
linear part of the stage's prefill plus its attention context, which grows with its position
(:func:`chunk_steps`); bubble = (pp − 1)·slowest chunk step / TTFT. Decode runs pp micro-batches, TPOT = pp stage
steps.
Model-level ops (embedding, final norm, LM head) are charged to the busiest stage. Energy: idle power over
the wall time plus the per-FLOP/per-byte energies of each device's work, plus the links' energy (every bit the
collectives and stage sends move, at the system's pJ/bit per tier: :func:`link_energy`);
``joules_per_token`` divides a replica's energy (prefill included) by its generated tokens
(``link_joules_per_token``: the links' part).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ...arch.architecture import param_counts
from ...arch.layer_kinds import count_columns, kinds
from ...devices.precision import Precision
from ...devices.system import System
from ...errors import bad
from .. import assembly as A
from .. import operators as O
from ..roofline import complete_columns, evaluate_chunk, evaluate_columns
from ..scenario import Scenario
from ..workload import Workload
from . import collectives as C
from . import routing, shard
from .layout import Layout

CHUNK = 1 << 14
OUTPUTS = ("ttft_s", "decode_s", "tpot_s", "latency_s", "memory_per_device_bytes", "weight_bytes_per_device",
           "kv_cache_bytes_per_device", "comm_s_prefill", "comm_s_decode", "tokens_per_s", "tokens_per_s_per_user",
           "tokens_per_s_per_device", "prefill_tokens_per_s_per_device", "joules_per_token",
           "link_joules_per_token", "energy_j", "kv_replication", "stage_balance", "bubble_fraction", "fits",
           "divides", "valid")  # fmt: skip


def _ops(cols, sc: Scenario) -> dict[str, Any]:
    """The per-operator costs of one device's shard shapes ``cols`` in its (one-chip) scenario ``sc``."""
    return evaluate_chunk(complete_columns(cols), sc, per_op=True)


def _sum_group(res: dict, group: str, phase: str, exclude_overhead: bool = False):
    """(seconds, FLOPs per roof class, bytes) of the ops of ``group`` in ``phase``."""
    n = len(res["weight_bytes"])
    sec, nbytes = np.zeros(n), np.zeros(n)
    flops = {c: np.zeros(n) for c in A.ROOF_CLASSES}
    for o in res["_ops"]:
        name = o["name"]
        if name == "engine_overhead":
            if group == "attn" and not exclude_overhead:
                sec = sec + o[phase][2]
            continue
        op = O.op_named(name)
        if op.shard != group:
            continue
        F, By, s, _ = o[phase]
        sec, nbytes = sec + s, nbytes + By
        roof = op.roof
        if roof in flops:
            flops[roof] = flops[roof] + F
    return sec, flops, nbytes


def _busiest_ffn(shp, cols, sc: Scenario, ranks: int, tokens: int) -> dict[str, Any]:
    """The FFN shape of the busiest of ``ranks`` EP ranks for ``tokens`` routed tokens: its routed experts'
    ``top_k`` per token times :func:`.routing.serving_share` (the busiest rank's rows over the mean under the served
    routing law, :data:`.routing.SERVING_LAW`)."""
    share = routing.serving_share(tokens, cols["experts"], cols["top_k"], ranks)
    return _ops(dict(shp["ffn"], top_k=shp["ffn"]["top_k"] * share), sc)


def _device_phase(shp, scs: Mapping[str, Scenario], helix: bool, cols=None, ranks: int = 1):
    """Seconds, FLOPs per class and bytes of one device's stage in both phases, and the evaluated shapes.

    Helix: prefill's context ops run on the ``ctx`` shape (heads/kvp: the whole prompt's queries against a 1/kvp
    slice of the keys); decode's on the attention shape at a 1/kvp context (``ctxd``: every attention kind --
    GQA, MLA latent, sliding window -- reads only its slice of the cache). ``scs``: the one-chip scenario of
    each shape (its own batch and context). ``ranks`` > 1 (EP; ``cols`` the unsharded table): the FFN runs the
    busiest rank's routed rows, prefill at its ``batch·S_in`` tokens, decode at its ``batch`` (:mod:`.routing`)."""
    busiest = ranks > 1 and cols is not None
    names = ("attn", "ctx", "ctxd") if helix else ("attn",)
    res = {k: _ops(shp["attn" if k == "ctxd" else k], scs[k]) for k in names + (() if busiest else ("ffn",))}
    res.setdefault("ctx", res["attn"])
    res.setdefault("ctxd", res["ctx"])
    if busiest:
        wl = scs["ffn"].workload
        ffn = {"prefill": _busiest_ffn(shp, cols, scs["ffn"], ranks, wl.batch * wl.input_tokens),
               "decode": _busiest_ffn(shp, cols, scs["ffn"], ranks, wl.batch)}  # fmt: skip
        res["ffn"] = ffn["prefill"]
    else:
        ffn = {"prefill": res["ffn"], "decode": res["ffn"]}
    out = {}
    for phase in ("prefill", "decode"):
        ctx = res["ctx"] if phase == "prefill" else res["ctxd"]
        parts = [_sum_group(r, g, phase) for r, g in ((res["attn"], "attn"), (ctx, "ctx"), (ffn[phase], "ffn"))]
        out[phase] = (sum(p[0] for p in parts), {c: sum(p[1][c] for p in parts) for c in A.ROOF_CLASSES},
                      sum(p[2] for p in parts))  # fmt: skip
    return out, res


def _ffn_weights(cols: Mapping[str, np.ndarray], b_w: float) -> np.ndarray:
    """Bytes of the FFN weights: the main FFN's layers and the FFN-slot layer kinds' (first-k dense)."""
    c = param_counts(cols)
    own = sum(cols[k.count] * c[k.name] for k in kinds() if k.slot == "ffn" and k.params is not None)
    return (cols["ffn_layers"] * (cols["experts"] * c["expert"] + c["shared"]) + own) * b_w


def _ffn_workspace(cols: Mapping[str, np.ndarray], batch: int, S: int, b_a: float) -> np.ndarray:
    """The FFN intermediates' share of the activation workspace (operators.activation_bytes_expr: one prefill
    chunk's tokens, min(batch·S, PREFILL_CHUNK_TOKENS))."""
    from ..operators import PREFILL_CHUNK_TOKENS

    width = cols["top_k"] * cols["ffn"] + cols["shared_experts"] * cols["shared_ffn"]
    return min(batch * S, PREFILL_CHUNK_TOKENS) * (1 + cols["gated"]) * width * b_a


def stream_bytes(b_a: float) -> float:
    """Bytes per element of the residual stream that the collectives move, for activations of ``b_a`` bytes: 16-bit
    (2) unless the activations are wider (fp32: 4)."""
    return max(float(b_a), 2.0)


def _comm_per_layer(cols, lay: Layout, system: System, tokens_attn: float, tokens_ffn: float, b_a: float,
                    c: C.Costs = C.TIME):  # fmt: skip
    """Seconds (``c = C.TIME``) or one device's link joules (``C.ENERGY``) of one layer's collectives for
    ``tokens_attn`` tokens held by a device (``tokens_ffn`` in the FFN); ``b_a``: the activation format's bytes
    (the EP dispatch's), the rest at :func:`stream_bytes`."""
    g = shard.degrees(cols, lay)
    d = cols["d_model"]
    b_c = stream_bytes(b_a)
    msg = tokens_attn * d * b_c
    t = np.zeros(np.shape(d))
    if lay.helix:
        heads_dev = cols["heads"] / g.tp_attn
        t = t + c.all_to_all(tokens_attn * heads_dev * (cols["head_dim"] * b_c + 4), g.kvp, system)
        t = t + c.all_reduce(msg, lay.helix, system)
        n = lay.helix
        sent = tokens_ffn / n * cols["top_k"] * d
        t = t + np.where(g.moe, c.all_to_all(sent * b_a, n, system) + c.all_to_all(sent * b_c, n, system),
                         c.all_reduce(tokens_ffn * d * b_c, n, system))  # fmt: skip
        return t
    if g.tp_attn > 1:
        t = t + c.all_reduce(msg, g.tp_attn, system)
    if lay.ep > 1:
        own = tokens_attn / g.tp_attn  # each TP peer of an attention group dispatches its share
        sent = own * cols["top_k"] * d
        t = t + c.all_to_all(sent * b_a, lay.ep, system) + c.all_to_all(sent * b_c, lay.ep, system)
        if lay.tp > 1:
            t = t + c.all_reduce(tokens_ffn * cols["top_k"] / lay.ep * d * b_c, lay.tp, system)
    elif lay.tp > 1 and lay.dp_attn == 0:
        t = t + c.all_reduce(tokens_ffn * d * b_c, lay.tp, system)
    return t


def link_energy(cols, lay: Layout, system: System, wl: Workload, b_a: float) -> np.ndarray:
    """Joules one replica's links spend serving its batch (prefill + every decode step): each of the
    ``group`` devices of a stage sends its share of every layer's collectives (all micro-batches), and each
    stage boundary's point-to-point sends carry every token's activations (pp − 1 boundaries, from each
    device of the group)."""
    ba, bf = shard.batches(wl.batch, lay)
    mba, mbf = shard.batches(wl.batch, lay, lay.pp)
    S_in, S_out = wl.input_tokens, wl.output_tokens
    layers = np.asarray(cols["layers"], dtype=float)  # every layer, on whichever stage holds it
    pre = _comm_per_layer(cols, lay, system, ba * S_in, bf * S_in, b_a, C.ENERGY)
    dec = lay.pp * _comm_per_layer(cols, lay, system, mba, mbf, b_a, C.ENERGY)
    e = lay.group * layers * (pre + S_out * dec)
    if lay.pp > 1:
        cross = lay.devices // lay.dp > system.node_size
        sends = ba * S_in + S_out * lay.pp * mba  # tokens crossing each boundary
        e = e + lay.group * (lay.pp - 1) * C.p2p_j(sends * cols["d_model"] * stream_bytes(b_a), system, cross)
    return e


def chunk_sizes(prompt: int, chunk: int) -> np.ndarray:
    """Tokens of each prefill chunk (the last one may be shorter)."""
    ends = np.minimum(np.arange(1, math.ceil(prompt / chunk) + 1) * chunk, prompt)
    return np.diff(np.concatenate([[0], ends])).astype(float)


def chunk_steps(compute, ctx, ctx_half, prompt: int, half: int, sizes: np.ndarray) -> np.ndarray:
    """A stage's compute seconds per prefill chunk, shape (rows, chunks), summing to ``compute`` (the stage's
    unchunked prefill seconds of a ``prompt``-token prompt).

    The context part (attention scores, softmax, ·V: ``ctx`` seconds at the whole prompt, ``ctx_half`` at ``half``
    tokens) is fitted as A(S) = a·S + b·S² through both (linear where it is bandwidth-bound, quadratic where causal
    attention is FLOP-bound); chunk i is charged A(end_i) − A(start_i) (its queries against every earlier key),
    scaled so the chunks add up to ``ctx``. The rest is linear in tokens: each chunk its share of it."""
    ctx, ctx_half, compute = (np.asarray(x, dtype=float).reshape(-1, 1) for x in (ctx, ctx_half, compute))
    ends = np.cumsum(sizes)
    starts = ends - sizes
    if half < prompt:
        b = (ctx / prompt - ctx_half / half) / (prompt - half)
        a = ctx / prompt - b * prompt
    else:
        a, b = ctx / prompt, np.zeros_like(ctx)
    grow = np.maximum(a * (ends - starts) + b * (ends**2 - starts**2), 0.0)
    total = grow.sum(axis=1, keepdims=True)
    share = np.divide(grow, total, out=np.broadcast_to(sizes / prompt, grow.shape).copy(), where=total > 0)
    return (compute - ctx) * (sizes / prompt) + ctx * share


def pipeline_makespan(steps: np.ndarray, stages: int) -> np.ndarray:
    """Seconds until the last chunk leaves the last of ``stages`` identical stages, chunks in order, each chunk
    taking ``steps[:, i]`` on every stage: Σ steps + (stages − 1)·max steps (the proportionate flow shop: the
    critical path runs every chunk through the first stage and the slowest chunk through the others)."""
    return steps.sum(axis=1) + (stages - 1) * steps.max(axis=1)


def _combine(compute, comm, overlap: bool):
    return np.maximum(compute, comm) if overlap else compute + comm


def _single(cols, sc: Scenario, dp: int) -> dict[str, np.ndarray]:
    """The single-chip model itself (a one-device layout is exactly it)."""
    return from_single(evaluate_columns(cols, sc.on_chip(), backend="numpy"), sc.workload, dp)


def from_single(r: Mapping[str, Any], wl: Workload, dp: int = 1) -> dict[str, np.ndarray]:
    """Serving metrics of the single-chip results ``r`` (:func:`evaluate_columns` arrays)."""
    r = {k: np.atleast_1d(np.asarray(v, dtype=float)) for k, v in r.items() if k != "_ops"}
    n = len(r["prefill_s"])
    z = np.zeros(n)
    tok = wl.batch * wl.output_tokens
    out = dict(ttft_s=r["ttft_s"], decode_s=r["decode_s"], tpot_s=r["tpot_s"], latency_s=r["total_s"],
               memory_per_device_bytes=r["memory_bytes"], weight_bytes_per_device=r["weight_bytes"],
               kv_cache_bytes_per_device=r["kv_cache_bytes"], comm_s_prefill=z, comm_s_decode=z.copy(),
               tokens_per_s=dp * tok / r["decode_s"], tokens_per_s_per_user=wl.output_tokens / r["decode_s"],
               prefill_tokens_per_s_per_device=wl.batch * wl.input_tokens / r["prefill_s"],
               joules_per_token=r["energy_j"] / tok, energy_j=dp * r["energy_j"], kv_replication=np.ones(n),
               link_joules_per_token=z.copy(), stage_balance=np.ones(n), bubble_fraction=z.copy())  # fmt: skip
    out["tokens_per_s_per_device"] = out["tokens_per_s"] / dp
    out["fits"] = r["fits_in_memory"].astype(bool)
    return out


def layout_columns(
    columns: Mapping[str, Any],
    system: System | Scenario,
    layout: str | Layout | None = None,
    workload: Workload | None = None,
    precision: str | Precision = "bf16",
    engine: Any = None,
    overlap: bool = False,
    stage: Mapping[str, Any] | None = None,
) -> dict[str, np.ndarray]:
    """Serve every architecture of a column table under ``layout`` on ``system`` (arrays, SI units).

    ``system``: a :class:`Scenario` whose device is a :class:`System` and whose ``layout`` is set (the ``full``
    preset prices each shard); or a System with the loose ``layout``, ``workload``, ``precision``, ``engine`` and
    ``overlap`` that build one.
    Returns :data:`OUTPUTS`: ttft_s, decode_s (all S_out steps), tpot_s, latency_s, memory_per_device_bytes
    (weights + KV cache + activations of the busiest device), comm_s_prefill / comm_s_decode (the collectives'
    seconds per phase), tokens_per_s (generated tokens per second, all replicas), tokens_per_s_per_user,
    tokens_per_s_per_device, prefill_tokens_per_s_per_device, joules_per_token, kv_replication, stage_balance,
    bubble_fraction, ``fits`` (memory), ``divides`` (the layout's divisibility rules) and ``valid`` (both).
    ``workload.batch`` is the number of concurrent sequences per replica. ``stage``: per-row layer fraction
    counts (``layers``, ``attn_layers``, ... of :func:`~rooflaw.arch.layer_kinds.count_columns`) of the pipeline
    stage to price (default: the busiest, ceil(layers/pp) layers with each kind in proportion).
    """
    if isinstance(system, Scenario):
        sc = system
        if not isinstance(sc.device, System) or sc.layout is None:
            raise bad("scenario", sc.describe(), "layout_columns needs a scenario with a System and a layout")
    else:
        if layout is None:
            raise bad("layout", None, "a layout is required (a Layout or text such as tp=8)")
        sc = Scenario.of(system, workload, precision, "full", engine, layout, overlap)
    lay, sysm = sc.layout, sc.device
    assert lay is not None and isinstance(sysm, System)
    cols = complete_columns(columns)
    divides = shard.check(cols, lay, sysm.count)
    if lay.trivial:
        out = _single(cols, sc, 1)
    else:
        n = len(cols["layers"])
        parts = []
        for s in range(0, n, CHUNK):
            sub = {k: v[s : s + CHUNK] for k, v in cols.items()}
            st = None if stage is None else {k: np.broadcast_to(stage[k], (n,))[s : s + CHUNK] for k in count_columns()}
            parts.append(_sharded(sub, sc, st))
        out = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    out["divides"] = divides
    out["valid"] = divides & out["fits"]
    return out


def _sharded(cols, sc: Scenario, stage):
    system, lay, wl, prec, overlap = sc.device, sc.layout, sc.workload, sc.precision, sc.overlap
    assert lay is not None and isinstance(system, System)
    one = sc.on_chip()
    dev = one.chip
    if lay.pp > 1 and stage is None:
        stage = shard.busiest_stage(cols, lay.pp)
    shp = shard.shapes(cols, lay, stage if lay.pp > 1 else None)
    micro = lay.pp
    ba, bf = shard.batches(wl.batch, lay)
    mba, mbf = shard.batches(wl.batch, lay, micro)
    w = lambda b, s=wl.input_tokens: one.with_workload(Workload(b, s, wl.output_tokens, wl.attention))  # noqa: E731
    shard_in = math.ceil(wl.input_tokens / lay.kvp)  # Helix: each device holds 1/kvp of the prompt's KV
    loads = lambda a, f: {"attn": w(a), "ctx": w(a), "ctxd": w(a, shard_in), "ffn": w(f)}  # noqa: E731
    ranks = lay.helix or lay.ep
    pre, res = _device_phase(shp, loads(ba, bf), bool(lay.helix), cols, ranks)
    dec = pre if micro == 1 else _device_phase(shp, loads(mba, mbf), bool(lay.helix), cols, ranks)[0]
    b_a = prec.activations.bytes
    layers = shp["attn"]["layers"]
    S_in, S_out = wl.input_tokens, wl.output_tokens
    comm_pre = layers * _comm_per_layer(cols, lay, system, ba * S_in, bf * S_in, b_a)
    comm_dec = S_out * layers * _comm_per_layer(cols, lay, system, mba, mbf, b_a)
    t_pre = _combine(pre["prefill"][0], comm_pre, overlap)
    t_dec = _combine(dec["decode"][0], comm_dec, overlap)
    cross = lay.devices // lay.dp > system.node_size
    if lay.pp > 1:
        sizes = chunk_sizes(S_in, lay.chunk)
        ctx = _sum_group(res["ctx"], "ctx", "prefill")[0]
        half = max(1, S_in // 2)
        ctx_shape = shp["ctx"] if lay.helix else shp["attn"]
        ctx_half = _sum_group(_ops(ctx_shape, w(ba, half)), "ctx", "prefill")[0] if half < S_in else ctx
        comp = chunk_steps(pre["prefill"][0], ctx, ctx_half, S_in, half, sizes)
        comm_c = comm_pre[:, None] * (sizes / S_in)
        p2p_c = C.p2p_sys(ba * sizes * cols["d_model"][:, None] * stream_bytes(b_a), system, cross)
        steps = _combine(comp, comm_c, overlap) + p2p_c  # a stage's seconds per chunk, its send included
        ttft = pipeline_makespan(steps, lay.pp)
        prefill_rate = wl.batch * S_in / steps.sum(axis=1) / (lay.pp * lay.group)
        p2p_dec = C.p2p_sys(mba * cols["d_model"] * stream_bytes(b_a), system, cross)
        tpot = lay.pp * (t_dec / S_out + p2p_dec)
        decode_s = S_out * tpot
        # communication on the critical path: every chunk's collectives and sends on one stage, then the slowest
        # chunk's on the other pp - 1 stages
        comm_steps = comm_c + p2p_c
        slow = np.argmax(steps, axis=1)
        comm_pre = comm_steps.sum(axis=1) + (lay.pp - 1) * comm_steps[np.arange(len(slow)), slow]
        comm_dec = lay.pp * (comm_dec + S_out * p2p_dec)
        bubble = (lay.pp - 1) * steps.max(axis=1) / ttft
    else:
        ttft, decode_s = t_pre, t_dec
        prefill_rate = wl.batch * S_in / ttft / lay.group
        bubble = np.zeros(len(ttft))
    b_w = prec.weights.bytes
    a, ctx = res["attn"], res["ctxd"]
    weights = a["weight_bytes"] - _ffn_weights(shp["attn"], b_w) + _ffn_weights(shp["ffn"], b_w)
    kv = ctx["kv_cache_bytes"]
    act = a["activation_bytes"] - _ffn_workspace(shp["attn"], ba, S_in, b_a) + _ffn_workspace(shp["ffn"], bf, S_in, b_a)
    memory = weights + kv + act
    coef = one.energy
    per_replica = lay.pp * lay.group
    dyn = A.energy(coef, 0.0, pre["prefill"][1], pre["prefill"][2])
    dyn = dyn + micro * A.energy(coef, 0.0, dec["decode"][1], dec["decode"][2])
    latency = ttft + decode_s
    e_link = link_energy(cols, lay, system, wl, b_a)
    e_replica = per_replica * (dyn + (coef.p_idle * latency if coef else np.nan)) + e_link
    tokens = lay.dp * wl.batch * S_out
    return dict(
        ttft_s=ttft, decode_s=decode_s, tpot_s=decode_s / S_out, latency_s=latency,
        memory_per_device_bytes=memory, weight_bytes_per_device=weights, kv_cache_bytes_per_device=kv,
        comm_s_prefill=comm_pre, comm_s_decode=comm_dec, tokens_per_s=tokens / decode_s,
        tokens_per_s_per_user=S_out / decode_s, tokens_per_s_per_device=tokens / decode_s / lay.devices,
        prefill_tokens_per_s_per_device=prefill_rate, joules_per_token=e_replica / (wl.batch * S_out),
        energy_j=lay.dp * e_replica, link_joules_per_token=e_link / (wl.batch * S_out),
        kv_replication=shard.kv_replication(cols, lay),
        stage_balance=shard.stage_balance(cols, lay.pp), bubble_fraction=bubble,
        fits=memory <= dev.memory_capacity,
    )  # fmt: skip


__all__ = ["OUTPUTS", "chunk_sizes", "chunk_steps", "from_single", "layout_columns", "link_energy", "pipeline_makespan",
           "stream_bytes"]  # fmt: skip
