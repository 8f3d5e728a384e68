"""The numpy backend's compile step: the assembly's expressions become cached numpy functions.

One compiled model per (preset, layer kinds): :func:`assembly.place` and :func:`assembly.part_times` give the
expressions, ``sympy.lambdify`` (with common-subexpression elimination) turns them into two functions over
candidate columns -- ``fast`` (phase times summed inside the generated code, for bulk tables) and ``parts``
(per-part values, for the per-operator breakdown) -- and :mod:`.roofline` runs them.
"""

from __future__ import annotations

import builtins
import functools
import inspect
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import sympy as sp

from . import assembly as A
from . import fused_prefill as FP
from . import moe_padding as PAD
from . import moe_reread as RR
from . import operators as O
from . import streams as ST
from .symbols import ARCH, PRECISION, STACK, WORKLOAD, sym

ARGS = (*ARCH.values(), *STACK.values(), *WORKLOAD, *PRECISION)
ARG_NAMES = tuple(str(s) for s in ARGS)


def args_for(kinds: frozenset[str]) -> tuple[sp.Symbol, ...]:
    """The architecture, stack, workload and precision arguments of the model for layer ``kinds``: :data:`ARGS`,
    plus the stack columns of the kinds in ``kinds`` registered from outside rooflaw (after the built-in ones)."""
    extra = [sym(c) for c in stack_columns_of(kinds) if c not in STACK]
    return (*ARCH.values(), *STACK.values(), *extra, *WORKLOAD, *PRECISION) if extra else ARGS


def kinds_tag(kinds: frozenset[str]) -> str | None:
    """The disk-cache tag of a model for layer ``kinds``: their names (``uniform``: none), plus, for a kind registered
    from outside rooflaw (whose ops are not in the package source the cache key hashes), a hash of what the model
    reads of it -- its ops and its parameter, cache and derived terms over the symbols. None: not cacheable."""
    import hashlib

    from ..arch.layer_kinds import LAYER_KINDS

    tag = "+".join(sorted(kinds)) or "uniform"
    outside = [LAYER_KINDS[k] for k in sorted(kinds) if k in LAYER_KINDS and not LAYER_KINDS[k].builtin]
    if not outside:
        return tag
    cols = {**ARCH, **{c: sym(c) for c in stack_columns_of(kinds)}}
    h = hashlib.sha256()
    for k in outside:
        terms = [k.params, k.cache_token, k.cache_state, *k.derived.values()]
        try:
            vals = [None if f is None else sp.srepr(sp.sympify(f(cols))) for f in terms]
        except Exception:  # noqa: BLE001 - a term not written over symbols: compile per process
            return None
        fields = (k.name, k.count, k.slot, k.columns, k.in_base, k.window, k.full_context, sorted(k.derived))
        h.update(repr((fields, vals, [repr(op) for op in k.ops])).encode())
    return f"{tag}-{h.hexdigest()[:16]}"


def stack_columns_of(kinds: frozenset[str]) -> tuple[str, ...]:
    from ..arch.layer_kinds import stack_columns

    return stack_columns(kinds)


#: The rate arguments after the inverse roofs: the stream classes' inverse bandwidths, the experts' blend exponent
#: half-rate width and inverse grouped-GEMM fraction, their padded rows' switch (:mod:`.moe_padding`), their
#: re-read share and 1/L2 bytes (:mod:`.moe_reread`),
#: decode attention's occupancy ramp and split, wave seconds and SMs, the GEMMs' blend exponent (tile/wave model),
#: the per-launch overhead, a fused prefill kernel's block, wave seconds and blend exponent, its softmax's seconds
#: per pair and p-norm exponent (:mod:`.fused_prefill`)
#: (their values in this order: :meth:`device_rates.Rates.stream_args`).
RATE_ARGS = (ST.INV_BETA, ST.INV_STREAM["kv"], ST.INV_STREAM["experts"], ST.MOE_BLEND, ST.MOE_HALF, ST.INV_MOE,
             PAD.MOE_PAD, PAD.MOE_PAD_DEC, RR.MOE_REREAD, RR.INV_L2, ST.DECODE_HALF,
             ST.DECODE_SPLIT, ST.DECODE_WAVE, ST.SMS, ST.GEMM_BLEND, A.OVERHEAD,
             FP.ATTN_BLOCK, FP.PREFILL_WAVE, FP.PREFILL_BLEND, FP.SOFTMAX_S, FP.SOFTMAX_P)  # fmt: skip
