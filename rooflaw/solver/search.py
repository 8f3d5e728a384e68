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

import importlib
import math
import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..arch.space import add_paper_variables
from ..errors import RooflawError, bad
from .exhaustive import _KEEP, FRONTIER_COLUMNS, OBJECTIVES, check_objectives, evaluate_lean, result_from_row
from .pareto import hypervolume, pareto_mask
from .problem import Problem
from .result import Result

SAMPLERS = ("nsga2", "tpe", "gp", "random")
_ATTR = "rooflaw"


def load_measure(measure: Any) -> Callable[..., float] | None:
    """A measuring callable from a callable, ``module:function`` (module importable or in the working directory),
    ``path/to/file.py:function``, or the name of an entry point of group ``rooflaw.measure``."""
    if measure is None or callable(measure):
        return measure
    text = str(measure)
    if ":" in text:
        mod, _, fn = text.rpartition(":")
        try:
            obj: Any = _import(mod)
            for part in fn.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError) as e:
            raise bad("measure", text, f"cannot import: {e}") from None
        if not callable(obj):
            raise bad("measure", text, "is not callable")
        return obj
    from importlib.metadata import entry_points

    for ep in entry_points(group="rooflaw.measure"):
        if ep.name == text:
            return ep.load()
    raise bad("measure", text, "give module:function or the name of a rooflaw.measure entry point")


def _import(mod: str) -> Any:
    """Import ``mod`` (a dotted name, resolved from the working directory too, or a ``.py`` file path)."""
    import sys

    if mod.endswith(".py"):
        from importlib import util

        spec = util.spec_from_file_location(os.path.splitext(os.path.basename(mod))[0], mod)
        if spec is None or spec.loader is None or not os.path.isfile(mod):
            raise ImportError(f"no such file {mod}")
        module = util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    try:
        return importlib.import_module(mod)
    except ImportError:
        if os.getcwd() in sys.path:
            raise
        sys.path.insert(0, os.getcwd())
        return importlib.import_module(mod)


# ---- storage --------------------------------------------------------------------------------
def open_storage(url: str | None) -> Any:
    """An Optuna storage for a URL (None: in memory). Raises a one-line :class:`RooflawError` if it cannot open."""
    import optuna

    if url is None:
        return optuna.storages.InMemoryStorage()
    try:
        if url.startswith("journal://") or url.endswith((".log", ".journal")):
            from optuna.storages.journal import JournalFileBackend, JournalStorage

            path = url[len("journal://") :] if url.startswith("journal://") else url
            path = path[1:] if path.startswith("//") else path  # journal:///abs/path -> /abs/path
            parent = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(parent):
                raise OSError(f"directory {parent} does not exist")
            return JournalStorage(JournalFileBackend(path))
        url = _driver_url(url)
        if "://" not in url:
            raise ValueError("not a storage URL (sqlite:///file.db, journal:///file.log, postgresql://…)")
        for attempt in range(6):  # concurrent first starts race on creating the schema; creation is idempotent
            try:
                return optuna.storages.RDBStorage(url, engine_kwargs={"pool_pre_ping": True})
            except Exception as e:
                text = str(e).lower()
                if attempt == 5 or not ("duplicate" in text or "already exists" in text or "unique" in text):
                    raise
                time.sleep(0.2 + 0.3 * attempt)
        raise AssertionError("unreachable")
    except Exception as e:  # sqlalchemy, driver, OS errors: one line
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise RooflawError(f"storage={url!r}: cannot open: {msg[:300]}") from None


def _driver_url(url: str) -> str:
    """``postgresql://`` means psycopg 3 to SQLAlchemy 2.1; use psycopg2 when only it is installed."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            from importlib import util

            if util.find_spec("psycopg") is None and util.find_spec("psycopg2") is not None:
                return "postgresql+psycopg2://" + url[len(prefix) :]
            return "postgresql://" + url[len(prefix) :]
    return url


def _sampler(name: str, seed: int | None) -> Any:
    """Samplers see budgets through ``Trial.set_constraint`` (Optuna 5's replacement of ``constraints_func``)."""
    import optuna

    if name == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=40)
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed, multivariate=True, n_startup_trials=20)
    if name == "gp":
        return optuna.samplers.GPSampler(
            seed=seed, deterministic_objective=True, n_startup_trials=20, warn_independent_sampling=False
        )
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    raise bad("sampler", name, f"unknown sampler; known: {', '.join(SAMPLERS)}")


