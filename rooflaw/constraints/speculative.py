"""Speculative decoding priced by the one assembly: a draft proposes γ tokens, the target verifies them in one pass.

Per verification step (Leviathan et al. 2023, i.i.d. acceptance with probability α per drafted token):

- expected tokens emitted τ(α, γ) = (1 − α^(γ+1)) / (1 − α) (the accepted prefix plus the target's own token);
- time = γ draft decode steps + one target pass of γ+1 tokens per sequence over the cache (:mod:`.passes`:
  query length γ+1, context cached + γ + 1, logits for every position), both priced by the same operators;
- energy = the same passes' energy (:func:`assembly.energy`); memory adds the draft's weights and KV cache.

Generating S_out tokens takes S_out/τ verification steps on average; step k starts with ``S_in + k·τ`` tokens
in the target's cache (the last step counted for its fraction), so TPOT = Σ step seconds / S_out. The prompt is
prefilled by the target and by the draft (TTFT is both). With α = 0 or γ = 0 every step emits one token and the
evaluation is the plain decode (a test checks it against :func:`roofline.evaluate`).

A draft is an :class:`~rooflaw.arch.Architecture` (any model: its own embedding and LM head), or ``eagle``-style
heads (:func:`eagle_draft`): a few decoder layers of the target's width that reuse the target's embedding and LM
head (their weights are not counted again). The optimal γ for a cost ratio c = draft step / target step is
:func:`optimal_draft_tokens`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..arch.architecture import Architecture
from ..devices.device import Device
from ..errors import bad
from .engines import EngineProfile
from .precision import Precision
from .workload import Workload

#: Most draft tokens per step accepted (beyond it the expected gain is < α^64 of a token).
MAX_DRAFT_TOKENS = 64


def expected_tokens(alpha: Any, gamma: Any) -> Any:
    """τ(α, γ) = (1 − α^(γ+1)) / (1 − α): expected tokens per verification step (γ + 1 at α = 1)."""
    a = np.asarray(alpha, dtype=np.float64)
    g = np.asarray(gamma, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(a < 1.0, (1.0 - a ** (g + 1.0)) / np.where(a < 1.0, 1.0 - a, 1.0), g + 1.0)
    return float(out) if out.ndim == 0 else out


def check_alpha(alpha: Any, field_name: str = "acceptance") -> float:
    """α as a float in [0, 1), or a one-line error naming ``field_name``."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.floating, np.integer)):
        raise bad(field_name, alpha, "must be a number in [0, 1) or 'fitted'")
    a = float(alpha)
    if not (0.0 <= a < 1.0):
        raise bad(field_name, alpha, "must satisfy 0 <= acceptance < 1")
    return a


def check_gamma(gamma: Any, field_name: str = "draft-tokens") -> int:
    if isinstance(gamma, bool) or not isinstance(gamma, (int, np.integer)) or not 0 <= gamma <= MAX_DRAFT_TOKENS:
        raise bad(field_name, gamma, f"must be an integer from 1 to {MAX_DRAFT_TOKENS}")
    return int(gamma)


# ---- the optimal draft length ----------------------------------------------------------------------------------
def speedup_ratio(alpha: Any, gamma: Any, cost_ratio: Any) -> Any:
    """τ(α, γ) / (γ·c + 1): tokens per unit of target-step time, relative to plain decoding (the verification pass
    priced as one target step; c = draft step / target step)."""
    return expected_tokens(alpha, gamma) / (np.asarray(gamma, dtype=np.float64) * cost_ratio + 1.0)


def optimal_gamma_continuous(alpha: float, cost_ratio: float) -> float:
    """The stationary point γ* of τ(α, γ)/(γc + 1) over real γ ≥ 0, in closed form (Lambert W, lower branch):

    d/dγ = 0  ⇔  α^(γ+1)·(1 − x·ln α) = 1 with x = γ + 1/c; with u = 1 − x·ln α this is u·e^(−u) = α^(1/c − 1)/e,
    so u = −W₋₁(−α^(1/c − 1)/e) and γ* = (1 − u)/ln α − 1/c (sympy's solve gives the same root on the
    principal branch, which is negative: the tests swap in W₋₁ and compare). Returns 0 when the
    stationary point is at or below 0 (drafting does not pay) and inf at c = 0 (a free draft: draft forever).
    """
    from scipy.special import lambertw

    a, c = check_alpha(alpha, "alpha"), float(cost_ratio)
    if not (math.isfinite(c) and c >= 0):
        raise bad("cost_ratio", cost_ratio, "must be a finite number >= 0")
    if a == 0.0:
        return 0.0
    if c == 0.0:
        return math.inf
    z = -(a ** (1.0 / c - 1.0)) / math.e
    if z < -1.0 / math.e:  # c > 1: no stationary point with u > 1 -- the draft costs more than the target
        return 0.0
    u = -float(np.real(lambertw(z, -1)))
    return max(0.0, (1.0 - u) / math.log(a) - 1.0 / c)


