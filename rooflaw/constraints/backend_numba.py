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

import hashlib
import importlib.util
import inspect
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import RooflawError
from .numba_printer import HELPERS, Unsupported, scalarize

#: Outputs of the row kernel, in order (``fits_in_memory`` is derived from memory_bytes afterwards).
OUTPUTS = (
    "prefill_s", "decode_s", "ttft_s", "tpot_s", "total_s", "prefill_flops", "decode_flops", "prefill_bytes",
    "decode_bytes", "weight_bytes", "kv_cache_bytes", "activation_bytes", "memory_bytes", "energy_j",
    "params_total", "params_active",
)  # fmt: skip
#: Device/workload scalars every kernel takes after the cost-model arguments, in order.
PARAMS = (
    "inv_linear", "inv_attention", "inv_vector", "inv_beta", "p_ko", "p_sout", "p_mode", "p_eflop", "p_ebyte",
    "p_dyn", "p_share", "p_mshare", "p_idle", "p_rlin", "p_ratt", "p_rvec", "p_bw",
)  # fmt: skip
#: Tables smaller than this stay on numpy under ``backend="auto"`` (the kernel's fixed call cost dominates).
AUTO_MIN_ROWS = 100_000
BACKENDS = ("auto", "numpy", "numba")
_LOCK = threading.Lock()
_LOADED: dict[str, ModuleType] = {}
_MEMO: dict[tuple, Kernels] = {}  # (preset, cost source, law source) -> kernels, to skip regenerating
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
    module: ModuleType
    args: tuple[str, ...]  # cost-model argument names (roofline.ARG_NAMES order)
    law_vars: tuple[str, ...]
    key: str

    @property
    def rows(self):
        return self.module.rows

    @property
    def scan(self):
        return self.module.scan


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
    return src if isinstance(src, str) else inspect.getsource(fn)


def _source(preset: str, law: Any) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    from .compile import compile_preset

    comp = compile_preset(preset)
    fast_src = source_of(comp.fast)
    import ast

    fn_args = [a.arg for a in ast.parse(fast_src).body[0].args.args]  # type: ignore[attr-defined]
    cost_args = tuple(a for a in fn_args if a not in PARAMS[:4])
    names = {a: f"c_{a}" for a in cost_args} | {a: a for a in PARAMS[:4]}
    cost = scalarize(fast_src, names, "t_")
    nvar = len(comp.varying)
    if len(cost.outputs) != 4 + 4 * nvar + 15:
        raise Unsupported(f"unexpected output count {len(cost.outputs)}")
    lines = [f"    {s}" for s in cost.body]
    lines += [f"    v{i} = {e}" for i, e in enumerate(cost.outputs)]
    lines += ["    pre_l = v0", "    pre_m = v1", "    dec_l = v2", "    dec_m = v3"]
    for j, i in enumerate(comp.varying):
        tgt = "dec_l" if comp.ops[i].scope == "layer" else "dec_m"
        a = 4 + 4 * j
        lines.append(f"    {tgt} = {tgt} + _sma(v{a}, v{a + 1}, v{a + 2}, v{a + 3}, p_sout)")
    t = [f"v{4 + 4 * nvar + k}" for k in range(15)]
    weights, kv, act, p_total, p_active, fpl, fpa, fpv, fdl, fda, fdv, bpre, bdec = t[:13]
    full = preset == "full"
    lines += [
        "    pre_t = c_layers * pre_l + pre_m",
        "    dec_t = c_layers * dec_l + dec_m",
    ]
    if full:
        lines += [
            "    if p_ko != 0.0:",
            f"        launches = c_layers * {t[-2]} + {t[-1]}",
            "        pre_t = pre_t + p_ko * launches",
            "        dec_t = dec_t + (p_ko * p_sout) * launches",
        ]
    lines += [
        f"    memory = {weights} + ({kv} + {act})" if full else f"    memory = {weights} + 0.0",
        "    total = pre_t + dec_t",
        f"    flops_pre = {fpl} + {fpa} + {fpv}",
        f"    flops_dec = {fdl} + {fda} + {fdv}",
        "    if p_mode == 1.0:",
        f"        dyn = p_eflop * (flops_pre + flops_dec) + p_ebyte * ({bpre} + {bdec})",
        "    elif p_mode == 2.0:",
        f"        busy_c = ({fpl} + {fdl}) / p_rlin + ({fpa} + {fda}) / p_ratt + ({fpv} + {fdv}) / p_rvec",
        f"        busy_m = ({bpre} + {bdec}) / p_bw",
        "        dyn = p_dyn * (p_share * busy_c + p_mshare * busy_m)",
        "    else:",
        "        dyn = np.nan",
        "    energy = p_idle * total + dyn",
    ]
    outs = ("pre_t", "dec_t", "pre_t", "dec_t / p_sout", "total", "flops_pre", "flops_dec", bpre, bdec, weights, kv,
            act, "memory", "energy", p_total, p_active)  # fmt: skip
    lines += [f"    o{k} = {e}" for k, e in enumerate(outs)]
    # the point code is pasted into each loop (one function: loop-invariant work is hoisted by LLVM)
    body = [ln[4:] for ln in lines]
    from ..arch.architecture import COLUMNS

    per_row = [a for a in cost_args if a in COLUMNS]  # architecture columns: one value per candidate
    scalars = [a for a in cost_args if a not in COLUMNS]  # workload and precision: one value per call
    rows = [
        "@njit(**_JK)",
        "def rows(x, s, w, p, out):",
        f"    {', '.join(PARAMS)} = {', '.join(f'p[{k}]' for k in range(len(PARAMS)))}",
        *(f"    c_{a} = w[{k}]" for k, a in enumerate(scalars)),
        *(f"    x{k} = x[{k}]" for k in range(len(per_row))),
        *(f"    s{k} = s[{k}]" for k in range(len(per_row))),
        *(f"    {ln}" for ln in cost.init),
        "    for i in range(out.shape[1]):",
        *(f"        c_{a} = x{k}[i * s{k}]" for k, a in enumerate(per_row)),
        *(f"        {ln}" for ln in body),
        *(f"        out[{k}, i] = o{k}" for k in range(len(OUTPUTS))),
    ]
    src = [
        "# Generated by rooflaw.constraints.backend_numba from the numpy backend's lambdified cost model.",
        "# Do not edit: regenerated whenever the cost model, the law or the library versions change.",
        "import math",
        "import numpy as np",
        "from numba import njit",
        "_JI = dict(cache=True, fastmath=False, nogil=True, error_model='numpy')",
        "_JK = dict(cache=True, fastmath=False, nogil=True, error_model='numpy')",
        HELPERS,
        *rows,
    ]
    law_vars: tuple[str, ...] = ()
    if law is not None:
        law_vars = tuple(law.variables)
        inputs = _law_inputs()
        unknown = [v for v in law_vars if v not in inputs]
        if unknown:
            raise Unsupported(f"law variable(s) {unknown}")
        lsrc = source_of(law._fn)
        lz = scalarize(lsrc, {v: f"l_{v}" for v in law_vars}, "u_")
        loss = [f"l_{v} = {inputs[v]}" for v in law_vars] + lz.body + [f"loss = {lz.outputs[0]}"]
        src += ["", _scan_source(cost_args, body, loss, cost.init + lz.init)]
    return "\n".join(src) + "\n", cost_args, law_vars


