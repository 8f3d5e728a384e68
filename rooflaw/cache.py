"""A small on-disk cache for derived artefacts (generated evaluator code, symbolic derivations).

Keys hash every source file of the packages an artefact can derive from (:data:`DERIVING_PACKAGES`)
plus the library versions, so an edit to the cost model -- operators, symbols, the compile step, a
new module -- or an upgrade of sympy/numpy invalidates them. The directory is
``$ROOFLAW_CACHE_DIR`` or ``~/.cache/rooflaw``, kept user-private (created 0700; a directory owned
by another user or writable by group/others is not used) and every entry carries an HMAC under a
per-cache key (0600), so nothing another user could have written is ever unpickled (nor, for the
compiled evaluator, executed). ``ROOFLAW_NO_CACHE=1`` turns the cache off. A process whose loaded deriving modules
were edited on disk after it imported rooflaw (:func:`edited_since_import`) neither stores nor serves entries: its
keys would hash the new files while it runs the old code. Any failure to read or
write falls back to recomputing -- the cache never changes a result.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import pickle
import secrets
import stat
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any


def cache_dir() -> Path | None:
    """The cache directory, created user-private (0700); None when disabled or not safe to use.

    A directory that is a symlink, is not owned by the current user, or is writable by group or
    others is ignored (another user could plant entries there), and so is any failure to create it.
    """
    if os.environ.get("ROOFLAW_NO_CACHE"):
        return None
    base = os.environ.get("ROOFLAW_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "rooflaw")
    d = Path(base)
    try:
        if not os.path.lexists(d):
            d.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.mkdir(d, 0o700)
        return d if _private(os.lstat(d), directory=True) else None
    except OSError:
        return None


def _private(st: os.stat_result, directory: bool) -> bool:
    """True for a directory (or regular file) owned by us that group and others cannot write."""
    kind_ok = stat.S_ISDIR(st.st_mode) if directory else stat.S_ISREG(st.st_mode)
    owner_ok = not hasattr(os, "getuid") or st.st_uid == os.getuid()
    return kind_ok and owner_ok and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


#: Opening an entry: never through a symlink, and never blocking (a FIFO planted in the cache opens at once and
#: is then refused by the regular-file check on the open descriptor).
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


def _secret(d: Path) -> bytes | None:
    """This cache's HMAC key (created once, 0600); entries not signed with it are never unpickled."""
    path = d / "key"
    try:
        fd = os.open(path, _READ_FLAGS)
    except FileNotFoundError:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(32))
        except OSError:
            return None
        return _secret(d)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not _private(os.fstat(f.fileno()), directory=False):
            return None
        key = f.read(64)
    return key if len(key) == 32 else None


#: Packages whose Python sources any derived artefact may depend on (the cost model, its symbols and
#: compile step, architectures, laws, solvers): every ``.py`` file under them keys every entry, so an
#: edit anywhere there -- or a new file -- invalidates the cache without a hand-kept module list.
DERIVING_PACKAGES = ("arch", "constraints", "objectives", "solver")
#: Single modules outside those packages that derived artefacts also depend on.
DERIVING_MODULES = ("devices/precision.py",)
_ROOT = Path(__file__).resolve().parent


def source_files(root: Path | None = None) -> list[Path]:
    """The ``.py`` files of :data:`DERIVING_PACKAGES` and :data:`DERIVING_MODULES` under ``root`` (the installed
    package), sorted."""
    root = root or _ROOT
    files = [p for pkg in DERIVING_PACKAGES for p in (root / pkg).rglob("*.py")]
    return sorted(files + [root / m for m in DERIVING_MODULES if (root / m).is_file()])


def source_key(tag: str, *modules: ModuleType) -> str:
    """A hash of ``tag``, the numpy/sympy versions, every source file of :data:`DERIVING_PACKAGES`
    (path and content) and the source files of any extra ``modules`` outside them."""
    import numpy
    import sympy

    h = hashlib.sha256(f"{tag}|numpy {numpy.__version__}|sympy {sympy.__version__}".encode())
    files = source_files()
    extra = sorted({Path(m.__file__).resolve() for m in modules if m.__file__} - set(files))
    for f in files + extra:
        name = f.relative_to(_ROOT) if f.is_relative_to(_ROOT) else Path(f.name)
        h.update(f"\0{name.as_posix()}\0".encode())
        h.update(f.read_bytes())
    return f"{tag}-{h.hexdigest()[:20]}"


