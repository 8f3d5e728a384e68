"""One compile step: the sympy operator expressions become one cached numpy function per preset."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import numpy as np
import sympy as sp

from . import operators as O
from .symbols import ARCH, PRECISION, WORKLOAD, B, C, S_in, Sq, T, t

ARGS = (*ARCH.values(), *WORKLOAD, *PRECISION)
#: Inverse roofs (s/FLOP) of the three compute classes and inverse bandwidth (s/byte), for the bulk path.
INV_ROOF = {c: sp.Symbol(f"inv_{c}", positive=True) for c in ("linear", "attention", "vector")}
INV_BETA = sp.Symbol("inv_beta", positive=True)
ARG_NAMES = tuple(str(s) for s in ARGS)


def prefill(expr: sp.Expr) -> sp.Expr:
    """Substitute the prefill phase: T = B·S_in tokens, query length and context S_in."""
    expr = sp.sympify(expr).subs(O.experts_touched, O.EXPERTS_TOUCHED)
    return expr.subs({T: B * S_in, Sq: S_in, C: S_in}, simultaneous=True)


def decode_step(expr: sp.Expr) -> sp.Expr:
    """Substitute decode step t: T = B, query length 1, context S_in + t."""
    expr = sp.sympify(expr).subs(O.experts_touched, O.EXPERTS_TOUCHED)
    return expr.subs({T: B, Sq: 1, C: S_in + t}, simultaneous=True)


def affine_in_t(expr: sp.Expr) -> tuple[sp.Expr, sp.Expr]:
    """Split ``expr`` = e0 + e1·t (exactly; raises if it is not affine in the step index t)."""
    e1 = sp.expand(sp.diff(expr, t))
    if sp.expand(sp.diff(e1, t)) != 0:
        raise AssertionError(f"decode cost is not affine in t: {expr}")
    return expr.subs(t, 0), e1


@dataclass(frozen=True)
class Compiled:
    """Numpy functions for one preset: each returns a list of arrays in the documented order."""

    ops: tuple[O.Op, ...]
    #: f(*ARGS) -> [prefill flops, prefill bytes] per op, then decode [f0, f1, b0, b1] per op,
    #: then the totals below.
    phases: Callable[..., list]
    #: f(*ARGS) -> [M, N, K, groups] per GEMM op for prefill, then for decode.
    gemms: Callable[..., list]
    gemm_ops: tuple[int, ...]
    #: per op: True when its decode FLOPs and bytes do not depend on the step index.
    step_constant: tuple[bool, ...]
    #: ``phases`` returns n_phase_values per-op values, then [weight bytes, kv bytes, activation
    #: bytes, params total, params active, prefill FLOPs of linear/attention/vector ops, decode
    #: FLOPs of the same three, prefill bytes, decode bytes] -- summed over layers and steps --
    #: and the number of kernels launched per pass, per layer and at model level.
    n_phase_values: int
    #: f(*ARGS, inv_linear, inv_attention, inv_vector, inv_beta) -> [prefill time per layer,
    #: prefill time of model-level ops, decode time per layer, decode time model-level (step-
    #: constant ops, all steps)], then [a0, a1, b0, b1] (seconds) of each step-varying op, then the totals.
    fast: Callable[..., list]
    varying: tuple[int, ...]


@cache
def compile_preset(preset: str) -> Compiled:
    """Lambdify the operator list of ``preset`` (``full`` or ``paper``); cached per process."""
    from ..arch.architecture import param_counts

    ops = O.FULL_OPS if preset == "full" else O.PAPER_OPS
    exprs: list[sp.Expr] = []
    for op in ops:
        exprs += [prefill(op.flops), prefill(op.bytes)]
    constant = []
    for op in ops:
        f0, f1 = affine_in_t(decode_step(op.flops))
        b0, b1 = affine_in_t(decode_step(op.bytes))
        exprs += [f0, f1, b0, b1]
        constant.append(f1 == 0 and b1 == 0)
    gemm_ops = tuple(i for i, op in enumerate(ops) if op.gemm is not None)
    gexprs: list[sp.Expr] = []
    for phase in (prefill, decode_step):
        for i in gemm_ops:
            gexprs += [phase(e) for e in ops[i].gemm]  # type: ignore[union-attr]
    counts = param_counts(ARCH)
    S_out = sp.Symbol("S_out", positive=True)
    weights = O.weight_bytes_expr() if preset == "full" else O.paper_weight_bytes_expr()
    mem = [
        weights,
        O.kv_cache_bytes_expr(B * (S_in + S_out))
        if preset == "full"
        else 2
        * ARCH["layers"]
        * B
        * (S_in + S_out)
        * ARCH["d_model"]
        * sp.Symbol("b_kv", positive=True)
        * ARCH["kv_heads"]
        / ARCH["heads"],
        O.activation_bytes_expr(S_in) if preset == "full" else sp.Integer(0),
        counts["total"],
        counts["active"],
    ]
    lay = ARCH["layers"]
    S_o = sp.Symbol("S_out", positive=True)
    tot = {("pre", c): sp.Integer(0) for c in ("linear", "attention", "vector")}
    tot.update({("dec", c): sp.Integer(0) for c in ("linear", "attention", "vector")})
    bpre = bdec = sp.Integer(0)
    for i, op in enumerate(ops):
        mult = lay if op.scope == "layer" else 1
        f0, f1, b0, b1 = exprs[2 * len(ops) + 4 * i : 2 * len(ops) + 4 * i + 4]
        if op.roof in ("linear", "attention", "vector"):
            tot[("pre", op.roof)] += mult * exprs[2 * i]
            tot[("dec", op.roof)] += mult * (S_o * f0 + f1 * S_o * (S_o + 1) / 2)
        bpre += mult * exprs[2 * i + 1]
        bdec += mult * (S_o * b0 + b1 * S_o * (S_o + 1) / 2)
    mem += [tot[("pre", c)] for c in ("linear", "attention", "vector")]
    mem += [tot[("dec", c)] for c in ("linear", "attention", "vector")]
    mem += [bpre, bdec]
    # kernels launched per pass (operators with any work), for the device's per-launch overhead
    kern = {"layer": sp.Integer(0), "model": sp.Integer(0)}
    for i, op in enumerate(ops):
        kern[op.scope] += sp.sign(exprs[2 * i] + exprs[2 * i + 1])
    mem += [kern["layer"], kern["model"]]
    lam = lambda ex, extra=(): sp.lambdify(  # noqa: E731
        (*ARGS, *extra), ex, modules=[{"Max": np.maximum}, "numpy"], cse=True
    )
    both = lam(exprs + mem)
    n_ph = len(exprs)
    # The bulk path: roofline maxima summed inside one generated function.
    nops = len(ops)
    pre_sum = {"layer": sp.Integer(0), "model": sp.Integer(0)}
    dec_sum = {"layer": sp.Integer(0), "model": sp.Integer(0)}
    varying: list[int] = []
    vexprs: list[sp.Expr] = []
    for i, op in enumerate(ops):
        ipi = INV_ROOF.get(op.roof, sp.Integer(0))
        F, By = exprs[2 * i], exprs[2 * i + 1]
        f0, f1, b0, b1 = exprs[2 * nops + 4 * i : 2 * nops + 4 * i + 4]
        if preset == "paper":
            pre_sum[op.scope] += F * ipi
            dec_sum[op.scope] += (S_o * b0 + b1 * S_o * (S_o + 1) / 2) * INV_BETA
            continue
        pre_sum[op.scope] += sp.Max(F * ipi, By * INV_BETA)
        if constant[i]:
            dec_sum[op.scope] += S_o * sp.Max(f0 * ipi, b0 * INV_BETA)
        else:
            varying.append(i)
            vexprs += [f0 * ipi, f1 * ipi, b0 * INV_BETA, b1 * INV_BETA]
    fast_exprs = [pre_sum["layer"], pre_sum["model"], dec_sum["layer"], dec_sum["model"], *vexprs, *mem]
    fast = lam(fast_exprs, (*INV_ROOF.values(), INV_BETA))
    return Compiled(ops, both, lam(gexprs), gemm_ops, tuple(constant), n_ph, fast, tuple(varying))
