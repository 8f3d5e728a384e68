"""The numba backend: the numpy path's own arithmetic, traced into generated loops.

:func:`kernels` calls the numpy path's functions on tracers (:mod:`.numba_trace`): the compiled model's ``fast``
function, :func:`.epilogue.phase_overheads` and :func:`.epilogue.fast_outputs`, and for the frontier scan
:func:`objectives.law_inputs`, the law and its domain. Each recorded statement is placed in a generated loop at
the outermost level its inputs allow: the row kernel (one loop over a table) or the scan (:mod:`.scan_source`).
One kernel per preset × layer kinds × law: device, workload, precision, outputs needed, budgets and domain bounds
are run-time arguments. Modules are cached on disk, keyed by their text and the library versions
(:mod:`.numba_native`). Division by zero gives inf/NaN as in numpy. numba is optional (``rooflaw[fast]``).
"""

from __future__ import annotations

import hashlib
import sys
import threading
from dataclasses import dataclass, fields, replace
from itertools import groupby
from types import SimpleNamespace
from typing import Any

import numpy as np

from .backends import available
from .numba_native import entry_source, load, spec
from .numba_trace import BLEND_SOURCE, Tape, Unsupported, code

__all__ = ["Kernels", "Unsupported", "evaluate_rows", "kernels", "scalars"]

_LOCK = threading.Lock()
_LOADED: dict[str, Any] = {}
_MEMO: dict[tuple, Kernels] = {}  # (preset, kinds, law, axes) -> kernels
#: The scan's loop index of each axis (width rows, (experts, top_k) pairs, layer counts, (vocab, tied) pairs).
LOOPS = ("iw", "im", "il", "iv")
#: Statements a run needs to be skipped at run time when no output it serves is asked for (shorter: always run).
MIN_GUARDED = 6


@dataclass(frozen=True)
class Kernels:
    """A generated kernel (``fn``: the row kernel, or with a law the scan; a C entry) and what it reads."""

    fn: Any
    args: tuple[str, ...]  # arguments of the compiled model's ``fast`` function, in order
    outputs: tuple[str, ...]  # as ``roofline.evaluate_columns`` (but ``fits_in_memory``); the scan's loss after them
    per_row: tuple[str, ...]  # architecture/stack columns read (one value per candidate)
    scalars: tuple[str, ...]  # inputs with one value per call (``w``)
    fixed: tuple[str, ...] = ()  # per-row columns the scan takes as constants (not decoded from the index)
    axes: tuple[tuple[str, ...], ...] = ()  # per-row columns the scan reads from each axis's table
    domain: tuple[str, ...] = ()  # law variables whose fitted range the scan checks
    tables: tuple[int, int] = (0, 0)  # values the scan tabulates per layer count and per (vocab, tied) pair

    def scan(self, *args: Any) -> None:
        """Run the scan kernel on the arguments :func:`.numba_native.spec` names, less the scratch arrays: a point's
        values, ``C = max(8192, points per block)`` pending points plus a block, the staircase's prefix minima, the
        values tabulated per layer count and per (vocab, tied) pair."""
        radix, stair, (nl, nv) = args[8], args[15], self.tables
        c = max(8192, int(radix[0] * radix[1])) + int(radix[0] * radix[1])
        self.fn(*args, np.empty(len(self.outputs) + 1), np.empty((2, c)), np.empty((2, c), dtype=np.int64),
                np.empty(len(stair)), np.empty((radix[1], max(1, nl))), np.empty((radix[0], max(1, nv))))  # fmt: skip


