"""The continuous relaxation over the **full** cost preset as a geometric program (cvxpy DGP).

Every cost is built from :data:`rooflaw.constraints.operators.FULL_OPS` and the memory expressions the numerical
evaluator uses (``weight_bytes_expr``, ``kv_cache_bytes_expr``, ``activation_bytes_expr``) -- nothing is typed in.
The architecture symbols are rewritten in the relaxation variables (l, d, r, ρ, gqa):

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
activation reads of the routed experts (T·K·d·b_a in ffn_up/ffn_down) keep it; :func:`k_dependent_ops` reports
them (checked symbolically). The space's points are therefore split into two **branches**, solved as two GPs:

- dense (E = K = 1, moe = 0, ρ = 1), if the space has dense points;
- MoE (moe = 1, K = the smallest top_k of the MoE pairs, ρ between the MoE pairs' smallest and largest K/E), if it
  has MoE points. Every cost is non-decreasing in K at fixed (r, ρ), so this is a lower bound for every MoE point.

The better branch is the relaxation's optimum. Each phase's latency is Σ_ops max(FLOPs/π_op, bytes/β) with layer
ops × l; decode is S_out × one max for the step-constant ops and one max per step for the ops whose cost grows
with the context (QKᵀ, softmax, ·V: exact, S_out maxima each); plus the device's kernel overhead × launches.
Memory and energy are the evaluator's expressions, posynomials. Every expression is checked to be a posynomial
(positive coefficients, real exponents of l, d, r, ρ, gqa only) and refused with the offending term otherwise.
"""

from __future__ import annotations

import math
import time
import warnings
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import sympy as sp

from ..constraints import operators as O
from ..constraints.compile import affine_in_t, decode_step, prefill
from ..constraints.roofline import COMPUTE_POWER_SHARE
from ..constraints.symbols import ARCH, B, S_in, S_out, b_a, b_h, b_kv, b_v, b_w, unfused
from ..errors import Infeasible, RooflawError
from .kkt import VARS, X

#: Workload/precision symbols the templates keep symbolic; numbers per problem.
CONSTS = (B, S_in, S_out, b_w, b_a, b_kv, b_v, b_h, unfused)
Ksym = sp.Symbol("K_topk", positive=True)
_VSYM = tuple(X[v] for v in VARS)
_FIXED_COLS = ("gated", "qkv_bias", "norms_per_layer", "layernorm", "qk_norm_size", "qk_norm_on", "shared_gate",
               "shared_experts")  # fmt: skip
PHASE_COLUMN = {"prefill": "prefill_s", "decode": "decode_s", "total": "total_s"}


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
        return Posy(np.concatenate([self.c, o.c]), np.vstack([self.A, o.A])).merged()

    def scale(self, s: float) -> Posy:
        return Posy(self.c * s, self.A.copy()) if s else Posy.zero()

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
    ops: list[dict[str, Any]]
    #: posynomial templates: name -> [(exponents, index into coefficient vector)]
    posy: dict[str, list[tuple[tuple[float, ...], int]]]
    coef_fn: Any
    what: list[str]
    k_dependent: tuple[str, ...]


def _arch_subs(fixed: Mapping[str, float], moe: int) -> dict[sp.Symbol, sp.Expr]:
    a = ARCH
    l, d, r, rho, gqa = _VSYM
    hd = sp.Integer(int(fixed["head_dim"]))
    subs: dict[sp.Symbol, sp.Expr] = {
        a["layers"]: l, a["d_model"]: d, a["heads"]: d / hd, a["kv_heads"]: d / (hd * gqa), a["head_dim"]: hd,
        a["ffn"]: r * d / Ksym, a["shared_ffn"]: r * d / Ksym, a["experts"]: Ksym / rho, a["top_k"]: Ksym,
        a["moe"]: sp.Integer(moe), a["vocab"]: sp.Integer(int(fixed["vocab"])),
        a["tied"]: sp.Integer(int(fixed["tied"])),
    }  # fmt: skip
    for k in _FIXED_COLS:
        subs[a[k]] = sp.Integer(int(fixed[k]))
    return subs