# ---- the objective ----------------------------------------------------------------------------
class _Objective:
    def __init__(self, problem: Problem, objectives: tuple[str, ...], measure: Callable[..., float] | None) -> None:
        self.problem = problem
        self.objectives = objectives
        self.measure = measure
        self.choices = problem.space.choices()
        self.cache: dict[int, dict[str, Any]] = {}
        self.evaluations = 0
        self.measurements = 0

    def suggest(self, trial: Any) -> dict[str, Any]:
        ch = self.choices
        out: dict[str, Any] = {}
        for dim in ("layers", "d_model", "head_dim", "kv_heads", "r_single"):
            vals = ch[dim]
            out[dim] = vals[trial.suggest_int(f"{dim}_i", 0, len(vals) - 1)] if len(vals) > 1 else vals[0]
        for dim in ("moe", "vocab_tied", "pattern"):
            vals = ch[dim]
            labels = ["x".join(str(x) for x in v) for v in vals]
            if len(vals) > 1:
                out[dim] = vals[labels.index(trial.suggest_categorical(dim, labels))]
            else:
                out[dim] = vals[0]
        return out

    def evaluate(self, index: int) -> dict[str, Any]:
        p = self.problem
        cols = p.space.columns_at(np.array([index]), np.float64)
        v = evaluate_lean(p, cols)
        row = {k: float(v[k][0]) for k in _KEEP}
        row["feasible"] = bool(v["feasible"][0])
        row["measured"] = False
        self.evaluations += 1
        budgets = p.budgets()
        if self.measure is not None:
            # the analytic model prunes what cannot fit; only candidates that fit are measured
            mem_col, cap = budgets["memory"]
            if row[mem_col] <= cap and math.isfinite(row["loss"]):
                arch = p.space.architecture(row)
                seconds = float(self.measure(arch, p.workload))
                if not (math.isfinite(seconds) and seconds > 0):
                    raise RooflawError(f"measure returned {seconds!r} for {arch.spec()}; expected seconds > 0")
                self.measurements += 1
                row["latency_s"] = seconds
                row[p.latency_column] = seconds
                row["measured"] = True
                feas = math.isfinite(row["loss"])
                for col, bound in budgets.values():
                    feas &= row[col] <= bound
                row["feasible"] = bool(feas)
        row["constraints"] = [(row[col] - bound) / bound for col, bound in budgets.values()]
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
        for name, c in zip(self.problem.budgets(), row["constraints"], strict=True):
            trial.set_constraint(name, float(c))
        trial.set_user_attr(_ATTR, {k: row[k] for k in (*_KEEP, "feasible", "measured")})
        vals = [row[OBJECTIVES[o]] for o in self.objectives]
        vals = [v if math.isfinite(v) else 1e300 for v in vals]
        return vals[0] if len(vals) == 1 else vals


# ---- study handling ---------------------------------------------------------------------------
def _open_study(problem: Problem, objectives: tuple[str, ...], storage: Any, study_name: str, sampler: Any) -> Any:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    directions = ["minimize"] * len(objectives)
    meta = {"objectives": list(objectives), "space": problem.space.name, "phase": problem.phase}
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
    try:
        study = optuna.create_study(
            storage=storage, study_name=study_name, directions=directions, sampler=sampler, load_if_exists=True
        )
    except Exception as e:
        raise RooflawError(
            f"study_name={study_name!r}: cannot create or load: {str(e).splitlines()[0][:300]}"
        ) from None
    if study.user_attrs.get("rooflaw") is None:
        study.set_user_attr("rooflaw", meta)
    return study


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
    progress: bool = False,
) -> dict[str, int]:
    """Run trials until the study has ``n_trials`` completed trials; returns how many this process ran."""
    from optuna.trial import TrialState

    storage = storage_obj if storage_obj is not None else open_storage(storage_url)
    sampler = _sampler(sampler_name, seed)
    study = _open_study(problem, objectives, storage, study_name, sampler)
    obj = _Objective(problem, objectives, load_measure(measure))
    _load_cache(study, obj)
    shared = storage_url is not None
    done = _n_complete(study)
    ran = 0
    bar = None
    if progress:
        from rich.progress import Progress

        bar = Progress(transient=True)
        bar.start()
        task = bar.add_task("search", total=n_trials, completed=done)
    try:
        while done < n_trials:
            trial = study.ask()
            try:
                values = obj(trial)
            except BaseException:
                study.tell(trial, state=TrialState.FAIL)
                raise
            study.tell(trial, values)
            ran += 1
            done = _n_complete(study) if shared else done + 1
            if bar is not None:
                bar.update(task, completed=done)
    finally:
        if bar is not None:
            bar.stop()
    return {"ran": ran, "evaluations": obj.evaluations, "measurements": obj.measurements}


