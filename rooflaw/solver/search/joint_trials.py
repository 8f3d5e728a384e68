"""Optuna search over the joint space: architecture × precision × batch × option (layout), as one trial space.

The architecture is drawn as in :mod:`.study` (an ordinal index per dimension, repaired to the nearest valid
point); precision, batch and option are categorical parameters (``precision``, ``batch``, ``option``; a dimension
with one value is not a parameter). Each trial is evaluated by the joint frontier's own code
(:func:`~rooflaw.solver.discrete.joint.evaluate_chunk` on one architecture and one combination), so a trial and
the exact joint frontier agree to the bit. A layout that does not divide the architecture (or misses the serving
floor ``--min-tokens-per-gpu``; ``--tpot-budget`` is a budget constraint) is an infeasible trial through the
``option`` constraint, not an exception. ``throughput`` (aggregate decode tokens/s) is maximised; every other
objective is minimised.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd

from ..discrete.joint import JOINT_KEEP, JOINT_OBJECTIVES, Combo, JointSpace, evaluate_chunk
from ..discrete.pareto import pareto_mask
from ..problem import Problem
from .dashboard import set_trial_attrs
from .params import suggest_architecture

#: An Optuna study direction.
Direction = Literal["minimize", "maximize"]

#: Trial user attribute holding a joint trial's row.
ATTR = "rooflaw_joint"
#: Architectures of the fixed sample that sets the joint hypervolume reference (seed 0; × every combination).
REFERENCE_SAMPLE = 1024


def directions(objectives: Sequence[str]) -> list[Direction]:
    """Optuna study directions: throughput is maximised, the rest minimised."""
    return ["maximize" if JOINT_OBJECTIVES[o][1] < 0 else "minimize" for o in objectives]


def extra_columns(joint: JointSpace) -> tuple[str, ...]:
    """The options' extra columns (a layout's tokens/s per device, decode comm, KV replication, devices)."""
    return tuple(dict.fromkeys(k for o in joint.options for k in o.extra))


def joint_definition(problem: Problem, joint: JointSpace) -> dict[str, Any]:
    """What the joint dimensions add to a study's definition (precisions, batches, options and their settings)."""
    combos = joint.combos(problem)
    opts = []
    for o in joint.options:
        cols = o.columns
        spec = repr(cols) if cols is None or hasattr(cols, "__dataclass_fields__") else getattr(
            cols, "__qualname__", type(cols).__qualname__)  # fmt: skip
        opts.append({"name": o.name, "columns": spec, "meta": dict(o.meta)})
    return {
        "precisions": sorted({c.precision for c in combos}, key=[c.precision for c in combos].index),
        "batches": sorted({c.batch for c in combos}),
        "options": opts,
    }


class JointObjective:
    """The trial function of a joint search (callable on an Optuna trial; values in the study's directions)."""

    def __init__(self, problem: Problem, joint: JointSpace, objectives: tuple[str, ...]) -> None:
        self.problem = problem
        self.objectives = objectives
        self.combos: list[Combo] = joint.combos(problem)
        self.precisions = list(dict.fromkeys(c.precision for c in self.combos))
        self.batches = list(dict.fromkeys(c.batch for c in self.combos))
        self.options = [o.name for o in joint.options]
        self.extra = extra_columns(joint)
        self.choices = problem.space.choices()
        self.cache: dict[tuple[int, int], dict[str, Any]] = {}
        self.evaluations = 0
        self.measurements = 0

    def suggest(self, trial: Any) -> tuple[dict[str, Any], int]:
        """The architecture choice and the combination index of a trial."""
        arch = suggest_architecture(trial, self.choices)  # the same architecture parameters as one space's search
        pick = []
        for name, vals in (("precision", self.precisions), ("batch", self.batches), ("option", self.options)):
            pick.append(vals.index(trial.suggest_categorical(name, vals)) if len(vals) > 1 else 0)
        p, b, o = pick
        return arch, (p * len(self.batches) + b) * len(self.options) + o

    def evaluate(self, index: int, combo: int) -> dict[str, Any]:
        """One architecture (flat index) under one combination: the joint frontier's columns, feasible, valid."""
        c = self.combos[combo]
        cols = self.problem.space.columns_at(np.array([index]), np.float64)
        ((_, v, _),) = evaluate_chunk([c], cols, self.extra)
        self.evaluations += 1
        row: dict[str, Any]
        if v is None:  # outside the law's fitted domain: no cost model run, never feasible
            row = {k: math.nan for k in JOINT_KEEP + self.extra}
            row |= {k: float(np.asarray(cols[k])[0]) for k in cols if k in row and np.ndim(cols[k])}
            row |= {"combo": float(combo), "feasible": False, "valid": True}  # whether the option applies: untested
        else:
            row = {k: float(np.asarray(v[k])[0]) for k in JOINT_KEEP + self.extra}
            row["feasible"] = bool(v["feasible"][0])
            row["valid"] = bool(v["finite"][0]) or not math.isfinite(row["loss"])
        q = c.problem
        cons = [-float(con.slack(row)) for con in q.constraints]
        bad_point = not math.isfinite(row["loss"])
        row["constraints"] = [1.0] * len(cons) if bad_point else cons
        row["constraints"].append(0.0 if row["valid"] and not bad_point else 1.0)  # the option applies
        return row

    def __call__(self, trial: Any) -> Any:
        choice, combo = self.suggest(trial)
        index = self.problem.space.point(choice)["index"]
        key = (index, combo)
        cached = key in self.cache
        row = self.cache[key] if cached else self.evaluate(index, combo)
        self.cache[key] = row
        trial.set_user_attr("index", index)
        trial.set_user_attr("cached", cached)
        trial.set_user_attr("constraints", row["constraints"])
        for name, c in zip([*(con.kind for con in self.problem.constraints), "option"], row["constraints"],
                           strict=True):  # fmt: skip
            trial.set_constraint(name, float(c))
        trial.set_user_attr(ATTR, {k: v for k, v in row.items() if k != "constraints"})
        set_trial_attrs(trial, row)
        vals = []
        for o in self.objectives:
            col, sign = JOINT_OBJECTIVES[o]
            x = row[col]
            vals.append(x if math.isfinite(x) else (1e300 if sign > 0 else -1e300))
        return vals[0] if len(vals) == 1 else vals

    def load(self, study: Any) -> None:
        """Pre-load the cache from a study's completed trials (a resumed or shared study)."""
        from optuna.trial import TrialState

        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            a = t.user_attrs.get(ATTR)
            if a is not None and "index" in t.user_attrs:
                row = dict(a) | {"constraints": t.user_attrs.get("constraints", [1.0])}
                self.cache.setdefault((int(t.user_attrs["index"]), int(a["combo"])), row)