@lru_cache(maxsize=32)
def _templates(fixed_items: tuple[tuple[str, float], ...], moe: int, decode_cover: str = "BK") -> _Templates:
    fixed = dict(fixed_items)
    subs = _arch_subs(fixed, moe)
    Ecov_pre = ARCH["experts"]  # all experts (exact up to (1 − ρ)^T)
    # decode: min(E, B·K) piecewise -- B·K where B·ρ ≤ 1 (exact at B = 1), E where B·ρ ≥ 1 (exact for dense)
    Ecov_dec = B * ARCH["top_k"] if decode_cover == "BK" else ARCH["experts"]
    exprs: dict[str, sp.Expr] = {}
    ops = []
    for op in O.FULL_OPS:
        pre = lambda e: prefill(sp.sympify(e).xreplace({O.experts_touched: Ecov_pre}))  # noqa: E731
        dec = lambda e: decode_step(sp.sympify(e).xreplace({O.experts_touched: Ecov_dec}))  # noqa: E731
        f0, f1 = affine_in_t(dec(op.flops))
        b0, b1 = affine_in_t(dec(op.bytes))
        parts = {"pF": pre(op.flops), "pB": pre(op.bytes), "dF0": f0, "dF1": f1, "dB0": b0, "dB1": b1}
        for k, e in parts.items():
            exprs[f"{op.name}.{k}"] = sp.sympify(e).xreplace(subs)
        # kernel launches, counted as the evaluator counts them: one per operator with any prefill work
        # (decided per branch below, so a dense model's router, moe = 0, launches nothing)
        ops.append({"name": op.name, "roof": op.roof, "scope": op.scope, "launch": None})
    exprs["weights"] = O.weight_bytes_expr().xreplace(subs)
    exprs["kv"] = O.kv_cache_bytes_expr(B * (S_in + S_out)).xreplace(subs)
    exprs["act"] = O.activation_bytes_expr(S_in).xreplace(subs)
    posy: dict[str, list[tuple[tuple[float, ...], int]]] = {}
    coefs: list[sp.Expr] = []
    what: list[str] = []
    kdep = set()
    for name, e in exprs.items():
        terms = _split_terms(e, name)
        posy[name] = []
        for key, c in terms.items():
            if Ksym in c.free_symbols:
                kdep.add(name.split(".")[0])
            posy[name].append((key, len(coefs)))
            coefs.append(c)
            what.append(name)
    fn = sp.lambdify((*CONSTS, Ksym), coefs, modules="numpy")
    return _Templates(ops, posy, fn, what, tuple(sorted(kdep)))


