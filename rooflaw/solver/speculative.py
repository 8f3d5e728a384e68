"""Speculative decoding as the joint space's option dimension: draft × γ searched with the target architecture.

:func:`speculative_options` makes one :class:`~rooflaw.solver.discrete.joint.Option` per (draft, γ) -- plus the
plain decoder (``no draft``), so a search says whether drafting pays -- whose columns are
:class:`~rooflaw.constraints.speculative.SpeculativeColumns`. Drafts are a fixed list, or (:func:`space_drafts`)
drafts from the problem's own space and law: the architectures on the space's loss-vs-size Pareto front (the best
model of each size), log-spaced in size. :func:`explain_speculative` says, for one target, draft and γ, the
speed-up, the acceptance below which the draft stops paying (the α where speculative and plain decode times meet,
found by root bracketing on the priced model), the acceptance the problem's latency budget needs
(:func:`alpha_needed`), and the closed-form γ* for the priced cost ratio.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..constraints.speculative import (
    SPEC_EXTRA,
    Draft,
    SpeculativeColumns,
    optimal_draft_tokens,
    optimal_gamma_continuous,
)
from ..errors import bad
from .discrete.joint import Option

#: Draft lengths searched when none are given.
DEFAULT_GAMMAS = (1, 2, 3, 4, 6, 8)
#: Most drafts taken from a space.
MAX_SPACE_DRAFTS = 6


def speculative_options(
    drafts: list[Draft], gammas: tuple[int, ...] = DEFAULT_GAMMAS, alpha: float | None = None,
    extrapolate: bool = False, plain: bool = True,
) -> tuple[Option, ...]:  # fmt: skip
    """One option per draft × γ (``alpha`` None: the fitted law), after the plain decoder when ``plain``."""
    if not drafts:
        raise bad("draft", "", "give at least one draft")
    out = [Option("no draft")] if plain else []
    for d in drafts:
        for g in gammas:
            name = f"{d.name or d.arch.name} γ={g}"
            cols = SpeculativeColumns(d, int(g), alpha, extrapolate)
            out.append(Option(name, cols, extra=SPEC_EXTRA, meta={"draft": d.name, "gamma": int(g)}))
    names = [o.name for o in out]
    if len(set(names)) != len(names):
        raise bad("draft", ";".join(names), "lists a draft twice")
    return tuple(out)


def space_drafts(problem: Any, limit: int = MAX_SPACE_DRAFTS) -> list[Draft]:
    """Drafts from the problem's space and law: the loss-vs-total-parameters Pareto front of the space (no smaller
    architecture has a lower loss), ``limit`` of them log-spaced in size, smallest first."""
    from ..arch.architecture import param_counts
    from ..constraints.roofline import complete_columns
    from ..objectives import law_inputs
    from .discrete.pareto import pareto_mask

    space = problem.space
    idx = np.arange(space.size)
    cols = space.columns_at(idx, dtype=np.float64)
    full = complete_columns(cols)
    size = np.asarray(param_counts(full)["total"], dtype=float)
    loss = np.broadcast_to(np.asarray(problem.law.evaluate(law_inputs(cols, tokens=problem.tokens)), dtype=float),
                           size.shape)  # fmt: skip
    ok = np.isfinite(loss)
    if not problem.allow_extrapolation:
        ok &= np.broadcast_to(np.asarray(problem.law.in_domain(law_inputs(cols, tokens=problem.tokens))), ok.shape)
    cand = np.flatnonzero(ok)
    if not len(cand):
        raise bad("space", space.name, "has no architecture inside the law's domain to draft with")
    front = cand[pareto_mask(np.column_stack([size[cand], loss[cand]]))]
    front = front[np.argsort(size[front])]
    if len(front) > limit:
        targets = np.geomspace(size[front[0]], size[front[-1]], limit)
        pick = sorted({int(np.argmin(np.abs(np.log(size[front] / t)))) for t in targets})
        front = front[pick]
    out = []
    for i in front:
        row = {k: int(v[i]) for k, v in cols.items()}
        a = space.architecture(row, name=f"{space.name}-draft-{int(size[i] / 1e6)}M")
        out.append(Draft(a, False, a.name))
    return out


def explain_speculative(problem: Any, arch: Any, option: Option) -> dict[str, Any]:
    """Whether ``option``'s draft pays for target ``arch`` under ``problem``: plain and speculative TPOT, speed-up,
    the break-even acceptance (the α at which they are equal; None when the draft cannot pay even at α → 1), the
    priced cost ratio c = draft step / target step and the closed-form γ* for the option's α and that c."""
    from scipy.optimize import brentq

    cols = {k: np.array([float(v)]) for k, v in arch.columns().items()}
    plain = Option().evaluate(cols, problem)
    base_tpot = float(plain["tpot_s"][0])
    if not isinstance(option.columns, SpeculativeColumns):
        return {"option": option.name, "draft_pays": False, "tpot_s": base_tpot, "note": "no draft"}
    sc = option.columns
    res = sc(cols, problem)
    alpha = float(res["alpha"][0])

    def gain(a: float) -> float:
        r = SpeculativeColumns(sc.draft, sc.gamma, a, True)(cols, problem)
        return float(r["tpot_s"][0]) - base_tpot

    hi = 1.0 - 1e-9
    breakeven = None
    if gain(hi) < 0:
        breakeven = 0.0 if gain(0.0) <= 0 else float(brentq(gain, 0.0, hi, xtol=1e-6))
    # the priced cost ratio: one draft step over one target step (both one-token passes) at the prompt's context
    from ..constraints.passes import pass_columns
    from ..constraints.roofline import complete_columns
    from ..constraints.speculative import eagle_columns

    full = complete_columns(cols)
    dcols = eagle_columns(full, sc.draft.arch.layers) if sc.draft.shares_head else complete_columns(
        {k: np.array([float(v)]) for k, v in sc.draft.arch.columns().items()})  # fmt: skip
    wl = problem.workload
    at = (problem.device, wl.batch, 1, float(wl.input_tokens), problem.precision, problem.preset,
          getattr(problem, "engine", None), wl.attention)  # fmt: skip
    c = float(pass_columns(dcols, *at)["seconds"][0] / pass_columns(full, *at)["seconds"][0])
    return {
        "option": option.name,
        "alpha_needed": alpha_needed(problem, arch, option),
        "alpha": alpha,
        "gamma": sc.gamma,
        "tpot_s": float(res["tpot_s"][0]),
        "tpot_without_draft_s": base_tpot,
        "speedup": base_tpot / float(res["tpot_s"][0]),
        "draft_pays": bool(float(res["tpot_s"][0]) < base_tpot),
        "breakeven_alpha": breakeven,
        "cost_ratio": c,
        "optimal_gamma": optimal_draft_tokens(alpha, c),
        "optimal_gamma_continuous": optimal_gamma_continuous(alpha, c),
    }


