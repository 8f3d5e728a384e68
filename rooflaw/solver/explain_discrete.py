"""Why the discrete answer is what it is: the chosen architecture, its runner-ups, the slack of every constraint,
and what rounding the continuous optimum to a real, aligned architecture changed."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd
import sympy

from .result import Result

#: Runner-ups are feasible architectures whose loss is within this fraction of the answer's.
WITHIN = 0.03
ARCH_COLS = ("layers", "d_model", "heads", "kv_heads", "head_dim", "ffn", "experts", "top_k")
PAPER_VARS = ("l", "d", "r", "rho", "gqa")


def _paper_point(row: Any) -> dict[str, float]:
    return {
        "l": float(row["layers"]), "d": float(row["d_model"]), "r": float(row["top_k"] * row["ffn"] / row["d_model"]),
        "rho": float(row["top_k"] / row["experts"]), "gqa": float(row["heads"] / row["kv_heads"]),
    }  # fmt: skip


def _candidates(problem: Any, res: Result) -> pd.DataFrame:
    """Feasible architectures near the answer: the rounding neighbourhood of the continuous optimum (or of the
    answer itself) evaluated with the problem's cost model, plus the method's frontier when it has one."""
    from .discrete.rounding import round_solution

    a = res.architecture
    centre = res.continuous if res.continuous else _paper_point({k: getattr(a, k) for k in ARCH_COLS})
    frames = []
    try:
        _, cands, _ = round_solution(problem, centre, k=2)
        frames.append(cands)
    except Exception:  # noqa: BLE001 - a space the rounding grid cannot serve still has a frontier
        pass
    if res.frontier is not None and len(res.frontier):
        frames.append(problem.evaluate({k: res.frontier[k].to_numpy() for k in ARCH_COLS}))
    if not frames:
        return pd.DataFrame()
    df = pd.concat(frames, ignore_index=True)
    df = df[df["feasible"]] if "feasible" in df else df
    return df.drop_duplicates(list(ARCH_COLS))


def _terms(problem: Any, x: dict[str, float]) -> list[float] | None:
    """The law's additive terms at a point of (l, d, r, rho, gqa), or None when the law uses other variables."""
    law = problem.law
    if not set(law.variables) <= {"l", "d", "r", "rho", "d_m", "gqa"}:
        return None
    terms = _term_exprs(problem)
    vals = {"l": x["l"], "d": x["d"], "r": x["r"], "rho": x["rho"], "gqa": x["gqa"], "d_m": x["d"] / x["gqa"]}
    from ..objectives import symbol

    subs = {symbol(k): v for k, v in vals.items()}
    return [float(t.xreplace(subs)) for t in terms]


#: Cost shares of a phase's time, by what the time is spent on (see :func:`cost_shares`).
SHARES = ("weights", "kv_cache", "compute", "vector_memory", "overhead")
_EDGE_TOL = 1e-9


def _roof_class(name: str) -> str:
    """The roof class (linear, attention, vector, memory) of operator ``name`` (a ``_local`` part is its op's)."""
    from ..constraints import operators as O
    from ..constraints.presets import PRESETS

    ops = {op.name: op.roof for p in PRESETS.values() for op in p.ops}
    ops.update(O.part_roofs())
    return ops.get(name, "memory")


def cost_shares(report: Any, phase: str) -> dict[str, float]:
    """Fractions of ``phase``'s time (``prefill``, ``decode`` or ``total``) the answer spends streaming weights
    (memory-bound GEMMs, embeddings, LM head), reading the KV cache (memory-bound attention), on compute-bound
    operators, moving activations through vector ops (norms, activations), and in engine/launch overhead."""
    phases = ("prefill", "decode") if phase == "total" else (phase,)
    acc = dict.fromkeys(SHARES, 0.0)
    for o in report.ops:
        if o.phase not in phases:
            continue
        if o.bound == "overhead":
            key = "overhead"
        elif o.bound == "compute":
            key = "compute"
        else:
            key = {"linear": "weights", "memory": "weights", "attention": "kv_cache"}.get(
                _roof_class(o.name), "vector_memory"
            )
        acc[key] += o.seconds
    total = sum(acc.values())
    return {k: v / total for k, v in acc.items()} if total > 0 else acc