def space_fixed(space: Any) -> dict[str, float]:
    """The columns the relaxation fixes from ``space`` (see the module docstring)."""
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
@dataclass
class Branch:
    """One branch of the relaxation (dense or MoE) with numbers substituted: posynomials per op and phase."""

    name: str
    K: float
    moe: int
    bounds: dict[str, tuple[float, float]]
    S_out: int
    #: per op: name, scope, prefill (F/π, B/β), decode step-constant (F/π, B/β) or per-step lists
    pre: list[tuple[Posy, Posy]] = field(default_factory=list)
    dec_const: list[tuple[Posy, Posy]] = field(default_factory=list)  # one step (× S_out)
    dec_step: list[tuple[Posy, Posy, Posy, Posy]] = field(default_factory=list)  # a0, a1, b0, b1 (seconds)
    overhead_pre: Posy = field(default_factory=Posy.zero)
    overhead_dec: Posy = field(default_factory=Posy.zero)
    memory: Posy = field(default_factory=Posy.zero)
    energy_dyn: Posy = field(default_factory=Posy.zero)
    p_idle: float = 0.0
    has_energy: bool = True
    k_dependent: tuple[str, ...] = ()

    # numeric evaluation (numpy, vectorised over arrays of x)
    def prefill_s(self, x: Mapping[str, Any]) -> Any:
        out = self.overhead_pre(x)
        for f, b in self.pre:
            out = out + np.maximum(f(x), b(x))
        return out

    def decode_s(self, x: Mapping[str, Any]) -> Any:
        out = self.overhead_dec(x)
        for f, b in self.dec_const:
            out = out + self.S_out * np.maximum(f(x), b(x))
        for a0, a1, b0, b1 in self.dec_step:
            va0, va1, vb0, vb1 = a0(x), a1(x), b0(x), b1(x)
            for s in range(1, self.S_out + 1):
                out = out + np.maximum(va0 + va1 * s, vb0 + vb1 * s)
        return out

    def values(self, x: Mapping[str, Any]) -> dict[str, Any]:
        p, dd = self.prefill_s(x), self.decode_s(x)
        e = self.p_idle * (p + dd) + self.energy_dyn(x) if self.has_energy else np.nan * p
        return {"prefill_s": p, "decode_s": dd, "total_s": p + dd, "memory_bytes": self.memory(x), "energy_j": e}


def _posy(tm: _Templates, coef: np.ndarray, name: str, mult_l: bool = False) -> Posy:
    rows = tm.posy[name]
    if not rows:
        return Posy.zero()
    c = np.array([coef[i] for _, i in rows], dtype=float)
    A = np.array([k for k, _ in rows], dtype=float)
    if np.any(c < 0) or not np.all(np.isfinite(c)):
        j = int(np.flatnonzero(~(c >= 0))[0])
        raise RooflawError(f"{name} is not a posynomial: the term in {dict(zip(VARS, A[j], strict=True))} has "
                           f"coefficient {c[j]:.4g}")  # fmt: skip
    keep = c > 0
    p = Posy(c[keep], A[keep]).merged()
    return p.times_l() if mult_l else p