def alpha_needed(problem: Any, arch: Any, option: Option) -> float | None:
    """The smallest acceptance at which ``arch`` with ``option``'s draft and γ meets the problem's latency budget
    (bisection on the priced model, to 1e-6; 0.0 when it meets it at α = 0; None when it cannot even as α → 1 or
    the problem has no latency budget)."""
    budget = problem.budgets().get("latency")
    if budget is None or not isinstance(option.columns, SpeculativeColumns):
        return None
    col, bound = budget
    sc = option.columns
    cols = {k: np.array([float(v)]) for k, v in arch.columns().items()}

    def cost(a: float) -> float:
        return float(SpeculativeColumns(sc.draft, sc.gamma, a, True)(cols, problem)[col][0])

    lo, hi = 0.0, 1.0 - 1e-9
    if cost(hi) > bound:
        return None
    if cost(lo) <= bound:
        return 0.0
    while hi - lo > 1e-6:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cost(mid) > bound else (lo, mid)
    return hi


def explain_speculative_text(e: dict[str, Any]) -> str:
    """One paragraph of :func:`explain_speculative`."""
    if e.get("note") == "no draft":
        return "speculative decoding: the best point runs without a draft (no draft × γ searched paid off there)."
    be = e["breakeven_alpha"]
    stop = "it cannot pay at any acceptance" if be is None else f"it stops paying below α = {be:.3f}"
    g = e.get("optimal_gamma")
    gtxt = "" if g is None else f"; closed-form γ* = {g} (continuous {e['optimal_gamma_continuous']:.2f}) at c = " \
        f"{e['cost_ratio']:.3f}"  # fmt: skip
    verdict = "pays" if e["draft_pays"] else "does not pay"
    need = e.get("alpha_needed")
    ntxt = "" if need is None else f"; the latency budget needs α ≥ {need:.3f}"
    return (f"speculative decoding ({e['option']}, α = {e['alpha']:.3f}): TPOT {e['tpot_s'] * 1e3:.2f} ms vs "
            f"{e['tpot_without_draft_s'] * 1e3:.2f} ms without the draft (×{e['speedup']:.2f}): the draft {verdict}; "
            f"{stop}{ntxt}{gtxt}.")  # fmt: skip


__all__ = [
    "DEFAULT_GAMMAS",
    "alpha_needed",
    "explain_speculative",
    "explain_speculative_text",
    "space_drafts",
    "speculative_options",
]