# ---- tracing and placing -------------------------------------------------------------------------------------
def _trace(preset: str, kinds: frozenset[str], law: Any) -> tuple[Tape, tuple[str, ...], dict[str, Any], list]:
    """(tape, the ``fast`` function's arguments, output -> traced value, [loss, domain variables] with a law):
    the numpy path's functions called on tracers ``c_<column>``, ``s_<scalar>``, ``r_<Rates field>``, ``e_<…>``."""
    from ..arch.architecture import COLUMNS
    from . import assembly as A
    from .compile import WORKLOAD, compile_preset
    from .epilogue import fast_outputs, phase_overheads

    pr, comp, tape = A.get_preset(preset), compile_preset(preset, kinds), Tape()
    var: Any = tape.var  # tracers stand for numbers
    fn = comp.fast.__code__
    args = fn.co_varnames[: fn.co_argcount]
    # the arguments before the workload's are candidate columns (architecture, then layer-stack columns)
    col = {c: var(f"c_{c}") for c in (*COLUMNS, *args[: args.index(str(WORKLOAD[0]))])}
    s = {a: col[a] if a in col else var(f"s_{a}") for a in (*args, "overlap", "tokens")}
    rates: Any = SimpleNamespace(**{f.name: var(f"r_{f.name}") for f in fields(A.Rates) if f.type in ("float", float)})
    coef = A.EnergyCoefficients(var("e_idle"), {c: var(f"e_{c}") for c in A.ROOF_CLASSES}, var("e_byte"))
    try:
        pre, dec = (0.0, 0.0) if pr.theory else phase_overheads(rates, col, s["B"], s["S_in"])
        vals = comp.fast(*(s[a] for a in args))
        out = fast_outputs(vals, sum(comp.n_varying), s["overlap"], pre, dec, s["S_out"], pr.memory, coef)
        return tape, args, out, [] if law is None else _loss(tape, law, col, s["tokens"])
    except (TypeError, AttributeError) as e:  # an operation the tracer does not record
        raise Unsupported(f"{type(e).__name__}: {e}") from None


def _loss(tape: Tape, law: Any, col: dict[str, Any], tokens: Any) -> list:
    """[the traced loss, the domain variables]: NaN outside the law's fitted domain (:meth:`LossLaw.within` as
    :meth:`LossLaw.in_domain` applies it), the bounds of variable ``j`` the run-time scalars ``dlo<j>``, ``dhi<j>``
    (NaN: not judged)."""
    from ..objectives import law_inputs

    inputs = law_inputs(col, tokens)
    unknown = [v for v in law.variables if v not in inputs]
    if unknown:
        raise Unsupported(f"law variable(s) {unknown}")
    loss = law._fn(*(inputs[v] for v in law.variables))
    domain = tuple(v for v in law.domain if v in inputs)
    for j, v in enumerate(domain):
        lo = tape.var(f"dlo{j}")
        loss = tape.emit(
            "{2} if {0} != {0} or {1} else math.nan", lo, law.within(inputs[v], lo, tape.var(f"dhi{j}")), loss
        )
    return [loss, domain]


def _levels(stmts: list, level: dict[str, int]) -> list[int]:
    """The loop level of each statement: the deepest level of what it reads (``level``: of the inputs)."""
    for tgt, _, reads in stmts:
        level[tgt] = max((level.get(r, 0) for r in reads), default=0)
    return [level[t] for t, _, _ in stmts]


def _users(stmts: list, roots: dict[str, set[int]]) -> list[frozenset[int]]:
    """For each statement, the outputs that need it (``roots``: variable -> the outputs it is)."""
    need = {k: set(v) for k, v in roots.items()}
    out = []
    for tgt, _, reads in reversed(stmts):
        out.append(frozenset(need.get(tgt, ())))
        for r in reads:
            need.setdefault(r, set()).update(out[-1])
    return out[::-1]


def _source(preset: str, law: Any, kinds: frozenset[str], axes: tuple[tuple[str, ...], ...]) -> tuple[str, Kernels]:
    tape, args, out, scan = _trace(preset, kinds, law)
    outs = [code(v) for v in out.values()] + [code(x) for x in scan[:1]]  # the loss last
    roots: dict[str, set[int]] = {}
    for j, c in enumerate(outs):
        roots.setdefault(c, set()).add(j)
    stmts = [st for st, u in zip(tape.stmts, _users(tape.stmts, roots), strict=True) if u]  # the rest is dead code
    made = {t for t, _, _ in tape.stmts}
    inputs = sorted({r for _, _, rs in stmts for r in rs} | {o for o in outs if o.isidentifier()} - made)
    per_row = tuple(n[2:] for n in inputs if n.startswith("c_"))
    scalars = tuple(n for n in inputs if not n.startswith(("c_", "t")))
    k = Kernels(None, args, tuple(out), per_row, scalars)
    if law is None:
        return _module("rows", _rows_source(k, stmts, outs), k), k
    ax = tuple(tuple(a for a in per_row if a in x) for x in axes)
    fixed = tuple(a for a in per_row if not any(a in x for x in ax))
    k = Kernels(None, args, tuple(out), per_row, scalars, fixed, ax, scan[1])
    src, tables = _scan_source(k, stmts, outs, roots)
    return _module("scan", src, k), replace(k, tables=tables)


