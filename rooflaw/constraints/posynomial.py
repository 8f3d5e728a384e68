"""The posynomial backend: the ``full`` preset's assembly as posynomials in (l, d, r, ρ, gqa), for the GP.

Every cost is the assembly's (:mod:`.assembly`: placement, phases, roofs and efficiencies, launch overhead, memory
terms, energy) over :data:`rooflaw.constraints.operators.FULL_OPS` -- nothing is typed in; this module only rewrites
it as posynomials, numbers substituted, and the cvxpy problem is built in :mod:`rooflaw.solver.gp_full`. The
architecture symbols are rewritten in the relaxation variables (l, d, r, ρ, gqa) (:func:`assembly.paper_variable_map`):

    layers = l, d_model = d, heads = d/hd, kv_heads = d/(hd·gqa), ffn = shared_ffn = r·d/K, experts = K/ρ,

with the remaining columns fixed from the space: ``hd`` = the largest head_dim of the space, the smallest vocabulary,
tied embeddings if the space allows them (every cost is non-increasing in head_dim at fixed d, in tying and
increasing in vocab, so these keep the relaxation a lower bound), and ``gated``, ``qkv_bias``, ``norms_per_layer``,
``layernorm``, ``qk_norm_*``, ``shared_*`` from the space's first point (constant over a space).

The expected number of distinct experts touched, ``E_cov`` = E·(1 − (1 − K/E)^T), is not a posynomial; it is
replaced *before* the phase substitution by a posynomial stand-in in which K cancels:

- prefill (T = B·S_in tokens): E_cov → E = K/ρ (all experts; exact up to a relative (1 − ρ)^T, ~1e-29 at
  T = 1024, ρ = 1/16);
- decode (T = B): E_cov → min(E, B·K), taken piecewise: B·K where ρ ≤ 1/B, E = K/ρ where ρ ≥ 1/B (the MoE branch is
  split at ρ = 1/B when that lies inside its range; a dense model is E = 1, exact). Exact at batch 1; for B > 1 an
  upper bound, at most 1/(1 − (1 − 1/B)^B) ≤ e/(e − 1) ≈ 1.58 times the expected coverage.

K itself does not cancel everywhere: the router (2·T·d·E·moe FLOPs, d·E·moe weights = d·K/ρ) and the per-token
activation reads of the routed experts (T·K·d·b_a in ffn_up/ffn_down; the gather and scatter-reduce's
2·T·(K + 1)·d·b_v in ffn_act) keep it; :func:`k_dependent_ops` reports them (checked symbolically); so does the
grouped GEMMs' compute time at width ffn = r·d/K, × (1 + moe_half_inter·K/(r·d)) (a rate, not a FLOP count).
The space's points are therefore split into two **branches**, solved as two GPs:

- dense (E = K = 1, moe = 0, ρ = 1), if the space has dense points;
- MoE (moe = 1, K = the smallest top_k of the MoE pairs, ρ between the MoE pairs' smallest and largest K/E), if it
  has MoE points. Every cost is non-decreasing in K at fixed (r, ρ), so this is a lower bound for every MoE point.

The better branch is the relaxation's optimum. Each phase's latency is Σ_ops max(FLOPs/π_op, bytes/β_class) with layer
ops × l (β_class: the op's memory stream class, :data:`assembly.STREAM_CLASSES`; a routed expert's grouped GEMM
takes the blend ((FLOPs/π)^p + (bytes/β)^p)^(1/p) of :func:`assembly.roofline_time`, convex in log space); decode is
S_out × one max for the step-constant ops and one max per step for the ops whose cost grows with the context (QKᵀ,
softmax, ·V: exact, S_out maxima each), without decode attention's stream ramp and per-wave seconds (kernel curves:
:func:`assembly.decode_waves`; a ceiling, not a posynomial -- left out, the relaxation stays a lower bound), without
a fused prefill kernel's whole diagonal blocks, query-tile waves and efficiency and math/stream blend
(:mod:`.fused_prefill`: ceilings and a p-norm ≥ the max; the causal pairs and the max, a lower bound again), without
its softmax under kernel curves (the p-norm of the matmuls and the softmax ≥ the matmuls: the softmax op's time
dropped, a lower bound; without curves it runs in series, as in the assembly),
without a large expert's DRAM re-read (:mod:`.moe_reread`: a max, left out likewise) and without the routed experts'
rows padded to whole tiles (:mod:`.moe_padding`: a factor ≥ 1 of floors and steps, dropped: a lower bound); plus the
device's kernel overhead × launches;
plus the engine's overhead (:func:`device_rates.engine_overhead`), or, for a host-launching engine on an accelerator
(``Applied.overlap``, the flag the numpy and numba backends read), the larger of the two: max(roofline, engine
overhead) per phase, which the GP writes with one epigraph variable per phase (:mod:`rooflaw.solver.gp_full`).
Memory and energy are the evaluator's expressions, posynomials. Every expression is checked to be a posynomial
(positive coefficients, real exponents of l, d, r, ρ, gqa only) and refused with the offending term otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import numpy as np
import sympy as sp

from ..errors import RooflawError
from . import assembly as A
from . import streams as ST
from .fused_prefill import SOFTMAX_OPS, drop_blocks
from .moe_reread import MOE_REREAD
from .roofline import with_overhead
from .scenario import Scenario
from .symbols import ARCH, B, S_in, S_out, b_a, b_d, b_h, b_kv, b_q, b_v, b_w, sym, unfused

VARS = A.PAPER_VARS
#: Workload/precision symbols the templates keep symbolic; numbers per problem.
CONSTS = (B, S_in, S_out, b_w, b_a, b_kv, b_v, b_h, b_q, b_d, unfused)
Ksym = sp.Symbol("K_topk", positive=True)
_VSYM = tuple(sym(v) for v in VARS)
_FIXED_COLS = ("gated", "qkv_bias", "norms_per_layer", "layernorm", "qk_norm_size", "qk_norm_on", "shared_gate",
               "shared_experts")  # fmt: skip


# ---- posynomials ---------------------------------------------------------------------------------
@dataclass
class Posy:
    """Σ_i c_i Π_j x_j^A_ij over (l, d, r, rho, gqa); c > 0 (an empty posynomial is zero)."""

    c: np.ndarray
    A: np.ndarray

    @staticmethod
    def zero() -> Posy:
        return Posy(np.zeros(0), np.zeros((0, len(VARS))))

    @staticmethod
    def const(v: float) -> Posy:
        return Posy(np.array([float(v)]), np.zeros((1, len(VARS)))) if v else Posy.zero()

    def __bool__(self) -> bool:
        return len(self.c) > 0

    def __add__(self, o: Posy) -> Posy:
        if isinstance(o, (int, float)) and o == 0:
            return self
        return Posy(np.concatenate([self.c, o.c]), np.vstack([self.A, o.A])).merged()

    def __radd__(self, o: Any) -> Posy:
        if isinstance(o, (int, float)) and o == 0:
            return self
        return NotImplemented

    def __mul__(self, s: float) -> Posy:
        return self.scale(float(s))

    __rmul__ = __mul__

    def scale(self, s: float) -> Posy:
        return Posy(self.c * s, self.A.copy()) if s else Posy.zero()

    def times(self, s: float, powers: Mapping[str, float]) -> Posy:
        """This posynomial times the monomial s·Π x_v^powers[v] (s > 0)."""
        A = self.A.copy()
        for v, e in powers.items():
            A[:, VARS.index(v)] += e
        return Posy(self.c * s, A)

    def times_l(self) -> Posy:
        A = self.A.copy()
        A[:, 0] += 1
        return Posy(self.c.copy(), A)

    def merged(self) -> Posy:
        if not len(self.c):
            return self
        keys, inv = np.unique(np.round(self.A, 12), axis=0, return_inverse=True)
        c = np.zeros(len(keys))
        np.add.at(c, inv.ravel(), self.c)
        return Posy(c, keys)

    def __call__(self, x: Mapping[str, Any]) -> Any:
        """Value at ``x`` (scalars or arrays per variable)."""
        if not len(self.c):
            return 0.0
        logx = np.stack([np.log(np.asarray(x[v], dtype=float)) for v in VARS], axis=-1)
        return np.exp(logx @ self.A.T) @ self.c


def _split_terms(expr: sp.Expr, what: str) -> dict[tuple[float, ...], sp.Expr]:
    """expand(expr) as {exponents of (l, d, r, rho, gqa): coefficient over the constants and K}."""
    e = sp.expand(expr)
    out: dict[tuple[float, ...], sp.Expr] = {}
    allowed = set(CONSTS) | {Ksym}
    for term in e.args if isinstance(e, sp.Add) else (e,):
        if term == 0:
            continue
        powers = [0.0] * len(VARS)
        coef: sp.Expr = sp.Integer(1)
        for base, ex in term.as_powers_dict().items():
            if base in _VSYM:
                if not (ex.is_number and ex.is_real):
                    raise RooflawError(f"{what} is not a posynomial: term {term} has factor {base}**{ex}")
                powers[_VSYM.index(base)] += float(ex)
            elif base.is_number or base.free_symbols <= allowed:
                coef *= base**ex
            else:
                raise RooflawError(
                    f"{what} is not a posynomial in l, d, r, rho, gqa: term {term} uses "
                    f"{sorted(map(str, base.free_symbols - allowed))}"
                )
        key = tuple(powers)
        out[key] = out.get(key, sp.Integer(0)) + coef
    return out


# ---- symbolic templates (cached per space signature) ---------------------------------------------
@dataclass
class _Templates:
    parts: list[dict[str, Any]]
    #: posynomial templates: name -> [(exponents, index into coefficient vector)]
    posy: dict[str, list[tuple[tuple[float, ...], int]]]
    coef_fn: Any
    k_dependent: tuple[str, ...]


def _arch_subs(fixed: Mapping[str, float], moe: int) -> dict[sp.Symbol, sp.Expr]:
    """The assembly's mapping to the paper's variables at the space's fixed head_dim, K = Ksym, shared_ffn = ffn."""
    a = ARCH
    subs = A.paper_variable_map(head_dim=sp.Integer(int(fixed["head_dim"])), top_k=Ksym)
    subs[a["shared_ffn"]] = subs[a["ffn"]]
    subs.update({a["moe"]: sp.Integer(moe), a["vocab"]: sp.Integer(int(fixed["vocab"])),
                 a["tied"]: sp.Integer(int(fixed["tied"]))})  # fmt: skip
    for k in _FIXED_COLS:
        subs[a[k]] = sp.Integer(int(fixed[k]))
    return subs