def edited_since_import() -> list[str]:
    """The loaded deriving modules (:func:`source_files`) whose file changed on disk after this process imported
    rooflaw: while any is listed, a key (the files on disk) may not describe the code running."""
    import sys

    import rooflaw

    files = {str(f.resolve()) for f in source_files(Path(rooflaw.__file__).resolve().parent)}
    out = []
    for name, mod in list(sys.modules.items()):
        path = getattr(mod, "__file__", None)
        if not name.startswith("rooflaw.") or not path or str(Path(path).resolve()) not in files:
            continue
        with contextlib.suppress(OSError):
            if os.stat(path).st_mtime_ns > rooflaw._IMPORTED_NS:
                out.append(name)
    return sorted(out)


def load(key: str) -> Any | None:
    """The object stored under ``key``, or None (absent, disabled, unreadable or not verified).

    Only a regular file in the private cache directory, owned by us, not writable by others and
    carrying a valid HMAC of this cache's key is unpickled.
    """
    d = cache_dir()
    if d is None or edited_since_import():
        return None
    try:
        secret = _secret(d)
        if secret is None:
            return None
        fd = os.open(d / f"{key}.pkl", _READ_FLAGS)
        with os.fdopen(fd, "rb") as f:
            if not _private(os.fstat(f.fileno()), directory=False):
                return None
            blob = f.read()
        tag, payload = blob[:32], blob[32:]
        if not hmac.compare_digest(tag, hmac.new(secret, payload, hashlib.sha256).digest()):
            return None
        return pickle.loads(payload)  # noqa: S301 - our own bytes, verified by HMAC above
    except Exception:  # noqa: BLE001 - a bad cache entry only costs a recomputation
        return None


def store(key: str, obj: Any) -> None:
    """Store ``obj`` under ``key`` atomically, signed with this cache's key; errors are ignored."""
    d = cache_dir()
    if d is None or edited_since_import():
        return
    tmp = None
    try:
        secret = _secret(d)
        if secret is None:
            return
        payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(hmac.new(secret, payload, hashlib.sha256).digest() + payload)
        os.replace(tmp, d / f"{key}.pkl")
    except Exception:  # noqa: BLE001
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _drop_irregular(d: Path, stem: str) -> None:
    """Remove entries for ``stem`` (its source and numba's index/data files beside it or in ``__pycache__``) that
    are not regular files: numba opens them blocking, so a FIFO planted there would hang the command."""
    for where in (d, d / "__pycache__"):
        try:
            entries = list(os.scandir(where))
        except OSError:
            continue
        for e in entries:
            if e.name.startswith(stem) and not e.is_file(follow_symlinks=False):
                with contextlib.suppress(OSError):
                    os.unlink(e.path)


def load_generated(stem: str, src: str, name: str | None = None) -> ModuleType:
    """Write generated source ``src`` to ``<cache>/numba/<stem>.py`` (atomically, only if it differs; a private
    temporary directory when caching is off) and import it as module ``name`` (default ``stem``): numba's
    ``cache=True`` keeps its machine code beside the file, so a later process loads instead of compiling. Keep
    ``stem`` and ``name`` stable: numba's cached code refers to the module by name."""
    import importlib.util
    import sys

    d = cache_dir()
    d = (Path(tempfile.mkdtemp(prefix="rooflaw-numba-")) if d is None else d) / "numba"
    d.mkdir(parents=True, exist_ok=True)
    _drop_irregular(d, stem)
    path = d / f"{stem}.py"
    name = name or stem
    if not path.is_file() or path.read_text(encoding="utf-8") != src:
        fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(src)
        os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def lambdify_numpy(args: Any, expr: Any, cse: bool = True) -> Any:
    """``sympy.lambdify(args, expr, modules="numpy", cse=cse)``, its generated source kept on disk by the expression
    (``srepr``) and the sympy/numpy versions: a fresh process rebuilds the function from the source instead of
    running the printer (whose first call imports much of sympy's printing and code generation). The source is
    only run where every global name it reads resolves to numpy, ``functools.reduce`` or a builtin; otherwise
    (and on any failure) lambdify runs as usual."""
    import builtins
    import functools

    import numpy as np
    import sympy

    text = f"{sympy.__version__}|{np.__version__}|{cse}|{sympy.srepr(args)}|{sympy.srepr(expr)}"
    key = "lambdify-" + hashlib.sha256(text.encode()).hexdigest()[:32]
    src = load(key)
    if isinstance(src, str):
        try:
            code = compile(src, "<lambdifygenerated>", "exec")
            names: set[str] = set()
            todo = [code]
            while todo:
                c = todo.pop()
                names.update(c.co_names)
                todo += [k for k in c.co_consts if isinstance(k, type(code))]
            exported = set(np.__all__)
            ns: dict[str, Any] = {"reduce": functools.reduce, "numpy": np}
            ns.update({n: getattr(np, n) for n in names if n in exported})
            if all(n in ns or hasattr(builtins, n) or n == "_lambdifygenerated" for n in names):
                exec(code, ns)  # noqa: S102 - source generated by sympy.lambdify, stored signed by us
                fn = ns["_lambdifygenerated"]
                fn.__source__ = src
                return fn
        except Exception:  # noqa: BLE001 - a stale or broken entry: lambdify again
            pass
    import inspect

    fn = sympy.lambdify(args, expr, modules="numpy", cse=cse)
    with contextlib.suppress(OSError, TypeError):  # no source to keep: nothing stored
        store(key, inspect.getsource(fn))
    return fn