def optimal_draft_tokens(alpha: float, cost_ratio: float, max_tokens: int = MAX_DRAFT_TOKENS) -> int:
    """The integer γ in 0..max_tokens maximising τ(α, γ)/(γc + 1): floor or ceil of the continuous optimum (the
    ratio is quasi-concave in γ: a concave numerator over a linear denominator), 0 when drafting does not pay."""
    g = optimal_gamma_continuous(alpha, cost_ratio)
    if not math.isfinite(g) or g >= max_tokens:
        return max_tokens
    cands = sorted({0, math.floor(g), math.ceil(g)})
    vals = [float(speedup_ratio(alpha, k, cost_ratio)) for k in cands]
    return int(cands[int(np.argmax(vals))])


# ---- drafts ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Draft:
    """The draft model: ``arch`` and whether it shares the target's embedding and LM head (``shares_head``, EAGLE-
    style heads: their weights are not counted twice). ``name`` is what the user gave."""

    arch: Architecture
    shares_head: bool = False
    name: str = ""


def eagle_draft(target: Architecture, layers: int = 1) -> Draft:
    """EAGLE-style draft heads: ``layers`` dense decoder layers of the target's width, attention and FFN shape,
    reading and writing through the target's embedding and LM head (shared)."""
    if isinstance(layers, bool) or not isinstance(layers, int) or layers < 1:
        raise bad("draft", f"eagle:{layers}", "eagle heads need a positive integer number of layers")
    fields = {k: getattr(target, k) for k in ("d_model", "heads", "kv_heads", "head_dim", "vocab", "gated", "tied")}
    ffn = target.shared_ffn if target.experts > 1 and target.shared_ffn else target.ffn
    arch = Architecture(layers=layers, ffn=ffn, name=f"eagle-{layers}x{target.name or 'target'}", **fields)
    return Draft(arch, shares_head=True, name=f"eagle:{layers}")


def parse_draft(text: str, target: Architecture | None = None) -> Draft:
    """``--draft``: ``eagle`` / ``eagle:N`` (heads on the target), a bundled model id, a config.json, an
    architecture file or a ``key=value`` spec."""
    from ..arch import load_architecture

    t = str(text).strip()
    if t == "eagle" or t.startswith("eagle:"):
        if target is None:
            raise bad("draft", t, "eagle heads are built on a target; give the target architecture")
        n = t.partition(":")[2] or "1"
        if not n.isdigit():
            raise bad("draft", t, "write eagle or eagle:N with N decoder layers")
        return eagle_draft(target, int(n))
    try:
        return Draft(load_architecture(t), False, t)
    except Exception as e:  # noqa: BLE001 - re-raised as a one-line error naming --draft
        raise bad("draft", t, str(e).split("\n")[0]) from None


# ---- evaluation ---------------------------------------------------------------------------------------------------
@dataclass
class SpeculativeReport:
    """Speculative decoding of one target with one draft on one device. SI units."""

    alpha: float
    gamma: int
    expected_tokens_per_step: float
    steps: float  # expected verification steps for S_out tokens
    draft_s_per_step: float  # mean over steps: γ draft decode steps
    verify_s_per_step: float  # mean over steps: the target's γ+1-token pass
    ttft_s: float
    decode_s: float
    tpot_s: float
    total_s: float
    memory_bytes: float
    draft_memory_bytes: float
    fits_in_memory: bool
    energy_j: float
    baseline_tpot_s: float
    baseline_energy_j: float
    batch: int
    draft: str = ""
    acceptance_source: str = "given"
    verify_flops_per_step: float = 0.0
    verify_bytes_per_step: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def speedup(self) -> float:
        """Plain TPOT / speculative TPOT (> 1: the draft pays)."""
        return self.baseline_tpot_s / self.tpot_s

    @property
    def tokens_per_s_per_user(self) -> float:
        return 1.0 / self.tpot_s

    @property
    def tokens_per_s_per_device(self) -> float:
        return self.batch / self.tpot_s

    def to_dict(self) -> dict[str, Any]:
        return {
            "alpha": self.alpha,
            "gamma": self.gamma,
            "acceptance_source": self.acceptance_source,
            "draft": self.draft,
            "expected_tokens_per_step": self.expected_tokens_per_step,
            "verification_steps": self.steps,
            "draft_s_per_step": self.draft_s_per_step,
            "verify_s_per_step": self.verify_s_per_step,
            "verify_flops_per_step": self.verify_flops_per_step,
            "verify_bytes_per_step": self.verify_bytes_per_step,
            "draft_memory_bytes": self.draft_memory_bytes,
            "baseline_tpot_s": self.baseline_tpot_s,
            "speedup": self.speedup,
            "tokens_per_s_per_user": self.tokens_per_s_per_user,
            "tokens_per_s_per_device": self.tokens_per_s_per_device,
            **self.extra,
        }