_LAMBDIFY_FUNCS: dict[str, Any] = {"Max": np.maximum, "Min": np.minimum, "nonzero": np.sign,
                                   "blend": ST.blend_values, "blocked": FP.blocked_values,
                                   "ncdf": PAD.ncdf_values}  # fmt: skip
LAMBDIFY_MODULES: list[dict[str, Any] | str] = [_LAMBDIFY_FUNCS, "numpy"]


@dataclass(frozen=True)
class Compiled:
    """Numpy functions for one preset and set of layer kinds.

    Both take ``(*ARGS, *ipi_pre, *ipi_dec, *RATE_ARGS)`` with one inverse roof (s/FLOP, 0 for memory ops) per
    part and phase. ``fast`` returns [prefill s, step-constant decode s] summed over
    parts and layers, then (count, steps, a0, a1, b0, b1) per step-varying decode segment, then the totals
    (:data:`assembly.TOTAL_KEYS`). ``parts`` returns, per part, [count, prefill FLOPs, bytes, seconds,
    compute s, memory s, decode FLOPs, bytes, step-constant seconds, compute-bound steps], then its varying
    segments, then the totals. ``gemms`` returns (M, N, K, groups) per GEMM part for prefill, then decode.
    """

    names: tuple[str, ...]
    roofs: tuple[str, ...]
    scopes: tuple[str, ...]
    n_varying: tuple[int, ...]  # varying decode segments per part
    fast: Callable[..., list]
    parts: Callable[..., list]
    gemms: Callable[..., list]
    gemm_parts: tuple[int, ...]
    args: tuple[str, ...] = ARG_NAMES  # names of the leading arguments (architecture ... precision)


@cache
def _namespace() -> dict:
    """The globals lambdify gives its functions (built once per process: each lambdify call re-imports them)."""
    ns = dict(sp.lambdify((), 0, modules=LAMBDIFY_MODULES).__globals__)
    ns.setdefault("reduce", functools.reduce)  # lambdify adds it only for Max/Min of > 2 arguments
    return ns


def _globals_for(code: types.CodeType) -> dict | None:
    """lambdify's namespace restricted to the global names ``code`` reads, resolved with lambdify's precedence
    (the ``LAMBDIFY_MODULES`` mapping, then ``from numpy import *``, then builtins), or None for a name found in
    neither.
    Building lambdify's full namespace runs ``from numpy import *``, which imports numpy.testing and f2py: the
    largest cost of loading a cached evaluator in a fresh process."""
    names: set[str] = set()
    todo = [code]
    while todo:
        c = todo.pop()
        names.update(c.co_names)
        todo += [k for k in c.co_consts if isinstance(k, types.CodeType)]
    first, exported = _LAMBDIFY_FUNCS, set(np.__all__)
    ns: dict = {}
    for n in names:
        if n in first:
            ns[n] = first[n]
        elif n in exported:
            ns[n] = getattr(np, n)
        elif n == "reduce":
            ns[n] = functools.reduce
        elif not hasattr(builtins, n) and n != "_lambdifygenerated":
            return None
    return ns


def _from_source(src: str):
    """Rebuild a lambdified function from its generated source, in lambdify's namespace (the names it reads)."""
    code = compile(src, "<lambdifygenerated>", "exec")
    ns = _globals_for(code)
    ns = dict(_namespace()) if ns is None else ns
    exec(code, ns)  # noqa: S102 - source generated by sympy.lambdify and cached by us
    fn = ns["_lambdifygenerated"]
    missing = [n for n in fn.__code__.co_names if n not in ns and not hasattr(builtins, n)]
    if missing:
        raise NameError(f"cached evaluator needs {missing}")
    return fn