@lru_cache(maxsize=32)
def _templates(fixed_items: tuple[tuple[str, float], ...], moe: int, decode_cover: str = "BK") -> _Templates:
    fixed = dict(fixed_items)
    subs = _arch_subs(fixed, moe) | {MOE_REREAD: sp.Integer(0)}  # a max, not a posynomial: out, still a lower bound
    # prefill: all experts (exact up to (1 − ρ)^T); decode: min(E, B·K) piecewise -- B·K where B·ρ ≤ 1
    # (exact at B = 1), E where B·ρ ≥ 1 (exact for dense)
    cover_dec = B * ARCH["top_k"] if decode_cover == "BK" else ARCH["experts"]
    parts = A.place("full", cover_pre=ARCH["experts"], cover_dec=cover_dec)
    exprs: dict[str, sp.Expr] = {}
    meta = []
    for p in parts:
        (seg,) = p.decode  # a uniform stack: one decode segment of S_out steps per part
        vals = {"pF": p.pre_flops, "pB": p.pre_bytes, "dF0": seg.f0, "dF1": seg.f1, "dB0": seg.b0, "dB1": seg.b1}
        for k, e in vals.items():
            exprs[f"{p.name}.{k}"] = drop_blocks((p.count * e).xreplace(subs))  # causal pairs: a lower bound
        meta.append({"name": p.name, "roof": p.roof, "per_layer": p.scope == "layer"})
    tot = A.totals("full", parts)
    for k in ("weights", "kv", "act"):
        exprs[k] = getattr(tot, k).xreplace(subs)
    posy: dict[str, list[tuple[tuple[float, ...], int]]] = {}
    coefs: list[sp.Expr] = []
    kdep = set()
    for name, e in exprs.items():
        posy[name] = []
        for key, c in _split_terms(e, name).items():
            if Ksym in c.free_symbols:
                kdep.add(name.split(".")[0])
            posy[name].append((key, len(coefs)))
            coefs.append(c)
    fn = sp.lambdify((*CONSTS, Ksym), coefs, modules="numpy")
    return _Templates(meta, posy, fn, tuple(sorted(kdep)))


