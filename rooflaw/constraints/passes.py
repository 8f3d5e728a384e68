"""One forward pass of ``q`` new tokens per sequence over a KV cache of ``cached`` tokens, priced by the assembly.

The operators are written over three phase symbols (:mod:`.operators`): ``T`` tokens in the pass, ``Sq`` query
length per sequence and ``C`` attended context. Prefill and a decode step are two substitutions of them
(:func:`assembly.prefill`, :func:`assembly.decode_step`); this module adds the third one a speculative
verification (or a chunk of a chunked prefill) needs: ``T = B·q, Sq = q, C = cached + q`` (``min(·, window)`` in
sliding-window layers). An operator whose cost has none of T, Sq, C but scales with B produces one row per sequence
(the LM head: prefill computes the last token's logits only); a verification pass samples all q positions, so
there ``B → B·q``. Each placed operator then costs what :func:`assembly.part_times` says (max of compute and
memory time on its roof, plus its launch; priced as a decode pass: its attention reads the KV cache at the ``kv``
stream class and pays its waves, :mod:`.streams`), the linear layers run on the decode roof of a ``B·q``-token batch
(:func:`engines.decode_linear_inv`: an engine's GEMV path for small batches), and the engine's per-pass overhead
is added with :func:`roofline.with_overhead`. With ``q = 1`` and ``cached = S_in + t − 1`` the pass is exactly
decode step t of the assembly (a test checks it against :func:`steps.decode_step_table`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import sympy as sp

from ..arch.architecture import Architecture
from ..devices.device import Device
from ..errors import bad
from . import assembly as A
from . import operators as O
from .compile import ARG_NAMES, LAMBDIFY_MODULES, RATE_ARGS, args_for, kinds_tag
from .engines import EngineProfile, applied, decode_linear_inv, gemv_path
from .fused_prefill import masked_pairs
from .moe_padding import padding_factor
from .moe_reread import reread_bytes
from .precision import Precision
from .streams import EXPERT_OPS
from .symbols import B, C, Mk, Sq, T, sym

#: Tokens per sequence in the pass, and tokens already in each sequence's KV cache.
Q, CACHED = sym("q_pass"), sym("cached")
#: Rows per compiled call (bounds the temporaries whatever the number of passes).
PASS_CHUNK = 1 << 15


def pass_phase(op: O.Op, expr: sp.Expr, window: sp.Expr | None = None) -> sp.Expr:
    """``expr`` (a cost of ``op``) in a pass of q tokens per sequence over ``cached`` tokens."""
    ctx = CACHED + Q if window is None else sp.Min(CACHED + Q, window)
    # the causal mask among the q new tokens hides q(q-1)/2 query-key pairs, of which a fused kernel skips those outside
    # its 128 x 128 blocks (its query tiles start at the pass's first token; the assembly's Mk: the prefill's at S = q,
    # 0 in a one-token step, which this is at q = 1: fused_prefill.masked_pairs)
    subs: dict[sp.Expr, sp.Expr] = {T: B * Q, Sq: Q, C: ctx, Mk: masked_pairs(Q, Q)}
    if per_sequence(op):
        subs[B] = B * Q
    e = sp.sympify(expr).xreplace({O.experts_touched: O.EXPERTS_TOUCHED})
    return e.subs(subs, simultaneous=True)


def per_sequence(op: O.Op) -> bool:
    """An op that computes one row per sequence (no T, Sq or C in its costs, B in them): the LM head."""
    free = (sp.sympify(op.flops) + sp.sympify(op.bytes)).free_symbols
    return B in free and not free & {T, Sq, C}


@dataclass(frozen=True)
class PassModel:
    """The lambdified pass of one preset and stack: per part (count·FLOPs, count·bytes, count·seconds)."""

    names: tuple[str, ...]
    roofs: tuple[str, ...]
    fn: Any
    args: tuple[str, ...] = ARG_NAMES  # names of the leading arguments (architecture ... precision)


def _ipi(n: int) -> tuple[sp.Symbol, ...]:
    return tuple(sp.Symbol(f"ipiV{i}", positive=True) for i in range(n))


@cache
def pass_model(preset: str, kinds: frozenset[str] = frozenset()) -> PassModel:
    """The compiled pass of ``preset`` for a stack with layer ``kinds`` (cached per process, and on disk as the
    generated source, like :func:`compile.compile_preset`)."""
    import inspect
    import sys

    from .. import cache as disk
    from ..arch import architecture
    from . import compile as compile_mod
    from . import symbols

    A.get_preset(preset)
    ktag = kinds_tag(kinds)
    if ktag is None:
        return _pass_model(preset, kinds)
    tag = f"pass-{preset}-{ktag}"
    key = disk.source_key(tag, O, symbols, architecture, A, compile_mod, sys.modules[__name__])
    hit = disk.load(key)
    if hit is not None:
        try:
            fn, args = compile_mod._from_source(hit["fn"]), tuple(hit.get("args", ARG_NAMES))
            return PassModel(tuple(hit["names"]), tuple(hit["roofs"]), fn, args)
        except Exception:  # noqa: BLE001 - a stale or broken entry: derive again
            pass
    model = _pass_model(preset, kinds)
    disk.store(key, {"names": model.names, "roofs": model.roofs, "fn": inspect.getsource(model.fn), "args": model.args})
    return model


def _pass_model(preset: str, kinds: frozenset[str]) -> PassModel:
    pr = A.get_preset(preset)
    if pr.theory:
        raise bad("preset", preset, "has no per-operator roofline for a multi-token pass; use full or paper-ops")
    kinds = kinds if pr.kinds else frozenset()
    placed = A.place(preset, kinds)
    ipi = _ipi(len(placed))
    out: list[sp.Expr] = []
    for i, p in enumerate(placed):
        F, By = pass_phase(p.op, p.op.flops, p.window), pass_phase(p.op, p.op.bytes + reread_bytes(p.op), p.window)
        pad = pass_phase(p.op, padding_factor(), p.window) if p.op.name in EXPERT_OPS else sp.Integer(1)
        part = A.Part(p.name, p.op, p.count, F, By, (), pad_pre=pad)
        tm = A.part_times(part, ipi[i], ipi[i], theory=False, pass_phase="decode")  # it reads the KV cache
        sec = tm["pre"] + A.OVERHEAD * tm["launch"]
        out += [p.count * F, p.count * By, p.count * sec]
    head = args_for(kinds)
    args = (*head, Q, CACHED, *ipi, *RATE_ARGS)
    fn = sp.lambdify(args, out, modules=LAMBDIFY_MODULES, cse=True)
    return PassModel(tuple(p.name for p in placed), tuple(p.roof for p in placed), fn, tuple(map(str, head)))


@dataclass(frozen=True)
class _PassWorkload:
    batch: int
    attention: str
    input_tokens: int = 1
    output_tokens: int = 1


def pass_table(
    arch: Architecture,
    device: Device,
    batch: int,
    q: int,
    cached: Any,
    precision: str | Precision = "fp16",
    preset: str = "full",
    engine: str | EngineProfile | None = None,
    attention: str = "fused",
    per_op: bool = False,
) -> dict[str, Any]:
    """Passes of ``q`` tokens per sequence (``batch`` sequences) of one architecture over caches of ``cached``
    tokens (an array: one pass per entry). Returns arrays ``seconds``, ``flops``, ``bytes``, ``energy_j`` and
    ``flops_by_roof`` (a dict per compute class); with ``per_op``, ``ops``: {name: (FLOPs, bytes, seconds)} arrays,
    the engine's per-pass overhead as ``engine_overhead``."""
    from .roofline import complete_columns

    cached = np.atleast_1d(np.asarray(cached, dtype=np.float64))
    base = complete_columns({k: np.array([float(v)]) for k, v in arch.columns().items()})
    cols = {k: np.broadcast_to(v, cached.shape) for k, v in base.items()}
    return pass_columns(cols, device, batch, q, cached, precision, preset, engine, attention, per_op)


