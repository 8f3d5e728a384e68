"""The speculative-decoding options (``--draft``, ``--draft-tokens``, ``--acceptance``) and what ``evaluate`` prints."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import typer

from .. import api
from ..errors import bad
from ..units import fmt_bytes, fmt_time

DRAFT = typer.Option(
    None, "--draft", help="Draft model for speculative decoding: a bundled id, config.json, spec, or eagle[:N] heads."
)
DRAFT_TOKENS = typer.Option(4, "--draft-tokens", help="Draft tokens per verification step (γ), 1..64.")
ACCEPTANCE = typer.Option(
    None, "--acceptance", help="Per-token acceptance α in [0, 1), or 'fitted' (the published-rates law); needs --draft."
)


def parse_acceptance(text: Any) -> float | str:
    """``--acceptance``: ``fitted`` or a number 0 <= α < 1 (one-line error otherwise)."""
    s = str(text).strip()
    if s == "fitted":
        return s
    try:
        a = float(s)
    except ValueError:
        raise bad("acceptance", s, "must be a number in [0, 1) or 'fitted'") from None
    return api.check_alpha(a)


def check_draft_options(draft: Optional[str], draft_tokens: int, acceptance: Any) -> None:
    """Refuse a bad γ or α even without ``--draft`` (a typo should not pass silently), and speculation options
    without a draft."""
    if isinstance(draft_tokens, bool) or not 1 <= int(draft_tokens) <= api.MAX_DRAFT_TOKENS:
        raise bad("draft-tokens", draft_tokens, f"must be an integer from 1 to {api.MAX_DRAFT_TOKENS}")
    if acceptance is not None:
        parse_acceptance(acceptance)
    if draft is not None and acceptance is None:
        raise bad("acceptance", None, "give --acceptance A (0 <= A < 1, measured) or --acceptance fitted with --draft")
    if draft is None and acceptance is not None:
        raise bad("draft", None, "--acceptance needs --draft")


def speculate(target: Any, draft: str, device: Any, workload: Any, draft_tokens: int, acceptance: Any,
              precision: str, preset: str, engine: Optional[str]) -> Any:  # fmt: skip
    """The :class:`SpeculativeReport` of ``evaluate --draft``."""
    d = api.parse_draft(draft, target)
    return api.evaluate_speculative(
        target, d, device, workload, int(draft_tokens), parse_acceptance(acceptance), precision, preset, engine
    )


def merge(out: dict, spec: Any) -> None:
    """Put the speculative numbers into ``evaluate``'s JSON: TPOT, TTFT, decode, totals, memory, energy and
    tokens/s now include the draft; ``speculative`` holds α, γ, τ, the draft and verify seconds and the baseline."""
    w = out["workload"]
    out["speculative"] = spec.to_dict()
    out["speculative"]["ops_note"] = "ops list the target's plain prefill and decode (no draft, no verification pass)"
    out.update(
        ttft_s=spec.ttft_s, prefill_s=spec.ttft_s, decode_s=spec.decode_s, tpot_s=spec.tpot_s,
        total_s=spec.total_s, memory_bytes=spec.memory_bytes, fits_in_memory=spec.fits_in_memory,
        energy_j=spec.energy_j,
    )  # fmt: skip
    out["tokens_per_s"] = {
        "prefill": w["batch"] * w["input_tokens"] / spec.ttft_s,
        "decode": w["batch"] * w["output_tokens"] / spec.decode_s,
        "total": w["batch"] * w["output_tokens"] / spec.total_s,
    }


def rows(spec: Any) -> list[list[str]]:
    """Summary rows of the terminal table."""
    return [
        ["draft", f"{spec.draft} (γ={spec.gamma}, α={spec.alpha:.3g} {spec.acceptance_source})"],
        ["tokens per verification step", f"{spec.expected_tokens_per_step:.3f}"],
        ["draft / verify per step", f"{fmt_time(spec.draft_s_per_step)} / {fmt_time(spec.verify_s_per_step)}"],
        ["TPOT without draft", fmt_time(spec.baseline_tpot_s)],
        ["speed-up", f"{spec.speedup:.3f}×"],
        ["draft memory", fmt_bytes(spec.draft_memory_bytes)],
    ]


# ---- solve / frontier / search: draft × γ as the joint space's option dimension --------------------------------
def _field(default: Any, *decls: str, help: str) -> Any:
    from .options import option

    return option(default, *decls, help=help)


@dataclasses.dataclass(frozen=True)
class SpeculativeOptions:
    """``--speculative`` and the drafts, draft lengths and acceptance it searches with the architecture."""

    speculative: bool = _field(False, "--speculative", help="Search draft × γ with the target (implied by --draft).")
    drafts: Optional[str] = _field(
        None, "--draft", help="Drafts to search, ';'-separated (ids, specs, eagle:N); default: the space's own."
    )
    gammas: Optional[str] = _field(
        None, "--draft-tokens", help="Draft lengths γ to search, e.g. 1,2,4,8 (1,2,3,4,6,8)."
    )
    acceptance: Optional[str] = _field(
        None, "--acceptance", help="Per-token acceptance α in [0, 1), or 'fitted' (the published-rates law)."
    )

    @property
    def active(self) -> bool:
        """Whether draft × γ is searched (``--speculative``, or a ``--draft`` / ``--draft-tokens`` given)."""
        return self.speculative or self.drafts is not None or self.gammas is not None

    def merge(self, joint: Any, problem: Any) -> Any:
        """``joint`` (a JointSpace or None) with the speculative options as its option dimension (or unchanged)."""
        if not self.active:
            if self.acceptance is not None:
                raise bad("acceptance", self.acceptance, "needs --speculative (or --draft)")
            return joint
        if self.acceptance is None:
            raise bad("acceptance", None, "give --acceptance A (0 <= A < 1) or --acceptance fitted with --speculative")
        acc = parse_acceptance(self.acceptance)
        alpha = None if acc == "fitted" else float(acc)
        gammas = api.DEFAULT_GAMMAS
        if self.gammas is not None:
            items = [t.strip() for t in self.gammas.split(",")]
            if not items or not all(t.isdigit() and 1 <= int(t) <= api.MAX_DRAFT_TOKENS for t in items):
                raise bad(
                    "draft-tokens", self.gammas, f"expected integers from 1 to {api.MAX_DRAFT_TOKENS}, e.g. 1,2,4"
                )
            gammas = tuple(int(t) for t in items)
        if self.drafts is None:
            drafts = api.space_drafts(problem)
        else:
            items = [t.strip() for t in self.drafts.split(";")]
            if any(not t for t in items):
                raise bad("draft", self.drafts, "expected drafts separated by ';', none empty")
            drafts = [_draft_for_search(t) for t in items]
        opts = api.speculative_options(drafts, gammas, alpha)
        if joint is None:
            return api.JointSpace(options=opts)
        if any(o.columns is not None for o in joint.options):
            raise bad("speculative", True, "is searched on one device; drop --layouts/--system")
        return api.JointSpace(precisions=joint.precisions, batches=joint.batches, options=opts)


def _draft_for_search(text: str) -> Any:
    """A draft of ``--draft`` on solve/frontier/search: ``eagle:N`` is rebuilt on every target."""
    if text == "eagle" or text.startswith("eagle:"):
        n = text.partition(":")[2] or "1"
        if not n.isdigit() or int(n) < 1:
            raise bad("draft", text, "write eagle or eagle:N with N decoder layers")
        base = api.Architecture(layers=int(n), d_model=64, heads=1, ffn=64, name="eagle")  # shape taken per target
        return api.Draft(base, True, f"eagle:{n}")
    return api.parse_draft(text)


def explain_pick(problem: Any, joint: Any, res: Any) -> dict:
    """:func:`api.explain_speculative` of the solved point: its architecture and the option it picked, at the
    precision and batch it picked."""
    opt = next(o for o in joint.options if o.name == res.extra["option"])
    q = api.combination_problem(
        problem, res.extra.get("precision", problem.precision), res.extra.get("batch", problem.workload.batch)
    )
    return api.explain_speculative(q, res.architecture, opt)