def space_fixed(space: Any) -> dict[str, float]:
    """The columns the relaxation fixes from ``space`` (see the module docstring)."""
    if getattr(space, "has_patterns", False):
        raise RooflawError(
            f"space {space.name!r} searches layer patterns; the GP relaxation models uniform stacks only: "
            "use --method exhaustive or optuna"
        )
    first = space.columns_at(np.array([0]))
    out = {k: float(first[k][0]) for k in _FIXED_COLS}
    out["head_dim"] = float(max(space.values("head_dim")))
    out["vocab"] = float(min(space.values("vocab")))
    out["tied"] = float(max(int(x) for x in space.values("tied")))
    return out


def k_dependent_ops(space: Any = "paper") -> tuple[str, ...]:
    """Cost expressions in which top_k does not cancel after the substitutions (MoE branch)."""
    if isinstance(space, str):
        from ..arch.space import get_space

        space = get_space(space)
    return _templates(tuple(sorted(space_fixed(space).items())), 1).k_dependent


# ---- the numeric model of one branch -------------------------------------------------------------
def blend(f: Any, b: Any, p: float) -> Any:
    """``(f^p + b^p)^(1/p)`` of two non-negative times, as :func:`assembly.roofline_time` (p = inf: the max)."""
    hi = np.maximum(f, b)
    if p == np.inf:
        return hi
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(hi > 0, np.minimum(f, b) / hi, 0.0)
    return hi * (1.0 + ratio**p) ** (1.0 / p)