def build_branch(
    problem: Any, name: str, K: float, moe: int, bounds: dict[str, tuple[float, float]], decode_cover: str = "auto"
) -> Branch:
    """The branch's posynomials with the problem's device, workload and precision substituted.

    ``decode_cover``: the decode stand-in for the experts touched, ``BK`` (B·K) or ``E`` (all experts); ``auto``
    takes E for a dense branch (moe = 0) and B·K otherwise.
    """
    dev, wl, prec = problem.device, problem.workload, problem.precision
    fixed = space_fixed(problem.space)
    if decode_cover == "auto":
        decode_cover = "BK" if moe else "E"
    tm = _templates(tuple(sorted(fixed.items())), moe, decode_cover)
    consts = {B: wl.batch, S_in: wl.input_tokens, S_out: wl.output_tokens, b_w: prec.weights.bytes,
              b_a: prec.activations.bytes, b_kv: prec.kv.bytes, b_v: prec.vector_bytes, b_h: prec.head_format.bytes,
              unfused: 1.0 if wl.attention == "unfused" else 0.0}  # fmt: skip
    coef = np.asarray([float(np.asarray(v)) for v in tm.coef_fn(*[float(consts[s]) for s in CONSTS], float(K))])
    ce, me = float(dev.compute_efficiency), float(dev.memory_efficiency)
    raw = {"linear": float(dev.roof(prec.linear_dtype)[1]), "attention": float(dev.roof(prec.attention_dtype)[1]),
           "vector": float(dev.vector_flops)}  # fmt: skip
    beta_raw = float(dev.memory_bandwidth)
    ibeta = 1.0 / (beta_raw * me)
    n = int(wl.output_tokens)
    br = Branch(name, float(K), moe, bounds, n, k_dependent=tm.k_dependent if moe else ())
    launches = Posy.zero()
    F_tot, B_tot = {c: Posy.zero() for c in raw}, Posy.zero()
    for op in tm.ops:
        nm, lay = op["name"], op["scope"] == "layer"
        ipi = 1.0 / (raw[op["roof"]] * ce) if op["roof"] in raw else 0.0
        P = {k: _posy(tm, coef, f"{nm}.{k}", lay) for k in ("pF", "pB", "dF0", "dF1", "dB0", "dB1")}
        if op["roof"] not in raw and (P["pF"] or P["dF0"] or P["dF1"]):
            raise RooflawError(f"operator {nm}: FLOPs on a memory-only roof")
        br.pre.append((P["pF"].scale(ipi), P["pB"].scale(ibeta)))
        if P["dF1"] or P["dB1"]:
            br.dec_step.append((P["dF0"].scale(ipi), P["dF1"].scale(ipi), P["dB0"].scale(ibeta),
                                P["dB1"].scale(ibeta)))  # fmt: skip
        else:
            br.dec_const.append((P["dF0"].scale(ipi), P["dB0"].scale(ibeta)))
        n_launch = op["launch"] if op["launch"] is not None else float(bool(P["pF"] or P["pB"]))
        if n_launch:  # per layer and pass, as the evaluator counts it
            one = Posy.const(n_launch)
            launches = launches + (one.times_l() if lay else one)
        tri = n * (n + 1) / 2
        if op["roof"] in raw:
            F_tot[op["roof"]] = F_tot[op["roof"]] + P["pF"] + P["dF0"].scale(n) + P["dF1"].scale(tri)
        B_tot = B_tot + P["pB"] + P["dB0"].scale(n) + P["dB1"].scale(tri)
    ko = float(dev.kernel_overhead or 0.0)
    br.overhead_pre, br.overhead_dec = launches.scale(ko), launches.scale(ko * n)
    br.memory = (_posy(tm, coef, "weights") + _posy(tm, coef, "kv")) + _posy(tm, coef, "act")
    if dev.energy_per_flop is not None and dev.energy_per_byte is not None:
        br.p_idle = 0.0
        br.energy_dyn = (F_tot["linear"] + F_tot["attention"] + F_tot["vector"]).scale(float(dev.energy_per_flop))
        br.energy_dyn = br.energy_dyn + B_tot.scale(float(dev.energy_per_byte))
    elif dev.power_peak is not None:
        dyn = float(dev.power_peak) - float(dev.power_idle or 0.0)
        br.p_idle = float(dev.power_idle or 0.0)
        busy = Posy.zero()
        for c, p in F_tot.items():
            busy = busy + p.scale(1.0 / raw[c])
        br.energy_dyn = busy.scale(dyn * COMPUTE_POWER_SHARE) + B_tot.scale(dyn * (1 - COMPUTE_POWER_SHARE) / beta_raw)
    else:
        br.has_energy = False
    return br


def branches(problem: Any) -> list[Branch]:
    """The dense and/or MoE branches of ``problem``'s space (see the module docstring)."""
    sp_ = problem.space
    pairs = [tuple(p) for p in sp_.choices()["moe"]]
    b = sp_.bounds()
    kk = [k for _, k in pairs]
    ratio_lo, ratio_hi = b["r"][0] / min(kk), b["r"][1] / max(kk)  # per-expert ffn/d range of the width table
    base = {v: (float(b[v][0]), float(b[v][1])) for v in ("l", "d", "gqa")}
    out = []
    dense = [p for p in pairs if p[0] == 1]
    moe = [p for p in pairs if p[0] > 1]
    if dense:
        bb = dict(base, r=(ratio_lo, ratio_hi), rho=(1.0, 1.0))
        out.append(build_branch(problem, "dense", 1.0, 0, bb))
    if moe:
        ks = [k for _, k in moe]
        rhos = [k / e for e, k in moe]
        bb = dict(base, r=(ratio_lo * min(ks), ratio_hi * max(ks)), rho=(min(rhos), max(rhos)))
        knee = 1.0 / problem.workload.batch  # B·K ≤ E ⟺ ρ ≤ 1/B
        if knee >= bb["rho"][1]:
            out.append(build_branch(problem, "moe", float(min(ks)), 1, bb, "BK"))
        elif knee <= bb["rho"][0]:
            out.append(build_branch(problem, "moe", float(min(ks)), 1, bb, "E"))
        else:  # min(E, B·K) exactly: one GP on each side of the knee
            out.append(build_branch(problem, "moe", float(min(ks)), 1, dict(bb, rho=(bb["rho"][0], knee)), "BK"))
            out.append(build_branch(problem, "moe-wide", float(min(ks)), 1, dict(bb, rho=(knee, bb["rho"][1])), "E"))
    return out