# ---- results ----------------------------------------------------------------------------------
@dataclass
class SearchResult:
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

    @property
    def frontier_size(self) -> int:
        return len(self.frontier)

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
    progress: bool = False,
) -> SearchResult:
    """Optuna search of ``problem.space``. ``objectives`` (loss first) are minimised; ``("loss",)`` is the
    constrained single-objective problem (min loss s.t. the problem's budgets). ``measure`` (a callable
    ``f(arch, workload) -> seconds``, ``module:function`` or a ``rooflaw.measure`` entry point) replaces the
    analytic latency of candidates that fit in memory. ``workers`` processes share the study (with no storage,
    a temporary journal file). ``reference`` is the hypervolume reference point (default: the frontier's nadir
    + 10 % of its range)."""
    objs = check_objectives(objectives)
    if sampler not in SAMPLERS:
        raise bad("sampler", sampler, f"unknown sampler; known: {', '.join(SAMPLERS)}")
    if isinstance(n_trials, bool) or not isinstance(n_trials, int) or n_trials <= 0:
        raise bad("n_trials", n_trials, "must be a positive integer")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers <= 0:
        raise bad("workers", workers, "must be a positive integer")
    if reference is not None and len(reference) != len(objs):
        raise bad("reference", list(reference), f"needs {len(objs)} values ({','.join(objs)})")
    load_measure(measure)  # fail early on a bad spec
    name = study_name or f"rooflaw-{problem.space.name}-{'-'.join(objs)}-{sampler}"
    t0 = time.perf_counter()
    tmp = None
    url = storage
    if workers > 1 and storage is None:
        tmp = tempfile.TemporaryDirectory(prefix="rooflaw-search-")
        url = os.path.join(tmp.name, "study.log")
    try:
        store = open_storage(url)
        import optuna

        # validate the study (objectives, space) before any worker starts
        _open_study(problem, objs, store, name, optuna.samplers.RandomSampler(seed=seed))
        if workers == 1:
            stats = [_run_worker(problem, objs, sampler, seed, url, store, name, n_trials, measure, progress)]
        else:
            from joblib import Parallel, delayed

            seeds = [None if seed is None else seed + 7919 * i for i in range(workers)]
            m = measure if measure is None or callable(measure) else str(measure)
            stats = Parallel(n_jobs=workers, backend="loky")(
                delayed(_run_worker)(problem, objs, sampler, s, url, None, name, n_trials, m) for s in seeds
            )
        import optuna

        study = optuna.load_study(study_name=name, storage=store)
        trials = trials_frame(study)
    finally:
        if tmp is not None:
            tmp.cleanup()
    front = search_frontier(trials, objs)
    ref = list(reference) if reference is not None else default_reference(front, objs)
    hv = hypervolume(front[[OBJECTIVES[o] for o in objs]].to_numpy(dtype=float), ref) if len(front) else 0.0
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
) -> Result:
    """Constrained single-objective search: min loss s.t. the problem's budgets. The best feasible trial as a
    :class:`Result` (method ``optuna``); raises :class:`~rooflaw.errors.Infeasible` if no trial is feasible."""
    from ..errors import Infeasible

    res = search(problem, sampler, n_trials, seed, storage, study_name, workers, ("loss",), measure)
    best = res.best()
    if best is None:
        budgets = problem.budgets()
        t = res.trials
        worst = max(budgets, key=lambda k: float(t[budgets[k][0]].min()) / budgets[k][1]) if len(t) else "memory"
        col, bound = budgets[worst]
        smallest = float(t[col].min()) if len(t) else math.nan
        raise Infeasible(
            f"no feasible architecture among {len(t)} trials on space {problem.space.name!r}; smallest {worst} "
            f"seen {smallest:.4g} vs bound {bound:.4g} (SI units; try solve_exhaustive for a certificate)",
            binding=worst,
            smallest=smallest,
            budget=bound,
        )
    row: Mapping[str, Any] = best.to_dict()
    out = result_from_row(
        problem,
        {k: float(row[k]) for k in _KEEP},
        "optuna",
        None,
        timings={"search": res.seconds},
        notes=[f"{len(res.trials)} trials ({res.to_dict()['unique']} distinct points), sampler {sampler}"],
        extra={"trials": len(res.trials), "sampler": sampler, "study_name": res.study_name},
    )
    return out