def _module(name: str, body: str, k: Kernels) -> str:
    blend = [BLEND_SOURCE] if "_rl_blend(" in body else []  # the roofline blend, one function the kernel calls
    return "\n".join([
        "# Generated by rooflaw.constraints.backend_numba from the numpy path's own functions, traced.",
        "# Do not edit: regenerated whenever the cost model, the law or the library versions change.",
        "import math", "import numpy as np", "from numba import carray, cfunc, njit", "from numba import types as _t",
        *blend, entry_source(name, spec(len(k.per_row), name == "scan"), body),
    ]) + "\n"  # fmt: skip


def _rows_source(k: Kernels, stmts: list, outs: list[str]) -> str:
    """The row kernel's body: one loop over the table, every output of a row computed in registers and stored
    once; statements that read only scalars run once before the loop."""
    lv = _levels(stmts, {f"c_{a}": 1 for a in k.per_row})
    return "\n".join([
        *(f"    {n} = w[{j}]" for j, n in enumerate(k.scalars)),
        *(f"    x{j}, s{j} = x[{j}], s[{j}]" for j in range(len(k.per_row))),
        *(f"    {t} = {e}" for (t, e, _), x in zip(stmts, lv, strict=True) if x == 0),
        "    for i in range(out.shape[1]):",
        *(f"        c_{a} = x{j}[i * s{j}]" for j, a in enumerate(k.per_row)),
        *(f"        {t} = {e}" for (t, e, _), x in zip(stmts, lv, strict=True) if x == 1),
        *(f"        out[{j}, i] = {o}" for j, o in enumerate(outs)),
    ])  # fmt: skip


