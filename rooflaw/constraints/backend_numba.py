"""The numba backend: one fused loop per table, generated from the numpy backend's lambdified cost model.

``kernels(preset, law)`` prints a Python module (the compiled preset's common-subexpression code, re-printed per
candidate by :mod:`.numba_printer`, plus the roofline step-sum and the memory/energy assembly of
:mod:`.roofline` in the same operation order), writes it under the rooflaw cache directory keyed by a hash of its
text and the numba/numpy/Python versions, and imports it; every kernel is ``@njit(cache=True, fastmath=False)``, so
numba's own on-disk cache sits next to the file and a fresh process (or a joblib/Dask worker) loads the machine code
instead of compiling it again. Division by zero gives inf/NaN as in numpy (``error_model="numpy"``).

numba is optional (``pip install rooflaw[fast]``): :func:`available` says whether it is importable.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import inspect
import re
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import RooflawError
from .numba_native import entry_source, load, no_alloc, specs
from .numba_printer import HELPERS, Unsupported, memo_powers, scalarize
from .numba_rows import BLOCK
from .outputs import FLOAT_KEYS as OUTPUTS  # the row kernel's outputs, in order (fits_in_memory comes after)

#: Device/workload scalars every kernel takes (energy coefficients of :func:`assembly.energy_coefficients`).
PARAMS = ("p_sout", "p_emode", "p_idle", "p_ebyte", "p_ef_linear", "p_ef_attention", "p_ef_vector")
#: Tables smaller than this stay on numpy under ``backend="auto"`` (the kernel's fixed call cost dominates).
AUTO_MIN_ROWS = 100_000
#: Tables at least this large run the vectorized row kernel (:mod:`.numba_rows`), specialised to their constant
#: columns; smaller ones the general kernel (no compile per set of constant columns).
VECTOR_MIN_ROWS = 1 << 16
BACKENDS = ("auto", "numpy", "numba")
_LOCK = threading.Lock()
_LOADED: dict[str, Any] = {}
_MEMO: dict[tuple, Kernels] = {}  # (preset, cost source, law source) -> kernels, to skip regenerating
_SOURCES: dict[Any, str] = {}  # lambdified function -> its source
#: Seconds spent importing numba, generating, and compiling (or loading) each kernel, for reports.
TIMINGS: dict[str, float] = {}


def available() -> bool:
    """Whether numba can be imported (the ``fast`` extra)."""
    return importlib.util.find_spec("numba") is not None


def resolve(backend: str, rows: int) -> str:
    """``numpy`` or ``numba`` for a table of ``rows`` candidates (``auto``: numba for large tables if installed)."""
    if backend not in BACKENDS:
        raise RooflawError(f"backend={backend!r}: must be one of {', '.join(BACKENDS)}")
    if backend == "numba" and not available():
        raise RooflawError("backend='numba': numba is not installed (pip install 'rooflaw[fast]')")
    if backend == "auto":
        return "numba" if rows >= AUTO_MIN_ROWS and available() else "numpy"
    return backend


@dataclass(frozen=True)
class Kernels:
    module: Any  # ``rows`` (and ``scan``): the native entries (:mod:`.numba_native`) or numba's dispatchers
    args: tuple[str, ...]  # arguments of the compiled ``fast`` function, in order
    per_row: tuple[str, ...]  # of which architecture/stack columns (one value per candidate)
    scalars: tuple[str, ...]  # of which workload, precision and rate scalars (one value per call)
    fixed: tuple[str, ...]  # per-row columns the scan kernel takes as constants (not decoded from the index)
    law_vars: tuple[str, ...]
    rate_fields: tuple[str, ...]  # Rates fields engine_overhead reads (scalars ``r_<field>``)
    const: tuple[str, ...] | None  # the vectorized row kernel's constant columns (None: the general kernel)
    key: str
    preset: str
    kinds: frozenset[str]
    memo: tuple[int, int, int] = (0, 0, 0)  # memo tables of rows and of scan, first-pass rows of the vector kernel

    def rows(self, x, s, w, p, out) -> None:
        """Run the row kernel (``s``: the columns' steps, or the constant columns' values for the vector one)."""
        mw = np.full((self.memo[0], 256), np.nan)
        if self.const is None:
            self.module.rows(x, s, w, p, out, mw)
        else:
            self.module.rows(x, s, w, p, out, mw, np.empty((self.memo[2], BLOCK)))

    def scan(self, *args) -> None:
        """Run the scan kernel on the arguments :mod:`.scan_source` documents, less the scratch arrays."""
        from .scan_source import scratch

        self.module.scan(*args, np.full((self.memo[1], 256), np.nan), *scratch(args[10], args[16]))


# ---- source generation ---------------------------------------------------------------------------------------
def _law_inputs() -> dict[str, str]:
    """Law variable -> scalar expression over kernel column names, as :func:`objectives.law_inputs` computes it."""
    import sympy as sp

    from ..arch.architecture import COLUMNS, param_counts

    sym = {c: sp.Symbol(f"c_{c}") for c in COLUMNS}
    pc = param_counts(sym)
    emb = pc["embed"] + pc["lm_head"]
    code = {k: sp.pycode(v) for k, v in {"N": pc["total"], "N_active": pc["active"], "emb": emb}.items()}
    return {
        "l": "c_layers", "d": "c_d_model", "r": "(c_top_k * c_ffn) / c_d_model", "G": "(4.0 * c_d_model) / c_ffn",
        "rho": "c_top_k / c_experts", "gqa": "c_heads / c_kv_heads", "d_m": "c_kv_heads * c_head_dim",
        "E": "c_experts", "K": "c_top_k", "N": code["N"], "N_active": code["N_active"],
        "N_nonembed": f"({code['N']}) - ({code['emb']})",
        "N_active_nonembed": f"({code['N_active']}) - ({code['emb']})",
        "D": "p_tokens",
    }  # fmt: skip


def source_of(fn: Any) -> str:
    """The generated source of a lambdified function (also when it was rebuilt from rooflaw's disk cache)."""
    src = getattr(fn, "__source__", None)
    if isinstance(src, str):
        return src
    if fn not in _SOURCES:  # inspect.getsource re-tokenizes the file on every call (~40 ms for the cost model)
        _SOURCES[fn] = inspect.getsource(fn)
    return _SOURCES[fn]


def _source(
    preset: str, law: Any, kinds: frozenset[str], need: tuple[int, ...], domain: tuple = (), const: Any = None
) -> tuple[str, Kernels]:
    import ast

    from ..arch.architecture import COLUMNS, STACK_COLUMNS
    from . import assembly as A
    from .compile import compile_preset
    from .numba_trace import domain_source, trace_engine_overhead

    pr = A.get_preset(preset)
    comp = compile_preset(preset, kinds)
    fast_src = source_of(comp.fast)
    fn_args = tuple(a.arg for a in ast.parse(fast_src).body[0].args.args)  # type: ignore[attr-defined]
    per_row = tuple(a for a in fn_args if a in COLUMNS or a in STACK_COLUMNS)
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
    lines = list(cost.body) + [f"v{i} = {e}" for i, e in enumerate(cost.outputs)]
    lines += ["dec_0 = v1"]  # single assignments: the scan hoists each line to its loop level
    for j in range(nseg):
        k = 2 + 6 * j
        lines.append(f"dec_{j + 1} = dec_{j} + v{k} * _sma(v{k + 2}, v{k + 3}, v{k + 4}, v{k + 5}, v{k + 1})")
    init = list(cost.init)
    if pr.theory:
        lines += ["pre_t = v0", f"dec_t = dec_{nseg}"]
    else:  # the experts-touched powers (libm pow, one per row and phase) memoised like the cost model's own
        for name, expr in (("ovh", ovh), ("ovh_dec", ovh_dec)):
            i, pre, expr = memo_powers(expr, "t_", len(init) // 6, cost.body)
            init += i
            lines += [*pre, f"{name} = {expr}"]
        # roofline.with_overhead: the sum, or the max when the host launches while an accelerator runs
        lines += [
            "pre_t = max(v0, ovh) if r_overlap else v0 + ovh",
            f"dec_t = max(dec_{nseg}, p_sout * ovh_dec) if r_overlap else dec_{nseg} + p_sout * ovh_dec",
        ]
    t = {key: f"v{2 + 6 * nseg + i}" for i, key in enumerate(A.TOTAL_KEYS)}
    fl = {c: f"({t['fpre_' + c]} + {t['fdec_' + c]})" for c in A.ROOF_CLASSES}
    lines += [
        "memory = " + " + ".join(["0.0", *(t[m] for m in pr.memory)]),
        "total = pre_t + dec_t",
        "if p_emode == 0.0:",
        "    energy = total * np.nan",
        "else:",
        f"    energy = p_idle * total + p_ebyte * ({t['bytes_pre']} + {t['bytes_dec']})",
        *(f"    energy = energy + p_ef_{c} * {fl[c]}" for c in A.ROOF_CLASSES),
    ]
    outs = ("pre_t", "dec_t", "pre_t", "dec_t / p_sout", "total",
            f"{t['fpre_linear']} + {t['fpre_attention']} + {t['fpre_vector']}",
            f"{t['fdec_linear']} + {t['fdec_attention']} + {t['fdec_vector']}", t["bytes_pre"], t["bytes_dec"],
            t["weights"], t["kv"], t["act"], "memory", "energy", t["params_total"], t["params_active"])  # fmt: skip
    body = lines + [f"o{k} = {e}" for k, e in enumerate(outs)]  # pasted into each loop: one function, so
    # loop-invariant work (everything over workload and device scalars) is hoisted by LLVM
    rows_init, n_memo = no_alloc(init)
    n_tmp, n_scan = 0, 0
    if const is None:
        rows = _rows_source(per_row, scalars, body, rows_init)
    else:
        from .numba_rows import rows_vec_source

        rows, n_tmp = rows_vec_source(per_row, const, scalars, body, rows_init, len(OUTPUTS), PARAMS, _var)
    src = [
        "# Generated by rooflaw.constraints.backend_numba from the numpy backend's lambdified cost model.",
        "# Do not edit: regenerated whenever the cost model, the law or the library versions change.",
        "import math",
        "import numpy as np",
        "from numba import carray, cfunc, njit",
        "from numba import types as _t",
        "_JI = dict(cache=True, fastmath=False, nogil=True, error_model='numpy')",
        HELPERS,
    ]
    kernels = {"rows": "\n".join(rows)}  # each becomes the body of its C entry (numba_native.entry_source)
    law_vars: tuple[str, ...] = ()
    fixed = tuple(a for a in per_row if a not in _DECODE)
    if law is not None:
        law_vars = tuple(law.variables)
        inputs = _law_inputs()
        unknown = [v for v in law_vars if v not in inputs]
        if unknown:
            raise Unsupported(f"law variable(s) {unknown}")
        lz = scalarize(source_of(law._fn), {v: f"l_{v}" for v in law_vars}, "u_")
        loss = [f"l_{v} = {inputs[v]}" for v in law_vars] + lz.body
        if domain:  # outside the law's fitted domain counts as no loss (LossLaw.in_domain, same bounds)
            inputs["D"] = "p_tokens"
            loss += domain_source(domain, inputs) + [f"loss = {lz.outputs[0]} if dom else math.nan"]
        else:
            loss.append(f"loss = {lz.outputs[0]}")
        scan_init, n_scan = no_alloc(init + lz.init)
        kernels["scan"] = _scan_source(per_row, scalars, fixed, body, loss, scan_init, need)
    src += ["", *(entry_source(fn, spec, kernels[fn]) for fn, spec in specs(per_row, const, law is not None).items())]
    return "\n".join(src) + "\n", Kernels(
        None, fn_args, per_row, scalars, fixed, law_vars, rate_fields, const, "", preset, kinds, (n_memo, n_scan, n_tmp)
    )


def _var(a: str) -> str:
    """The kernel variable of a scalar argument (rates read by engine_overhead keep their ``r_`` name)."""
    return a if a.startswith("r_") else f"c_{a}"


def _rows_source(per_row, scalars, body: list[str], init: list[str]) -> list[str]:
    """The row kernel: one loop over the table, every output of a row computed in registers and stored once;
    statements that read only workload/device scalars run once before the loop. (Recomputing a row's statements
    only when its columns changed from the previous row measured no faster: 370-560 vs 260-300 ns per row.)"""
    stmts = _statements(body)
    levels = _levels(stmts, {f"c_{a}": 1 for a in per_row})
    once = [ln for st, x in zip(stmts, levels, strict=True) if x == 0 for ln in st]
    each = [ln for st, x in zip(stmts, levels, strict=True) if x != 0 for ln in st]
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


#: Loop level of each decoded column in the scan's loop nest: 1-2 per (width, experts) block, 3 per layer count,
#: 4 per point (vocab, tied). Everything else (workload, precision, device, fixed columns) is level 0.
_LEVEL = {"d_model": 1, "head_dim": 1, "heads": 1, "kv_heads": 1, "ffn": 1, "shared_ffn": 1, "experts": 2,
          "top_k": 2, "moe": 2, "layers": 3, "attn_layers": 3, "ffn_layers": 3, "vocab": 4, "tied": 4}  # fmt: skip
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=(?!=)")


def _statements(lines: list[str]) -> list[list[str]]:
    """Group lines into statements: an unindented line plus the indented / ``else:`` lines that follow it."""
    out: list[list[str]] = []
    for ln in lines:
        if out and (ln.startswith((" ", "else:", "elif "))):
            out[-1].append(ln)
        else:
            out.append([ln])
    return out


def _levels(stmts: list[list[str]], level: dict[str, int]) -> list[int]:
    """The loop level of each statement: the deepest level of the names it reads (single assignments only)."""
    out = []
    for st in stmts:
        lv = max((level.get(n, 0) for ln in st for n in _NAME.findall(ln)), default=0)
        for ln in st:
            m = _ASSIGN.match(ln)
            if m:
                if m.group(1) in level and level[m.group(1)] != lv and not ln.startswith(" "):
                    raise Unsupported(f"{m.group(1)} assigned at two loop levels")
                level[m.group(1)] = max(lv, level.get(m.group(1), 0))
        out.append(lv)
    return out


def _scan_source(per_row, scalars, fixed, body: list[str], loss: list[str], init: list[str], need) -> str:
    """The scan kernel: each statement of the point code is placed in the outermost loop where its inputs are
    known, so per-layer and per-block work is done once per block, not once per point (same operations)."""
    from .scan_source import SCAN

    pre = [f"{_var(a)} = w[{k}]" for k, a in enumerate(scalars)] + [f"c_{a} = fx[{k}]" for k, a in enumerate(fixed)]
    dec = [f"c_{a} = {_DECODE[a]}" for a in _DECODE if a in per_row]
    level = {f"c_{a}": _LEVEL[a] for a in _DECODE if a in per_row}
    stmts = _statements(dec + body + loss)
    levels = _levels(stmts, level)
    at = {lv: [ln for st, x in zip(stmts, levels, strict=True) if x == lv for ln in st] for lv in range(5)}
    # only the outputs the scan reads are stored: LLVM drops the arithmetic of the others
    point = at[4] + [f"v[{k}] = o{k}" for k in range(len(OUTPUTS)) if k in need] + ["v[16] = loss"]
    ind = lambda lines, n: "\n".join(" " * n + ln for ln in lines)  # noqa: E731
    return (
        SCAN.replace("{FIXED}", ind(pre + init + at[0], 4))
        .replace("{BLOCK}", ind(at[1] + at[2], 8))
        .replace("{LAYER}", ind(at[3], 12))
        .replace("{POINT}", ind(point, 16))
        .replace("{PARAMS}", ", ".join(PARAMS))
        .replace("{P}", ", ".join(f"p[{k}]" for k in range(len(PARAMS))))
    )


#: How the scan kernel decodes a flat index into columns (mirrors ``Space.columns_at`` and the uniform-stack
#: defaults of ``roofline.complete_columns``): iv fastest, then layers, then (experts, top_k), then the width row
#: (d_model, head_dim, heads, kv_heads, ffn). Derived entries come after the columns they use.
_DECODE = {
    "layers": "float(TL[il])", "d_model": "float(TW[iw, 0])", "head_dim": "float(TW[iw, 1])",
    "heads": "float(TW[iw, 2])", "kv_heads": "float(TW[iw, 3])", "ffn": "float(TW[iw, 4])",
    "shared_ffn": "float(TW[iw, 4])", "experts": "float(TM[im, 0])", "top_k": "float(TM[im, 1])",
    "moe": "1.0 if TM[im, 0] > 1 else 0.0", "vocab": "float(TV[iv, 0])", "tied": "float(TV[iv, 1])",
    "attn_layers": "c_layers - c_mla_layers - c_mixer_layers", "ffn_layers": "c_layers - c_dense_layers",
}  # fmt: skip


# ---- loading (disk cache) ----------------------------------------------------------------------------------------
def _key(src: str) -> str:
    from importlib.metadata import version  # not numba.__version__: a warm process never imports numba

    h = hashlib.sha256(src.encode())
    h.update(f"|numba {version('numba')}|numpy {np.__version__}|py {sys.version}".encode())
    return h.hexdigest()[:20]


def kernels(
    preset: str,
    law: Any = None,
    kinds: frozenset[str] = frozenset(),
    need: tuple[int, ...] = tuple(range(16)),
    domain: tuple[tuple[str, float, float], ...] = (),
    const: tuple[str, ...] | None = None,
) -> Kernels:
    """The generated kernels for ``preset`` and layer ``kinds`` (and ``law``, for the frontier scan, which stores
    only the outputs ``need``: indices into :data:`OUTPUTS`, and treats points outside ``domain`` -- (law
    variable, lo, hi) -- as having no loss), compiled or loaded from disk."""
    if not available():
        raise ModuleNotFoundError("No module named 'numba'", name="numba")
    from .compile import compile_preset

    fast = source_of(compile_preset(preset, kinds).fast)
    need = tuple(sorted(set(need))) if law is not None else ()
    domain = tuple(domain) if law is not None else ()
    const = None if law is not None or const is None else tuple(const)
    memo = (preset, kinds, fast, None if law is None else source_of(law._fn), need, domain, const)
    hit = _MEMO.get(memo)
    if hit is not None:
        return hit
    t1 = time.perf_counter()
    src, meta = _source(preset, law, kinds, need, domain, const)
    key = _key(src)
    TIMINGS["generate_s"] = time.perf_counter() - t1
    with _LOCK:
        mod = _LOADED.get(key)
        if mod is None:
            mod = load(key, src, specs(meta.per_row, const, law is not None), const is not None, TIMINGS)
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


def call_values(
    cols: dict[str, np.ndarray], device: Any, workload: Any, precision: Any, k: Kernels, app: Any = None
) -> dict:
    """Argument name -> value of the compiled ``fast`` function, exactly as ``roofline._evaluate_chunk`` builds it."""
    from . import assembly as A
    from .compile import compile_preset
    from .roofline import model_call
    from .scenario import Scenario

    pr = A.get_preset(k.preset)
    comp = compile_preset(k.preset, k.kinds)  # the kernels were generated for this table's stack kinds
    sc = Scenario.given(device, workload, precision, k.preset, app)
    rates = sc.rates
    from .numba_trace import rate_values

    out = dict(zip(k.args, model_call(cols, sc, comp), strict=True))
    out |= {a: cols[a] for a in k.per_row if a not in out}
    out["r_overlap"] = float(bool(app is not None and not pr.theory and app.overlap))
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
    strict: bool = True,
    app: Any = None,
    block: np.ndarray | None = None,
) -> dict[str, np.ndarray] | None:
    """All outputs of ``roofline.evaluate_columns`` for completed columns, in one generated loop (written into
    ``block``, a C-contiguous (len(OUTPUTS), n) float64 array, when given: see :mod:`.outputs`).

    If the cost model uses a construct the printer does not translate: a one-line error when ``strict``, else None.
    """
    from . import assembly as A
    from .roofline import stack_kinds

    try:
        k = kernels(preset, None, stack_kinds(cols) if A.get_preset(preset).kinds else frozenset())
    except Unsupported as e:
        if strict:
            raise RooflawError(f"backend='numba': the generated kernel cannot express this cost model ({e})") from None
        return None
    n = len(cols["layers"])
    vals = call_values(cols, device, workload, precision, k, app)
    xs = [_readonly(vals[a]) for a in k.per_row]
    w = np.array([float(vals[a]) for a in k.scalars])
    out = np.empty((len(OUTPUTS), n)) if block is None else block
    p = params(device, workload, precision)
    t0 = time.perf_counter()
    if n >= VECTOR_MIN_ROWS and any(st for _, st in xs):  # the SIMD kernel for this table's constant columns
        # (one compile per such set)
        const = tuple(a for a, (_, st) in zip(k.per_row, xs, strict=True) if st == 0)
        kv = kernels(preset, None, k.kinds, const=const)
        cx = np.array([v[0] for v, st in xs if st == 0])
        kv.rows(tuple(v for v, st in xs if st != 0), cx, w, p, out)
    else:
        k.rows(tuple(v for v, _ in xs), np.array([st for _, st in xs], dtype=np.int64), w, p, out)
    TIMINGS.setdefault(f"first_call_{preset}_s", time.perf_counter() - t0)
    res = {name: out[j] for j, name in enumerate(OUTPUTS)}
    res["fits_in_memory"] = res["memory_bytes"] <= device.memory_capacity
    order = ("prefill_s", "decode_s", "ttft_s", "tpot_s", "total_s", "prefill_flops", "decode_flops",
             "prefill_bytes", "decode_bytes", "weight_bytes", "kv_cache_bytes", "activation_bytes", "memory_bytes",
             "fits_in_memory", "energy_j", "params_total", "params_active")  # fmt: skip
    return {name: res[name] for name in order}