@cache
def compile_preset(preset: str, kinds: frozenset[str] = frozenset(), tiles: bool = False) -> Compiled:
    """The compiled model of ``preset`` for a stack with layer ``kinds`` (empty: uniform); ``tiles``: the tile/wave
    model's variant (its GEMMs blend at their round corner, :func:`.streams.roofline_time`).

    Cached per process, and on disk (:mod:`rooflaw.cache`) as the generated source keyed by the
    source of the cost-model modules, so a new process skips the symbolic work.
    """
    from .. import cache as disk
    from ..arch import architecture
    from . import symbols

    A.get_preset(preset)
    ktag = kinds_tag(kinds)
    if ktag is None:
        return _compile_preset(preset, kinds, tiles)
    tag = f"compile-{preset}-{ktag}" + "-tiles" * tiles
    mods = (O, symbols, architecture, A, sys.modules[__name__])
    key = disk.source_key(tag, *mods)
    hit = disk.load(key)
    if hit is not None:
        try:
            fns = {k: _from_source(hit[k]) for k in ("fast", "parts", "gemms")}
            names, roofs, scopes, n_varying = hit["meta"]
            gp, args = tuple(hit["gemm_parts"]), tuple(hit.get("args", ARG_NAMES))
            return Compiled(names, roofs, scopes, n_varying, fns["fast"], fns["parts"], fns["gemms"], gp, args)
        except Exception:  # noqa: BLE001 - a stale or broken entry: derive again
            pass
    comp = _compile_preset(preset, kinds, tiles)
    meta = (comp.names, comp.roofs, comp.scopes, comp.n_varying)
    disk.store(key, {
        "fast": inspect.getsource(comp.fast), "parts": inspect.getsource(comp.parts),
        "gemms": inspect.getsource(comp.gemms), "meta": meta, "gemm_parts": comp.gemm_parts, "args": comp.args,
    })  # fmt: skip
    return comp


def ipi_symbols(n: int) -> tuple[tuple[sp.Symbol, ...], tuple[sp.Symbol, ...]]:
    return tuple(sp.Symbol(f"ipiP{i}", positive=True) for i in range(n)), tuple(
        sp.Symbol(f"ipiD{i}", positive=True) for i in range(n)
    )


def _compile_preset(preset: str, kinds: frozenset[str] = frozenset(), tiles: bool = False) -> Compiled:
    pr = A.get_preset(preset)
    kinds = kinds if pr.kinds else frozenset()
    parts = A.place(preset, kinds)
    tot_obj = A.totals(preset, parts, kinds)
    tot = tot_obj.as_list()
    ipp, ipd = ipi_symbols(len(parts))
    pre_by: dict[sp.Expr, sp.Expr] = {}  # per layer count: Σ seconds of its parts (one multiply per count)
    dec_by: dict[sp.Expr, sp.Expr] = {}
    vary: list[sp.Expr] = []
    per_part: list[sp.Expr] = []
    n_varying = []
    for i, p in enumerate(parts):
        tm = A.part_times(p, ipp[i], ipd[i], pr.theory, tiles=tiles and not pr.theory)
        pre_by[p.count] = pre_by.get(p.count, sp.Integer(0)) + tm["pre"]
        dec_by[p.count] = dec_by.get(p.count, sp.Integer(0)) + tm["dec"]
        seg_vals = []
        for steps, a0, a1, b0, b1 in tm["varying"]:
            seg_vals += [p.count, steps, a0, a1, b0, b1]
        vary += seg_vals
        n_varying.append(len(tm["varying"]))
        ncomp = sum(
            (
                s.steps * sp.Heaviside(s.f0 * ipd[i] - s.b0 * ST.inv_bandwidth(p.op, "decode"), 0)
                for s in p.decode
                if s.constant
            ),
            sp.Integer(0),
        )
        tp, td = A.with_launches(tm["pre"], tm["dec"], tm["launch"])
        per_part += [p.count, p.pre_flops, p.pre_bytes, tp, tm["tc"], tm["tm"], p.dec_flops, p.dec_bytes, td, ncomp,
                     *seg_vals]  # fmt: skip
    launches = tot_obj.launches
    pre_sum, dec_sum = A.with_launches(
        sum((c * e for c, e in pre_by.items()), sp.Integer(0)),
        sum((c * e for c, e in dec_by.items()), sp.Integer(0)),
        launches,
    )
    head = args_for(kinds)
    args = (*head, *ipp, *ipd, *RATE_ARGS)
    lam = lambda ex: sp.lambdify(args, ex, modules=LAMBDIFY_MODULES, cse=True)  # noqa: E731
    gemm_parts = tuple(i for i, p in enumerate(parts) if p.gemm_pre is not None)
    pre_dec = [(parts[i].gemm_pre, parts[i].gemm_dec) for i in gemm_parts]
    gex = [e for g, _ in pre_dec for e in g or ()] + [e for _, g in pre_dec for e in g or ()]  # both set together
    return Compiled(
        tuple(p.name for p in parts), tuple(p.roof for p in parts), tuple(p.scope for p in parts), tuple(n_varying),
        lam([pre_sum, dec_sum, *vary, *tot]), lam(per_part + tot),
        sp.lambdify(head, gex, modules=LAMBDIFY_MODULES, cse=True),
        gemm_parts, tuple(str(a) for a in head),
    )  # fmt: skip
