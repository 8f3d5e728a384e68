"""The generated kernels' C entries, and (only with ``ROOFLAW_NUMBA_NATIVE=1``) running them from cached machine
code without importing numba (~1 s per process, even when numba's own disk cache holds the kernel).

A kernel is a numba ``cfunc`` on raw pointers, shapes and scalars (:func:`entry_source`), called through ctypes
with the GIL released. With the setting, its object code is also kept in rooflaw's cache (keyed by the source,
library versions and host CPU) and later processes link it with llvmlite's ORC JIT: the same machine code. That
relies on numba's private object-code serialisation, so it is off by default and fails loudly. The kernels
allocate nothing and never raise (``error_model='numpy'``); numba's error-path symbols are bound to a stub that
aborts loudly if they were ever reached.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import sys
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

#: Argument kinds of a kernel: scalars, C-contiguous arrays (dtype, ndim), or a tuple of 1-D float64 arrays.
_DT = {"f8": (np.float64, "float64"), "i8": (np.int64, "int64")}
_CACHED = "error_model='numpy', cache=True"  # the entries' options: numba keeps their machine code on disk
_LOCK = threading.Lock()
_JIT: list[Any] = []  # the ORC JIT and the error-path stub
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


def entry_source(fn: str, spec: Sequence[tuple[str, str]], body: str) -> str:
    """Source of ``{fn}_c``: a numba ``cfunc`` whose raw pointers, shapes and scalars become the arguments ``spec``
    names, followed by the kernel's ``body``."""
    params: list[str] = []
    sig: list[str] = []
    conv: list[str] = []
    for arg, kind in spec:
        base, nd, count = _parse(kind)
        if nd == 0:
            params.append(f"_a{len(params)}_")
            sig.append(f"_t.{_DT[base][1]}")
            conv.append(f"    {arg} = {params[-1]}")
            continue
        items = []
        for _ in range(max(count, 1)):
            ptr, dims = f"_a{len(params)}_", [f"_a{len(params) + 1 + d}_" for d in range(nd)]
            params += [ptr, *dims]
            sig += [f"_t.CPointer(_t.{_DT[base][1]})", *(["_t.int64"] * nd)]
            items.append(f"carray({ptr}, ({', '.join(dims)},))")
        conv.append(f"    {arg} = ({', '.join(items)},)" if count else f"    {arg} = {items[0]}")
    head = [f"@cfunc(_t.void({', '.join(sig)}), {_CACHED})", f"def {fn}_c({', '.join(params)}):"]
    return "\n".join([*head, *conv, body])


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


def _jit() -> tuple[Any, int]:
    """The ORC JIT and the address of the error-path stub, made once per process."""

    def fail() -> None:  # pragma: no cover - only reached if a kernel raised, which these kernels cannot
        sys.stderr.write("rooflaw: a natively loaded kernel reached numba's error path; aborting\n")
        os.abort()

    with _LOCK:
        if not _JIT:
            import llvmlite.binding as llvm

            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            _JIT.extend([llvm.create_lljit_compiler(), ctypes.CFUNCTYPE(None)(fail)])  # the callback kept alive
        return _JIT[0], ctypes.cast(_JIT[1], ctypes.c_void_p).value or 0


def link(name: str, fn: str, obj: tuple[str, bytes], spec: Sequence[tuple[str, str]]) -> Native:
    """Link the object code ``(symbol, code)`` of entry ``fn`` as JIT library ``name``."""
    import llvmlite.binding as llvm

    lljit, stub = _jit()
    b = llvm.JITLibraryBuilder().add_current_process().add_object_img(obj[1]).export_symbol(obj[0])
    for sym in _ERROR_PATH:
        b.import_symbol(sym, stub)
    with _LOCK:
        rt = b.link(lljit, name)
    return Native(rt[obj[0]], spec, rt)


def load(key: str, src: str, fn: str, spec: Sequence[tuple[str, str]]) -> Native:
    """The C entry ``{fn}_c`` of generated module ``src``, compiled by numba (or loaded from numba's disk cache
    beside the file). With ``ROOFLAW_NUMBA_NATIVE=1`` its object code is kept in rooflaw's cache and linked
    natively in later processes, which then never import numba; a failure there raises (the user chose it)."""
    from .. import cache
    from ..errors import ExternalError

    native = os.environ.get("ROOFLAW_NUMBA_NATIVE", "0") == "1"
    ckey, obj = "", None
    if native:  # the object code uses this CPU's features: its key names the CPU and llvmlite's version
        import llvmlite
        import llvmlite.binding as llvm

        host = f"llvmlite {llvmlite.__version__}|{llvm.get_host_cpu_name()}|{llvm.get_host_cpu_features().flatten()}"
        ckey = f"native-{key}-{hashlib.sha256(host.encode()).hexdigest()[:12]}"
        obj = cache.load(ckey)
    try:
        if isinstance(obj, tuple):
            return link(f"rl_{key}_cached", fn, obj, spec)
        import numba  # noqa: F401 - fails with ImportError when the extra is missing

        if native:  # object code exists only for a fresh compile, not for an entry numba loaded from its cache
            src, key = src.replace(_CACHED, _CACHED.replace("True", "False")), f"{key}_n"
        entry = getattr(cache.load_generated(f"rl_{key}", src, f"rooflaw_kernel_{key}"), f"{fn}_c")
        if not native:
            return Native(entry.address, spec, entry)
        _, kind, data = entry._library.serialize_using_object_code()  # numba's private serialisation
        if kind != "object":
            raise RuntimeError(f"numba returned {kind!r} code")
        obj = (entry.native_name, bytes(data[0]))
        out = link(f"rl_{key}", fn, obj, spec)
    except Exception as e:  # noqa: BLE001 - the native loader was asked for: say why it cannot run
        if not native or isinstance(e, ImportError):
            raise
        raise ExternalError(f"ROOFLAW_NUMBA_NATIVE=1: the kernel's object code cannot be linked ({e})") from e
    cache.store(ckey, obj)
    return out


def spec(n_rows: int, scan: bool) -> list[tuple[str, str]]:
    """Argument kinds of a module's kernel: ``rows`` over ``n_rows`` per-row columns, or ``scan``."""
    kinds = (
        "pos:i8 stop:i8 TW:f8[:,:] TM:f8[:,:] TL:f8[:,:] TV:f8[:,:] fx:f8[:] w:f8[:] radix:i8[:] obj:i8[:] need:i8[:] "
        "latc:i8 bcol:i8[:] bval:f8[:] lohi:f8[:] stair:f8[:] out_idx:i8[:] out_val:f8[:,:] stats:f8[:] v:f8[:] "
        "sf:f8[:,:] si:i8[:,:] pre:f8[:] PL:f8[:,:] PV:f8[:,:]"
        if scan
        else f"x:f8[:]*{n_rows} s:i8[:] w:f8[:] out:f8[:,:]"
    )
    return [(a, k) for a, _, k in (x.partition(":") for x in kinds.split())]
