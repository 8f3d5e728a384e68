"""What the interactive report shows, as JSON-ready dicts (SI units; NaN where a figure is missing).

``report_data`` takes a problem and the frontier a solver returned for it (``frontier``, ``joint_frontier`` or
``search``) and adds, for each of the first ``details`` frontier points, what ``rooflaw evaluate --json`` prints
for that architecture (totals, per-operator rows, tokens/s; under a layout what ``evaluate --system --layout
--json`` prints), its roofline (roofs and operator points), its memory and a short explanation.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

#: Frontier points that get a detail panel (roofline, breakdown, explanation) by default; each costs ~10 ms.
REPORT_DETAILS = 400
#: Architecture columns of a point, in the order the page shows them.
ARCH_KEYS = ("layers", "d_model", "heads", "kv_heads", "head_dim", "ffn", "experts", "top_k", "vocab", "tied",
             "local_layers", "window")  # fmt: skip
#: Columns of a point's figures the page's table may show (those present in the frontier).
FIGURE_KEYS = ("loss", "latency_s", "prefill_s", "decode_s", "total_s", "tpot_s", "memory_bytes", "energy_j",
               "params_total", "params_active", "precision", "batch", "option", "tokens_per_s",
               "tokens_per_s_per_user", "tokens_per_s_per_device", "trial")  # fmt: skip


def _scalar(v: Any) -> Any:
    """A plain Python value (numpy scalars unwrapped)."""
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        v = v.item()
    return v


def settings(problem: Any) -> dict[str, Any]:
    """The problem's settings: device, law, space, workload, precision, budgets (SI), cost model."""
    wl = problem.workload
    budgets = {("capacity" if name == "memory" and problem.memory_budget is None else name): bound
               for name, (_, bound) in problem.budgets().items()}  # fmt: skip
    return {
        "description": problem.describe(),
        "device": problem.device.id,
        "device_name": problem.device.name,
        "memory_capacity_bytes": float(problem.device.memory_capacity),
        "law": problem.law.name,
        "space": problem.space.name,
        "space_size": int(problem.space.size),
        "phase": problem.phase,
        "latency_column": problem.latency_column,
        "precision": problem.precision.name,
        "batch": wl.batch,
        "input_tokens": wl.input_tokens,
        "output_tokens": wl.output_tokens,
        "attention": wl.attention,
        "preset": problem.preset,
        "engine": problem.engine,
        "tokens": problem.tokens,
        "align": problem.align,
        "allow_extrapolation": bool(problem.allow_extrapolation),
        "budgets": budgets,
    }


def _points(problem: Any, frontier: Any) -> list[dict[str, Any]]:
    cols = [c for c in (*ARCH_KEYS, *FIGURE_KEYS) if c in frontier.columns]
    out = []
    for i, rec in enumerate(frontier[cols].to_dict("records")):
        p = {k: _scalar(v) for k, v in rec.items()}
        if "tied" in p:
            p["tied"] = bool(p["tied"])
        p["id"] = i
        p["spec"] = problem.space.architecture(rec).spec()
        out.append(p)
    return out


def _workload(problem: Any, batch: int) -> Any:
    return dataclasses.replace(problem.workload, batch=int(batch))


def _bands(ev: Mapping[str, Any]) -> dict[str, Any]:
    """Error bands the cost model attached to an evaluation (``bands`` or ``*_band`` keys), when it gives any."""
    out: dict[str, Any] = {}
    if isinstance(ev.get("bands"), Mapping):
        out.update(ev["bands"])
    out.update({k[: -len("_band")]: v for k, v in ev.items() if k.endswith("_band")})
    return out


def _single_detail(problem: Any, arch: Any, precision: Any, batch: int, device: Any = None) -> dict[str, Any]:
    from ..constraints import evaluate
    from ..constraints.breakdown import op_rows, throughput
    from ..plots.roofline import roofline_data

    dev = problem.device if device is None else device
    rep = evaluate(arch, dev, _workload(problem, batch), precision, problem.preset, engine=problem.engine)
    ev = rep.to_dict()
    ev["ops"] = op_rows(rep)
    ev["tokens_per_s"] = throughput(rep)
    return {"evaluate": ev, "roofline": dataclasses.asdict(roofline_data(rep)), "bands": _bands(ev)}