# ---- the GP --------------------------------------------------------------------------------------
class _Basis:
    """All monomials of one cvxpy problem, computed once with ``gmatmul``; posynomials index into it."""

    def __init__(self) -> None:
        self.keys: dict[tuple[float, ...], int] = {}

    def idx(self, p: Posy) -> list[int]:
        out = []
        for row in p.A:
            k = tuple(np.round(row, 12))
            out.append(self.keys.setdefault(k, len(self.keys)))
        return out

    def expr(self, u: Any, log_ref: np.ndarray):
        """Monomials of x = ref·u (u ~ 1 over the box: better conditioned exponential cones)."""
        import cvxpy as cp

        A = np.array(list(self.keys), dtype=float).reshape(-1, len(VARS))
        self.log_ref = log_ref
        self.M = cp.gmatmul(A, u)
        return self.M

    def factor(self, A: np.ndarray) -> np.ndarray:
        return np.exp(A @ self.log_ref)


def _cvx_posy(basis: _Basis, p: Posy, idx: list[int], s: float):
    import cvxpy as cp

    c = p.c * basis.factor(p.A) / s
    if len(c) == 1:
        return float(c[0]) * basis.M[idx[0]]
    return cp.sum(cp.multiply(c, basis.M[idx]))


def _latency_exprs(br: Branch, basis: _Basis, s: float) -> dict[str, Any]:
    """cvxpy expressions of prefill and decode latency / s, and the pending index lists (two passes)."""
    import cvxpy as cp

    def mx(f: Posy, b: Posy, mult: float = 1.0):
        if f and b:
            return cp.maximum(_cvx_posy(basis, f, basis.idx(f), s / mult), _cvx_posy(basis, b, basis.idx(b), s / mult))
        p = f or b
        return _cvx_posy(basis, p, basis.idx(p), s / mult) if p else None

    pre = [mx(f, b) for f, b in br.pre]
    if br.overhead_pre:
        pre.append(_cvx_posy(basis, br.overhead_pre, basis.idx(br.overhead_pre), s))
    dec = [mx(f, b, br.S_out) for f, b in br.dec_const]
    steps = np.arange(1, br.S_out + 1, dtype=float)
    for a0, a1, b0, b1 in br.dec_step:
        side = []
        for p0, p1 in ((a0, a1), (b0, b1)):
            p = p0 + p1  # union of monomials; per-step coefficient c0 + c1·t > 0
            if not p:
                side.append(None)
                continue
            idx = basis.idx(p)
            c0 = np.array([_coef_of(p0, row) for row in p.A])
            c1 = np.array([_coef_of(p1, row) for row in p.A])
            C = (c0[None, :] + c1[None, :] * steps[:, None]) * basis.factor(p.A)[None, :] / s
            side.append(C @ basis.M[idx] if len(idx) > 1 else C[:, 0] * basis.M[idx[0]])
        if side[0] is not None and side[1] is not None:
            dec.append(cp.sum(cp.maximum(side[0], side[1])))
        else:
            dec.append(cp.sum(side[0] if side[0] is not None else side[1]))
    if br.overhead_dec:
        dec.append(_cvx_posy(basis, br.overhead_dec, basis.idx(br.overhead_dec), s))
    f = lambda xs: cp.sum(cp.hstack([e for e in xs if e is not None]))  # noqa: E731
    return {"prefill": f(pre), "decode": f(dec)}