def trials_frame(study: Any, problem: Problem, joint: JointSpace) -> pd.DataFrame:
    """Completed trials: ``trial, feasible, valid``, the joint frontier's columns (architecture, costs,
    precision, batch, option, serving and the options' extra columns), then ``cached, index, combo``."""
    from optuna.trial import TrialState

    from ...arch.space import add_paper_variables
    from ..discrete.scan_parts import FRONTIER_COLUMNS

    combos = joint.combos(problem)
    extra = extra_columns(joint)
    rows = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        a = t.user_attrs.get(ATTR)
        if a is None:
            continue
        rows.append(dict(a) | {"trial": t.number, "cached": bool(t.user_attrs.get("cached", False)),
                               "index": int(t.user_attrs.get("index", -1))})  # fmt: skip
    lead = ["trial", "feasible", "valid", *FRONTIER_COLUMNS, "precision", "batch", "option", "tokens_per_s",
            "tokens_per_s_per_user", *extra]  # fmt: skip
    tail = ["cached", "measured", "index", "combo", "vocab", "tied", "total_s", "tpot_s", "params_total",
            "params_active", "local_layers", "window"]  # fmt: skip
    if not rows:
        return pd.DataFrame({c: [] for c in lead + tail})
    df = pd.DataFrame(rows)
    arch_ok = np.isfinite(df["layers"].to_numpy(dtype=float))
    for k in ("layers", "d_model", "heads", "kv_heads", "head_dim", "ffn", "experts", "top_k", "vocab", "tied"):
        df[k] = df[k].astype(np.int64) if arch_ok.all() else df[k]
    df["combo"] = df["combo"].astype(np.int64)
    df["feasible"] = df["feasible"].astype(bool)
    df["valid"] = df["valid"].astype(bool)
    df["measured"] = False
    df["precision"] = [combos[i].precision for i in df["combo"]]
    df["batch"] = np.array([combos[i].batch for i in df["combo"]], dtype=np.int64)
    df["option"] = [combos[i].option.name for i in df["combo"]]
    df = add_paper_variables(df)
    return df[lead + tail].sort_values("trial").reset_index(drop=True)


def matrix(df: pd.DataFrame, objectives: Sequence[str]) -> np.ndarray:
    """Objective values as a minimisation matrix (throughput negated)."""
    return np.column_stack([s * df[c].to_numpy(dtype=float) for c, s in (JOINT_OBJECTIVES[o] for o in objectives)])


def search_frontier(trials: pd.DataFrame, objectives: Sequence[str]) -> pd.DataFrame:
    """Feasible, non-dominated, distinct (architecture, combination) points among ``trials``, by latency."""
    f = trials[trials["feasible"]].drop_duplicates(["index", "combo"])
    if not len(f):
        return f
    m = pareto_mask(matrix(f, objectives))
    return f[m].sort_values(["latency_s", "loss", "combo"]).reset_index(drop=True)