@dataclass
class Branch:
    """One branch of the relaxation (dense or MoE) with numbers substituted: posynomials per op and phase."""

    name: str
    K: float
    moe: int
    bounds: dict[str, tuple[float, float]]
    S_out: int
    #: per op: prefill (F/π, B/β), decode step-constant (F/π, B/β) or per-step a0, a1, b0, b1 (seconds)
    pre: list[tuple[Posy, Posy]] = field(default_factory=list)
    dec_const: list[tuple[Posy, Posy]] = field(default_factory=list)  # one step (× S_out)
    dec_step: list[tuple[Posy, Posy, Posy, Posy]] = field(default_factory=list)
    #: per ``pre`` / ``dec_const`` entry, p of its time ``(F/π)^p + (B/β)^p)^(1/p)`` (inf: the max; a routed
    #: expert's grouped GEMM: :data:`assembly.MOE_BLEND`)
    pre_p: list[float] = field(default_factory=list)
    dec_p: list[float] = field(default_factory=list)
    #: per-operator launch overhead of a pass (device ``kernel_overhead`` × launches; all S_out steps in decode):
    #: part of the roofline side, as in :func:`assembly.with_launches`
    launch_pre: Posy = field(default_factory=Posy.zero)
    launch_dec: Posy = field(default_factory=Posy.zero)
    #: the engine's overhead (:func:`device_rates.engine_overhead`; all S_out steps in decode)
    overhead_pre: Posy = field(default_factory=Posy.zero)
    overhead_dec: Posy = field(default_factory=Posy.zero)
    memory: Posy = field(default_factory=Posy.zero)
    energy_dyn: Posy = field(default_factory=Posy.zero)
    p_idle: float = 0.0
    has_energy: bool = True
    k_dependent: tuple[str, ...] = ()
    #: ``Applied.overlap`` of the device and engine: a phase takes max(roofline, engine overhead), else their sum
    overlap: bool = False

    # numeric evaluation (numpy, vectorised over arrays of x)
    def prefill_s(self, x: Mapping[str, Any]) -> Any:
        out = self.launch_pre(x)
        for (f, b), p in zip(self.pre, self.pre_p or [np.inf] * len(self.pre), strict=True):
            out = out + blend(f(x), b(x), p)
        return with_overhead(self.overlap, out, self.overhead_pre(x))

    def decode_s(self, x: Mapping[str, Any]) -> Any:
        out = self.launch_dec(x)
        for (f, b), p in zip(self.dec_const, self.dec_p or [np.inf] * len(self.dec_const), strict=True):
            out = out + self.S_out * blend(f(x), b(x), p)
        for a0, a1, b0, b1 in self.dec_step:
            out = out + A.sum_max_affine(a0(x), a1(x), b0(x), b1(x), self.S_out)[0]
        return with_overhead(self.overlap, out, self.overhead_dec(x))

    def values(self, x: Mapping[str, Any]) -> dict[str, Any]:
        p, dd = self.prefill_s(x), self.decode_s(x)
        e = self.p_idle * (p + dd) + self.energy_dyn(x) if self.has_energy else np.nan * p
        return {"prefill_s": p, "decode_s": dd, "total_s": p + dd, "memory_bytes": self.memory(x), "energy_j": e}