# ---- answers: what a deterministic command printed, keyed by all of its inputs ----------------------------------
#: Bump when the stored answer format changes.
ANSWER_FORMAT = 1
#: Distributions whose versions can change an answer (missing ones count as "none").
ANSWER_LIBRARIES = ("numpy", "scipy", "sympy", "pandas", "cloudpickle", "cvxpy", "clarabel", "scs", "ecos")
#: Files named by an option are hashed up to this size; a larger one (or a directory) means no key.
MAX_INPUT_FILE_BYTES = 4 << 20


def package_digest(root: Path | None = None) -> str:
    """sha256 over the relative path and bytes of every file of the package (sources and data; ``__pycache__`` left
    out): any edit, refit or new file changes it."""
    root = root or _ROOT
    h = hashlib.sha256()
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for name in sorted(files):
            if name.endswith((".pyc", ".pyo")):
                continue
            p = os.path.join(d, name)
            h.update(f"\0{os.path.relpath(p, root)}\0".encode())
            with open(p, "rb") as f:
                h.update(f.read())
    return h.hexdigest()


def _library_versions() -> list[str]:
    import sys
    from importlib.metadata import PackageNotFoundError, version

    out = [sys.version]
    for lib in ANSWER_LIBRARIES:
        try:
            out.append(f"{lib} {version(lib)}")
        except PackageNotFoundError:
            out.append(f"{lib} none")
    return out


def _device_plugins_installed() -> bool:
    from importlib.metadata import entry_points

    return any(True for _ in entry_points(group="rooflaw.devices"))


def _input_files(value: str) -> list[str] | None:
    """``[path, sha256]`` for each existing file ``value`` names (itself, or before an ``@mode``); None when it
    names something a key cannot cover (a directory, a special file, a file over :data:`MAX_INPUT_FILE_BYTES`)."""
    out: list[str] = []
    for cand in dict.fromkeys((value, value.partition("@")[0])):
        if not cand or len(cand) > 4096:
            continue
        try:
            st = os.stat(cand)
        except (OSError, ValueError):
            continue
        if not os.path.isfile(cand) or st.st_size > MAX_INPUT_FILE_BYTES:
            return None
        with open(cand, "rb") as f:
            out += [os.path.abspath(cand), hashlib.sha256(f.read()).hexdigest()]
    return out


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return []


def answer_key(command: str, options: dict[str, Any]) -> str | None:
    """The key of ``command``'s answer for ``options`` (JSON-able: strings, numbers, lists, dicts), or None when it
    must be computed: the cache is off, an option names a directory or a large file, or a ``rooflaw.devices``
    plug-in is installed (its code is outside the package and not hashed).

    Hashes the command, every option value, the path and bytes of every file an option names, every file of the
    package (:func:`package_digest`), the versions of Python and :data:`ANSWER_LIBRARIES`, and the ``ROOFLAW_*``
    environment (but the cache directory)."""
    import json

    if cache_dir() is None:
        return None
    files: list[str] = []
    for s in _strings(options):
        parts = _input_files(s)
        if parts is None:
            return None
        files += parts
    if _device_plugins_installed():
        return None
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith("ROOFLAW_") and k != "ROOFLAW_CACHE_DIR")
    blob = [ANSWER_FORMAT, command, options, files, _library_versions(), env, package_digest()]
    text = json.dumps(blob, sort_keys=True, default=repr)
    return f"answer-{command}-{hashlib.sha256(text.encode()).hexdigest()[:32]}"


def load_answer(key: str) -> Any | None:
    """The answer stored under ``key`` by :func:`store_answer`, or None."""
    hit = load(key)
    return hit[1] if isinstance(hit, tuple) and len(hit) == 2 and hit[0] == ANSWER_FORMAT else None


def store_answer(key: str, answer: Any) -> None:
    """Keep ``answer`` (plain data) under ``key``, signed like every entry."""
    store(key, (ANSWER_FORMAT, answer))