def _coef_of(p: Posy, row: np.ndarray) -> float:
    if not p:
        return 0.0
    hit = np.all(np.abs(p.A - row[None, :]) < 1e-12, axis=1)
    return float(p.c[hit].sum())


#: Compiled cvxpy problems, reused when only the budgets change (they are cvxpy Parameters): a budget
#: sweep on one device/workload/space pays cvxpy's DGP compilation once.
_COMPILED: OrderedDict[str, tuple] = OrderedDict()
_COMPILED_MAX = 32


def _compiled_key(problem: Any, br: Branch, lmons: Any, budgets: Mapping[str, float], solver: str | None) -> str:
    return repr((
        problem.law.name, sorted(problem.law.params.items()), lmons, problem.device.to_dict(),
        problem.workload.to_dict(), problem.precision.name, getattr(problem.space, "name", ""), problem.phase,
        problem.preset, sorted(budgets), br.name, br.K, sorted(br.bounds.items()), solver,
    ))  # fmt: skip


def _solve_branch(problem, br: Branch, lmons, budgets, fix, solver):

    bounds = dict(br.bounds)
    for k, v in (fix or {}).items():
        bounds[k] = (float(v), float(v))
    key = None if fix else _compiled_key(problem, br, lmons, budgets, solver)
    if key is not None and key in _COMPILED:
        _COMPILED.move_to_end(key)
        prob, x, named, ref, params = _COMPILED[key]
    else:
        prob, x, named, ref, params = _build_branch_problem(problem, br, lmons, budgets, bounds)
        if key is not None:
            _COMPILED[key] = (prob, x, named, ref, params)
            while len(_COMPILED) > _COMPILED_MAX:
                _COMPILED.popitem(last=False)
    for k, par in params.items():
        par.value = float(budgets[k])
    status = _run(prob, solver)
    name = prob.solver_stats.solver_name if prob.solver_stats else ""
    out: dict[str, Any] = {"status": status, "bounds": bounds, "solver": name}
    if status in ("optimal", "optimal_inaccurate"):
        xv = {v: min(max(float(x.value[i]) * ref[i], bounds[v][0]), bounds[v][1]) for i, v in enumerate(VARS)}
        out["x"] = xv
        out["duals"] = {
            k: float(np.atleast_1d(c.dual_value)[0]) if c.dual_value is not None else float("nan")
            for k, c in named.items()
        }
    return out


def _build_branch_problem(problem, br: Branch, lmons, budgets, bounds):
    """The cvxpy DGP of one branch, with the budgets as positive Parameters (set before each solve)."""
    import cvxpy as cp

    x = cp.Variable(len(VARS), pos=True, name="u")  # x / ref
    basis = _Basis()
    params = {k: cp.Parameter(pos=True, name=f"{k}_budget", value=float(budgets[k])) for k in budgets}

    def build():
        cons = []
        named = {}
        lat = None
        if "latency" in budgets or "energy" in budgets:
            lat = _latency_exprs(br, basis, 1.0)
        if "latency" in budgets:
            e = {"prefill": lat["prefill"], "decode": lat["decode"], "total": lat["prefill"] + lat["decode"]}
            named["latency"] = e[problem.phase] <= params["latency"]
        named["memory"] = _cvx_posy(basis, br.memory, basis.idx(br.memory), 1.0) <= params["memory"]
        if "energy" in budgets:
            en = _cvx_posy(basis, br.energy_dyn, basis.idx(br.energy_dyn), 1.0)
            if br.p_idle:
                en = en + br.p_idle * (lat["prefill"] + lat["decode"])
            named["energy"] = en <= params["energy"]
        cons += list(named.values())
        return named, cons

    _register(br, basis)  # every monomial first, then one gmatmul for all of them
    lo = np.array([bounds[v][0] for v in VARS])
    hi = np.array([bounds[v][1] for v in VARS])
    ref = np.sqrt(lo * hi)
    basis.expr(x, np.log(ref))
    named, cons = build()
    fixed_mask = lo == hi
    for i in range(len(VARS)):
        if fixed_mask[i]:
            cons.append(x[i] == 1.0)
        else:
            cons += [x[i] >= lo[i] / ref[i], x[i] <= hi[i] / ref[i]]
    x0 = {v: math.sqrt(bounds[v][0] * bounds[v][1]) for v in VARS}
    f0 = sum(cc * np.prod([x0[v] ** a for v, a in p.items()]) for cc, p in lmons)
    terms = []
    for cc, p in lmons:
        m = cc / f0
        for v, a in p.items():
            i = VARS.index(v)
            m = m * ref[i] ** a * (cp.power(x[i], a) if a != 1 else x[i])
        terms.append(m)
    obj = cp.sum(cp.hstack(terms)) if len(terms) > 1 else terms[0]
    return cp.Problem(cp.Minimize(obj), cons), x, named, ref, params