def edges(problem: Any, arch: Any) -> list[str]:
    """Where the answer sits at an edge: of the space (each of l, d, r, ρ, gqa at the smallest or largest value the
    space offers) and of the law's fitted domain (each domain variable at, or outside, its fitted range)."""
    from ..objectives.variables import law_inputs

    out = []
    x = _paper_point({k: getattr(arch, k) for k in ARCH_COLS})
    names = {"l": "layers", "d": "d_model", "r": "FFN ratio r", "rho": "activation rate ρ", "gqa": "GQA ratio"}
    try:
        bounds = problem.space.bounds()
    except (AttributeError, ValueError):  # a space without the paper's variables (no bounds to judge)
        bounds = {}
    for k, (lo, hi) in bounds.items():
        if hi <= lo * (1 + _EDGE_TOL):
            continue  # the space fixes it: no choice, no edge
        if x[k] <= lo * (1 + _EDGE_TOL):
            out.append(f"space: {names[k]} = {x[k]:.4g} is the smallest the space offers ({lo:.4g}–{hi:.4g})")
        elif x[k] >= hi * (1 - _EDGE_TOL):
            out.append(f"space: {names[k]} = {x[k]:.4g} is the largest the space offers ({lo:.4g}–{hi:.4g})")
    inputs = law_inputs(arch.columns(), getattr(problem, "tokens", None))
    for k, (lo, hi) in problem.law.domain.items():
        if k not in inputs:
            continue
        v = float(inputs[k].reshape(-1)[0])
        if v < lo * (1 - _EDGE_TOL) or v > hi * (1 + _EDGE_TOL):
            out.append(f"law: {k} = {v:.4g} is outside the law's fitted domain ({lo:.4g}–{hi:.4g}): extrapolated")
        elif v <= lo * (1 + _EDGE_TOL) or v >= hi * (1 - _EDGE_TOL):
            side = "lower" if v <= lo * (1 + _EDGE_TOL) else "upper"
            out.append(f"law: {k} = {v:.4g} is at the {side} edge of the law's fitted domain ({lo:.4g}–{hi:.4g})")
    return out


def explain_discrete(problem: Any, res: Result, within: float = WITHIN, top: int = 5) -> dict[str, Any]:
    """A JSON-ready account of the discrete answer ``res`` to ``problem`` (SI units).

    ``constraints``: per budget, the answer's value, the bound, the slack (budget − value)/budget and whether it is
    the tightest; ``runner_ups``: up to ``top`` other feasible architectures with loss ≤ (1 + ``within``)·loss;
    ``rounding``: the continuous optimum against the answer variable by variable, the loss of each, the law's terms
    at both points, and the answer's latency under the theory-mode model the relaxation used.
    """
    from ..constraints import evaluate

    a = res.architecture
    if a is None:
        return {"architecture": None}
    row = {k: getattr(a, k) for k in ARCH_COLS}
    lat = res.latency_s
    values = {"prefill_s": lat["prefill"], "decode_s": lat["decode"], "total_s": lat["total"], "tpot_s": lat["tpot"],
              "memory_bytes": res.memory_bytes, "energy_j": res.energy_j}  # fmt: skip
    cons = []
    for con in problem.constraints:
        v = float(con.value(values))
        cons.append({"name": con.label, "value": v, "budget": con.bound, "slack": float(con.slack(values)),
                     "quantity": con.quantity, "text": f"{con.human(v)} of {con.human(con.bound)}"})  # fmt: skip
    tight = min(cons, key=lambda c: c["slack"]) if cons else None
    for c in cons:
        c["tightest"] = c is tight
    out: dict[str, Any] = {
        "architecture": {**row, **_paper_point(row)},
        "loss": res.loss,
        "constraints": cons,
        "tightest": tight["name"] if tight else None,
    }
    out["edges"] = edges(problem, a)
    report = evaluate(a, problem.device, problem.workload, problem.precision, problem.preset,
                      engine=problem.engine)  # fmt: skip
    out["cost_shares"] = {"phase": problem.phase, **cost_shares(report, problem.phase)}
    out["memory_shares"] = {
        k: float(report.values[c]) / float(report.values["memory_bytes"])
        for k, c in (("weights", "weight_bytes"), ("kv_cache", "kv_cache_bytes"), ("activations", "activation_bytes"))
        if float(report.values["memory_bytes"]) > 0
    }
    cands = _candidates(problem, res)
    ups = []
    if len(cands):
        same = np.ones(len(cands), dtype=bool)
        for k in ARCH_COLS:
            same &= cands[k].to_numpy(dtype=float) == float(row[k])
        near = cands[~same & (cands["loss"] <= res.loss * (1 + within))]
        for _, r in near.sort_values(["loss", "latency_s"]).head(top).iterrows():
            ups.append({**{k: int(r[k]) for k in ARCH_COLS}, "loss": float(r["loss"]),
                        "loss_change": float(r["loss"] / res.loss - 1), "latency_s": float(r["latency_s"]),
                        "memory_bytes": float(r["memory_bytes"])})  # fmt: skip
    out["runner_ups"] = ups
    out["runner_ups_within"] = within
    out["candidates_compared"] = len(cands)
    if res.continuous:
        x = {k: float(res.continuous[k]) for k in PAPER_VARS if k in res.continuous}
        disc = _paper_point(row)
        rnd: dict[str, Any] = {
            "variables": {k: {"continuous": x[k], "discrete": disc[k]} for k in x},
            "loss": {"continuous": res.continuous_loss, "discrete": res.loss},
        }
        if set(PAPER_VARS) <= set(x):
            tc, td = _terms(problem, x), _terms(problem, disc)
            if tc is not None and td is not None:
                rnd["terms"] = [{"term": sympy.sstr(sympy.N(t, 3)), "continuous": c, "discrete": d}
                                for t, c, d in zip(_term_exprs(problem), tc, td, strict=True)]  # fmt: skip
        theory = evaluate(a, dataclasses.replace(problem.scenario, preset="paper"))
        rnd["latency_theory_s"] = float(theory.values[problem.latency_column])
        rnd["latency_judged_s"] = float(values[problem.latency_column])
        rnd["judged_by"] = problem.preset
        out["rounding"] = rnd
    return out


