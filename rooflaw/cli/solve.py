"""``rooflaw solve``: the lowest-loss architecture that meets a latency / memory / energy budget on a device."""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Optional

import typer

from .. import api
from ..units import fmt_bytes, fmt_count, fmt_energy, fmt_time
from . import answer_cache, app
from .bands import fmt_banded, interval, problem_band
from .common import esc
from .joint_options import describe_joint, wants_joint
from .options import JSON, SCHEDULER, JointOptions, ProblemOptions, with_options
from .speculative import SpeculativeOptions

METHODS = ("closed-form", "gp", "exhaustive", "optuna")
#: Methods whose answers the answer cache keeps (deterministic, no side effects): :mod:`.answer_cache`.
CACHED_METHODS = ("closed-form", "gp")
#: What ``--precisions`` and ``--batches`` add to their help on ``solve``.
_JOINT_METHODS = "--method exhaustive or optuna."


@app.command()
@with_options(more_help={"precisions": _JOINT_METHODS, "batches": _JOINT_METHODS})
def solve(
    *,
    opts: ProblemOptions,
    method: str = typer.Option("closed-form", help="closed-form, gp, exhaustive or optuna."),
    align: int = typer.Option(128, help="d_model (and FFN) multiple: 128 default; 256/512 per NVIDIA's tile guidance."),
    trials: int = typer.Option(500, help="Trials for --method optuna."),
    seed: int = typer.Option(0, help="Seed for --method optuna."),
    backend: str = typer.Option("auto", "--backend", help="--method exhaustive: auto, numpy or numba (fast extra)."),
    joint_opts: JointOptions,
    spec_opts: SpeculativeOptions,
    scheduler: Optional[str] = SCHEDULER,
    explain: bool = typer.Option(False, "--explain", help="Derivation, slacks, rounding, runner-ups."),
    as_json: bool = JSON,
) -> None:
    """Choose the architecture with the lowest loss that meets the budgets (closed form, GP, exhaustive, Optuna)."""
    if method not in METHODS:
        raise api.RooflawError(f"method={method!r}: must be one of {', '.join(METHODS)}")
    t0 = time.perf_counter()
    key = None
    if method in CACHED_METHODS and scheduler is None and _defaults(joint_opts) and _defaults(spec_opts):
        key = answer_cache.answer_key("solve", {
            "opts": opts, "method": method, "align": align, "explain": explain, "json": as_json,
        })  # fmt: skip
    rec = answer_cache.load(key)
    if rec is not None:
        answer_cache.replay(rec, cached_seconds=time.perf_counter() - t0)
        return
    rec = answer_cache.Recorder()
    with rec.catching_warnings():
        _solve(rec, opts, method, align, trials, seed, backend, joint_opts, spec_opts, scheduler, explain, as_json)
    answer_cache.store(key, rec)
    answer_cache.replay(rec)


def _defaults(group: Any) -> bool:
    """Whether every option of ``group`` (JointOptions, SpeculativeOptions) has its default."""
    return all(getattr(group, f.name) == f.metadata["option"].default for f in dataclasses.fields(group))


