"""The generated kernels' C entries, and (only with ``ROOFLAW_NUMBA_NATIVE=1``) running them from their cached
machine code without importing numba.

Importing numba and initialising its typing/lowering registries costs ~1 s per process (numba imports
``scipy.linalg`` for a BLAS check, ``cffi``, …) even when every kernel is in numba's on-disk cache, and every
joblib/Dask worker pays it again. So each generated kernel also gets a C entry point (``@cfunc`` taking raw
pointers, shapes and scalars; :func:`entry_source`). When numba compiles a kernel module, the entries' object
code is stored in rooflaw's cache (HMAC-signed like every entry, keyed by the generated source, the library
versions and the host CPU); a later process links it with llvmlite's ORC JIT (a few ms) and calls it through
ctypes (the GIL is released during the call). It is the same machine code numba would run, so the values are
the same. It relies on numba's private object-code serialisation and on llvmlite's ORC JIT, so it is off by
default (numba's own cache costs ~0.75 s more per fresh process) and, when asked for, fails loudly.

The kernels allocate nothing (their scratch arrays are arguments), so the code needs no numba runtime; the only
external symbols besides libm are numba's error-path helpers, which these kernels never reach (no exceptions
under ``error_model='numpy'``) and which are bound to a stub that aborts loudly if they ever were.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import sys
import threading
import time
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np

from .numba_trace import Unsupported

#: Argument kinds of a kernel: scalars, C-contiguous arrays (dtype, ndim), or a tuple of 1-D float64 arrays.
_DT = {"f8": (np.float64, "float64"), "i8": (np.int64, "int64")}
_CACHED = "error_model='numpy', cache=True"  # the entries' options: numba keeps their machine code on disk
_LOCK = threading.Lock()
_JIT: list[Any] = []  # the ORC JIT and the error-path stub's address, made once per process
_KEEP: list[Any] = []
#: numba's error-path helpers the object code refers to (exception raising, NRT frees): never reached.
_ERROR_PATH = ("NRT_Free", "NRT_MemInfo_call_dtor", "numba_unpickle", "numba_runtime_build_excinfo_struct",
               "numba_gil_release", "numba_gil_ensure", "numba_do_raise", "numba_extract_record_data",
               "numba_get_list_ptr", "NRT_MemInfo_alloc_safe_aligned", "NRT_MemInfo_alloc")  # fmt: skip


def _parse(kind: str) -> tuple[str, int, int]:
    """``"f8"`` -> (f8, 0, 0); ``"f8[:,:]"`` -> (f8, 2, 0); ``"f8[:]*22"`` -> (f8, 1, 22) (a tuple of 22)."""
    base, _, rest = kind.partition("[")
    if not rest:
        return base, 0, 0
    dims, _, count = rest.partition("]")
    return base, dims.count(":"), int(count[1:]) if count else 0


def entry_source(fn: str, spec: Sequence[tuple[str, str]], kernel: str) -> str:
    """Source of ``{fn}_c``: a numba ``cfunc`` whose body IS generated kernel ``kernel`` (its ``def`` line replaced
    by raw pointers, shapes and scalars turned back into the kernel's arguments, by position). Compiling the body
    once inside the entry costs one numba compile per kernel; an ``@njit`` kernel called (or inlined) from the entry
    cost 1.8-2.4x more cold compile time (typing and optimising the body twice, or copying its IR to inline it)."""
    import ast

    lines = kernel.strip("\n").split("\n")
    fdef = ast.parse("\n".join(lines)).body[0]
    if not isinstance(fdef, ast.FunctionDef):
        raise Unsupported(f"kernel {fn}: not a function definition")
    names = [a.arg for a in fdef.args.args]
    if len(names) != len(spec):
        raise Unsupported(f"kernel {fn}: {len(names)} arguments, {len(spec)} declared")
    params: list[str] = []
    sig: list[str] = []
    conv: list[str] = []
    for (_, kind), arg in zip(spec, names, strict=True):
        base, nd, count = _parse(kind)
        t = _DT[base][1]
        if nd == 0:
            params.append(f"_a{len(params)}_")
            sig.append(f"_t.{t}")
            conv.append(f"    {arg} = {params[-1]}")
            continue
        items = []
        for _ in range(max(count, 1)):
            ptr = f"_a{len(params)}_"
            dims = [f"_a{len(params) + 1 + d}_" for d in range(nd)]
            params += [ptr, *dims]
            sig += [f"_t.CPointer(_t.{t})", *(["_t.int64"] * nd)]
            items.append(f"carray({ptr}, ({', '.join(dims)},))")
        conv.append(f"    {arg} = ({', '.join(items)},)" if count else f"    {arg} = {items[0]}")
    return "\n".join([
        f"@cfunc(_t.void({', '.join(sig)}), {_CACHED})",
        f"def {fn}_c({', '.join(params)}):",
        *conv,
        *lines[fdef.body[0].lineno - 1:],
    ])  # fmt: skip


class Native:
    """A kernel's C entry as a Python callable taking the kernel's own arguments (arrays must already have the
    declared dtype and be C-contiguous: nothing is converted silently, outputs are written in place)."""

    def __init__(self, address: int, spec: Sequence[tuple[str, str]], owner: Any):
        self.spec = [(name, *_parse(kind)) for name, kind in spec]
        argtypes: list[Any] = []
        for _, base, nd, count in self.spec:
            if nd == 0:
                argtypes.append(ctypes.c_double if base == "f8" else ctypes.c_int64)
            else:
                argtypes += [ctypes.c_void_p, *([ctypes.c_int64] * nd)] * max(count, 1)
        self._fn = ctypes.CFUNCTYPE(None, *argtypes)(address)
        self._owner = owner  # the JIT resource tracker: the code stays mapped while this object lives

    def __call__(self, *args: Any) -> None:
        if len(args) != len(self.spec):
            raise TypeError(f"expected {len(self.spec)} arguments, got {len(args)}")
        flat: list[Any] = []
        for (name, base, nd, count), a in zip(self.spec, args, strict=True):
            if nd == 0:
                flat.append(float(a) if base == "f8" else int(a))
                continue
            for x in a if count else (a,):
                if not isinstance(x, np.ndarray) or x.dtype != _DT[base][0] or x.ndim != nd:
                    raise TypeError(f"argument {name}: expected a {base} array of {nd} dimension(s)")
                if not x.flags.c_contiguous:
                    raise TypeError(f"argument {name}: expected a C-contiguous array")
                flat += [x.__array_interface__["data"][0], *x.shape]
            if count and len(a) != count:
                raise TypeError(f"argument {name}: expected {count} arrays, got {len(a)}")
        self._fn(*flat)


def _stub() -> int:
    def fail() -> None:  # pragma: no cover - only reached if a kernel raised, which these kernels cannot
        sys.stderr.write("rooflaw: a natively loaded kernel reached numba's error path; aborting\n")
        sys.stderr.flush()
        import os

        os.abort()

    cb = ctypes.CFUNCTYPE(None)(fail)
    _KEEP.append(cb)  # keep the callback alive
    return ctypes.cast(cb, ctypes.c_void_p).value or 0


def _jit() -> tuple[Any, int]:
    with _LOCK:
        if not _JIT:
            import llvmlite.binding as llvm

            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            _JIT.append(llvm.create_lljit_compiler())
            _JIT.append(_stub())
        return _JIT[0], _JIT[1]


def host() -> str:
    """The host CPU and llvmlite version, part of the object code's key (the code uses this CPU's features)."""
    import llvmlite
    import llvmlite.binding as llvm

    return f"llvmlite {llvmlite.__version__}|{llvm.get_host_cpu_name()}|{llvm.get_host_cpu_features().flatten()}"


def link(name: str, objects: dict[str, tuple[str, bytes]], specs: dict[str, Sequence[tuple[str, str]]]) -> dict:
    """Link the object code of entries ``{fn: (symbol, code)}`` as JIT library ``name``: ``{fn: Native}``."""
    import llvmlite.binding as llvm

    lljit, stub = _jit()
    b = llvm.JITLibraryBuilder().add_current_process()
    for _, code in objects.values():
        b.add_object_img(code)
    for sym in _ERROR_PATH:
        b.import_symbol(sym, stub)
    for sym, _ in objects.values():
        b.export_symbol(sym)
    with _LOCK:
        rt = b.link(lljit, name)
    return {fn: Native(rt[sym], specs[fn], rt) for fn, (sym, _) in objects.items()}


def object_code(entry: Any) -> tuple[str, bytes]:
    """(symbol, object code) of a compiled numba ``cfunc``."""
    _, kind, data = entry._library.serialize_using_object_code()
    if kind != "object":
        raise RuntimeError(f"numba returned {kind!r} code")
    return entry.native_name, bytes(data[0])


def load(key: str, src: str, specs: dict, timings: dict) -> Any:
    """The C entries of generated module ``src``, compiled by numba (or loaded from numba's disk cache beside the
    file). With ``ROOFLAW_NUMBA_NATIVE=1`` their object code is kept in rooflaw's cache and linked natively in
    later processes, which then never import numba; a failure there raises (it is a setting the user chose)."""
    from .. import cache
    from ..errors import ExternalError

    t0 = time.perf_counter()
    native = os.environ.get("ROOFLAW_NUMBA_NATIVE", "0") == "1"
    ckey = f"native-{key}-{hashlib.sha256(host().encode()).hexdigest()[:12]}" if native else ""
    objs = cache.load(ckey) if native else None
    try:
        if isinstance(objs, dict) and set(objs) == set(specs):
            fns = link(f"rl_{key}_cached", objs, specs)
            timings.setdefault("native_load_s", time.perf_counter() - t0)
            return SimpleNamespace(**fns)
        import numba  # noqa: F401 - fails with ImportError when the extra is missing

        timings.setdefault("import_numba_s", time.perf_counter() - t0)
        if native:  # object code exists only for a fresh compile, not for an entry numba loaded from its cache
            src, key = src.replace(_CACHED, _CACHED.replace("True", "False")), f"{key}_n"
        mod = cache.load_generated(f"rl_{key}", src, f"rooflaw_kernel_{key}")
        if not native:
            return SimpleNamespace(**{f: Native(getattr(mod, f"{f}_c").address, sp, mod) for f, sp in specs.items()})
        objs = {fn: object_code(getattr(mod, f"{fn}_c")) for fn in specs}
        fns = link(f"rl_{key}", objs, specs)
    except Exception as e:  # noqa: BLE001 - the native loader was asked for: say why it cannot run
        if not native or isinstance(e, ImportError):
            raise
        raise ExternalError(f"ROOFLAW_NUMBA_NATIVE=1: the kernels' object code cannot be linked ({e})") from e
    cache.store(ckey, objs)
    return SimpleNamespace(**fns)


def specs(n_rows: int, scan: bool) -> dict[str, list[tuple[str, str]]]:
    """Argument kinds of the module's kernel (``rows`` over ``n_rows`` per-row columns, or ``scan``), for its C
    entry."""
    kinds = (
        "pos:i8 stop:i8 TW:f8[:,:] TM:f8[:,:] TL:f8[:,:] TV:f8[:,:] fx:f8[:] w:f8[:] radix:i8[:] obj:i8[:] need:i8[:] "
        "latc:i8 bcol:i8[:] bval:f8[:] lohi:f8[:] stair:f8[:] out_idx:i8[:] out_val:f8[:,:] stats:f8[:] v:f8[:] "
        "sf:f8[:,:] si:i8[:,:] pre:f8[:] PL:f8[:,:] PV:f8[:,:]"
        if scan
        else f"x:f8[:]*{n_rows} s:i8[:] w:f8[:] out:f8[:,:]"
    )
    return {"scan" if scan else "rows": [(a, k) for a, _, k in (x.partition(":") for x in kinds.split())]}