def _scan_source(k: Kernels, stmts: list, outs: list[str], roots: dict[str, set[int]]) -> tuple[str, tuple[int, int]]:
    """The scan kernel: each statement in the outermost loop where its inputs are known (per-layer and per-block
    work done once per layer or block, the same operations). One kernel serves any objectives and budgets: a
    statement no requested output needs (``need``, a run-time flag per output) is skipped, so a query pays only
    for the outputs it reads; the loss comes first, so a point outside the law's domain skips the rest."""
    from .scan_source import SCAN

    dec = [(f"c_{a}", f"T{'WMLV'[x]}[{LOOPS[x]}, {j}]", (LOOPS[x],)) for x, ax in enumerate(k.axes)
           for j, a in enumerate(ax)]  # fmt: skip
    # a value of the layer or the vocabulary axis alone (the law's power of l, …) is computed once per axis value at
    # the start of a call (``pre``) and read from a table (PL, PV) in the nest, which repeats those axes per block
    axis = {ix: frozenset({x}) for x, ix in enumerate(LOOPS)}
    rest = stmts
    for t, _, reads in dec + stmts:
        axis[t] = frozenset().union(*(axis.get(r, frozenset()) for r in reads))
    one = {t: min(axis[t]) for t, _, _ in stmts if len(axis[t]) == 1 and min(axis[t]) >= 2}
    read = {r for t, _, rs in stmts if t not in one for r in rs} | set(outs)
    tab = {x: [t for t, _, _ in stmts if one.get(t) == x and t in read] for x in (2, 3)}
    pre = []
    for x, n in ((2, "nl"), (3, "nv")):
        lines = [f"{t} = {e}" for t, e, _ in dec + stmts if one.get(t) == x or t.startswith("c_") and axis[t] == {x}]
        lines += [f"P{'LV'[x - 2]}[{LOOPS[x]}, {j}] = {t}" for j, t in enumerate(tab[x])]
        pre += [f"for {LOOPS[x]} in range({n}):", *("    " + ln for ln in lines)] if tab[x] else []
    stmts = dec + [(t, f"P{'LV'[x - 2]}[{LOOPS[x]}, {j}]", (LOOPS[x],)) for x in (2, 3) for j, t in enumerate(tab[x])]
    stmts += [st for st in rest if st[0] not in one]
    loss = len(outs) - 1
    # what the tables read is always needed
    roots = {o: set(u) for o, u in roots.items()}
    for r in {r for t, _, rs in rest if t in one for r in rs if not axis.get(r)}:
        roots.setdefault(r, set()).add(loss)
    users = _users(stmts, roots)
    stmts, users = [st for st, u in zip(stmts, users, strict=True) if u], [u for u in users if u]  # a table's columns
    lv = _levels(stmts, {ix: x + 1 for x, ix in enumerate(LOOPS)})
    # by level (5: the loss, first in the point loop), then by the outputs served, supersets first: every input
    # stays before its readers and the statements serving the same outputs come together, under one flag
    order = sorted(range(len(stmts)), key=lambda j: (lv[j] + (lv[j] == 4 and loss in users[j]), -len(users[j]),
                                                     sorted(users[j]), j))  # fmt: skip
    runs = [(level, g, [stmts[j] for j in js]) for (level, g), js in groupby(order, lambda j: (
        lv[j] + (lv[j] == 4 and loss in users[j]), None if lv[j] == 0 or loss in users[j] else users[j]))]  # fmt: skip
    # a short run is not worth a run-time branch: always run
    short = ((lv_, g if len(sts) >= MIN_GUARDED else None, sts) for lv_, g, sts in runs)
    blocks = [(lg[0], lg[1], [st for r in rs for st in r[2]]) for lg, rs in groupby(short, lambda r: r[:2])]
    readers: dict[str, set[int]] = {}
    for b, (_, _, sts) in enumerate(blocks):
        for r in (r for _, _, rs in sts for r in rs):
            readers.setdefault(r, set()).add(b)
    flags: dict[frozenset[int], str] = {}
    body: dict[int, list[str]] = {level: [] for level in range(6)}
    for b, (level, g, sts) in enumerate(blocks):
        if g is None:
            body[level] += [f"{t} = {e}" for t, e, _ in sts]
            continue  # skipped: the values read outside the block stay defined (none carried around the loop)
        out = [t for t, _, _ in sts if readers.get(t, set()) - {b} or t in outs]
        body[level] += [f"if {flags.setdefault(g, f'g{len(flags)}')}:", *(f"    {t} = {e}" for t, e, _ in sts)]
        body[level] += ["else:", *(f"    {t} = 0.0" for t in out)] if out else []
    head = [f"{n} = w[{j}]" for j, n in enumerate(k.scalars)] + [f"c_{a} = fx[{j}]" for j, a in enumerate(k.fixed)]
    head += [f"{f} = {' or '.join(f'need[{o}] != 0' for o in sorted(g))}" for g, f in flags.items()]
    point = body[4] + [f"v[{j}] = {o}" for j, o in enumerate(outs)]
    ind = lambda lines, n: "\n".join(" " * n + ln for ln in lines)  # noqa: E731
    src = (
        SCAN.replace("{FIXED}", ind(head + body[0], 4)).replace("{PRE}", ind(pre, 4))
        .replace("{BLOCK}", ind(body[1] + body[2], 8)).replace("{LAYER}", ind(body[3], 12))
        .replace("{LOSS}", ind([*body[5], f"loss = {outs[loss]}"], 16)).replace("{POINT}", ind(point, 16))
    )  # fmt: skip
    return src, (len(tab[2]), len(tab[3]))


