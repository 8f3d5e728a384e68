"""``solve(problem, method)``: one entry point for every solver; all return a :class:`Result`.

Methods live in a registry (:data:`METHODS`, name -> callable ``f(problem, *, explain=False, **kw) -> Result``);
:func:`register_method` adds one (``@register_method("my-method")``). Built in:

- ``closed-form``: the sympy-derived KKT optimum of the continuous relaxation (theory-mode constraints), then
  rounding to an aligned architecture judged by the problem's cost model (``full`` by default);
- ``gp``: the relaxation as a geometric program (cvxpy) over the problem's preset (``full`` by default: the full
  cost model's roofline; ``paper``: the theory-mode model the closed form uses; ``solve(p, "gp", preset=...)``
  overrides), then the same rounding;
- ``exhaustive`` / ``optuna``: the discrete searches of :mod:`rooflaw.solver.discrete.exhaustive` /
  :mod:`rooflaw.solver.search`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import sympy as sp

from ..errors import Infeasible, RooflawError, bad
from .discrete.rounding import round_solution
from .relaxation import kkt as K
from .relaxation.closed_form import ClosedForm, closed_form, regime_name, relaxed_phase
from .result import Result

Method = Callable[..., Result]
#: Solver methods by name (see :func:`register_method`).
METHODS: dict[str, Method] = {}


def register_method(name: str) -> Callable[[Method], Method]:
    """Decorator: register ``f(problem, *, explain=False, **kw) -> Result`` as solver method ``name``."""
    if not isinstance(name, str) or not name:
        raise bad("name", name, "a method name is a non-empty string")

    def deco(fn: Method) -> Method:
        if name in METHODS and METHODS[name] is not fn:
            raise bad("name", name, f"method already registered by {METHODS[name].__module__}")
        METHODS[name] = fn
        return fn

    return deco


def _round_to_result(problem: Any, method: str, x: dict[str, float], cont_loss: float, regime: str,
                     active: tuple[str, ...], timings: dict[str, float], notes: list[str],
                     extra: dict[str, Any], relaxed: Any = None) -> Result:  # fmt: skip
    t0 = time.perf_counter()
    row, cands, stats = round_solution(problem, x)
    timings["rounding"] = time.perf_counter() - t0
    if row is None:
        from .discrete.exhaustive import solve_exhaustive  # raises Infeasible with the smallest achievable value

        res = solve_exhaustive(problem)
        res.method = method
        res.continuous, res.continuous_loss, res.regime = x, cont_loss, regime
        res.notes = [*notes, "no feasible architecture near the relaxation; the space was enumerated", *res.notes]
        res.timings = {**timings, **{f"exhaustive_{k}": v for k, v in res.timings.items()}}
        return res
    slack = {c.label: float(c.slack(row)) for c in problem.constraints}
    binding = "+".join(relaxed_label(relaxed or problem, k) for k in active) if active else "none"
    extra = {**extra, "rounding": stats}
    return Result(
        method=method,
        architecture=problem.space.architecture(row),
        loss=float(row["loss"]),
        latency_s={"prefill": float(row["prefill_s"]), "decode": float(row["decode_s"]),
                   "total": float(row["total_s"]), "ttft": float(row["prefill_s"]), "tpot": float(row["tpot_s"])},
        memory_bytes=float(row["memory_bytes"]),
        energy_j=float(row["energy_j"]),
        binding=binding,
        slack=slack,
        regime=regime,
        continuous=dict(x),
        continuous_loss=cont_loss,
        timings=timings,
        notes=notes,
        extra=extra,
    )  # fmt: skip


def relaxation_notes(problem: Any) -> list[str]:
    """What the relaxation made of budgets it does not bound as given (a TPOT budget as a decode budget)."""
    from .budgets import relaxation

    out = []
    for r, c in relaxation(problem.constraints, problem.workload).values():
        if r.scale != 1.0 or (r.phase is not None and c.kind != "latency"):
            how = ""
            if r.scale != 1.0:
                how = (f" = {c.human(c.bound)} × {r.scale:g} output tokens" if c.upper else
                       f" = {r.scale:g} output tokens / {c.human(c.bound)}")  # fmt: skip
            out.append(f"the relaxation takes {c.describe()} as a {r.phase} latency budget of "
                       f"{r.bound * 1e3:.4g} ms{how}")  # fmt: skip
    return out


def relaxed_label(problem: Any, kind: str) -> str:
    """The label of the constraint a relaxation's active ``kind`` (latency, memory, energy) comes from."""
    from .budgets import relaxation

    got = relaxation(problem.constraints, problem.workload).get(kind)
    return got[1].label if got is not None else kind


