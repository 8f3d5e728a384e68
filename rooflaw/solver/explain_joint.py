"""Why a joint pick (architecture, precision, batch, layout): its constraints and slacks, per-device memory and
communication share, and the best feasible point of every other (precision, batch, option) combination -- or, for
a combination with none, which constraint shut it out and by how much.

One more scan of the joint space (in-process, by the joint frontier's own :func:`evaluate_chunk`), keeping per
combination only counters, the minimum of each budgeted quantity and the best feasible row.
"""

from __future__ import annotations

import math
from typing import Any, TypedDict

import numpy as np

from ..units import fmt_bytes, fmt_time
from .discrete.joint import JOINT_KEEP, JointSpace, argbest_joint, evaluate_chunk
from .discrete.scan_parts import SUB_CHUNK
from .problem import Problem

_ARCH = ("layers", "d_model", "heads", "kv_heads", "head_dim", "ffn", "experts", "top_k")


class _ComboStats(TypedDict):
    """One combination's scan: points evaluated, where its option applies, feasible; its best feasible row
    (None: none); per constraint kind, the best value of its quantity over the points it applies to."""

    evaluated: int
    applies: int
    feasible: int
    best: dict[str, float] | None
    minimum: dict[str, float]


def _scan(problem: Problem, joint: JointSpace) -> list[_ComboStats]:
    combos = joint.combos(problem)
    extra = tuple(dict.fromkeys(k for o in joint.options for k in o.extra))
    keep = JOINT_KEEP + extra
    stats: list[_ComboStats] = [
        {"evaluated": 0, "applies": 0, "feasible": 0, "best": None, "minimum": {}} for _ in combos
    ]
    size = problem.space.size
    for s in range(0, size, SUB_CHUNK):
        cols = problem.space.columns_at(np.arange(s, min(s + SUB_CHUNK, size), dtype=np.int64), np.float64)
        for c, v, n in evaluate_chunk(combos, cols, extra):
            st = stats[c.index]
            st["evaluated"] += n
            if v is None:
                continue
            fi = np.flatnonzero(v["finite"])
            st["applies"] += len(fi)
            for con in c.problem.constraints:
                if len(fi):  # the best value of each constraint's quantity (largest for a floor)
                    got = float(con.from_ceiling(float(np.asarray(v[con.as_upper()[0]])[fi].min())))
                    old = st["minimum"].get(con.kind)
                    st["minimum"][con.kind] = got if old is None else min(old, got) if con.upper else max(old, got)
            feas = np.flatnonzero(v["feasible"])
            st["feasible"] += len(feas)
            if len(feas):
                j = argbest_joint(v, feas)
                row = {k: float(np.asarray(v[k])[j]) for k in keep}
                b = st["best"]
                if b is None or (row["loss"], row["latency_s"]) < (b["loss"], b["latency_s"]):
                    st["best"] = row
    return stats


def _serving(row: dict[str, float]) -> dict[str, float]:
    out = {"memory_per_device_bytes": row["memory_bytes"], "tokens_per_s": row["tokens_per_s"],
           "tokens_per_s_per_user": row["tokens_per_s_per_user"]}  # fmt: skip
    out["tokens_per_s_per_device"] = row.get("tokens_per_s_per_device", row["tokens_per_s"])
    comm = row.get("comm_s_decode", 0.0)
    out["comm_s_decode"] = comm
    out["comm_share_decode"] = comm / row["decode_s"] if row["decode_s"] > 0 else math.nan
    if "kv_replication" in row:
        out["kv_replication"] = row["kv_replication"]
    return out