def _posy(tm: _Templates, coef: np.ndarray, name: str) -> Posy:
    rows = tm.posy[name]
    if not rows:
        return Posy.zero()
    c = np.array([coef[i] for _, i in rows], dtype=float)
    A_ = np.array([k for k, _ in rows], dtype=float)
    if np.any(c < 0) or not np.all(np.isfinite(c)):
        j = int(np.flatnonzero(~(c >= 0))[0])
        raise RooflawError(f"{name} is not a posynomial: the term in {dict(zip(VARS, A_[j], strict=True))} has "
                           f"coefficient {c[j]:.4g}")  # fmt: skip
    keep = c > 0
    return Posy(c[keep], A_[keep]).merged()


def build_branch(
    scenario: Scenario, fixed: Mapping[str, float], name: str, K: float, moe: int,
    bounds: dict[str, tuple[float, float]], decode_cover: str = "auto",
) -> Branch:  # fmt: skip
    """The branch's posynomials with the scenario's device, workload and precision substituted (the ``full``
    preset's roofline: its rates and energy are the scenario's under ``full``).

    ``fixed``: :func:`space_fixed` of the space. ``decode_cover``: the decode stand-in for the experts touched,
    ``BK`` (B·K) or ``E`` (all experts); ``auto`` takes E for a dense branch (moe = 0) and B·K otherwise.
    """
    if decode_cover == "auto":
        decode_cover = "BK" if moe else "E"
    tm = _templates(tuple(sorted(fixed.items())), moe, decode_cover)
    sc = scenario if scenario.preset == "full" else replace(scenario, preset="full")
    wl, prec = sc.workload, sc.precision
    consts = {B: wl.batch, S_in: wl.input_tokens, S_out: wl.output_tokens, b_w: prec.weights.bytes,
              b_a: prec.activations.bytes, b_kv: prec.kv.bytes, b_v: prec.vector_bytes, b_h: prec.head_format.bytes,
              b_q: prec.quantise_bytes, b_d: prec.dequantise_bytes,
              unfused: 1.0 if wl.attention == "unfused" else 0.0}  # fmt: skip
    coef = np.asarray([float(np.asarray(v)) for v in tm.coef_fn(*[float(consts[s]) for s in CONSTS], float(K))])
    from .engines import decode_linear_inv

    app, rates = sc.applied, sc.rates
    n = int(wl.output_tokens)
    br = Branch(name, float(K), moe, bounds, n, k_dependent=tm.k_dependent if moe else ())
    launches = Posy.zero()
    F_tot = {c: Posy.zero() for c in A.ROOF_CLASSES}
    B_tot = Posy.zero()
    tri = n * (n + 1) / 2
    for op in tm.parts:
        nm, roof = op["name"], op["roof"]
        ipi = rates.inv.get(roof, 0.0)
        if nm in SOFTMAX_OPS and rates.softmax_pair_s > 0 and wl.attention != "unfused":
            ipi = 0.0  # the fused kernel's softmax p-norm ≥ its matmuls' time: dropped, a lower bound
        P = {k: _posy(tm, coef, f"{nm}.{k}") for k in ("pF", "pB", "dF0", "dF1", "dB0", "dB1")}
        if roof not in A.ROOF_CLASSES and (P["pF"] or P["dF0"] or P["dF1"]):
            raise RooflawError(f"operator {nm}: FLOPs on a memory-only roof")
        # bytes at their stream class's bandwidth, and the experts' blend (assembly.roofline_time), in a routed-expert
        # branch only
        ib = {ph: rates.inv_stream(c if c != "experts" or moe else "weights")
              for ph in ("prefill", "decode") for c in [ST.stream_class(nm, roof, ph)]}  # fmt: skip
        p_blend = rates.moe_blend if nm in ST.EXPERT_OPS and moe else np.inf
        # a routed expert's grouped GEMMs compute for FLOPs × (1 + half/ffn) / moe, ffn = r·d/K (streams.roofline_time;
        # the FLOPs counted stay P's)
        # (a width under one element, a fit at its bound of 0, stays out: a vanishing monomial the solvers cannot scale)
        half = rates.moe_half_inter * float(K) if nm in ST.EXPERT_OPS and moe and rates.moe_half_inter >= 1 else 0.0
        g = 1.0 / rates.moe if nm in ST.EXPERT_OPS and moe and rates.moe > 0 else 1.0
        w = float(K) / (float(K) + float(fixed["shared_experts"])) if g != 1.0 or half else 1.0  # routed share
        tF = {k: (P[k] + P[k].times(half, {"d": -1.0, "r": -1.0}) if half else P[k]).scale(g * w) + P[k].scale(1 - w)
              for k in ("pF", "dF0", "dF1")}  # fmt: skip
        br.pre.append((tF["pF"].scale(ipi), P["pB"].scale(ib["prefill"])))
        br.pre_p.append(p_blend)
        if roof == "linear":
            ipi = float(decode_linear_inv(rates, wl.batch))
        if P["dF1"] or P["dB1"]:
            if p_blend != np.inf:
                raise RooflawError(f"operator {nm}: a routed expert's decode cost varies with the step")
            br.dec_step.append((tF["dF0"].scale(ipi), tF["dF1"].scale(ipi), P["dB0"].scale(ib["decode"]),
                                P["dB1"].scale(ib["decode"])))  # fmt: skip
        else:
            br.dec_const.append((tF["dF0"].scale(ipi), P["dB0"].scale(ib["decode"])))
            br.dec_p.append(p_blend)
        # the assembly's launch rule: an operator with any prefill work launches once per layer and pass
        if P["pF"] or P["pB"]:
            one = Posy.const(1.0)
            launches = launches + (one.times_l() if op["per_layer"] else one)
        if roof in A.ROOF_CLASSES:
            F_tot[roof] = F_tot[roof] + P["pF"] + P["dF0"].scale(n) + P["dF1"].scale(tri)
        B_tot = B_tot + P["pB"] + P["dB0"].scale(n) + P["dB1"].scale(tri)
    per_layer_s = rates.kernel_s * (rates.per_layer + rates.per_moe_layer * moe) + rates.layer_s
    per_layer_s += rates.gemm_s * rates.gemms_per_layer + rates.moe_s * moe  # curves' per-GEMM-call, per-MoE-layer
    eng = Posy.const(per_layer_s).times_l() + Posy.const(
        rates.kernel_s * rates.per_pass + rates.pass_s
    )  # the engine's kernels, per-layer and per-pass overhead (device_rates.engine_overhead)
    # kernels per routed expert touched, with the byte model's coverage stand-ins: E = K/ρ in prefill, B·K or E in
    # a decode step (each at least the expected coverage, so the relaxation stays a bound)
    per_e = rates.kernel_s * rates.per_expert * moe
    e_all = Posy(np.array([per_e * K]), np.array([[1.0 if v == "l" else -1.0 if v == "rho" else 0.0 for v in VARS]]))
    e_dec = e_all if decode_cover == "E" else Posy.const(per_e * wl.batch * K).times_l()
    eng_pre, eng_dec = (eng + e_all, eng + e_dec) if per_e else (eng, eng)
    br.launch_pre, br.launch_dec = launches.scale(rates.overhead), launches.scale(rates.overhead * n)
    br.overhead_pre, br.overhead_dec = eng_pre, eng_dec.scale(n)
    br.overlap = app.overlap  # the numpy and numba backends' flag (roofline._evaluate_chunk: full preset, app set)
    br.memory = _posy(tm, coef, "weights") + _posy(tm, coef, "kv") + _posy(tm, coef, "act")
    ecoef = sc.energy
    if ecoef is None:
        br.has_energy = False
    else:
        br.p_idle = ecoef.p_idle
        br.energy_dyn = A.energy(replace(ecoef, p_idle=0.0), 0.0, F_tot, B_tot)
    return br