def joint_reference(problem: Problem, joint: JointSpace, objectives: Sequence[str]) -> list[float]:
    """A hypervolume reference point fixed by the problem (natural units): each budget the problem sets, 0 tokens/s
    for throughput, otherwise 1.1 × the maximum over a fixed sample of :data:`REFERENCE_SAMPLE` architectures
    (seed 0) × every combination (finite loss, the option applies)."""
    size = problem.space.size
    rng = np.random.default_rng(0)
    idx = np.unique(rng.integers(0, size, min(REFERENCE_SAMPLE, size), dtype=np.int64))
    cols = problem.space.columns_at(idx, np.float64)
    seen: dict[str, list[np.ndarray]] = {}
    for _, v, _ in evaluate_chunk(joint.combos(problem), cols, extra_columns(joint)):
        if v is not None:
            for o in objectives:
                seen.setdefault(o, []).append(np.asarray(v[JOINT_OBJECTIVES[o][0]])[v["finite"]])
    out = []
    for o in objectives:
        con = problem.constraint(o)
        if JOINT_OBJECTIVES[o][1] < 0:
            out.append(0.0)
        elif con is not None:
            out.append(float(con.bound))
        else:
            vals = np.concatenate(seen.get(o, [np.empty(0)]))
            out.append(1.1 * float(vals.max()) if len(vals) else math.nan)
    return out


def minimised(reference: Sequence[float], objectives: Sequence[str]) -> list[float]:
    """A reference point in natural units as the minimisation point the hypervolume takes."""
    return [JOINT_OBJECTIVES[o][1] * float(r) for o, r in zip(objectives, reference, strict=True)]


def summary(problem: Problem, joint: JointSpace, trials: pd.DataFrame, objectives: Sequence[str],
            reference: Sequence[float] | None) -> tuple[pd.DataFrame, list[float], float, dict[str, Any]]:  # fmt: skip
    """The trials' feasible frontier, the reference point (natural units), its hypervolume and the counts a joint
    search reports (``unique`` (architecture, combination) points, ``valid`` trials, ``combinations``,
    ``joint_points``)."""
    from ..discrete.pareto import hypervolume

    front = search_frontier(trials, objectives)
    ref = list(reference) if reference is not None else joint_reference(problem, joint, objectives)
    hv = hypervolume(matrix(front, objectives), minimised(ref, objectives)) if len(front) else 0.0
    extra = {"unique": int(len(trials.drop_duplicates(["index", "combo"]))) if len(trials) else 0,
             "valid": int(trials["valid"].sum()) if len(trials) else 0,
             "combinations": len(joint.combos(problem)), "joint_points": joint.size(problem)}  # fmt: skip
    return front, ref, hv, extra


def best_row(trials: pd.DataFrame) -> Mapping[str, Any] | None:
    """The lowest-loss feasible trial (ties: lower latency, earlier combination, earlier trial)."""
    f = trials[trials["feasible"]]
    if not len(f):
        return None
    return f.sort_values(["loss", "latency_s", "combo", "trial"]).iloc[0].to_dict()


def joint_result(problem: Problem, joint: JointSpace, res: Any) -> Any:
    """The best feasible trial of a joint search as a :class:`~rooflaw.solver.result.Result` (method ``optuna``)
    with its precision, batch and option in ``extra``; raises :class:`Infeasible` when no trial is feasible."""
    from ..discrete.exhaustive import result_from_row
    from ..discrete.scan_parts import KEEP
    from .infeasible_trials import infeasible_from_trials

    best = best_row(res.trials)
    if best is None:
        valid = res.trials[res.trials["valid"]] if len(res.trials) else res.trials
        if len(res.trials) and not len(valid):
            from ...errors import Infeasible

            raise Infeasible(f"option: none of the {len(res.trials)} trials ran on an option (layout) that applies "
                             "to its architecture and meets the serving floors")  # fmt: skip
        raise infeasible_from_trials(problem, valid)
    c = joint.combos(problem)[int(best["combo"])]
    d = res.to_dict()
    return result_from_row(
        c.problem, {k: float(best[k]) for k in KEEP}, "optuna", None, timings={"search": res.seconds},
        notes=[f"{d['trials']} trials ({d['unique']} distinct joint points of {d['joint_points']:,}), sampler "
               f"{res.sampler}; best at precision {c.precision}, batch {c.batch}, option {c.option.name}"],
        extra={"trials": d["trials"], "sampler": res.sampler, "study_name": res.study_name,
               "precision": c.precision, "batch": c.batch, "option": c.option.name},
    )  # fmt: skip


__all__ = ["ATTR", "JointObjective", "directions", "joint_definition", "joint_reference", "search_frontier",
           "trials_frame"]  # fmt: skip