def explain_joint(problem: Problem, joint: JointSpace, res: Any) -> dict[str, Any]:
    """A JSON-ready account of the joint pick ``res`` (:func:`solve_joint`'s result) for ``problem`` × ``joint``
    (SI units): ``pick`` (combination, architecture, loss, latency, per-device memory, tokens/s, decode comm and
    its share of the decode time), ``constraints`` (value, bound, slack, tightest; the layouts' serving floors
    too), ``combinations`` (per precision/batch/option: counts and its best feasible point with its loss change
    against the pick, or the smallest value of each budgeted quantity when none is feasible)."""
    combos = joint.combos(problem)
    stats = _scan(problem, joint)
    x = res.extra
    pick_i = next(c.index for c in combos if (c.precision, c.batch, c.option.name) == (x["precision"], x["batch"],
                                                                                       x["option"]))  # fmt: skip
    best = stats[pick_i]["best"]
    assert best is not None  # the pick is the best feasible point of its combination: the scan found it
    c = combos[pick_i]
    cons: list[dict[str, Any]] = []
    for con in c.problem.constraints:
        label = "capacity (per device)" if con.label == "capacity" else con.label
        cons.append({"name": label, "value": float(con.value(best)), "budget": con.bound,
                     "slack": float(con.slack(best))})  # fmt: skip
    fn = c.option.columns
    floor, tpot = getattr(fn, "min_tokens_per_s_per_device", None), getattr(fn, "max_tpot_s", None)
    if floor is not None:
        v = best["tokens_per_s_per_device"]
        cons.append({"name": "tokens/s per device (floor)", "value": v, "budget": floor, "slack": (v - floor) / floor})
    if tpot is not None:
        cons.append({"name": "TPOT", "value": best["tpot_s"], "budget": tpot, "slack": (tpot - best["tpot_s"]) / tpot})
    tight = min(cons, key=lambda d: d["slack"]) if cons else None
    for d in cons:
        d["tightest"] = d is tight
    rows = []
    for cc, st in zip(combos, stats, strict=True):
        r: dict[str, Any] = {"precision": cc.precision, "batch": cc.batch, "option": cc.option.name,
                             "evaluated": st["evaluated"], "applies": st["applies"], "feasible": st["feasible"],
                             "picked": cc.index == pick_i}  # fmt: skip
        b = st["best"]
        if b is not None:
            change = b["loss"] / best["loss"] - 1
            r["best"] = {**{k: int(b[k]) for k in _ARCH}, "loss": b["loss"], "loss_change": change,
                         "latency_s": b["latency_s"], **_serving(b)}  # fmt: skip
        else:
            r["minimum"] = st["minimum"]
            r["budgets"] = {con.kind: con.bound for con in cc.problem.constraints}
        rows.append(r)
    rows.sort(key=lambda r: (r.get("best", {}).get("loss", math.inf), r["precision"], r["batch"], r["option"]))
    return {
        "pick": {"precision": c.precision, "batch": c.batch, "option": c.option.name,
                 "architecture": {k: int(best[k]) for k in _ARCH}, "loss": best["loss"], "latency_s": best["latency_s"],
                 **_serving(best)},
        "constraints": cons,
        "tightest": tight["name"] if tight else None,
        "binding": res.binding,
        "combinations": rows,
        "feasible": sum(s["feasible"] for s in stats),
        "evaluated": sum(s["evaluated"] for s in stats),
    }  # fmt: skip


def _why_not(r: dict[str, Any]) -> str:
    if not r["applies"]:
        return "the option never applies (layout does not divide, or misses the serving floors)"
    misses = [f"{k} >= {_q(k, v)} (budget {_q(k, r['budgets'][k])})" for k, v in r["minimum"].items()
              if v > r["budgets"][k]]  # fmt: skip
    return "no feasible point: " + ("; ".join(misses) if misses else "no single point meets every budget at once")


def _q(name: str, v: float) -> str:
    return fmt_time(v) if name == "latency" else fmt_bytes(v) if name == "memory" else f"{v:.3g} J"


def explain_joint_text(ex: dict[str, Any], top: int = 12) -> str:
    """The account of :func:`explain_joint` as plain text."""
    p = ex["pick"]
    a = p["architecture"]
    lines = [
        f"why precision {p['precision']}, batch {p['batch']}, option {p['option']}: the lowest loss ({p['loss']:.4f}) "
        f"among {ex['feasible']:,} feasible of {ex['evaluated']:,} joint points",
        f"  architecture: {a['layers']} x {a['d_model']}, {a['heads']} heads / {a['kv_heads']} KV, ffn {a['ffn']}, "
        + (f"{a['experts']} experts top-{a['top_k']}" if a["experts"] > 1 else "dense"),
        f"  per device: memory {fmt_bytes(p['memory_per_device_bytes'])}, "
        f"{p['tokens_per_s_per_device']:,.0f} tokens/s; "
        f"{p['tokens_per_s_per_user']:,.1f} tokens/s per user; decode communication {fmt_time(p['comm_s_decode'])} "
        f"({100 * p['comm_share_decode']:.1f} % of decode)",
        "constraints (slack = distance to the bound, relative):",
    ]  # fmt: skip
    for c in ex["constraints"]:
        unit = fmt_time if "latency" in c["name"] or c["name"] == "TPOT" else fmt_bytes if "capacity" in c["name"] or \
            c["name"] == "memory" else (lambda v: f"{v:,.4g}")  # fmt: skip
        mark = "  <- tightest" if c["tightest"] else ""
        lines.append(f"  {c['name']}: {unit(c['value'])} vs {unit(c['budget'])}, slack {100 * c['slack']:.1f} %{mark}")
    lines.append(f"binding (what the unconstrained optimum violates): {ex['binding']}")
    lines.append("best point of each combination (precision, batch, option):")
    for r in ex["combinations"][:top]:
        head = f"  {r['precision']}, B={r['batch']}, {r['option']}: "
        if "best" in r:
            b = r["best"]
            tag = "  <- pick" if r["picked"] else f"  (loss {100 * b['loss_change']:+.2f} %)"
            moe = f"{b['experts']}E top-{b['top_k']}" if b["experts"] > 1 else "dense"
            lines.append(head + f"loss {b['loss']:.4f}, {b['layers']} x {b['d_model']}, {moe}, latency "
                         f"{fmt_time(b['latency_s'])}, {b['tokens_per_s_per_device']:,.0f} tok/s/device, comm "
                         f"{100 * b['comm_share_decode']:.1f} %{tag}")  # fmt: skip
        else:
            lines.append(head + _why_not(r))
    if len(ex["combinations"]) > top:
        lines.append(f"  ... {len(ex['combinations']) - top} more (--json has them all)")
    return "\n".join(lines)


__all__ = ["explain_joint", "explain_joint_text"]