def explain_closed_form(cf: ClosedForm, problem: Any) -> str:
    """The derivation behind a closed-form optimum, as text with LaTeX lines."""
    th = K.theorems(problem.law) if {"rho", "r"} <= set(problem.law.variables) else None
    lines = [f"regime: {cf.regime} (binding: {cf.binding}); method: {cf.method}"]
    if cf.multipliers:
        lines.append("KKT multipliers (per unit of relative budget): "
                     + ", ".join(f"μ_{k} = {v:.4g}" for k, v in cf.multipliers.items())
                     + f"; stationarity residual {cf.kkt_residual:.1e}")  # fmt: skip
    if cf.eta:
        e = cf.eta
        lines.append(
            f"F̄_p = {e['F_p_bar']:.4g} FLOP, M̄_d = {e['M_d_bar']:.4g} B, η = M̄_d/M = {e['eta']:.4g}, "
            f"η_p = F̄_p/M = {e['eta_p']:.4g}; the paper's §5.5.2 rule would say '{cf.paper_regime}'"
        )
    lines.append("continuous optimum: " + ", ".join(f"{k} = {v:.6g}" for k, v in cf.x.items())
                 + f"; loss {cf.loss:.6f}")  # fmt: skip
    at = {k: v for k, v in cf.at_bound.items() if v != "fixed"}
    if at:
        lines.append("at a bound of the space: " + ", ".join(f"{k} ({v})" for k, v in at.items()))
    lines.append("derived (sympy, from rooflaw's own law and theory-mode cost expressions):")
    for v, e in cf.eliminated.items():
        lines.append(f"  {v}* = {sp.sstr(e)}")
        lines.append(f"    LaTeX: {sp.latex(K.X[v])}^* = {sp.latex(e)}")
    if th is not None:
        if "latency" in cf.active and "memory" not in cf.active and th.rho_latency_at_min:
            lines.append("  ρ* = ρ_min (Theorem 5.1: ∂T/∂ρ = 0 for prefill and decode, ∂L/∂ρ > 0)")
            lines.append(f"    ∂L/∂ρ = {sp.sstr(th.dL_drho)}")
        if cf.active == ("memory",) and th.rho_memory is not None:
            lines.append(f"  ρ*(d) = {sp.sstr(th.rho_memory)}  (Theorem 5.2; with the law's numbers "
                         f"{sp.sstr(sp.N(th.rho_memory_bound, 6))})")  # fmt: skip
            lines.append(f"    LaTeX: \\rho^* = {sp.latex(th.rho_memory)}")
    free = [v for v in K.VARS if v not in cf.eliminated and v not in cf.at_bound]
    if free:
        lines.append(
            "  implicit stationarity, solved by projected Newton in log variables: "
            + ", ".join(f"∂L̃/∂{v} = 0" for v in free)
            + " with L̃ = L after substituting the solved variables"
        )
    if cf.theorem_checks:
        lines.append("checks against the derived closed forms (relative difference): "
                     + ", ".join(f"{k} {v:.1e}" for k, v in cf.theorem_checks.items()))  # fmt: skip
    lines.append(f"derivation {cf.derivation_seconds:.2f} s once (cached); this solve {cf.seconds * 1e3:.1f} ms")
    for n in cf.notes:
        lines.append(f"note: {n}")
    return "\n".join(lines)