def _scan_source(cost_args: tuple[str, ...], body: list[str], loss: list[str], init: list[str]) -> str:
    from .scan_source import SCAN

    fixed = [f"c_{a} = fx[{_FIXED.index(a)}]" for a in cost_args if a not in _DECODE] + init
    fixed = "\n".join(f"    {ln}" for ln in fixed)
    point = [f"c_{a} = {_DECODE[a]}" for a in cost_args if a in _DECODE] + body + loss
    point += [f"v[{k}] = o{k}" for k in range(len(OUTPUTS))] + ["v[16] = loss"]
    return (
        SCAN.replace("{FIXED}", fixed)
        .replace("{POINT}", "\n".join(" " * 12 + ln for ln in point))
        .replace("{PARAMS}", ", ".join(PARAMS))
        .replace("{P}", ", ".join(f"p[{k}]" for k in range(len(PARAMS))))
    )


#: How the scan kernel decodes a flat index into columns (mirrors ``Space.columns_at``): iv fastest, then
#: layers, then (experts, top_k), then the width row (d_model, head_dim, heads, kv_heads, ffn).
_DECODE = {
    "layers": "float(TL[il])", "d_model": "float(TW[iw, 0])", "head_dim": "float(TW[iw, 1])",
    "heads": "float(TW[iw, 2])", "kv_heads": "float(TW[iw, 3])", "ffn": "float(TW[iw, 4])",
    "shared_ffn": "float(TW[iw, 4])", "experts": "float(TM[im, 0])", "top_k": "float(TM[im, 1])",
    "moe": "1.0 if TM[im, 0] > 1 else 0.0", "vocab": "float(TV[iv, 0])", "tied": "float(TV[iv, 1])",
}  # fmt: skip
#: Columns the scan takes as constants (from the space's fixed values, else 0), in this order.
_FIXED = ("shared_experts", "gated", "qkv_bias", "layernorm", "qk_norm_size", "norms_per_layer", "shared_gate",
          "qk_norm_on", "B", "S_in", "S_out", "unfused", "b_w", "b_a", "b_kv", "b_v")  # fmt: skip


# ---- loading (disk cache) ----------------------------------------------------------------------------------------
def _key(src: str) -> str:
    import numba

    h = hashlib.sha256(src.encode())
    h.update(f"|numba {numba.__version__}|numpy {np.__version__}|py {sys.version}".encode())
    return h.hexdigest()[:20]