#: Clarabel settings tried in turn (tight tolerances first; a shorter step or no equilibration when Clarabel stalls
#: with "insufficient progress", which happens on some devices' exponential cones), then Clarabel's defaults.
_TIGHT = {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10, "tol_ktratio": 1e-8}
_LADDER = (_TIGHT, {**_TIGHT, "max_step_fraction": 0.9}, {**_TIGHT, "equilibrate_enable": False},
           {"tol_gap_abs": 1e-8, "tol_gap_rel": 1e-8, "tol_feas": 1e-8}, {"max_step_fraction": 0.9}, {})  # fmt: skip


def _run(prob: Any, solver: str | None) -> str:
    """Solve ``prob`` (DGP); the status of the first accurate solve, else the last one's."""
    import cvxpy as cp

    ladder = _LADDER if solver == "CLARABEL" else ({},)
    status, err = "solver_error", None
    for opts in ladder:
        kw = {"solver": solver, **opts} if solver else {}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                prob.solve(gp=True, **kw)
        except cp.error.SolverError as e:
            err = e
            continue
        status = prob.status
        if status in ("optimal", "infeasible"):
            break
    if status == "solver_error":
        raise RooflawError(f"GP solver failed: {err}")
    return status


def _register(br: Branch, basis: _Basis) -> None:
    for f, b in br.pre + br.dec_const:
        basis.idx(f), basis.idx(b)
    for a0, a1, b0, b1 in br.dec_step:
        basis.idx(a0 + a1), basis.idx(b0 + b1)
    for p in (br.overhead_pre, br.overhead_dec, br.memory, br.energy_dyn):
        basis.idx(p)


def _corner(br: Branch) -> dict[str, float]:
    """The box corner where every full-preset cost is smallest (costs increase in l, d, r, decrease in ρ, gqa)."""
    b = br.bounds
    return {"l": b["l"][0], "d": b["d"][0], "r": b["r"][0], "rho": b["rho"][1], "gqa": b["gqa"][1]}


