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