def solve(
    problem: Any, method: str = "closed-form", explain: bool = False, *, explain_result: bool | None = None, **kw: Any
) -> Result:
    """Solve ``problem`` with ``method`` (a name in :data:`METHODS`: closed-form | gp | exhaustive | optuna | any
    registered one). ``explain`` adds the derivation behind the answer (``Result.explain``) where the method has
    one. Extra keywords go to the method (optuna: n_trials, seed, sampler, ...; exhaustive: n_jobs; gp: solver,
    preset, fix).

    Example: a 16-point space judged by the pure roofline (``engine="ideal"``: datasheet figures only)::

        >>> import rooflaw as rl
        >>> tiny = rl.Space.from_mapping({"layers": [4, 8], "d_model": [768, 1024], "head_dim": [128],
        ...                               "kv_heads": [1, 2], "moe": [[1, 1]], "r_single": [2, 4]}, name="tiny")
        >>> problem = rl.Problem(device="jetson-agx-orin-64gb", latency_budget="10ms", space=tiny, engine="ideal")
        >>> result = rl.solve(problem, method="exhaustive")
        >>> a = result.architecture
        >>> a.layers, a.d_model, a.kv_heads, round(result.loss, 3), result.binding
        (4, 768, 2, 4.568, 'latency')
        >>> print(f"decode {result.latency_s['decode'] * 1e3:.2f} ms of 10 ms")
        decode 9.61 ms of 10 ms
    """
    if not all(hasattr(problem, a) for a in ("law", "device", "space", "preset")):
        text = repr(problem) if len(repr(problem)) <= 40 else repr(problem)[:37] + "..."
        raise RooflawError(f"problem={text}: must be a rooflaw.Problem (law, device, space, budgets)")
    fn = METHODS.get(method) if isinstance(method, str) else None
    if fn is None:
        raise bad("method", method, f"must be one of {', '.join(METHODS)}")
    if explain_result is not None:  # the keyword's former name
        explain = explain_result
    res = fn(problem, explain=bool(explain), **kw)
    engine = getattr(problem, "engine", None)
    if isinstance(res, Result) and engine is not None:  # which cost model judged the answer
        res.extra.setdefault("preset", problem.preset)
        res.extra.setdefault("engine", engine)
        if res.explain:
            res.explain += f"\ncost model: preset {problem.preset}; {problem.scenario.applied.describe()}"
    return res


def relaxations(problem: Any) -> list[Any]:
    """``[problem]`` when its latency budgets bound one phase in the relaxation; else one problem per phase, each
    keeping the latency budgets of that phase only (a TPOT and a TTFT budget: one with each). Each drops
    constraints, so each is a relaxation of ``problem``: the one with the higher relaxed loss bounds it tighter."""
    wl = problem.workload
    lat = [c for c in problem.constraints if c.relaxed(wl).kind == "latency"]
    phases = sorted({c.relaxed(wl).phase for c in lat})
    if len(phases) <= 1:
        return [problem]
    keep = lambda c, ph: c.relaxed(wl).kind != "latency" or c.relaxed(wl).phase == ph  # noqa: E731
    return [problem.replace(constraints=tuple(c for c in problem.constraints if keep(c, ph))) for ph in phases]


def _relaxed(problem: Any, method: str, solve_one: Callable[[Any], Any]) -> tuple[Any, Any, list[str]] | Result:
    """(the relaxation kept, its solution, notes) over :func:`relaxations`; a :class:`Result` when a relaxation is
    infeasible (the discrete verdict of ``problem``)."""
    best = None
    for q in relaxations(problem):
        try:
            got = solve_one(q)
        except Infeasible as e:
            return _discrete_verdict(problem, e)
        except RooflawError as e:
            raise _unsupported(e, method) from None
        if best is None or got.loss > best[1].loss:
            best = (q, got)
    assert best is not None
    notes = relaxation_notes(best[0])
    if best[0] is not problem:
        kept = ", ".join(c.describe() for c in best[0].constraints if c.relaxed(problem.workload).kind == "latency")
        notes.insert(0, f"the relaxation bounds one latency phase at a time: solved once per phase, kept {kept} (the "
                        "higher relaxed loss, so the tighter bound); the answer meets every budget")  # fmt: skip
    return best[0], best[1], notes