def solve_gp_full(problem: Any, fix: Mapping[str, float] | None = None, solver: str | None = None) -> dict[str, Any]:
    """The full-preset relaxation of ``problem`` as GPs (one per branch); the best branch's optimum.

    Returns the keys of :func:`rooflaw.solver.gp.solve_gp` plus ``branch``, ``branches`` (loss or status per
    branch) and ``notes``. Raises :class:`Infeasible` when no branch is feasible.
    """
    import cvxpy as cp

    from .closed_form import problem_budgets
    from .gp import law_posynomial

    t0 = time.perf_counter()
    L, const, lmons = law_posynomial(problem)
    budgets = problem_budgets(problem)
    brs = branches(problem)
    if "energy" in budgets and not all(b.has_energy for b in brs):
        raise RooflawError(f"energy budget: device {problem.device.id} has no power or energy figures")
    t1 = time.perf_counter()
    solver = solver or ("CLARABEL" if "CLARABEL" in cp.installed_solvers() else None)
    best, summary = None, {}
    for br in brs:
        if fix and "rho" in fix and not (br.bounds["rho"][0] - 1e-12 <= fix["rho"] <= br.bounds["rho"][1] + 1e-12):
            summary[br.name] = "excluded by fix"
            continue
        o = _solve_branch(problem, br, lmons, budgets, fix, solver)
        if "x" not in o:
            summary[br.name] = o["status"]
            continue
        o["loss"] = float(L.xreplace({X[v]: o["x"][v] for v in VARS}))
        summary[br.name] = o["loss"]
        if best is None or o["loss"] < best[1]["loss"]:
            best = (br, o)
    t2 = time.perf_counter()
    if best is None:
        raise _infeasible_full(problem, brs, budgets)
    br, o = best
    vals = br.values(o["x"])
    col = {"latency": PHASE_COLUMN[problem.phase], "memory": "memory_bytes", "energy": "energy_j"}
    values = {k: float(vals[col[k]]) for k in budgets}
    active = tuple(k for k in budgets if values[k] >= budgets[k] * (1 - 1e-5))
    notes = [
        "continuous optimum from the full-preset relaxation (roofline max(compute, memory) per operator, attention "
        "S² terms, embeddings and LM head, KV cache and activations in memory; per-step decode context)",
        "expert coverage stand-in: all E experts in prefill (exact to (1-ρ)^T), min(E, B·K) in decode"
        + (
            " (an upper bound at batch > 1, ≤ 1/(1-(1-1/B)^B) × the expected coverage)"
            if problem.workload.batch > 1
            else " (exact at batch 1)"
        ),
        f"branches: {', '.join(f'{k} {v:.6g}' if isinstance(v, float) else f'{k} {v}' for k, v in summary.items())}"
        + (f"; MoE branch at K = {br.K:g} (top_k enters {', '.join(br.k_dependent)})" if br.moe else ""),
    ]
    return {
        "x": o["x"], "loss": o["loss"], "constant": const, "active": active, "values": values, "budgets": budgets,
        "status": o["status"], "solver": o["solver"], "duals": o["duals"], "seconds": time.perf_counter() - t0,
        "build_seconds": t1 - t0, "solve_seconds": t2 - t1, "preset": "full", "branch": br.name,
        "branches": summary, "notes": notes, "all_values": {k: float(v) for k, v in vals.items()},
    }  # fmt: skip


def _infeasible_full(problem: Any, brs: list[Branch], budgets: dict[str, float]) -> Infeasible:
    col = {"latency": PHASE_COLUMN[problem.phase], "memory": "memory_bytes", "energy": "energy_j"}
    smallest = {k: min(float(b.values(_corner(b))[col[k]]) for b in brs) for k in budgets}
    sname = getattr(problem.space, "name", "space")
    for k in ("latency", "memory", "energy"):
        if k in budgets and smallest[k] > budgets[k]:
            what = {"latency": f"{problem.phase} latency", "memory": "memory", "energy": "energy"}[k]
            unit = {"latency": ("ms", 1e3), "memory": ("GB", 1e-9), "energy": ("J", 1.0)}[k]
            return Infeasible(
                f"{what} ≥ {smallest[k] * unit[1]:.4g} {unit[0]} for every architecture of the continuous relaxation "
                f"of space '{sname}' (full model); budget {budgets[k] * unit[1]:.4g} {unit[0]}",
                binding=k, smallest=smallest[k], budget=budgets[k],
            )  # fmt: skip
    return Infeasible("the budgets cannot be met together by the full-preset relaxation", binding="+".join(budgets))


__all__ = ["Branch", "Posy", "branches", "build_branch", "k_dependent_ops", "solve_gp_full", "space_fixed"]