def _solve(
    rec: answer_cache.Recorder, opts: ProblemOptions, method: str, align: int, trials: int, seed: int, backend: str,
    joint_opts: JointOptions, spec_opts: SpeculativeOptions, scheduler: Optional[str], explain: bool, as_json: bool,
) -> None:  # fmt: skip
    """Solve and record what ``solve`` prints into ``rec``."""
    from ..api import solve as run

    prob = opts.problem(align)
    kw: dict[str, Any] = {"n_trials": trials, "seed": seed} if method == "optuna" else {}
    if method == "exhaustive":
        kw = {"backend": backend}
    joint = spec_opts.merge(joint_opts.space(), prob)
    joint_explain = None
    if wants_joint(joint, scheduler):
        if method not in ("exhaustive", "optuna") or (method == "optuna" and scheduler is not None):
            raise api.RooflawError(f"method={method!r}: the joint space (--precisions/--batches/--layouts) needs "
                                   "--method exhaustive or optuna (--scheduler: exhaustive)")  # fmt: skip
        if method == "optuna":
            res = api.solve_optuna(prob, n_trials=trials, seed=seed, joint=joint or api.JointSpace())
        else:
            res = api.solve_joint(prob, joint, scheduler=scheduler, backend=backend)
        if explain:
            joint_explain = api.explain_joint(prob.on_aligned_space(), joint or api.JointSpace(), res)
            if spec_opts.active:
                from .speculative import explain_pick

                joint_explain["speculative"] = explain_pick(prob, joint, res)
    else:
        res = (
            run(prob, method, explain_result=explain, **kw)
            if method in ("closed-form", "gp")
            else run(prob, method, **kw)
        )
    out = res.to_dict()
    joint_pick = {k: res.extra[k] for k in ("precision", "batch", "option") if k in (res.extra or {})}
    cont = out.get("continuous")
    if as_json:
        keys = ("method", "regime", "binding", "continuous", "continuous_loss", "architecture", "loss", "perplexity",
                "latency_s", "memory_bytes", "energy_j", "slack", "seconds", "timings", "notes")  # fmt: skip
        obj = {k: out.get(k) for k in keys}
        obj.update(preset=prob.preset, engine=prob.engine)
        obj["bands"] = _latency_bands(prob, out.get("latency_s"))
        obj |= joint_pick
        if explain and res.explain:
            obj["explain"] = res.explain
        if joint_explain is not None:
            obj["explain_joint"] = joint_explain
        elif explain:
            obj["explain_discrete"] = api.explain_discrete(prob, res)
        rec.json(obj)
        return
    a = res.architecture
    desc = describe_joint(prob, joint) if joint_pick else prob.describe()
    rec.print(f"[bold]{esc(desc)}[/bold] — space {esc(prob.space.name)}, method {res.method}")
    if res.regime:
        rec.print(f"regime: [bold]{res.regime}[/bold]; binding: {res.binding}")
    if cont:
        rec.print(
            "continuous optimum: " + ", ".join(f"{k} = {v:.4g}" for k, v in cont.items())
            + (f" (loss {res.continuous_loss:.4f})" if res.continuous_loss is not None else "")
        )  # fmt: skip
    if joint_pick:
        rec.print("joint choice: " + ", ".join(f"{k} {v}" for k, v in joint_pick.items()))
    if a is not None:
        rows = [
            ["layers", a.layers], ["d_model", a.d_model], ["heads", a.heads], ["kv_heads", a.kv_heads],
            ["head_dim", a.head_dim], ["ffn", a.ffn], ["experts", a.experts], ["top_k", a.top_k],
            ["params (total / active)", f"{fmt_count(a.params_total)} / {fmt_count(a.params_active)}"],
        ]  # fmt: skip
        if not a.uniform:
            rows.insert(1, ["layer pattern", a.pattern])
        rec.table("architecture", ["field", "value"], rows)
    lat = res.latency_s
    bands = {ph: problem_band(prob, ph) for ph in ("prefill", "decode", "total")}
    summary = [
        ["loss", f"{res.loss:.4f}"], ["perplexity", f"{res.perplexity:.2f}"],
        ["prefill", fmt_banded(lat["prefill"], bands["prefill"])],
        ["decode", fmt_banded(lat["decode"], bands["decode"])], ["total", fmt_banded(lat["total"], bands["total"])],
        ["memory", fmt_bytes(res.memory_bytes)], ["energy", fmt_energy(res.energy_j)],
    ]  # fmt: skip
    if prob.workload.output_tokens > 1:  # the per-token figure users budget (decode time / output tokens)
        n = prob.workload.output_tokens
        summary.insert(4, ["TPOT (decode / tokens)", fmt_banded(lat["decode"] / n, bands["decode"])])  # same ratios
    own = bands.get(prob.phase) or {}
    if own.get("confidence") is not None:
        q, f = own["confidence"], own["factor"]
        summary.insert(2, [f"{prob.phase} at the {q:.0%} quantile", f"{fmt_time(lat[prob.phase] * f)} (× {f:.3g})"])
    title = f"judged by the '{prob.preset}' cost model, engine {prob.engine}"
    rec.table(title, ["quantity", "value"], summary)
    if prob.phase == "decode" and prob.latency_budget is not None and prob.workload.output_tokens > 1:
        n = prob.workload.output_tokens
        rec.print(f"[dim]note: the decode budget {fmt_time(prob.latency_budget)} covers all {n} output tokens "
                      f"({fmt_time(prob.latency_budget / n)} per token)[/dim]")  # fmt: skip
    rec.timing(f"solved in {res.seconds * 1e3:.1f} ms ({res.method})")
    for n in res.notes:
        rec.print(f"[dim]note: {esc(n)}[/dim]")
    if explain:
        if res.explain:
            rec.print("the continuous relaxation:", style="bold")
            rec.print(res.explain, markup=False, highlight=False)
        if joint_explain is not None:
            rec.print(api.explain_joint_text(joint_explain), markup=False, highlight=False)
            if "speculative" in joint_explain:
                rec.print(api.explain_speculative_text(joint_explain["speculative"]), markup=False)
        else:
            rec.print(api.explain_text(api.explain_discrete(prob, res), prob.phase), markup=False, highlight=False)


def _latency_bands(prob: Any, lat: dict | None) -> dict:
    """JSON: per phase the 80 % band of the solution's latency (``{}`` where none applies), and the confidence."""
    out: dict = {}
    for ph in ("prefill", "decode", "total"):
        b = problem_band(prob, ph)
        if b and lat and lat.get(ph) is not None:
            out[ph] = {**b, "latency_s": interval(float(lat[ph]), b)}
            if "factor" in b:
                out[ph]["latency_at_confidence_s"] = float(lat[ph]) * b["factor"]
    return out