def _term_exprs(problem: Any) -> tuple:
    e = problem.law.bound_expr()
    return tuple(t for t in (e.args if isinstance(e, sympy.Add) else (e,)) if t.free_symbols)


def _v(name: str, v: float) -> str:
    from ..units import fmt_bytes, fmt_time

    if name == "latency":
        return fmt_time(v)
    if name in ("memory", "capacity"):
        return fmt_bytes(v)
    return f"{v:.4g} J"


def explain_text(ex: dict[str, Any], phase: str = "decode") -> str:
    """:func:`explain_discrete` as lines of text."""
    a = ex.get("architecture")
    if a is None:
        return "no architecture"
    lines = [
        "the discrete answer: "
        + f"l={a['layers']}, d={a['d_model']}, heads={a['heads']}, kv_heads={a['kv_heads']}, ffn={a['ffn']}, "
        f"E/K={a['experts']}/{a['top_k']} (r={a['r']:.3g}, ρ={a['rho']:.3g}, gqa={a['gqa']:.3g}); loss {ex['loss']:.4f}"
    ]
    for c in ex["constraints"]:
        tag = "  <- tightest" if c["tightest"] else ""
        what = c.get("quantity") or (f"{phase} latency" if c["name"] == "latency" else c["name"])
        text = c.get("text") or f"{_v(c['name'], c['value'])} of {_v(c['name'], c['budget'])}"
        if c["name"] == "capacity":
            what = "memory (device capacity)"
        lines.append(f"  {what}: {text}, slack {c['slack']:.1%}{tag}")
    for e in ex.get("edges", []):
        lines.append(f"  at an edge -- {e}")
    sh = ex.get("cost_shares")
    if sh:
        parts = {k: sh[k] for k in SHARES if sh.get(k, 0) > 0}
        ranked = sorted(parts.items(), key=lambda kv: -kv[1])
        spent = ", ".join(f"{k.replace('_', ' ')} {v:.0%}" for k, v in ranked)
        binds = f" -> {ranked[0][0].replace('_', ' ')} binds" if ranked else ""
        lines.append(f"  where its {sh['phase']} time goes: {spent}{binds}")
    ms = ex.get("memory_shares")
    if ms:
        lines.append("  its memory: " + ", ".join(f"{k.replace('_', ' ')} {v:.0%}" for k, v in ms.items()))
    rnd = ex.get("rounding")
    if rnd:
        lc, ld = rnd["loss"]["continuous"], rnd["loss"]["discrete"]
        lines.append(f"what rounding changed (continuous optimum -> answer): loss {lc:.4f} -> {ld:.4f} "
                     f"({ld - lc:+.4f})")  # fmt: skip
        for k, v in rnd["variables"].items():
            lines.append(f"  {k:>4}: {v['continuous']:.4g} -> {v['discrete']:.4g}")
        for t in rnd.get("terms", []):
            dt = t["discrete"] - t["continuous"]
            lines.append(f"  loss term {t['term']}: {t['continuous']:.4f} -> {t['discrete']:.4f} ({dt:+.4f})")
        lt, lj = rnd["latency_theory_s"], rnd["latency_judged_s"]
        lines.append(f"  the answer's {phase} latency: {_v('latency', lt)} in the theory-mode model the relaxation "
                     f"solves, {_v('latency', lj)} in the '{rnd['judged_by']}' model that judges it "
                     f"({lj / lt:.2f}x)")  # fmt: skip
    ups = ex["runner_ups"]
    lines.append(f"runner-ups within {ex['runner_ups_within']:.0%} of its loss "
                 f"({len(ups)} of {ex['candidates_compared']} feasible candidates compared):")  # fmt: skip
    if not ups:
        lines.append("  none: every other feasible candidate is more than that worse")
    if any(u["loss_change"] < 0 for u in ups):
        lines.append("  (a negative change is a feasible architecture the rounding's local search did not reach; "
                     "--method exhaustive finds the optimum of the space)")  # fmt: skip
    for u in ups:
        lines.append(f"  l={u['layers']}, d={u['d_model']}, kv={u['kv_heads']}, ffn={u['ffn']}, "
                     f"E/K={u['experts']}/{u['top_k']}: loss {u['loss']:.4f} ({u['loss_change']:+.2%}), "
                     f"latency {_v('latency', u['latency_s'])}")  # fmt: skip
    return "\n".join(lines)


__all__ = ["WITHIN", "explain_discrete", "explain_text"]
