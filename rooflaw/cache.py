"""A small on-disk cache for derived artefacts (generated evaluator code, symbolic derivations).

Keys hash every source file of the packages an artefact can derive from (:data:`DERIVING_PACKAGES`)
plus the library versions, so an edit to the cost model -- operators, symbols, the compile step, a
new module -- or an upgrade of sympy/numpy invalidates them. The directory is
``$ROOFLAW_CACHE_DIR`` or ``~/.cache/rooflaw``; ``ROOFLAW_NO_CACHE=1`` turns the cache off. Any
failure to read or write falls back to recomputing -- the cache never changes a result.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any


def cache_dir() -> Path | None:
    if os.environ.get("ROOFLAW_NO_CACHE"):
        return None
    base = os.environ.get("ROOFLAW_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "rooflaw")
    return Path(base)


#: Packages whose Python sources any derived artefact may depend on (the cost model, its symbols and
#: compile step, architectures, laws, solvers): every ``.py`` file under them keys every entry, so an
#: edit anywhere there -- or a new file -- invalidates the cache without a hand-kept module list.
DERIVING_PACKAGES = ("arch", "constraints", "objectives", "solver")
_ROOT = Path(__file__).resolve().parent


def source_files(root: Path | None = None) -> list[Path]:
    """The ``.py`` files of :data:`DERIVING_PACKAGES` under ``root`` (the installed package), sorted."""
    root = root or _ROOT
    return sorted(p for pkg in DERIVING_PACKAGES for p in (root / pkg).rglob("*.py"))


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


def load(key: str) -> Any | None:
    """The object stored under ``key``, or None (absent, disabled or unreadable)."""
    d = cache_dir()
    if d is None:
        return None
    try:
        with open(d / f"{key}.pkl", "rb") as f:
            return pickle.load(f)
    except Exception:  # noqa: BLE001 - a bad cache entry only costs a recomputation
        return None


def store(key: str, obj: Any) -> None:
    """Store ``obj`` under ``key`` atomically; errors are ignored."""
    d = cache_dir()
    if d is None:
        return
    tmp = None
    try:
        d.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            pickle.dump(obj, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, d / f"{key}.pkl")
    except Exception:  # noqa: BLE001
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