def pass_columns(
    cols: Mapping[str, np.ndarray],
    device: Device,
    batch: int,
    q: int,
    cached: Any,
    precision: str | Precision = "fp16",
    preset: str = "full",
    engine: str | EngineProfile | None = None,
    attention: str = "fused",
    per_op: bool = False,
) -> dict[str, Any]:
    """:func:`pass_table` over a table of candidates: row i is architecture ``cols[...][i]`` (completed columns,
    :func:`roofline.complete_columns`) over ``cached[i]`` tokens (a scalar: the same for every row)."""
    from .roofline import phase_overheads, stack_kinds, with_overhead
    from .scenario import model_scalars

    if isinstance(q, bool) or not isinstance(q, (int, np.integer)) or q < 1:
        raise bad("q", q, "tokens per sequence in a pass must be a positive integer")
    n = len(cols["layers"])
    cached = np.broadcast_to(np.asarray(cached, dtype=np.float64), (n,))
    if n and (not np.all(np.isfinite(cached)) or cached.min() < 0):
        raise bad("cached", float(cached.min()), "cached tokens must be finite and at least 0")
    precision = Precision.parse(precision)
    pr = A.get_preset(preset)
    app = applied(device, engine, preset if pr.engine else "paper")
    model = pass_model(preset, stack_kinds(cols) if pr.kinds else frozenset())
    rates = A.rates(device, precision, app)
    tokens = batch * int(q)
    lin, gemv = float(decode_linear_inv(rates, tokens)), gemv_path(rates, tokens)  # (GEMVs: no padded rows)
    ipi = [lin if r == "linear" else rates.inv.get(r, 0.0) for r in model.roofs]
    overlap = bool(app is not None and app.overlap)
    coef = A.energy_coefficients(device, precision)
    sec, flops, nbytes = np.empty(n), np.empty(n), np.empty(n)
    by_roof = {c: np.zeros(n) for c in A.ROOF_CLASSES}
    ops: dict[str, list[np.ndarray]] = {name: [np.zeros(n), np.zeros(n), np.zeros(n)] for name in model.names}
    wl = _PassWorkload(batch, attention)
    scal = model_scalars(wl, precision)  # the compiled model's scalar arguments for this pass's workload
    for s in range(0, n, PASS_CHUNK):
        m = min(PASS_CHUNK, n - s)
        sub = {k: v[s : s + m] for k, v in cols.items()}
        overhead = phase_overheads(rates, sub, tokens, 1)[1]
        args = [sub[a] if a in sub else scal[a] for a in model.args]
        vals = model.fn(*args, float(q), cached[s : s + m], *ipi, *rates.stream_args(gemv=(gemv, gemv)))
        arr = lambda v, m=m: np.broadcast_to(np.asarray(v, dtype=np.float64), (m,))  # noqa: E731
        t, f, b = np.zeros(m), np.zeros(m), np.zeros(m)
        for i, name in enumerate(model.names):
            F, By, ts = (arr(v) for v in vals[3 * i : 3 * i + 3])
            t, f, b = t + ts, f + F, b + By
            if model.roofs[i] in by_roof:
                by_roof[model.roofs[i]][s : s + m] += F
            if per_op:
                for j, v in enumerate((F, By, ts)):
                    ops[name][j][s : s + m] = v
        sec[s : s + m] = with_overhead(overlap, t, arr(overhead))
        flops[s : s + m], nbytes[s : s + m] = f, b
    out: dict[str, Any] = {
        "seconds": sec, "flops": flops, "bytes": nbytes, "flops_by_roof": by_roof,
        "energy_j": A.energy(coef, sec, by_roof, nbytes),
    }  # fmt: skip
    if per_op:
        out["ops"] = {k: tuple(v) for k, v in ops.items()}
        out["ops"]["engine_overhead"] = (np.zeros(n), np.zeros(n), sec - sum(v[2] for v in ops.values()))
    return out


__all__ = ["CACHED", "Q", "pass_columns", "pass_model", "pass_phase", "pass_table", "per_sequence"]
