"""Disaggregated serving on a :class:`~rooflaw.devices.system.System`: a prefill pool and a decode pool.

``prefill=tp=2x2,decode=tp=8``: the prefill pool is 2 replicas of layout ``tp=2``, the decode pool one replica of
``tp=8`` (``LAYOUTx N``: N replicas, default 1; a pool's layout is any :mod:`.layout` string). Each replica is priced
by :func:`.serving.layout_columns` (the one assembly on the sharded shapes):

- a prefill replica runs one request's prompt per pass (``prefill_batch`` requests, default 1) in TTFTₚ seconds;
- the request's KV cache (``S_in`` tokens, one sequence; :func:`kv_bytes`) then crosses the system's link to a
  decode replica: t_kv = latency + bytes / (bandwidth × min(devices of the two replicas)) -- the shards move in
  parallel, each over its GPU's link; the scale-up link when both pools fit in one node, else the scale-out one;
- a decode replica keeps ``batch`` sequences in flight, each for S_out steps of TPOT_d seconds.

Rates (requests/s): prefill Rₚ = nₚ·bₚ/TTFTₚ, decode R_d = n_d·B/(S_out·TPOT_d), link R_l = channels / t_kv,
channels = ⌊min(nₚ·dₚ, n_d·d_d) / min(dₚ, d_d)⌋ transfers at once (at least 1). The pools serve
R = min(Rₚ, R_d, R_l) (rate matching: the split is balanced when Rₚ ≈ R_d; :func:`balanced_split` finds it);
tokens/s = R·S_out, per GPU over all GPUs of both pools; TTFT = TTFTₚ + t_kv; TPOT = TPOT_d (the decode replicas
full at ``batch``; no queueing: the steady state at the served rate). Aggregated layouts count decode throughput
only (their prefills are not charged against it), so compare the two at the same TTFT/TPOT, not by tokens/s
alone. :func:`simulate` runs the same two pools as a discrete-event simulation.
Aggregated serving (one layout, :func:`.serving.layout_columns`) is unchanged and stays the default.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ...devices.system import System
from ...errors import bad
from ..precision import Precision
from ..roofline import complete_columns, evaluate_columns
from ..workload import Workload
from .layout import Layout, parse_layout
from .serving import layout_columns

_POOL = re.compile(r"^(?P<layout>.+?)(?:x(?P<n>\d+))?$")


@dataclass(frozen=True)
class Pool:
    """``replicas`` copies of ``layout``."""

    layout: Layout
    replicas: int = 1

    @property
    def devices(self) -> int:
        return self.layout.devices * self.replicas

    def describe(self) -> str:
        return f"{self.layout.describe()}x{self.replicas}"


@dataclass(frozen=True)
class Disagg:
    """A prefill pool and a decode pool (see the module docstring); ``prefill_batch`` requests per prefill pass."""

    prefill: Pool
    decode: Pool
    prefill_batch: int = 1

    @property
    def devices(self) -> int:
        return self.prefill.devices + self.decode.devices

    def describe(self) -> str:
        return f"prefill={self.prefill.describe()},decode={self.decode.describe()}"


def parse_pool(text: str, role: str, full: str) -> Pool:
    m = _POOL.match(text.strip())
    if not m or not m.group("layout"):
        raise bad("disagg", full, f"the {role} pool must be LAYOUT or LAYOUTxN (N replicas), e.g. tp=2x2")
    n = int(m.group("n") or 1)
    if n < 1:
        raise bad("disagg", full, f"the {role} pool needs at least one replica")
    try:
        lay = parse_layout(m.group("layout"))
    except Exception as e:  # noqa: BLE001 - one line naming --disagg
        raise bad("disagg", full, f"{role} layout: {str(e).splitlines()[0]}") from None
    return Pool(lay, n)


def parse_disagg(text: str) -> Disagg:
    """``prefill=LAYOUT[xN],decode=LAYOUT[xN]`` (e.g. ``prefill=tp=2x2,decode=tp=8``)."""
    t = str(text).strip()
    m = re.fullmatch(r"prefill=(?P<p>.+?),decode=(?P<d>.+)", t)
    if not m:
        raise bad("disagg", t, "expected prefill=LAYOUT[xN],decode=LAYOUT[xN], e.g. prefill=tp=2x2,decode=tp=8")
    return Disagg(parse_pool(m.group("p"), "prefill", t), parse_pool(m.group("d"), "decode", t))


def check_fits(d: Disagg, system: System) -> None:
    if d.devices > system.count:
        raise bad("disagg", d.describe(), f"needs {d.devices} devices; the system has {system.count}")


def kv_bytes(cols: Mapping[str, Any], device: Any, input_tokens: int, precision: Any, engine: Any = None) -> Any:
    """KV cache bytes of one sequence after its ``input_tokens``-token prompt (every layer kind), per row."""
    if input_tokens < 2:
        raise bad("input_tokens", input_tokens, "disaggregated serving needs a prompt of at least 2 tokens")
    wl = Workload(1, input_tokens - 1, 1)  # the cache holds S_in + S_out = input_tokens tokens
    return np.asarray(evaluate_columns(cols, device, wl, precision, "full", engine=engine)["kv_cache_bytes"])


def link_of(system: System, d: Disagg) -> tuple[float, float]:
    """(bandwidth per GPU each way, latency) of the link the KV cache crosses."""
    if system.spans_nodes(d.devices):
        return system.scale_out_bw, system.scale_out_latency
    return system.link_bw, system.link_latency


def disagg_columns(
    columns: Mapping[str, Any],
    system: System,
    d: Disagg | str,
    workload: Workload | None = None,
    precision: str | Precision = "bf16",
    engine: Any = None,
    overlap: bool = False,
) -> dict[str, np.ndarray]:
    """Disaggregated serving of every architecture of a column table (arrays, SI units): ``ttft_s`` (prefill +
    KV transfer), ``tpot_s``, ``decode_s``, ``latency_s``, ``kv_transfer_s``, ``kv_bytes``, the pools' request
    rates (``prefill_rate``, ``decode_rate``, ``link_rate``, ``rate``: requests/s served), ``bound`` (0 prefill,
    1 decode, 2 link), ``tokens_per_s``, ``tokens_per_s_per_user``, ``tokens_per_s_per_device`` (all GPUs of both
    pools), ``memory_per_device_bytes`` (the larger pool's), ``joules_per_token``, ``fits``, ``divides``, ``valid``."""
    d = parse_disagg(d) if isinstance(d, str) else d
    check_fits(d, system)
    wl = workload or Workload()
    prec = Precision.parse(precision)
    cols = complete_columns(columns)
    B, S_in, S_out = wl.batch, wl.input_tokens, wl.output_tokens
    pre = layout_columns(cols, system, d.prefill.layout, replace(wl, batch=d.prefill_batch, output_tokens=1), prec,
                         engine, overlap)  # fmt: skip
    dec = layout_columns(cols, system, d.decode.layout, wl, prec, engine, overlap)
    kvb = kv_bytes(cols, system.device, S_in, prec, engine)
    bw, lat = link_of(system, d)
    streams = min(d.prefill.layout.devices, d.decode.layout.devices)
    channels = max(1, min(d.prefill.devices, d.decode.devices) // streams)
    t_kv = lat + kvb / (bw * streams)
    ttft_p = pre["ttft_s"]
    tpot = dec["tpot_s"]
    with np.errstate(divide="ignore", invalid="ignore"):
        r_p = d.prefill.replicas * d.prefill_batch / ttft_p
        r_d = d.decode.replicas * B / (S_out * tpot)
        r_l = np.broadcast_to(channels / t_kv, r_p.shape)
    rates = np.vstack([r_p, r_d, r_l])
    rate = rates.min(axis=0)
    tokens = rate * S_out
    # energy per generated token: the decode steps (the decode layout's energy at S_out tokens less its prefill and
    # first step, i.e. steps 2..S_out), one prefill pass per request (its workload's one decode step included), and
    # the KV cache crossing the link
    if S_out > 1:
        one = layout_columns(cols, system, d.decode.layout, replace(wl, output_tokens=1), prec, engine, overlap)
        e_dec = (dec["joules_per_token"] * S_out - one["joules_per_token"]) / (S_out - 1)
    else:
        e_dec = dec["joules_per_token"]
    pj = system.scale_out_pj_per_bit if system.spans_nodes(d.devices) else system.link_pj_per_bit
    jpt = e_dec + (pre["joules_per_token"] + kvb * 8 * pj * 1e-12) / S_out
    fits = pre["fits"] & dec["fits"]
    divides = pre["divides"] & dec["divides"]
    return {
        "ttft_s": ttft_p + t_kv, "prefill_s": ttft_p, "kv_transfer_s": np.broadcast_to(t_kv, ttft_p.shape),
        "kv_bytes": np.broadcast_to(kvb, ttft_p.shape), "tpot_s": tpot, "decode_s": dec["decode_s"],
        "latency_s": ttft_p + t_kv + dec["decode_s"], "prefill_rate": r_p, "decode_rate": r_d,
        "link_rate": r_l, "rate": rate, "bound": np.argmin(rates, axis=0).astype(float),
        "tokens_per_s": tokens, "tokens_per_s_per_user": 1.0 / tpot, "tokens_per_s_per_device": tokens / d.devices,
        "memory_per_device_bytes": np.maximum(pre["memory_per_device_bytes"], dec["memory_per_device_bytes"]),
        "joules_per_token": jpt, "fits": fits, "divides": divides, "valid": fits & divides,
        "devices": np.full(ttft_p.shape, float(d.devices)),
    }  # fmt: skip


def splits(system: System, prefill: Layout | str, decode: Layout | str, prefill_batch: int = 1) -> list[Disagg]:
    """Every split of ``system`` into nₚ ≥ 1 prefill replicas and n_d ≥ 1 decode replicas that fits its devices
    (each maximal: no further replica of either pool fits)."""
    lp = parse_layout(prefill) if isinstance(prefill, str) else prefill
    ld = parse_layout(decode) if isinstance(decode, str) else decode
    out = []
    for n_p in range(1, system.count // lp.devices + 1):
        n_d = (system.count - n_p * lp.devices) // ld.devices
        left = system.count - n_p * lp.devices - n_d * ld.devices
        if n_d >= 1 and left < lp.devices:  # maximal: not even one more prefill replica fits
            out.append(Disagg(Pool(lp, n_p), Pool(ld, n_d), prefill_batch))
    if not out:
        raise bad(
            "disagg",
            f"prefill={lp.describe()},decode={ld.describe()}",
            f"one replica of each pool needs {lp.devices + ld.devices} devices; the system has {system.count}",
        )
    return out


def balanced_split(columns: Mapping[str, Any], system: System, prefill: str, decode: str, workload: Workload,
                   precision: Any = "bf16", engine: Any = None) -> tuple[Disagg, dict[str, np.ndarray]]:  # fmt: skip
    """The split of :func:`splits` with the most tokens/s for a one-architecture table (rate matching)."""
    best = None
    for dg in splits(system, prefill, decode):
        r = disagg_columns(columns, system, dg, workload, precision, engine)
        if best is None or float(r["tokens_per_s"][0]) > float(best[1]["tokens_per_s"][0]):
            best = (dg, r)
    assert best is not None
    return best


# ---- a discrete-event simulation of the two pools ------------------------------------------------------------------
def simulate(
    n_prefill: int, prefill_s: float, n_decode: int, slots: int, decode_s: float, links: int, transfer_s: float,
    n_requests: int, prefill_batch: int = 1, warmup: int = 0,
) -> float:  # fmt: skip
    """Requests/s served by ``n_prefill`` prefill servers (``prefill_batch`` requests per ``prefill_s`` pass),
    ``links`` parallel KV-transfer channels (``transfer_s`` each) and ``n_decode`` decode servers of ``slots``
    sequences (``decode_s`` each), with an unbounded queue of waiting requests; completions between the
    ``warmup``-th and the last. Event by event: a stage takes the next request as soon as it has room."""
    t = 0.0
    events: list[tuple[float, int, str, int]] = []  # (time, seq, kind, count)
    seq = 0
    waiting_prefill = n_requests
    free_prefill, free_links, free_slots = n_prefill, links, n_decode * slots
    queue_link, queue_decode, done, t_warm = 0, 0, 0, 0.0

    def push(time: float, kind: str, count: int = 1) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(events, (time, seq, kind, count))

    def start() -> None:
        nonlocal waiting_prefill, free_prefill, free_links, queue_link, free_slots, queue_decode
        while free_prefill and waiting_prefill:
            k = min(prefill_batch, waiting_prefill)
            waiting_prefill -= k
            free_prefill -= 1
            push(t + prefill_s, "prefilled", k)
        while free_links and queue_link:
            queue_link -= 1
            free_links -= 1
            push(t + transfer_s, "moved")
        while free_slots and queue_decode:
            queue_decode -= 1
            free_slots -= 1
            push(t + decode_s, "done")

    start()
    while done < n_requests:
        t, _, kind, k = heapq.heappop(events)
        if kind == "prefilled":
            free_prefill += 1
            queue_link += k
        elif kind == "moved":
            free_links += 1
            queue_decode += 1
        else:
            free_slots += 1
            done += 1
            if done == warmup:
                t_warm = t
        start()
    return (n_requests - warmup) / (t - t_warm)


#: Serving columns a disaggregated option adds to a frontier row.
DISAGG_EXTRA = ("tokens_per_s_per_device", "devices", "kv_transfer_s", "prefill_rate", "decode_rate")


@dataclass(frozen=True)
class DisaggColumns:
    """``columns(cols, problem)`` of one disaggregated split (the joint space's option dimension), like
    :class:`.option.LayoutColumns`: TTFT (prefill + KV transfer) as ``prefill_s``, memory per device of the larger
    pool, energy of one decode replica's batch, tokens/s of the whole split."""

    system: System
    disagg: Disagg

    def __call__(self, cols: Mapping[str, np.ndarray], problem: Any) -> dict[str, np.ndarray]:
        from ...arch.architecture import param_counts

        if problem.device.id != self.system.device.id:
            raise bad("system", self.system.id, f"runs {self.system.device.id}, the problem's device is "
                      f"{problem.device.id}")  # fmt: skip
        wl = problem.workload
        full = complete_columns(cols)
        r = disagg_columns(full, self.system, self.disagg, wl, problem.precision, getattr(problem, "engine", None))
        counts = param_counts(full)
        n = len(r["ttft_s"])
        total, active = (np.broadcast_to(counts[k], (n,)) for k in ("total", "active"))
        return {
            "prefill_s": r["ttft_s"], "decode_s": r["decode_s"], "total_s": r["latency_s"], "tpot_s": r["tpot_s"],
            "memory_bytes": r["memory_per_device_bytes"], "params_total": total, "params_active": active,
            "energy_j": r["joules_per_token"] * wl.batch * wl.output_tokens, "valid": r["valid"],
            "tokens_per_s": r["tokens_per_s"], "tokens_per_s_per_user": r["tokens_per_s_per_user"],
            "tokens_per_s_per_device": r["tokens_per_s_per_device"],
            "devices": r["devices"], "kv_transfer_s": r["kv_transfer_s"], "prefill_rate": r["prefill_rate"],
            "decode_rate": r["decode_rate"],
        }  # fmt: skip


__all__ = [
    "DISAGG_EXTRA",
    "Disagg",
    "DisaggColumns",
    "Pool",
    "balanced_split",
    "disagg_columns",
    "kv_bytes",
    "parse_disagg",
    "simulate",
    "splits",
]