def step_contexts(input_tokens: int, output_tokens: int, tau: float) -> tuple[np.ndarray, np.ndarray]:
    """(cached tokens at the start of each verification step, its weight): ⌈S_out/τ⌉ steps at S_in + k·τ, every
    weight 1 but the last, which counts the fraction S_out/τ − (⌈S_out/τ⌉ − 1) of a step."""
    n = output_tokens / tau
    k = max(1, math.ceil(n - 1e-12))
    idx = np.arange(k, dtype=np.float64)
    w = np.ones(k)
    w[-1] = n - (k - 1)
    return input_tokens + idx * tau, w


def evaluate_speculative(
    target: Architecture,
    draft: Draft | Architecture,
    device: Device,
    workload: Workload | None = None,
    gamma: int = 4,
    alpha: float | str = 0.7,
    precision: str | Precision = "fp16",
    preset: str = "full",
    engine: str | EngineProfile | None = None,
    draft_precision: str | Precision | None = None,
) -> SpeculativeReport:
    """Speculative decoding of ``target`` with ``draft`` (γ = ``gamma`` tokens per step, acceptance ``alpha``, or
    ``"fitted"``: the law of :mod:`.acceptance`). The draft runs at ``draft_precision`` (default: the target's)."""
    from .passes import pass_table
    from .roofline import evaluate as evaluate_one

    workload = workload or Workload()
    if isinstance(draft, Architecture):
        draft = Draft(draft, False, draft.name)
    gamma = check_gamma(gamma)
    source, law_info = "given", {}
    if isinstance(alpha, str):
        if alpha != "fitted":
            raise bad("acceptance", alpha, "must be a number in [0, 1) or 'fitted'")
        from .acceptance import fitted_acceptance, fitted_law

        alpha, source = fitted_acceptance(draft, target), "fitted"
        law_info = {"acceptance_law": fitted_law().to_dict()}
    alpha = check_alpha(alpha)
    precision = Precision.parse(precision)
    dprec = precision if draft_precision is None else Precision.parse(draft_precision)
    B, S_in, S_out = workload.batch, workload.input_tokens, workload.output_tokens
    tau = float(expected_tokens(alpha, gamma))
    cached, w = step_contexts(S_in, S_out, tau)
    ver = pass_table(target, device, B, gamma + 1, cached, precision, preset, engine, workload.attention)
    # draft step j (1..γ) of verification step k: one token over cached + j − 1 tokens
    draft_secs = np.zeros(cached.size)
    draft_energy = np.zeros(cached.size)
    if gamma:
        dc = (cached[:, None] + np.arange(gamma)[None, :]).ravel()
        dr = pass_table(draft.arch, device, B, 1, dc, dprec, preset, engine, workload.attention)
        draft_secs = dr["seconds"].reshape(cached.size, gamma).sum(1)
        draft_energy = dr["energy_j"].reshape(cached.size, gamma).sum(1)
    steps = float(w.sum())
    decode_s = float(np.dot(w, ver["seconds"] + draft_secs))
    base = evaluate_one(target, device, workload, precision, preset, False, engine)
    mem_wl = replace(workload, output_tokens=S_out + gamma)  # rejected drafts hold KV slots until rolled back
    tgt_mem = evaluate_one(target, device, mem_wl, precision, preset, False, engine)
    drep = evaluate_one(draft.arch, device, mem_wl, dprec, preset, False, engine)
    draft_mem = drep.memory_bytes - (_head_bytes(draft.arch, dprec) if draft.shares_head else 0.0)
    ttft = base.prefill_s + (drep.prefill_s if gamma else 0.0)
    pre_energy = _prefill_energy(base) + (_prefill_energy(drep) if gamma else 0.0)
    energy = pre_energy + float(np.dot(w, ver["energy_j"] + draft_energy))
    memory = tgt_mem.memory_bytes + (draft_mem if gamma else 0.0)
    return SpeculativeReport(
        alpha=alpha, gamma=gamma, expected_tokens_per_step=tau, steps=steps,
        draft_s_per_step=float(np.dot(w, draft_secs)) / steps,
        verify_s_per_step=float(np.dot(w, ver["seconds"])) / steps,
        ttft_s=ttft, decode_s=decode_s, tpot_s=decode_s / S_out, total_s=ttft + decode_s, memory_bytes=memory,
        draft_memory_bytes=draft_mem if gamma else 0.0, fits_in_memory=bool(memory <= device.memory_capacity),
        energy_j=energy, baseline_tpot_s=base.tpot_s, baseline_energy_j=base.energy_j, batch=B,
        draft=draft.name or draft.arch.name, acceptance_source=source,
        verify_flops_per_step=float(np.dot(w, ver["flops"])) / steps,
        verify_bytes_per_step=float(np.dot(w, ver["bytes"])) / steps, extra=law_info,
    )  # fmt: skip


