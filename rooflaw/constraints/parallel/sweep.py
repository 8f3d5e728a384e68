"""One architecture served under a layout: a report with notes, batch sweeps, the largest batch that fits,
and the throughput–interactivity Pareto front (tokens/s per device vs tokens/s per user)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...arch.layer_kinds import count_columns, kinds
from ...devices.precision import Precision
from ...devices.system import System
from ...errors import RooflawError, bad
from ..roofline import complete_columns, evaluate
from ..scenario import Scenario
from ..workload import Workload
from . import shard
from .layout import Layout
from .serving import OUTPUTS, from_single, layout_columns

#: Largest batch ``max_batch`` searches (sequences per replica).
BATCH_LIMIT = 1 << 20


def _columns(arch: Any) -> dict[str, np.ndarray]:
    return complete_columns({k: np.array([float(v)]) for k, v in arch.columns().items()})


def _stages(arch: Any, pp: int) -> list[dict[str, int]]:
    return shard.pattern_stages(arch, pp)


def _scenario(system: System | Scenario, layout: Any, workload: Any, precision: Any, engine: Any = None,
              overlap: bool = False) -> Scenario:  # fmt: skip
    """``system`` itself when it is a Scenario with a layout (the rest left at their defaults), else the scenario of
    the loose arguments (the ``full`` preset prices each shard)."""
    if isinstance(system, Scenario):
        if system.layout is None or not isinstance(system.device, System):
            raise bad("scenario", system.describe(), "needs a System and a layout")
        if layout is not None or workload is not None or engine is not None or overlap:
            raise bad("layout", layout, "given beside a Scenario, which already holds the layout and workload")
        return system
    if layout is None:
        raise bad("layout", None, "a layout is required (a Layout or text such as tp=8)")
    return Scenario.of(system, workload, precision, "full", engine, layout, overlap)


def evaluate_layout(
    arch: Any,
    system: System | Scenario,
    layout: str | Layout | None = None,
    workload: Workload | None = None,
    precision: str | Precision = "bf16",
    engine: Any = None,
    overlap: bool = False,
) -> dict[str, Any]:
    """Serving metrics of ``arch`` under ``layout`` (floats, SI units; see :func:`layout_columns`) plus
    ``notes`` (KV replication, stage imbalance, the assumptions in force) and ``stages`` (pipeline stages'
    layer counts from the actual layer pattern, and each stage's seconds per micro-batch decode step). Raises a
    one-line error when the layout does not divide the architecture or needs more devices than the system has.
    ``system``: a :class:`Scenario` with a System and a layout, or a System with the loose arguments."""
    sc = _scenario(system, layout, workload, precision, engine, overlap)
    lay, sysm, wl = sc.layout, sc.device, sc.workload
    assert lay is not None and isinstance(sysm, System)
    cols = _columns(arch)
    why = shard.first_problem(cols, lay)
    if why is not None:
        raise bad("layout", lay.describe(), f"{why} of {arch.name or 'the architecture'}")
    stages = _stages(arch, lay.pp) if lay.pp > 1 else []
    if lay.trivial:  # exactly what `rooflaw evaluate` prints for one chip
        shard.check(cols, lay, sysm.count)
        rep = evaluate(arch, sc.on_chip())
        res = from_single(rep.values, wl)
        out = {k: _scalar(v[0]) for k, v in res.items()}
        out.update(divides=True, valid=out["fits"])
    elif stages:  # every stage of the real pattern, one row each; the busiest one sets the pace
        rows = {k: np.repeat(v, len(stages)) for k, v in cols.items()}
        counts = {k: np.array([st[k] for st in stages], dtype=float) for k in count_columns()}
        res = layout_columns(rows, sc, stage=counts)
        slow = int(np.argmax(res["decode_s"] + res["ttft_s"]))
        out = {k: _scalar(v[slow]) for k, v in res.items()}
        per_stage = res["decode_s"]
        out["stage_balance"] = float(np.mean(per_stage) / np.max(per_stage))
        step = per_stage / (wl.output_tokens * lay.pp)  # one decode step of one micro-batch through the stage
        out["stages"] = [{**st, "decode_step_s": float(t)} for st, t in zip(stages, step, strict=True)]
    else:
        res = layout_columns(cols, sc)
        out = {k: _scalar(v[0]) for k, v in res.items()}
    out.update(layout=lay.describe(), devices=lay.devices, system=sysm.id, overlap=sc.overlap,
               batch=wl.batch, notes=notes(arch, lay, out, sc.overlap))  # fmt: skip
    return out


def _scalar(v: Any) -> Any:
    return bool(v) if isinstance(v, (bool, np.bool_)) else float(v)


def notes(arch: Any, lay: Layout, out: dict[str, Any], overlap: bool) -> list[str]:
    """What the numbers rest on, in words."""
    msgs = []
    rep = out.get("kv_replication", 1.0)
    if rep > 1:
        whole = [k.label for k in kinds() if k.cache_replicated and arch.kind_layers(k.name)]
        what = f"the {' and '.join(whole)} cache is never split" if whole else f"kv_heads={arch.kv_heads}"
        msgs.append(f"attention TP {lay.tp_attn} exceeds what the KV cache splits into ({what}): the KV cache is "
                    f"replicated {rep:g}x")  # fmt: skip
    if lay.ep > 1 or (lay.helix and arch.experts > 1):
        msgs.append(f"uniform routing priced at the busiest EP rank (expected maximum of its routed pairs), "
                    f"load-imbalance factor {lay.imbalance:g} on top")  # fmt: skip
    if lay.pp > 1:
        msgs.append(f"pipeline: chunk {lay.chunk} tokens, bubble {out.get('bubble_fraction', 0):.1%} of prefill; "
                    f"stage balance {out.get('stage_balance', 1):.1%}")  # fmt: skip
    if lay.helix:
        msgs.append(f"Helix: KV sharded {lay.kvp}-way along the sequence, heads {lay.tp_attn}-way; FFN over "
                    f"{lay.helix} devices")  # fmt: skip
    if not lay.trivial:
        msgs.append("compute and communication " + ("fully overlapped (upper bound)" if overlap else "not overlapped"))
    if not out.get("fits", True):
        msgs.append("DOES NOT FIT in one device's memory")
    return msgs


def max_batch(
    arch: Any,
    system: System | Scenario,
    layout: str | Layout | None = None,
    workload: Workload | None = None,
    precision: str | Precision = "bf16",
) -> int:
    """Largest batch (sequences per replica, ≤ BATCH_LIMIT) whose weights, KV cache and activations fit every
    device (0 when not even one sequence fits). Memory grows monotonically with the batch: bisection.
    ``system``: a :class:`Scenario` with a System and a layout, or a System with the loose arguments."""
    sc = _scenario(system, layout, workload, precision)
    wl, cols = sc.workload, _columns(arch)

    def fits(b: int) -> bool:
        w = sc.with_workload(Workload(b, wl.input_tokens, wl.output_tokens, wl.attention))
        return bool(_memory(cols, w, arch) <= sc.chip.memory_capacity)

    if not fits(1):
        return 0
    lo, hi = 1, 2
    while hi <= BATCH_LIMIT and fits(hi):
        lo, hi = hi, hi * 2
    hi = min(hi, BATCH_LIMIT + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def _memory(cols: dict[str, np.ndarray], sc: Scenario, arch: Any) -> float:
    if sc.layout is not None and sc.layout.pp > 1:
        return evaluate_layout(arch, sc)["memory_per_device_bytes"]
    return float(layout_columns(cols, sc)["memory_per_device_bytes"][0])


def batch_sweep(
    arch: Any,
    system: System | Scenario,
    layout: str | Layout | None = None,
    batches: list[int] | None = None,
    workload: Workload | None = None,
    precision: str | Precision = "bf16",
    engine: Any = None,
    overlap: bool = False,
) -> list[dict[str, Any]]:
    """:func:`evaluate_layout` at each of ``batches``, with ``pareto`` marking the throughput–interactivity front."""
    sc = _scenario(system, layout, workload, precision, engine, overlap)
    wl = sc.workload
    rows = []
    for b in batches or [wl.batch]:
        r = evaluate_layout(arch, sc.with_workload(Workload(int(b), wl.input_tokens, wl.output_tokens, wl.attention)))
        rows.append({"batch": int(b), **{k: r[k] for k in (*OUTPUTS, "layout", "devices", "notes")}})
    mark_pareto(rows)
    return rows


def mark_pareto(rows: list[dict[str, Any]]) -> None:
    """Set ``pareto`` on rows no other fitting row beats in both tokens/s per device and tokens/s per user."""
    for r in rows:
        r["pareto"] = bool(r["fits"]) and not any(
            o is not r and o["fits"]
            and o["tokens_per_s_per_device"] >= r["tokens_per_s_per_device"]
            and o["tokens_per_s_per_user"] >= r["tokens_per_s_per_user"]
            and (o["tokens_per_s_per_device"] > r["tokens_per_s_per_device"]
                 or o["tokens_per_s_per_user"] > r["tokens_per_s_per_user"])
            for o in rows
        )  # fmt: skip


#: Most batch sizes one ``--batch`` sweep lists.
MAX_BATCHES = 4096


def parse_batches(text: str) -> list[int]:
    """``8`` · ``1,8,64`` · ``1:256`` (powers of two from 1 to 256) · ``1:64:8`` (1, 9, 17, …: a step)."""
    text = str(text).strip()
    try:
        if ":" in text:
            parts = [int(x) for x in text.split(":")]
            if len(parts) == 2:
                lo, hi = parts
                out = []
                b = lo
                while b <= hi and lo > 0:
                    out.append(b)
                    b *= 2
            elif len(parts) == 3:
                steps = range(parts[0], parts[1] + 1, parts[2]) if parts[2] > 0 else range(0)
                if len(steps) > MAX_BATCHES:  # sized before it is built: 1:4000000000:1 is refused at once
                    raise bad("batch", text, f"lists {len(steps):,} batches; at most {MAX_BATCHES}")
                out = list(steps)
            else:
                raise ValueError
        else:
            out = [int(x) for x in text.split(",")]
    except RooflawError:
        raise
    except ValueError:
        raise bad("batch", text, "must be N, N1,N2,... or LO:HI (powers of two) or LO:HI:STEP") from None
    if not out or any(b <= 0 for b in out):
        raise bad("batch", text, "needs positive batch sizes (LO ≤ HI)")
    if len(out) > MAX_BATCHES:
        raise bad("batch", text, f"lists {len(out):,} batches; at most {MAX_BATCHES}")
    return sorted(set(out))


__all__ = ["BATCH_LIMIT", "batch_sweep", "evaluate_layout", "mark_pareto", "max_batch", "notes", "parse_batches"]