def _layout_detail(problem: Any, arch: Any, precision: Any, batch: int, option: Any) -> dict[str, Any]:
    from ..constraints.parallel import evaluate_layout, parse_layout
    from ..devices.system import get_system

    sys_ = get_system(option.meta["system"])
    ev = evaluate_layout(arch, sys_, option.name, _workload(problem, batch), precision, problem.engine,
                         bool(option.meta.get("overlap", False)))  # fmt: skip
    ev = {k: v for k, v in ev.items()}
    ev.update(system=sys_.to_dict(), layout=option.name)
    roofline = None
    if parse_layout(option.name).trivial:  # one device: exactly the single-chip model, so its roofline and operators
        one = _single_detail(problem, arch, precision, batch, sys_.device)
        ev["ops"], roofline = one["evaluate"]["ops"], one["roofline"]
    return {"evaluate": ev, "roofline": roofline, "bands": _bands(ev)}


def _fmt(name: str, v: float) -> str:
    from ..units import fmt_bytes, fmt_time

    if name in ("memory", "capacity"):
        return fmt_bytes(v)
    if name == "energy":
        return f"{v:.3g} J"
    return fmt_time(v)


def _edges(problem: Any, arch: Any) -> list[str]:
    """Dimensions of ``arch`` at the end of the space's choices, and law variables at the end of the law's domain."""
    out = []
    ch = problem.space.choices()
    for k in ("layers", "d_model"):
        vals = [v for v in ch.get(k, []) if isinstance(v, (int, float))]
        v = getattr(arch, k)
        if len(vals) > 1 and v in (min(vals), max(vals)):
            out.append(f"{k} = {v} is the space's {'minimum' if v == min(vals) else 'maximum'}")
    from ..objectives import law_inputs

    x = law_inputs(arch.columns(), problem.tokens)
    for k, (lo, hi) in problem.law.domain.items():
        v = x.get(k) if isinstance(x, Mapping) else None
        if v is None or (k in ("E", "K") and arch.experts == 1):  # a dense model sits at E = K = 1 by definition
            continue
        import numpy as np

        v = float(np.asarray(v, dtype=float).ravel()[0])
        if v < lo * (1 - 1e-9) or v > hi * (1 + 1e-9):
            out.append(f"{k} = {v:.4g} lies outside the law's fitted domain {lo:.4g}–{hi:.4g}")
        elif math.isclose(v, lo, rel_tol=1e-6) or math.isclose(v, hi, rel_tol=1e-6):
            out.append(f"{k} = {v:.4g} is at the edge of the law's fitted domain {lo:.4g}–{hi:.4g}")
    return out


def _explain(problem: Any, points: list[dict[str, Any]], i: int, arch: Any, ev: Mapping[str, Any]) -> str:
    """A few lines on why point ``i`` is where it is: budgets and slack, its frontier neighbours, where its time
    and memory go, and whether it sits at the edge of the space or of the law's domain."""
    p, col = points[i], problem.latency_column
    phase = problem.phase
    lines = [f"frontier point {i} of {len(points)} (ordered by {phase} latency): loss {p['loss']:.4f}, "
             f"{phase} latency {_fmt('latency', p[col])}, memory {_fmt('memory', p['memory_bytes'])}"]  # fmt: skip
    values = {"latency": p[col], "memory": p["memory_bytes"], "energy": p.get("energy_j", math.nan)}
    rows = []
    for name, (_, bound) in problem.budgets().items():
        label = name if name != "memory" or problem.memory_budget is not None else "capacity"
        v = values.get(name, math.nan)
        slack = (bound - v) / bound if v == v else math.nan
        rows.append((slack, f"{label}: {_fmt(label, v) if v == v else 'n/a'} of {_fmt(label, bound)}"
                            f"{'' if slack != slack else f', slack {slack:.1%}'}"))  # fmt: skip
    if rows:
        tight = min(rows, key=lambda r: r[0] if r[0] == r[0] else math.inf)
        lines.append("budgets: " + "; ".join(t + (" (tightest)" if (s, t) == tight else "") for s, t in rows))
    for j, word in ((i - 1, "faster"), (i + 1, "slower")):
        if 0 <= j < len(points):
            q = points[j]
            lines.append(f"next {word} frontier point ({j}): loss {q['loss']:.4f} ({q['loss'] - p['loss']:+.4f}) at "
                         f"{_fmt('latency', q[col])} ({(q[col] - p[col]) * 1e3:+.3g} ms)")  # fmt: skip
    ops = [r for r in ev.get("ops", []) if r["phase"] == ("prefill" if phase == "prefill" else "decode")]
    if ops:
        top = sorted(ops, key=lambda r: -r["share"])[:3]
        which = "prefill" if phase == "prefill" else "decode"
        lines.append(f"{which} time goes to " + ", ".join(f"{r['name']} {r['share']:.0%} ({r['bound']})" for r in top))
    if "weight_bytes" in ev:
        lines.append(f"memory: weights {_fmt('memory', ev['weight_bytes'])}, KV cache "
                     f"{_fmt('memory', ev['kv_cache_bytes'])}, activations {_fmt('memory', ev['activation_bytes'])}"
                     f" of {_fmt('memory', problem.device.memory_capacity)}")  # fmt: skip
    for note in ev.get("notes", []) or []:
        lines.append(f"note: {note}")
    lines += [f"edge: {e}" for e in _edges(problem, arch)]
    return "\n".join(lines)