# ---- loading (disk cache) ----------------------------------------------------------------------------------------
def kernels(
    preset: str, law: Any = None, kinds: frozenset[str] = frozenset(), axes: tuple[tuple[str, ...], ...] = ((),) * 4
) -> Kernels:
    """The generated kernel for ``preset`` and layer ``kinds``: the row kernel, or with ``law`` the frontier scan,
    whose ``axes`` are the columns that vary along each axis of a space's index (each read from that axis's
    table); compiled or loaded from disk, one module per preset × kinds × law."""
    if not available():
        raise ModuleNotFoundError("No module named 'numba'", name="numba")
    import sympy

    memo = (preset, kinds) + (() if law is None else (law.variables, sympy.srepr(law.bound_expr()), *law.domain, axes))
    if memo in _MEMO:
        return _MEMO[memo]
    src, meta = _source(preset, law, kinds, axes)
    from importlib.metadata import version  # not numba.__version__: a warm process never imports numba

    tag = f"{src}|numba {version('numba')}|numpy {np.__version__}|py {sys.version}"
    key = hashlib.sha256(tag.encode()).hexdigest()[:20]
    with _LOCK:
        if key not in _LOADED:
            name = "rows" if law is None else "scan"
            _LOADED[key] = load(key, src, name, spec(len(meta.per_row), law is not None))
    _MEMO[memo] = replace(meta, fn=_LOADED[key])
    return _MEMO[memo]


# ---- run-time arguments and the row kernel ---------------------------------------------------------------------
def scalars(k: Kernels, sc: Any, call: tuple, tokens: float = 0.0, bounds: tuple = ()) -> np.ndarray:
    """The kernel's one-per-call inputs (:attr:`Kernels.scalars`) for scenario ``sc``: the compiled model's
    arguments ``call`` (as :func:`roofline.model_call` gives them), its rates and energy coefficients (NaN when
    the device has none: energy NaN, as on numpy), the overlap flag, the law's tokens and domain ``bounds``
    (``(lo, hi)`` per domain variable, NaN where not judged)."""
    from .assembly import ROOF_CLASSES

    c, unknown = sc.energy, dict.fromkeys(["idle", "byte", *ROOF_CLASSES], np.nan)
    e = {"idle": c.p_idle, "byte": c.per_byte} | c.per_flop if c else unknown
    named = {f"s_{a}": v for a, v in zip(k.args, call, strict=True)} | {f"e_{c}": v for c, v in e.items()}
    named |= {"s_overlap": float(sc.host_overlap), "s_tokens": tokens}
    named |= {f"d{e}{j}": x for j, b in enumerate(bounds) for e, x in zip(("lo", "hi"), b, strict=True)}
    return np.array([float(named[n] if n in named else getattr(sc.rates, n[2:])) for n in k.scalars])


def evaluate_rows(cols: dict[str, np.ndarray], sc: Any, kinds: frozenset[str], call: tuple, strict: bool = True,
                  tiles: bool = False) -> dict[str, np.ndarray] | None:  # fmt: skip
    """The outputs of ``roofline.evaluate_columns`` (but ``fits_in_memory``) for completed columns of layer
    ``kinds`` in scenario ``sc`` (the compiled model called with ``call``), in one generated loop. When the kernel
    cannot take them: a one-line error when ``strict``, else a warning (:func:`.backends.fallback`) and None."""
    from ..errors import bad
    from .backends import fallback

    try:
        if tiles:
            raise Unsupported("the numba kernel has no tile/wave model (tiles=True)")
        k = kernels(sc.preset, None, kinds)
    except Unsupported as e:
        why = str(e) if tiles else f"the generated kernel cannot express this cost model ({e})"
        if strict:
            raise bad("backend", "numba", why) from None
        fallback(why)
        return None
    xs = [np.asarray(cols[a], dtype=np.float64) for a in k.per_row]
    one = [x.ndim == 0 or x.strides[0] == 0 for x in xs]  # one value for every row: read with step 0
    xs = [np.ascontiguousarray(x.flat[:1] if o else x) for x, o in zip(xs, one, strict=True)]
    out = np.empty((len(k.outputs), len(cols["layers"])))
    k.fn(tuple(xs), np.array([not o for o in one], dtype=np.int64), scalars(k, sc, call), out)
    return dict(zip(k.outputs, out, strict=True))
