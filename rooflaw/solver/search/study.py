"""Optuna search over a :class:`~rooflaw.arch.space.Space`: multi-objective or constrained single-objective.

Parametrisation: every dimension is a fixed list (an ordinal index for layers, d_model, head_dim, kv_heads,
r_single; a category for (experts, top_k) and (vocab, tied)); no range depends on another parameter. A combination
the space's rules reject is repaired deterministically to the nearest valid point (:meth:`Space.point`), so every
trial is a valid architecture. Suggestions that map to a point already evaluated are served from a cache (the
trial is recorded with ``cached = True``; a measured objective is never re-measured). Budgets and the device
capacity go to the sampler as trial constraints (``Trial.set_constraint``, Optuna 5's successor of
``constraints_func``); infeasible trials never reach the reported frontier.

Storage: in memory by default; ``sqlite:///file.db`` or ``journal:///path/file.log`` (or any path ending in
``.log``/``.journal``) make a study resumable; ``postgresql://…`` lets many processes on many machines share one
study. ``n_trials`` is the number of completed trials the *study* should reach: a resumed or shared study runs
only what is missing (shared studies may overshoot by at most workers − 1).
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from ...arch.space import add_paper_variables
from ...errors import ExternalError, RooflawError, bad
from ..discrete.exhaustive import FRONTIER_COLUMNS, KEEP, OBJECTIVES, check_objectives, evaluate_lean, result_from_row
from ..discrete.pareto import hypervolume, pareto_mask
from ..jobs import cpu_count
from ..problem import Problem
from ..reference import space_reference
from ..result import FrontierView, Result
from . import dashboard, joint_trials, safety
from .infeasible_trials import infeasible_from_trials
from .measure import load_measure
from .params import suggest_architecture
from .samplers import SAMPLERS, make_sampler
from .storage import open_storage

_ATTR = "rooflaw"


# ---- the objective ----------------------------------------------------------------------------
class _Objective:
    def __init__(
        self, problem: Problem, objectives: tuple[str, ...], measure: Callable[..., float] | None, backend: str = "auto"
    ) -> None:
        self.problem = problem
        self.backend = backend
        self.objectives = objectives
        self.measure = measure
        self.choices = problem.space.choices()
        self.cache: dict[int, dict[str, Any]] = {}
        self.evaluations = 0
        self.measurements = 0

    def suggest(self, trial: Any) -> dict[str, Any]:
        return suggest_architecture(trial, self.choices)

    def evaluate(self, index: int) -> dict[str, Any]:
        p = self.problem
        cols = p.space.columns_at(np.array([index]), np.float64)
        v = evaluate_lean(p, cols, self.backend)
        row: dict[str, Any] = {k: float(v[k][0]) for k in KEEP}
        row["feasible"] = bool(v["feasible"][0])
        row["measured"] = False
        self.evaluations += 1
        if self.measure is not None:
            # the analytic model prunes what cannot fit; only candidates that fit are measured
            mem = p.constraint("memory")
            if mem is not None and mem.satisfied(row) and math.isfinite(row["loss"]):
                arch = p.space.architecture(row)
                try:
                    got = self.measure(arch, p.workload)
                except Exception as e:  # noqa: BLE001 - a failure of the user's measuring code (exit 4)
                    msg = str(e).splitlines()[0][:200] if str(e) else ""
                    raise ExternalError(f"measure raised {type(e).__name__}: {msg} (for {arch.spec()})") from None
                try:
                    seconds = float(got) if not isinstance(got, (bool, str, bytes)) else math.nan
                except (TypeError, ValueError, OverflowError):
                    seconds = math.nan
                if not (math.isfinite(seconds) and seconds > 0):
                    raise ExternalError(f"measure returned {got!r:.60} for {arch.spec()}; expected seconds > 0")
                self.measurements += 1
                row["latency_s"] = seconds
                row[p.latency_column] = seconds
                row["measured"] = True
                row["feasible"] = bool(math.isfinite(row["loss"]) and all(c.satisfied(row) for c in p.constraints))
        # Optuna's convention: a trial is feasible where every value is ≤ 0 (minus the relative slack)
        row["constraints"] = [-float(c.slack(row)) for c in p.constraints]
        if not math.isfinite(row["loss"]):
            row["constraints"] = [1.0 for _ in row["constraints"]]
        return row

    def __call__(self, trial: Any) -> Any:
        point = self.problem.space.point(self.suggest(trial))
        index = point["index"]
        cached = index in self.cache
        row = self.cache[index] if cached else self.evaluate(index)
        self.cache[index] = row
        trial.set_user_attr("index", index)
        trial.set_user_attr("cached", cached)
        trial.set_user_attr("constraints", row["constraints"])
        for con, c in zip(self.problem.constraints, row["constraints"], strict=True):
            trial.set_constraint(con.kind, float(c))
        trial.set_user_attr(_ATTR, {k: row[k] for k in (*KEEP, "feasible", "measured")})
        dashboard.set_trial_attrs(trial, row)
        vals = [row[OBJECTIVES[o]] for o in self.objectives]
        vals = [v if math.isfinite(v) else 1e300 for v in vals]
        return vals[0] if len(vals) == 1 else vals


# ---- study handling ---------------------------------------------------------------------------
def _open_study(problem: Problem, objectives: tuple[str, ...], storage: Any, study_name: str, sampler: Any,
                joint: Any = None) -> Any:  # fmt: skip
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    directions: list[joint_trials.Direction] = (
        ["minimize"] * len(objectives) if joint is None else joint_trials.directions(objectives)
    )
    definition = _definition(problem, objectives, joint)
    meta = {"objectives": list(objectives), "space": problem.space.name, "phase": problem.phase,
            "definition": definition}  # fmt: skip
    try:
        existing = {s.study_name: s for s in optuna.get_all_study_summaries(storage, include_best_trial=False)}
    except Exception as e:
        raise RooflawError(f"storage: cannot read studies: {str(e).splitlines()[0][:300]}") from None
    if study_name in existing:
        s = existing[study_name]
        have = s.user_attrs.get("rooflaw", {})
        n_dir = len(s.directions)
        if have.get("objectives", None) not in (None, list(objectives)) or n_dir != len(objectives):
            got = ",".join(have.get("objectives", [])) or f"{n_dir} objective(s)"
            raise RooflawError(
                f"study_name={study_name!r}: exists with objectives {got}; this search has {','.join(objectives)} "
                "(choose another --study-name)"
            )
        for k in ("space", "phase"):
            if have.get(k) not in (None, meta[k]):
                raise RooflawError(
                    f"study_name={study_name!r}: exists with {k} {have.get(k)!r}; this search has {meta[k]!r} "
                    "(choose another --study-name)"
                )
        safety.check_definition(study_name, have.get("definition"), definition)
    try:
        study = optuna.create_study(
            storage=storage, study_name=study_name, directions=directions, sampler=sampler, load_if_exists=True
        )
    except Exception as e:
        raise RooflawError(
            f"study_name={study_name!r}: cannot create or load: {str(e).splitlines()[0][:300]}"
        ) from None
    if study.user_attrs.get("rooflaw", {}).get("definition") is None:
        study.set_user_attr("rooflaw", meta)
    dashboard.name_objectives(study, objectives, problem.phase)
    return study


def _definition(problem: Problem, objectives: tuple[str, ...], joint: Any) -> dict[str, Any]:
    """The study definition; a joint search adds its joint dimensions (precisions, batches, options)."""
    d = safety.study_definition(problem, objectives)
    return d if joint is None else d | {"joint": joint_trials.joint_definition(problem, joint)}


def _n_complete(study: Any) -> int:
    from optuna.trial import TrialState

    return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))


def _load_cache(study: Any, obj: _Objective) -> None:
    from optuna.trial import TrialState

    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        a = t.user_attrs.get(_ATTR)
        if a is not None and "index" in t.user_attrs:
            row = dict(a)
            row["constraints"] = t.user_attrs.get("constraints", [1.0])
            obj.cache.setdefault(int(t.user_attrs["index"]), row)


def _run_worker(
    problem: Problem,
    objectives: tuple[str, ...],
    sampler_name: str,
    seed: int | None,
    storage_url: str | None,
    storage_obj: Any,
    study_name: str,
    n_trials: int,
    measure: Any,
    progress: Callable[[int, int], None] | None = None,
    backend: str = "auto",
    joint: Any = None,
) -> dict[str, int]:
    """Run trials until the study has ``n_trials`` completed trials; returns how many this process ran."""
    from optuna.trial import TrialState

    storage = storage_obj if storage_obj is not None else open_storage(storage_url)
    sampler = make_sampler(sampler_name, seed)
    study = _open_study(problem, objectives, storage, study_name, sampler, joint)
    obj: Any
    if joint is None:
        obj = _Objective(problem, objectives, load_measure(measure), backend)
        _load_cache(study, obj)
    else:
        obj = joint_trials.JointObjective(problem, joint, objectives)
        obj.load(study)
    shared = storage_url is not None
    done = _n_complete(study)
    ran = 0
    if progress is not None:
        progress(done, n_trials)
    with safety.Heartbeat(study._storage) as beat:
        while done < n_trials:
            trial = study.ask()
            try:
                beat.start(trial)
                values = obj(trial)
            except BaseException:
                beat.finish(partial(study.tell, trial, state=TrialState.FAIL))
                raise
            beat.finish(partial(study.tell, trial, values))
            ran += 1
            done = _n_complete(study) if shared else done + 1
            if progress is not None:
                progress(done, n_trials)
    return {"ran": ran, "evaluations": obj.evaluations, "measurements": obj.measurements}


# ---- results ----------------------------------------------------------------------------------
@dataclass(eq=False)
class SearchResult(FrontierView):
    """Completed trials, their feasible Pareto frontier, hypervolume and timings (SI units)."""

    trials: pd.DataFrame
    frontier: pd.DataFrame
    objectives: tuple[str, ...]
    hypervolume: float
    reference_point: list[float]
    seconds: float
    sampler: str
    study_name: str
    storage: str | None
    ran: int = 0
    evaluations: int = 0
    measurements: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def best(self) -> pd.Series | None:
        """The lowest-loss feasible trial (ties: lower latency)."""
        f = self.trials[self.trials["feasible"]]
        if not len(f):
            return None
        return f.sort_values(["loss", "latency_s", "trial"]).iloc[0]

    def to_dict(self) -> dict[str, Any]:
        return {
            "trials": int(len(self.trials)),
            "frontier_size": self.frontier_size,
            "hypervolume": self.hypervolume,
            "reference_point": self.reference_point,
            "seconds": self.seconds,
            "objectives": list(self.objectives),
            "sampler": self.sampler,
            "study_name": self.study_name,
            "ran": self.ran,
            "unique": int(self.trials["index"].nunique()) if len(self.trials) else 0,
            "evaluations": self.evaluations,
            "measurements": self.measurements,
            **self.extra,
        }


def trials_frame(study: Any) -> pd.DataFrame:
    """Completed trials: ``trial, feasible`` + the frontier columns (+ cached, measured, index, vocab, tied)."""
    from optuna.trial import TrialState

    rows = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        a = t.user_attrs.get(_ATTR)
        if a is None:
            continue
        r = dict(a)
        r["trial"] = t.number
        r["cached"] = bool(t.user_attrs.get("cached", False))
        r["index"] = int(t.user_attrs.get("index", -1))
        rows.append(r)
    cols = ["trial", "feasible", *FRONTIER_COLUMNS, "cached", "measured", "index", "vocab", "tied", "total_s",
            "tpot_s", "params_total", "params_active", "local_layers", "window"]  # fmt: skip
    if not rows:
        return pd.DataFrame({c: [] for c in cols})
    df = pd.DataFrame(rows)
    for k in ("layers", "d_model", "heads", "kv_heads", "head_dim", "ffn", "experts", "top_k", "vocab", "tied"):
        df[k] = df[k].astype(np.int64)
    df["feasible"] = df["feasible"].astype(bool)
    df = add_paper_variables(df)
    return df[cols].sort_values("trial").reset_index(drop=True)


def search_frontier(trials: pd.DataFrame, objectives: tuple[str, ...]) -> pd.DataFrame:
    """Feasible, non-dominated, distinct points among ``trials`` (first trial of each point), by latency."""
    f = trials[trials["feasible"]].drop_duplicates("index")
    if not len(f):
        return f
    m = pareto_mask(f[[OBJECTIVES[o] for o in objectives]].to_numpy(dtype=float))
    return f[m].sort_values(["latency_s", "loss"]).reset_index(drop=True)


def _finite(x: object) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) and bool(np.isfinite(x))


def default_reference(front: pd.DataFrame, objectives: tuple[str, ...]) -> list[float]:
    """Nadir of a frontier pushed out by 10 % of its range (a relative 10 % if the range is zero)."""
    if not len(front):
        return [math.nan] * len(objectives)
    v = front[[OBJECTIVES[o] for o in objectives]].to_numpy(dtype=float)
    lo, hi = v.min(axis=0), v.max(axis=0)
    span = np.where(hi > lo, hi - lo, np.abs(hi) * 0.1 + 1e-12)
    return (hi + 0.1 * span).tolist()


def search(
    problem: Problem,
    sampler: str = "nsga2",
    n_trials: int = 200,
    seed: int | None = 0,
    storage: str | None = None,
    study_name: str | None = None,
    workers: int = 1,
    objectives: Any = ("loss", "latency"),
    measure: Any = None,
    reference: Sequence[float] | None = None,
    progress: Callable[[int, int], None] | None = None,
    backend: str = "auto",
    joint: Any = None,
) -> SearchResult:
    """Optuna search of ``problem.space``. ``objectives`` (loss first) are minimised; ``("loss",)`` is the
    constrained single-objective problem (min loss s.t. the problem's budgets). ``measure`` (a callable
    ``f(arch, workload) -> seconds``, ``module:function`` or a ``rooflaw.measure`` entry point) replaces the
    analytic latency of candidates that fit in memory. ``workers`` processes share the study (with no storage,
    a temporary journal file). ``reference`` is the hypervolume reference point (default:
    :func:`space_reference`, the same for every run of the same problem). ``progress(done, total)`` is called
    after each completed trial of this process (the CLI draws a bar with it); the solver itself prints nothing.
    ``backend``: the cost model's backend (``auto``, ``numpy``, ``numba``; each trial is one candidate, so ``auto``
    stays on numpy). ``joint`` (a :class:`~rooflaw.solver.discrete.joint.JointSpace`) searches architecture ×
    precision × batch × option (layout) as one space (:mod:`.joint_trials`): objectives may add ``throughput``
    (maximised); ``measure`` is not available there.

    Example: a dozen NSGA-II trials on a 16-point space; what they find is never better than the exact frontier::

        >>> import rooflaw as rl
        >>> tiny = rl.Space.from_mapping({"layers": [4, 8], "d_model": [768, 1024], "head_dim": [128],
        ...                               "kv_heads": [1, 2], "moe": [[1, 1]], "r_single": [2, 4]}, name="tiny")
        >>> problem = rl.Problem(device="jetson-agx-orin-64gb", latency_budget="10ms", space=tiny, engine="ideal")
        >>> s = rl.search(problem, n_trials=12, seed=0)
        >>> s.ran, bool(s.frontier["loss"].min() >= rl.frontier(problem).frontier["loss"].min())
        (12, True)
    """
    if joint is not None:
        from ..discrete.joint import JointSpace, check_joint_objectives

        if not isinstance(joint, JointSpace):
            raise bad("joint", joint, "expected a JointSpace")
        if measure is not None:
            raise bad("measure", measure, "measures one device's latency; not available for the joint space")
        objs = check_joint_objectives(objectives)
    else:
        objs = check_objectives(objectives)
    if progress is False:
        progress = None
    if progress is not None and not callable(progress):
        raise bad("progress", progress, "expected a callable progress(done, total) or None")
    if sampler not in SAMPLERS:
        raise bad("sampler", sampler, f"unknown sampler; known: {', '.join(SAMPLERS)}")
    if isinstance(n_trials, bool) or not isinstance(n_trials, int) or n_trials <= 0:
        raise bad("n_trials", n_trials, "must be a positive integer")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers <= 0:
        raise bad("workers", workers, "must be a positive integer")
    top = 2**32 - 1 - 7919 * (workers - 1)  # worker i seeds its sampler with seed + 7919·i; optuna takes < 2³²
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= top):
        raise bad("seed", seed, f"must be an integer from 0 to {top}")
    if workers > cpu_count():  # more would only queue on the CPUs (and each holds a study connection)
        raise bad("workers", workers, f"this machine has {cpu_count()} CPUs: use 1 to {cpu_count()}")
    if reference is not None and len(reference) != len(objs):
        raise bad("reference", list(reference), f"needs {len(objs)} values ({','.join(objs)})")
    if reference is not None and not all(_finite(x) for x in reference):
        raise bad("reference", list(reference), "must be finite numbers (NaN or infinity bounds no volume)")
    if workers > 1 and safety.is_memory_storage(storage):
        raise bad("storage", storage, f"lives in one process; {workers} workers need a file or server storage")
    load_measure(measure)  # fail early on a bad spec
    from ...constraints.backends import resolve

    resolve(backend, 1)  # fail early on a bad or unavailable backend
    problem = problem.on_aligned_space()  # trials are drawn among aligned points only, like every solver
    tag = safety.fingerprint(_definition(problem, objs, joint))
    kind = "" if joint is None else "joint-"
    name = study_name or f"rooflaw-{kind}{problem.space.name}-{'-'.join(objs)}-{sampler}-{tag}"
    t0 = time.perf_counter()
    tmp = None
    url = storage
    if workers > 1 and storage is None:
        tmp = tempfile.TemporaryDirectory(prefix="rooflaw-search-")
        url = os.path.join(tmp.name, "study.log")
    try:
        store = open_storage(url)
        import optuna

        # validate the study (what defines it) before any worker starts; fail trials of killed runs
        first = _open_study(problem, objs, store, name, optuna.samplers.RandomSampler(seed=seed), joint)
        stale = safety.fail_stale_running(first)
        if workers == 1:
            stats = [_run_worker(problem, objs, sampler, seed, url, store, name, n_trials, measure, progress, backend,
                                 joint)]  # fmt: skip
        else:
            seeds = [None if seed is None else seed + 7919 * i for i in range(workers)]
            m = measure if measure is None or callable(measure) else str(measure)
            stats = safety.run_workers(
                _run_worker,
                [(problem, objs, sampler, s, url, None, name, n_trials, m, None, backend, joint) for s in seeds],
            )
        import optuna

        study = optuna.load_study(study_name=name, storage=store)
        trials = trials_frame(study) if joint is None else joint_trials.trials_frame(study, problem, joint)
    finally:
        if tmp is not None:
            tmp.cleanup()
    extra: dict[str, Any] = {}
    if joint is None:
        front = search_frontier(trials, objs)
        ref = list(reference) if reference is not None else space_reference(problem, objs, backend)
        hv = hypervolume(front[[OBJECTIVES[o] for o in objs]].to_numpy(dtype=float), ref) if len(front) else 0.0
    else:
        front, ref, hv, extra = joint_trials.summary(problem, joint, trials, objs, reference)
    return SearchResult(
        trials=trials,
        frontier=front,
        objectives=objs,
        hypervolume=hv,
        reference_point=[float(x) for x in ref],
        seconds=time.perf_counter() - t0,
        sampler=sampler,
        study_name=name,
        storage=storage,
        ran=sum(s["ran"] for s in stats),
        evaluations=sum(s["evaluations"] for s in stats),
        measurements=sum(s["measurements"] for s in stats),
        extra=extra | ({"stale_trials_failed": stale} if stale else {}),
    )


def solve_optuna(
    problem: Problem,
    n_trials: int = 500,
    seed: int | None = 0,
    sampler: str = "tpe",
    storage: str | None = None,
    study_name: str | None = None,
    workers: int = 1,
    measure: Any = None,
    joint: Any = None,
) -> Result:
    """Constrained single-objective search: min loss s.t. the problem's budgets. The best feasible trial as a
    :class:`Result` (method ``optuna``); raises :class:`~rooflaw.errors.Infeasible` if no trial is feasible.
    ``joint``: over architecture × precision × batch × option (the pick's choice in ``extra``)."""
    res = search(problem, sampler, n_trials, seed, storage, study_name, workers, ("loss",), measure, joint=joint)
    if joint is not None:
        return joint_trials.joint_result(problem.on_aligned_space(), joint, res)
    best = res.best()
    if best is None:
        raise infeasible_from_trials(problem, res.trials)
    row: Mapping[str, Any] = best.to_dict()
    out = result_from_row(
        problem,
        {k: float(row[k]) for k in KEEP},
        "optuna",
        None,
        timings={"search": res.seconds},
        notes=[f"{len(res.trials)} trials ({res.to_dict()['unique']} distinct points), sampler {sampler}"],
        extra={"trials": len(res.trials), "sampler": sampler, "study_name": res.study_name},
    )
    return out