def _kernel_dir() -> Path:
    from .. import cache

    d = cache.cache_dir()
    if d is None:  # caching disabled: a private temporary directory for this process
        d = Path(tempfile.mkdtemp(prefix="rooflaw-numba-"))
    return d / "numba"


def kernels(preset: str, law: Any = None) -> Kernels:
    """The generated kernels for ``preset`` (and ``law``, for the frontier scan), compiled or loaded from disk."""
    t0 = time.perf_counter()
    import numba  # noqa: F401 - fails early with ImportError when the extra is missing

    TIMINGS.setdefault("import_numba_s", time.perf_counter() - t0)
    from .compile import compile_preset

    memo = (preset, source_of(compile_preset(preset).fast), None if law is None else source_of(law._fn))
    hit = _MEMO.get(memo)
    if hit is not None:
        return hit
    t1 = time.perf_counter()
    src, args, law_vars = _source(preset, law)
    key = _key(src)
    TIMINGS["generate_s"] = time.perf_counter() - t1
    with _LOCK:
        mod = _LOADED.get(key)
        if mod is None:
            d = _kernel_dir()
            d.mkdir(parents=True, exist_ok=True)
            path = d / f"rl_{key}.py"
            if not path.is_file() or path.read_text(encoding="utf-8") != src:
                fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(src)
                os.replace(tmp, path)
            name = f"rooflaw_kernel_{key}"
            spec = importlib.util.spec_from_file_location(name, path)
            assert spec is not None and spec.loader is not None
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod
            spec.loader.exec_module(mod)
            _LOADED[key] = mod
    _MEMO[memo] = Kernels(mod, args, law_vars, key)
    return _MEMO[memo]


# ---- driving the row kernel ----------------------------------------------------------------------------------------
def params(device: Any, workload: Any, precision: Any) -> np.ndarray:
    """The :data:`PARAMS` vector for one device/workload/precision, computed as :mod:`.roofline` computes them."""
    from .roofline import COMPUTE_POWER_SHARE, _roofs_by_class

    r = _roofs_by_class(device, precision)
    ce = device.compute_efficiency
    if device.energy_per_flop is not None and device.energy_per_byte is not None:
        mode = 1.0
    elif device.power_peak is not None:
        mode = 2.0
    else:
        mode = 0.0
    idle = device.power_idle or 0.0
    return np.array([
        1 / (r["linear"] * ce), 1 / (r["attention"] * ce), 1 / (r["vector"] * ce),
        1.0 / (device.memory_bandwidth * device.memory_efficiency), float(device.kernel_overhead or 0.0),
        float(workload.output_tokens), mode, device.energy_per_flop or 0.0, device.energy_per_byte or 0.0,
        (device.power_peak or 0.0) - idle, COMPUTE_POWER_SHARE, 1 - COMPUTE_POWER_SHARE, idle,
        r["linear"], r["attention"], r["vector"], float(device.memory_bandwidth),
    ], dtype=np.float64)  # fmt: skip


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
    cols: dict[str, np.ndarray], device: Any, workload: Any, precision: Any, preset: str, strict: bool = True
) -> dict[str, np.ndarray] | None:
    """All outputs of ``roofline.evaluate_columns`` for completed columns, in one generated loop.

    If the cost model uses a construct the printer does not translate: a one-line error when ``strict``, else None.
    """
    from .roofline import _args

    try:
        k = kernels(preset)
    except Unsupported as e:
        if strict:
            raise RooflawError(f"backend='numba': the generated kernel cannot express this cost model ({e})") from None
        return None
    n = len(cols["layers"])
    from ..arch.architecture import COLUMNS

    vals = dict(zip(k.args, _args(cols, workload, precision), strict=True))
    xs = [_readonly(vals[a]) for a in k.args if a in COLUMNS]
    x = tuple(a for a, _ in xs)
    s = np.array([st for _, st in xs], dtype=np.int64)
    w = np.array([float(vals[a]) for a in k.args if a not in COLUMNS])
    out = np.empty((len(OUTPUTS), n))
    t0 = time.perf_counter()
    k.rows(x, s, w, params(device, workload, precision), out)
    TIMINGS.setdefault(f"first_call_{preset}_s", time.perf_counter() - t0)
    res = {name: out[j] for j, name in enumerate(OUTPUTS)}
    res["fits_in_memory"] = res["memory_bytes"] <= device.memory_capacity
    order = ("prefill_s", "decode_s", "ttft_s", "tpot_s", "total_s", "prefill_flops", "decode_flops",
             "prefill_bytes", "decode_bytes", "weight_bytes", "kv_cache_bytes", "activation_bytes", "memory_bytes",
             "fits_in_memory", "energy_j", "params_total", "params_active")  # fmt: skip
    return {name: res[name] for name in order}