def _joint_settings(problem: Any, joint: Any) -> dict[str, Any] | None:
    """What a joint space crosses with the architecture: precisions, batches, options (layouts) and their system."""
    if joint is None:
        return None
    systems = sorted({str(o.meta["system"]) for o in joint.options if "system" in o.meta})
    return {
        "precisions": [p.name for p in joint.precisions] or [problem.precision.name],
        "batches": list(joint.batches) or [problem.workload.batch],
        "options": [o.name for o in joint.options],
        "systems": systems,
    }


def report_data(
    problem: Any, result: Any, joint: Any = None, details: int = REPORT_DETAILS, title: str | None = None
) -> dict[str, Any]:
    """The report's data for ``result`` (a frontier of ``problem``, or of ``problem`` × ``joint``).

    ``summary`` is ``result.to_dict()`` (what ``frontier --json`` / ``search --json`` print); ``points`` the
    frontier rows with each architecture's spec string; ``details[str(i)]`` for the first ``details`` points:
    ``architecture`` (its fields), ``evaluate`` (what ``evaluate --json`` prints for it), ``roofline`` (roofs and
    operator points; None under a multi-device layout), ``bands`` (error bands when the cost model gives them) and
    ``explain`` (text). ``title``: the page's title (default: the problem's description and space)."""
    from ..errors import bad

    if isinstance(details, bool) or not isinstance(details, int) or details < 0:
        raise bad("details", details, "must be a non-negative integer")
    problem = problem.on_aligned_space()
    front = result.frontier
    kind = "single"
    if "precision" in front.columns:
        layouts = joint is not None and any(o.columns is not None for o in joint.options)
        kind = "layouts" if layouts else "joint"
    points = _points(problem, front)
    options = {o.name: o for o in joint.options} if joint is not None else {}
    det: dict[str, Any] = {}
    for i, rec in enumerate(front.head(details).to_dict("records")):
        arch = problem.space.architecture(rec, name=f"frontier point {i}")
        precision = rec.get("precision", problem.precision)
        batch = int(rec.get("batch", problem.workload.batch))
        opt = options.get(rec.get("option"))
        if opt is not None and opt.columns is not None:
            d = _layout_detail(problem, arch, precision, batch, opt)
        else:
            d = _single_detail(problem, arch, precision, batch)
        d["architecture"] = {k: _scalar(rec[k]) for k in ARCH_KEYS if k in rec}
        d["architecture"]["tied"] = bool(arch.tied)
        d["spec"] = points[i]["spec"]
        d["explain"] = _explain(problem, points, i, arch, d["evaluate"])
        det[str(i)] = d
    return {
        "kind": kind,
        "title": title or f"{problem.describe()} — space {problem.space.name}",
        "settings": {
            **settings(problem),
            "objectives": list(result.objectives),
            "joint": _joint_settings(problem, joint),
        },  # fmt: skip
        "summary": result.to_dict(),
        "points": points,
        "details": det,
        "details_shown": len(det),
    }


__all__ = ["REPORT_DETAILS", "report_data", "settings"]