# ---- the same, vectorised over a candidate table (a solver's option dimension) ----------------------------------
#: Columns a speculative option adds to a frontier row.
SPEC_EXTRA = ("alpha", "expected_tokens_per_step", "draft_tokens", "speedup", "draft_memory_bytes")


def eagle_columns(full: dict[str, np.ndarray], layers: int) -> dict[str, np.ndarray]:
    """:func:`eagle_draft` for every row of a completed candidate table (dense layers of each target's shape)."""
    from .roofline import complete_columns

    n = len(full["layers"])
    keep = ("d_model", "heads", "kv_heads", "head_dim", "vocab", "gated", "tied")
    cols = {k: full[k] for k in keep}
    cols["ffn"] = np.where(full["experts"] > 1, np.where(full["shared_ffn"] > 0, full["shared_ffn"], full["ffn"]),
                           full["ffn"])  # fmt: skip
    cols["layers"] = np.full(n, float(layers))
    return complete_columns(cols)


@dataclass(frozen=True)
class SpeculativeColumns:
    """``columns(cols, problem)`` of speculative decoding with one draft and γ for a table of targets (the joint
    space's option dimension, :class:`~rooflaw.solver.discrete.joint.Option`): the same model as
    :func:`evaluate_speculative`, row by row. ``draft``: a fixed draft (``shares_head``: EAGLE heads, rebuilt on
    each target with ``draft.arch.layers`` layers); ``alpha``: a number, or None for the fitted law (rows outside its
    domain are not ``valid`` unless ``extrapolate``)."""

    draft: Draft
    gamma: int
    alpha: float | None = None
    extrapolate: bool = False

    def __call__(self, cols: Any, problem: Any) -> dict[str, np.ndarray]:
        from ..arch.architecture import param_counts
        from .passes import pass_columns
        from .roofline import complete_columns, evaluate_columns

        full = complete_columns(cols)
        n = len(full["layers"])
        dev, wl, prec, preset = problem.device, problem.workload, problem.precision, problem.preset
        eng = getattr(problem, "engine", None)
        B, S_in, S_out, g = wl.batch, wl.input_tokens, wl.output_tokens, self.gamma
        ev = lambda c, w: evaluate_columns(c, dev, w, prec, preset, engine=eng)  # noqa: E731
        one = replace(wl, output_tokens=1)
        base = ev(full, wl)
        mem = ev(full, replace(wl, output_tokens=S_out + g))["memory_bytes"]
        shared = self.draft.shares_head
        dcols = eagle_columns(full, self.draft.arch.layers) if shared else complete_columns(
            {k: np.array([float(v)]) for k, v in self.draft.arch.columns().items()})  # fmt: skip
        nd = len(dcols["layers"])
        valid = np.ones(n, dtype=bool)
        if self.alpha is None:
            if shared:
                raise bad("acceptance", "fitted", "the fitted law covers separate draft models, not eagle heads")
            from .acceptance import fitted_law

            law, pt = fitted_law(), param_counts(full)["total"]
            pd_ = float(param_counts(dcols)["total"][0])
            x = np.log(np.asarray(pt, dtype=float) / pd_)
            lo, hi = law.domain
            valid = np.broadcast_to((x >= lo) & (x <= hi), (n,)).copy() if not self.extrapolate else valid
            alpha = 1.0 / (1.0 + np.exp(-(law.a + law.b * x)))
        else:
            alpha = np.full(n, check_alpha(self.alpha))
        alpha = np.broadcast_to(np.asarray(alpha, dtype=float), (n,))
        tau = np.asarray(expected_tokens(alpha, g), dtype=float)
        steps = S_out / tau
        K = int(math.ceil(float(steps.max()) - 1e-12))
        dec, energy, draft_s = np.zeros(n), np.zeros(n), np.zeros(n)
        fixed_draft = not shared and bool(np.all(tau == tau[0]))
        for k in range(max(K, 1)):
            w = np.clip(steps - k, 0.0, 1.0)
            cached = S_in + k * tau
            ver = pass_columns(full, dev, B, g + 1, cached, prec, preset, eng, wl.attention)
            ds, de = np.zeros(n), np.zeros(n)
            for j in range(g):
                dc = cached[:1] + j if fixed_draft else cached + j
                d = pass_columns(dcols if nd == len(dc) else _rows(dcols, len(dc)), dev, B, 1, dc, prec, preset, eng,
                                 wl.attention)  # fmt: skip
                ds, de = ds + d["seconds"], de + d["energy_j"]
            dec += w * (ver["seconds"] + ds)
            energy += w * (ver["energy_j"] + de)
            draft_s += w * ds
        dfull = dcols if nd == n else _rows(dcols, n)
        dbase, d_one = ev(dfull, wl), ev(dfull, one)
        d_mem = ev(dfull, replace(wl, output_tokens=S_out + g))["memory_bytes"]
        if shared:
            d_mem = d_mem - _head_bytes_columns(dfull, prec)
        t_one = ev(full, one)
        # prefill energy = E(prefill + one decode step) − E(that step), the step being a one-token pass
        t_step = pass_columns(full, dev, B, 1, np.full(n, float(S_in)), prec, preset, eng, wl.attention)["energy_j"]
        d_step = pass_columns(dfull, dev, B, 1, np.full(n, float(S_in)), prec, preset, eng, wl.attention)["energy_j"]
        pre_e = (t_one["energy_j"] - t_step) + (d_one["energy_j"] - d_step)
        prefill = base["prefill_s"] + dbase["prefill_s"]
        with np.errstate(divide="ignore", invalid="ignore"):
            speedup = base["decode_s"] / dec
        return {
            "prefill_s": prefill, "decode_s": dec, "total_s": prefill + dec, "tpot_s": dec / S_out,
            "memory_bytes": mem + d_mem, "energy_j": pre_e + energy, "params_total": base["params_total"],
            "params_active": base["params_active"], "valid": valid & np.isfinite(dec),
            "tokens_per_s_per_user": S_out / dec, "tokens_per_s": B * S_out / dec, "alpha": alpha,
            "expected_tokens_per_step": tau, "draft_tokens": np.full(n, float(g)), "speedup": speedup,
            "draft_memory_bytes": np.broadcast_to(d_mem, (n,)),
        }  # fmt: skip


