"""A small on-disk cache for derived artefacts (generated evaluator code, symbolic derivations).

Keys hash the source of the modules that produce the artefact plus the library versions, so an
edit to the cost model or an upgrade of sympy/numpy invalidates them. The directory is
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


def source_key(tag: str, *modules: ModuleType) -> str:
    """A hash of ``tag``, the source files of ``modules`` and the numpy/sympy versions."""
    import numpy
    import sympy

    h = hashlib.sha256(f"{tag}|numpy {numpy.__version__}|sympy {sympy.__version__}".encode())
    for m in modules:
        h.update(Path(m.__file__ or "").read_bytes())
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