@register_method("closed-form")
def _closed_form_method(problem: Any, explain: bool = False) -> Result:
    got = _relaxed(problem, "closed-form", closed_form)
    if isinstance(got, Result):
        return got
    q, cf, notes = got
    if problem.preset != "paper":
        notes.append(
            f"continuous optimum from the theory-mode model (compute-bound prefill, memory-bound decode, weight "
            f"memory); the architecture is judged by the '{problem.preset}' cost model"
        )
    notes += cf.notes
    timings = {"continuous": cf.seconds}
    extra = {"kkt": cf.to_dict(), "law": problem.law.name, "device": problem.device.id,
             "derivation_seconds": cf.derivation_seconds}  # fmt: skip
    res = _round_to_result(problem, cf.method, cf.x, cf.loss, cf.regime, cf.active, timings, notes, extra, q)
    if explain:
        res.explain = explain_closed_form(cf, q)
    return res


@register_method("gp")
def _gp_method(problem: Any, explain: bool = False, **kw: Any) -> Result:
    from .relaxation.geometric import solve_gp

    got = _relaxed(problem, "gp", lambda q: solve_gp(q, **kw))
    if isinstance(got, Result):
        return got
    q, g, notes = got
    notes += g.notes
    if problem.preset != "paper":
        notes.append(f"the architecture is judged by the '{problem.preset}' cost model")
    timings = {"continuous": g.seconds}
    regime = regime_name(g.active, relaxed_phase(q))
    extra = {"gp": {k: getattr(g, k) for k in ("status", "solver", "values", "budgets", "duals", "constant", "preset")},
             "law": problem.law.name, "device": problem.device.id}  # fmt: skip
    res = _round_to_result(problem, "gp", g.x, g.loss, regime, g.active, timings, notes, extra, q)
    if explain:
        res.explain = (
            f"geometric program over the '{g.preset}' cost model (cvxpy, log-space convex form, {g.solver}): "
            f"status {g.status}, regime {regime}; "
            + ", ".join(f"{k} = {v:.6g}" for k, v in g.x.items())
            + f"; loss {g.loss:.6f}; built in {g.build_seconds * 1e3:.1f} ms, solved in "
            f"{g.solve_seconds * 1e3:.1f} ms"
        )
    return res


@register_method("exhaustive")
def _exhaustive_method(problem: Any, explain: bool = False, **kw: Any) -> Result:
    from .discrete.exhaustive import solve_exhaustive

    return solve_exhaustive(problem, **kw)


@register_method("optuna")
def _optuna_method(problem: Any, explain: bool = False, **kw: Any) -> Result:
    from .search.study import solve_optuna

    return solve_optuna(problem, **kw)


def _unsupported(e: RooflawError, method: str) -> RooflawError:
    """A relaxation that cannot take the problem's law: the reason, and the methods that work for any law."""
    if "--method" in str(e):
        return e
    other = "closed-form, " if method == "gp" else ""
    return RooflawError(f"{method}: {e}; use --method {other}exhaustive or optuna")


#: Spaces up to this size are enumerated when a relaxation is infeasible, so the error names the smallest value
#: the problem's own cost model can reach over the real discrete space (not the relaxation's).
ENUMERATE_MAX = 2_000_000


def _discrete_verdict(problem: Any, relaxed: Infeasible) -> Result:
    """The relaxation is infeasible: judge the discrete space with the problem's cost model when it is small enough.

    Raises :class:`Infeasible` naming the binding constraint and the smallest value any architecture of the space
    reaches; returns the exhaustive optimum (with a note) in the rare case the relaxation was stricter.
    """
    if problem.space.size > ENUMERATE_MAX:
        raise relaxed
    from .discrete.exhaustive import solve_exhaustive

    res = solve_exhaustive(problem)
    res.notes.insert(0, f"the continuous relaxation was infeasible ({relaxed}); exhaustive enumeration found this")
    return res


#: Former name of :func:`explain_closed_form`.
explain = explain_closed_form

__all__ = ["METHODS", "explain", "explain_closed_form", "register_method", "solve"]