def _rows(cols: dict[str, np.ndarray], n: int) -> dict[str, np.ndarray]:
    """A one-row table repeated to ``n`` rows (broadcast views)."""
    return {k: np.broadcast_to(v[:1], (n,)) for k, v in cols.items()}


def _head_bytes_columns(cols: dict[str, np.ndarray], precision: Precision) -> np.ndarray:
    from ..arch.architecture import param_counts

    c = param_counts(cols)
    return np.asarray((c["embed"] + c["lm_head"]) * Precision.parse(precision).head_format.bytes, dtype=float)


def _prefill_energy(rep: Any) -> float:
    """The prefill's energy of a report (:func:`assembly.energy` of its prefill seconds, FLOPs per class, bytes)."""
    from . import assembly as A

    coef = A.energy_coefficients(rep.device, rep.precision)
    if coef is None:
        return float("nan")
    roof_of = {op.name: op.roof for op in A.get_preset(rep.preset).ops}
    from . import operators as O

    roof_of.update(O.part_roofs())
    by_roof = {c: 0.0 for c in A.ROOF_CLASSES}
    for o in rep.ops:
        r = roof_of.get(o.name)
        if o.phase == "prefill" and r in by_roof:
            by_roof[r] += o.flops
    return float(A.energy(coef, rep.prefill_s, by_roof, rep.prefill_bytes))


def _head_bytes(arch: Architecture, precision: Precision) -> float:
    """Bytes of the embedding and LM head (the head format, as the weight terms count them): what EAGLE heads
    share with their target."""
    from ..arch.architecture import param_counts

    c = param_counts(arch.columns())
    return float((c["embed"] + c["lm_head"]) * precision.head_format.bytes)


__all__ = [
    "MAX_DRAFT_TOKENS",
    "SPEC_EXTRA",
    "SpeculativeColumns",
    "Draft",
    "SpeculativeReport",
    "eagle_draft",
    "evaluate_speculative",
    "expected_tokens",
    "optimal_draft_tokens",
    "optimal_gamma_continuous",
    "parse_draft",
    "speedup_ratio",
    "step_contexts",
]
