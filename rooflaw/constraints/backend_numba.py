"""The numba backend: the numpy cost model's own arithmetic in one generated loop.

:func:`kernels` prints a Python module: the compiled preset's common-subexpression statements re-printed per
candidate (:mod:`.numba_printer`), then the numpy path's epilogue, whose functions (engine overhead, decode-step sum,
energy, the law's inputs) are traced (:mod:`.numba_trace`), so the kernel performs the same IEEE operations in the
same order: bit-identical values. The module holds the row kernel (``evaluate_columns``) or, with a law, the
frontier scan (:mod:`.scan_source`); it is written under the rooflaw cache directory keyed by a hash of its text and
the library versions, and numba's ``cache=True`` machine code sits beside it, so a new process or a Dask worker loads
instead of compiling. Division by zero gives inf/NaN as in numpy (``error_model="numpy"``). numba is optional
(``pip install rooflaw[fast]``; :func:`.backends.available`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import RooflawError
from . import numba_schedule as S
from .backends import available
from .numba_native import entry_source, load, no_alloc, specs
from .numba_printer import HELPERS, Unsupported, memo_powers, scalarize

#: The row kernel's outputs, in order (``fits_in_memory`` is computed after it, from ``memory_bytes``).
OUTPUTS = (
    "prefill_s", "decode_s", "ttft_s", "tpot_s", "total_s", "prefill_flops", "decode_flops", "prefill_bytes",
    "decode_bytes", "weight_bytes", "kv_cache_bytes", "activation_bytes", "memory_bytes", "energy_j",
    "params_total", "params_active",
)  # fmt: skip
#: Device/workload scalars every kernel takes (energy coefficients of :func:`assembly.energy_coefficients`).
PARAMS = ("p_sout", "p_emode", "p_idle", "p_ebyte", "p_ef_linear", "p_ef_attention", "p_ef_vector")
_LOCK = threading.Lock()
_LOADED: dict[str, Any] = {}
_MEMO: dict[tuple, Kernels] = {}  # (preset, kinds, cost source, law source, domain) -> kernels
_SOURCES: dict[Any, str] = {}  # lambdified function -> its source
#: Seconds spent importing numba, generating, and compiling (or loading) each kernel, for reports.
TIMINGS: dict[str, float] = {}


@dataclass(frozen=True)
class Kernels:
    module: Any  # ``rows`` (and ``scan``): C entries (:mod:`.numba_native`)
    args: tuple[str, ...]  # arguments of the compiled ``fast`` function, in order
    per_row: tuple[str, ...]  # of which architecture/stack columns (one value per candidate)
    scalars: tuple[str, ...]  # of which workload, precision and rate scalars (one value per call)
    fixed: tuple[str, ...]  # per-row columns the scan kernel takes as constants (not decoded from the index)
    axes: tuple[tuple[str, ...], ...]  # per-row columns the scan reads from each axis's table (width … vocab)
    law_vars: tuple[str, ...]
    domain: tuple[str, ...]  # law variables whose fitted range the scan checks (bounds: runtime ``dlo``/``dhi``)
    rate_fields: tuple[str, ...]  # Rates fields engine_overhead reads (scalars ``r_<field>``)
    key: str
    preset: str
    kinds: frozenset[str]
    memo: tuple[int, int] = (0, 0)  # memo tables of rows and of scan

    def rows(self, x, s, w, p, out) -> None:
        """Run the row kernel (``x`` the per-row columns, ``s`` their steps: 0 for one value for every row)."""
        self.module.rows(x, s, w, p, out, np.full((self.memo[0], 256), np.nan))

    def scan(self, *args) -> None:
        """Run the scan kernel on the arguments :mod:`.scan_source` documents, less the scratch arrays."""
        from .scan_source import scratch

        self.module.scan(*args, np.full((self.memo[1], 256), np.nan), *scratch(args[10], args[19]))


# ---- source generation ---------------------------------------------------------------------------------------
def _law_inputs() -> dict[str, str]:
    """Law variable -> scalar expression over kernel column names: :func:`objectives.law_inputs` itself, traced
    (the same operations in the same order as on numpy columns)."""
    from ..arch.architecture import COLUMNS
    from ..objectives import law_inputs
    from .numba_trace import Traced, code

    return {k: code(v) for k, v in law_inputs({c: Traced(f"c_{c}") for c in COLUMNS}, Traced("p_tokens")).items()}


def source_of(fn: Any) -> str:
    """The generated source of a lambdified function (also when it was rebuilt from rooflaw's disk cache)."""
    src = getattr(fn, "__source__", None)
    if isinstance(src, str):
        return src
    if fn not in _SOURCES:  # inspect.getsource re-tokenizes the file on every call (~40 ms for the cost model)
        _SOURCES[fn] = inspect.getsource(fn)
    return _SOURCES[fn]


def law_source(law: Any) -> str:
    """The lambdified source of ``law``'s bound expression, also for a law unpickled on a Dask worker, whose
    function came by value and has no source to inspect (it is lambdified again here, the same text)."""
    try:
        return source_of(law._fn)
    except (OSError, TypeError):
        import sympy

        args = [law.symbols()[v] for v in law.variables]
        return inspect.getsource(sympy.lambdify(args, law.bound_expr(), modules="numpy", cse=True))


def _source(preset: str, law: Any, kinds: frozenset[str], axes: tuple[tuple[str, ...], ...]) -> tuple[str, Kernels]:
    import ast

    from ..arch.architecture import COLUMNS
    from ..arch.layer_kinds import stack_columns
    from . import assembly as A
    from .compile import compile_preset
    from .numba_trace import domain_source, energy_source, sum_max_affine_source, trace_engine_overhead

    pr = A.get_preset(preset)
    comp = compile_preset(preset, kinds)
    fast_src = source_of(comp.fast)
    fn_args = tuple(a.arg for a in ast.parse(fast_src).body[0].args.args)  # type: ignore[attr-defined]
    per_row = tuple(a for a in fn_args if a in COLUMNS or a in stack_columns())
    # the engine's per-pass overhead, which roofline._evaluate_chunk adds after the generated function
    # per phase: the experts touched by B·S_in prefill tokens and by the B tokens of a decode step
    ovh, rate_fields = ("0.0", ()) if pr.theory else trace_engine_overhead(tokens="(c_B * c_S_in)")
    ovh_dec = "0.0" if pr.theory else trace_engine_overhead(tokens="c_B")[0]
    per_row += tuple(a for a in ("layers", "moe", "experts", "top_k") if a not in per_row)
    scalars = tuple(a for a in fn_args if a not in per_row) + tuple(f"r_{f}" for f in rate_fields)
    scalars += () if pr.theory else ("r_overlap",)  # Applied.overlap: max, not sum, of roofline and overhead
    cost = scalarize(fast_src, {a: f"c_{a}" for a in fn_args}, "t_")
    nseg = sum(comp.n_varying)
    if len(cost.outputs) != 2 + 6 * nseg + len(A.TOTAL_KEYS):
        raise Unsupported(f"unexpected output count {len(cost.outputs)}")
    # the epilogue of roofline._evaluate_chunk / _finish, in the same operation order
    lines = [*cost.body, *([f"v{i} = {e}"] for i, e in enumerate(cost.outputs))]
    lines += [["dec_0 = v1"]]  # single assignments: the scan hoists each statement to its loop level
    for j in range(nseg):
        k = 2 + 6 * j
        lines.append([f"dec_{j + 1} = dec_{j} + v{k} * _sma(v{k + 2}, v{k + 3}, v{k + 4}, v{k + 5}, v{k + 1})"])
    init = list(cost.init)
    if pr.theory:
        lines += [["pre_t = v0"], [f"dec_t = dec_{nseg}"]]
    else:  # the experts-touched powers (libm pow, one per row and phase) memoised like the cost model's own
        for name, expr in (("ovh", ovh), ("ovh_dec", ovh_dec)):
            i, pre, expr = memo_powers(expr, "t_", len(init) // 6, cost.body)
            init += i
            lines += [*pre, [f"{name} = {expr}"]]
        # roofline.with_overhead: the sum, or the max when the host launches while an accelerator runs
        lines += [
            ["pre_t = max(v0, ovh) if r_overlap else v0 + ovh"],
            [f"dec_t = max(dec_{nseg}, p_sout * ovh_dec) if r_overlap else dec_{nseg} + p_sout * ovh_dec"],
        ]
    t = {key: f"v{2 + 6 * nseg + i}" for i, key in enumerate(A.TOTAL_KEYS)}
    fl = {c: f"({t['fpre_' + c]} + {t['fdec_' + c]})" for c in A.ROOF_CLASSES}
    lines += [
        ["memory = " + " + ".join(["0.0", *(t[m] for m in pr.memory)])],
        ["total = pre_t + dec_t"],
        [f"energy = {energy_source('total', fl, t['bytes_pre'] + ' + ' + t['bytes_dec'])}"],
    ]
    outs = ("pre_t", "dec_t", "pre_t", "dec_t / p_sout", "total",
            f"{t['fpre_linear']} + {t['fpre_attention']} + {t['fpre_vector']}",
            f"{t['fdec_linear']} + {t['fdec_attention']} + {t['fdec_vector']}", t["bytes_pre"], t["bytes_dec"],
            t["weights"], t["kv"], t["act"], "memory", "energy", t["params_total"], t["params_active"])  # fmt: skip
    body = lines + [[f"o{k} = {e}"] for k, e in enumerate(outs)]  # pasted into each loop: one function, so
    # loop-invariant work (everything over workload and device scalars) is hoisted by LLVM
    rows_init, n_memo = no_alloc(init)
    src = [
        "# Generated by rooflaw.constraints.backend_numba from the numpy backend's lambdified cost model.",
        "# Do not edit: regenerated whenever the cost model, the law or the library versions change.",
        "import math",
        "import numpy as np",
        "from numba import carray, cfunc, njit",
        "from numba import types as _t",
        "_JI = dict(cache=True, fastmath=False, nogil=True, error_model='numpy')",
        HELPERS,
        sum_max_affine_source(),
    ]
    kernels: dict[str, str] = {}  # a module holds the row kernel (law None) or the scan (a law)
    if law is None:
        kernels["rows"] = "\n".join(_rows_source(per_row, scalars, body, rows_init))
    law_vars: tuple[str, ...] = ()
    domain: tuple[str, ...] = ()
    n_scan = 0
    axes = tuple(tuple(a for a in per_row if a in ax) for ax in axes)
    fixed = tuple(a for a in per_row if not any(a in ax for ax in axes))
    if law is not None:
        inputs = _law_inputs()
        # domain variables numpy cannot compute from columns and tokens (precision bits) are not judged there either
        law_vars, domain = tuple(law.variables), tuple(v for v in law.domain if v in inputs)
        unknown = [v for v in law_vars if v not in inputs]
        if unknown:
            raise Unsupported(f"law variable(s) {unknown}")
        lz = scalarize(law_source(law), {v: f"l_{v}" for v in law_vars}, "u_")
        loss = [[f"l_{v} = {inputs[v]}"] for v in law_vars] + lz.body
        # outside the law's fitted domain counts as no loss (LossLaw.in_domain); bounds are runtime arrays
        loss += [[ln] for ln in domain_source(domain, inputs)] + [[f"loss = {lz.outputs[0]} if dom else math.nan"]]
        scan_init, n_scan = no_alloc(init + lz.init)
        kernels["scan"] = _scan_source(axes, scalars, fixed, body, loss, scan_init)
    src += ["", *(entry_source(fn, spec, kernels[fn]) for fn, spec in specs(per_row, law is not None).items())]
    meta = Kernels(None, fn_args, per_row, scalars, fixed, axes, law_vars, domain, rate_fields, "", preset, kinds,
                   (n_memo, n_scan))  # fmt: skip
    return "\n".join(src) + "\n", meta


def _var(a: str) -> str:
    """The kernel variable of a scalar argument (rates read by engine_overhead keep their ``r_`` name)."""
    return a if a.startswith("r_") else f"c_{a}"


def _rows_source(per_row, scalars, body: list[list[str]], init: list[str]) -> list[str]:
    """The row kernel: one loop over the table, every output of a row computed in registers and stored once;
    statements that read only workload/device scalars run once before the loop. (Recomputing a row's statements
    only when its columns changed from the previous row measured no faster: 370-560 vs 260-300 ns per row.)"""
    levels = S.levels(body, {f"c_{a}": 1 for a in per_row})
    once = [ln for st, x in zip(body, levels, strict=True) if x == 0 for ln in st]
    each = [ln for st, x in zip(body, levels, strict=True) if x != 0 for ln in st]
    return [
        "def rows(x, s, w, p, out, mw):",
        f"    {', '.join(PARAMS)} = {', '.join(f'p[{k}]' for k in range(len(PARAMS)))}",
        *(f"    {_var(a)} = w[{k}]" for k, a in enumerate(scalars)),
        *(f"    x{k} = x[{k}]" for k in range(len(per_row))),
        *(f"    s{k} = s[{k}]" for k in range(len(per_row))),
        *(f"    {ln}" for ln in init + once),
        "    for i in range(out.shape[1]):",
        *(f"        c_{a} = x{k}[i * s{k}]" for k, a in enumerate(per_row)),
        *(f"        {ln}" for ln in each),
        *(f"        out[{k}, i] = o{k}" for k in range(len(OUTPUTS))),
    ]


#: Loop level of the scan's loop indices: (width, experts) block 1-2, layer count 3, point (vocab, tied) 4. A
#: statement runs at the deepest level of what it reads; workload, precision, device and fixed columns are 0.
_LOOPS = {"iw": 1, "im": 2, "il": 3, "iv": 4}


#: Outputs whose statements the scan skips together (one run-time branch per group and statement run, not per
#: output: fewer branches per point). A grouping for speed only: an output not listed is a group of its own.
_GROUPS = {"prefill_s": 16, "ttft_s": 16, "decode_s": 17, "tpot_s": 17, "total_s": 18, "prefill_flops": 18,
           "decode_flops": 18, "prefill_bytes": 18, "decode_bytes": 18, "energy_j": 18, "weight_bytes": 19,
           "kv_cache_bytes": 19, "activation_bytes": 19, "memory_bytes": 19, "params_total": 19,
           "params_active": 19}  # fmt: skip


#: Output sets the point code has a version for besides the one computing everything (the loop is short, so a run-
#: time branch per group there costs as much as the work it skips; a version prunes it at compile time).
_VERSIONS = (("decode_s", "memory_bytes"), ("prefill_s", "memory_bytes"))


def _scan_source(axes, scalars, fixed, body: list[list[str]], loss: list[list[str]], init: list[str]) -> str:
    """The scan kernel: each statement of the point code is placed in the outermost loop where its inputs are
    known, so per-layer and per-block work is done once per block, not once per point (same operations). One
    kernel serves any objectives and budgets: a statement no requested output needs (``need``, a run-time flag
    per output) is skipped, so a query pays only for the outputs it reads."""
    from .scan_source import POINT, SCAN

    pre = [f"{_var(a)} = w[{k}]" for k, a in enumerate(scalars)] + [f"c_{a} = fx[{k}]" for k, a in enumerate(fixed)]
    dec = [[f"c_{a} = T{x.upper()}[i{x}, {j}]"] for x, ax in zip("wmlv", axes, strict=True) for j, a in enumerate(ax)]
    stmts = S.hoist(dec + body + loss, dict(_LOOPS))
    levels = S.levels(stmts, dict(_LOOPS))
    group = {k: _GROUPS.get(name, k) for k, name in enumerate(OUTPUTS)}
    users = [frozenset(group.get(k, k) for k in u) for u in S.guards(stmts, {"loss": -1} | {f"o{k}": k for k in group})]
    flags: dict[frozenset[int], str] = {}
    # a statement's inputs are needed by a superset of its outputs: ordering each level by decreasing output set
    # keeps every input before its readers and puts the statements of one set together, under one flag
    live = [(lv, -len(u), sorted(u), j) for j, (lv, u) in enumerate(zip(levels, users, strict=True)) if u]
    blocks: list[tuple[int, frozenset[int] | None, list[list[str]]]] = []  # (level, guard, statements)
    for lv, _, _, j in sorted(live):  # statements no output needs are dead code, left out
        st, u = stmts[j], users[j]
        g = None if lv == 0 or -1 in u or len(S.names(st)[1]) != 1 else u  # memo sites: ints must stay defined
        lv = 5 if lv == 4 and -1 in u else lv  # the point's loss first: an infeasible point skips the rest
        if blocks and blocks[-1][:2] == (lv, g) and g is not None:
            blocks[-1][2].append(st)
        else:
            blocks.append((lv, g, [st]))

    def emit(lv: int, const: frozenset[int] | None = None) -> list[str]:
        """The statements of level ``lv``: each guarded run under its run-time flag, or with ``const`` (the groups
        a point-loop version computes) under a constant, which numba prunes."""
        out: list[str] = []
        for lv_, g, sts in blocks:
            if lv_ != lv:
                continue
            if g is None:
                out += [ln for st in sts for ln in st]
                continue
            flag = flags.setdefault(g, f"g{len(flags)}") if const is None else str(bool(g & const))
            # skipped: every value still defined in this iteration (a value kept from an earlier one would be
            # carried around the loop, which costs registers and time)
            out += [f"if {flag}:", *(f"    {ln}" for st in sts for ln in st), "else:"]
            out += [f"    {w} = 0.0" for st in sts for w in sorted(S.names(st)[1])]
        return out

    # the point loop once per version: a query runs the first whose groups hold every output it needs
    every = frozenset(group.values())
    versions = [frozenset(group[OUTPUTS.index(o)] for o in v) for v in _VERSIONS] + [every]
    ind = lambda lines, n: "\n".join(" " * n + ln for ln in lines)  # noqa: E731
    point = []  # one branch per point, well predicted; the loss and the feasibility code are shared
    for j, ver in enumerate(versions):
        head = "else:" if 0 < j == len(versions) - 1 else f"{'if' if j == 0 else 'elif'} mode == {j}:"
        point += [head, *(f"    {ln}" for ln in emit(4, ver))]
    point += [f"v[{k}] = o{k}" for k in range(len(OUTPUTS))] + ["v[16] = loss"]
    loop = POINT.replace("{LOSS}", ind(emit(5), 0)).replace("{POINT}", ind(point, 0))
    points = ["for iv in range(nv):", *(f"    {ln}" for ln in loop.strip("\n").split("\n"))]
    outer = {lv: emit(lv) for lv in range(4)}
    on = {q: " or ".join(f"need[{k}] != 0" for k in group if group[k] == q) for q in every}
    flag_lines = [f"{g} = {' or '.join(on[q] for q in sorted(u))}" for u, g in flags.items()]
    flag_lines += [f"mode = {len(versions) - 1}"] + [
        f"if not ({' or '.join(on[q] for q in sorted(every - ver))}):\n        mode = {j}"
        for j, ver in reversed(list(enumerate(versions[:-1])))
    ]
    return (
        SCAN.replace("{FIXED}", ind(pre + init + flag_lines + outer[0], 4))
        .replace("{BLOCK}", ind(outer[1] + outer[2], 8))
        .replace("{LAYER}", ind(outer[3], 12))
        .replace("{POINTS}", ind(points, 12))
        .replace("{PARAMS}", ", ".join(PARAMS))
        .replace("{P}", ", ".join(f"p[{k}]" for k in range(len(PARAMS))))
    )


# ---- loading (disk cache) ----------------------------------------------------------------------------------------
def _key(src: str) -> str:
    from importlib.metadata import version  # not numba.__version__: a warm process never imports numba

    h = hashlib.sha256(src.encode())
    h.update(f"|numba {version('numba')}|numpy {np.__version__}|py {sys.version}".encode())
    return h.hexdigest()[:20]


def kernels(
    preset: str, law: Any = None, kinds: frozenset[str] = frozenset(), axes: tuple[tuple[str, ...], ...] = ((),) * 4
) -> Kernels:
    """The generated kernel for ``preset`` and layer ``kinds``: the row kernel, or with ``law`` the frontier scan;
    compiled or loaded from disk, one module per preset × kinds × law (objectives, budgets and domain bounds are
    arguments). ``axes``: for the scan, the columns that vary along each axis of a space's index (width rows,
    (experts, top_k) pairs, layer counts, (vocab, tied) pairs): each is read from that axis's table."""
    if not available():
        raise ModuleNotFoundError("No module named 'numba'", name="numba")
    from .compile import compile_preset

    fast = source_of(compile_preset(preset, kinds).fast)
    memo = (preset, kinds, fast, None if law is None else (law_source(law), tuple(law.domain), axes))
    hit = _MEMO.get(memo)
    if hit is not None:
        return hit
    t1 = time.perf_counter()
    src, meta = _source(preset, law, kinds, axes)
    key = _key(src)
    TIMINGS["generate_s"] = time.perf_counter() - t1
    with _LOCK:
        mod = _LOADED.get(key)
        if mod is None:
            mod = load(key, src, specs(meta.per_row, law is not None), TIMINGS)
            _LOADED[key] = mod
    _MEMO[memo] = dataclasses.replace(meta, module=mod, key=key)
    return _MEMO[memo]


# ---- driving the row kernel ----------------------------------------------------------------------------------------
def params(device: Any, workload: Any, precision: Any) -> np.ndarray:
    """The :data:`PARAMS` vector for one device/workload/precision (the assembly's energy coefficients)."""
    from . import assembly as A

    coef = A.energy_coefficients(device, precision)
    if coef is None:
        return np.array([float(workload.output_tokens), 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    return np.array([float(workload.output_tokens), 1.0, coef.p_idle, coef.per_byte,
                     *(coef.per_flop[c] for c in A.ROOF_CLASSES)], dtype=np.float64)  # fmt: skip


def kernel_values(k: Kernels, cols: dict[str, Any], call: tuple, rates: Any, overlap: bool) -> dict[str, Any]:
    """Kernel variable -> value: the compiled ``fast`` function's arguments ``call`` (as the numpy backend passes
    them, :func:`roofline.fast_inputs`), the other per-row columns, the rates engine_overhead reads, the overlap."""
    from .numba_trace import rate_values

    out = dict(zip(k.args, call, strict=True))
    out |= {a: cols[a] for a in k.per_row if a not in out}
    out["r_overlap"] = float(overlap)
    return out | rate_values(rates, k.rate_fields)


def _readonly(v: Any) -> tuple[np.ndarray, int]:
    """A read-only contiguous float64 array and its step (0: one value for every row)."""
    a = np.asarray(v, dtype=np.float64)
    if a.ndim == 0 or (a.ndim == 1 and a.strides[0] == 0):
        a, step = np.array([a.flat[0]]), 0
    else:
        a, step = np.ascontiguousarray(a), 1
    a = a.view()
    a.flags.writeable = False
    return a, step


def evaluate_rows(
    cols: dict[str, np.ndarray],
    device: Any,
    workload: Any,
    precision: Any,
    preset: str,
    kinds: frozenset[str],
    call: tuple,
    rates: Any,
    overlap: bool,
    strict: bool = True,
) -> dict[str, np.ndarray] | None:
    """All outputs of ``roofline.evaluate_columns`` for completed columns, in one generated loop.

    If the cost model uses a construct the printer does not translate: a one-line error when ``strict``, else a
    warning (:func:`.backends.fallback`) and None.
    """
    from .backends import fallback

    try:
        k = kernels(preset, None, kinds)
    except Unsupported as e:
        if strict:
            raise RooflawError(f"backend='numba': the generated kernel cannot express this cost model ({e})") from None
        fallback(f"the generated kernel cannot express this cost model ({e})")
        return None
    n = len(cols["layers"])
    vals = kernel_values(k, cols, call, rates, overlap)
    xs = [_readonly(vals[a]) for a in k.per_row]
    w = np.array([float(vals[a]) for a in k.scalars])
    out = np.empty((len(OUTPUTS), n))
    t0 = time.perf_counter()
    k.rows(tuple(v for v, _ in xs), np.array([st for _, st in xs], dtype=np.int64), w,
           params(device, workload, precision), out)  # fmt: skip
    TIMINGS.setdefault(f"first_call_{preset}_s", time.perf_counter() - t0)
    res = {name: out[j] for j, name in enumerate(OUTPUTS)}
    res["fits_in_memory"] = res["memory_bytes"] <= device.memory_capacity
    order = ("prefill_s", "decode_s", "ttft_s", "tpot_s", "total_s", "prefill_flops", "decode_flops",
             "prefill_bytes", "decode_bytes", "weight_bytes", "kv_cache_bytes", "activation_bytes", "memory_bytes",
             "fits_in_memory", "energy_j", "params_total", "params_active")  # fmt: skip
    return {name: res[name] for name in order}
