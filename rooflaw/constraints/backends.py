"""Which numerical backend evaluates a table of candidates: ``numpy`` (the lambdified cost model, always there) or
``numba`` (the generated kernels of :mod:`.backend_numba`, the ``fast`` extra; the same values bit for bit).

This module sits below both backends and imports neither: callers ask :func:`resolve` for a name, run that
backend, and call :func:`fallback` when ``auto`` chose numba but the kernel cannot take the problem, which warns
once per process and per reason, so a 5-50x slower run never goes unexplained.
"""

from __future__ import annotations

import importlib.util
import warnings

from ..errors import RooflawError

#: The backend names a caller may pass.
BACKENDS = ("auto", "numpy", "numba")
#: Tables (or spaces) smaller than this stay on numpy under ``auto`` (the kernel's fixed call cost dominates).
AUTO_MIN_ROWS = 100_000
_WARNED: set[str] = set()


class SlowPathWarning(UserWarning):
    """``backend="auto"`` ran numpy where numba was expected (the message says why)."""


def available() -> bool:
    """Whether numba can be imported (the ``fast`` extra)."""
    return importlib.util.find_spec("numba") is not None


def resolve(backend: str, rows: int) -> str:
    """``numpy`` or ``numba`` for ``rows`` candidates (``auto``: numba for large tables when installed)."""
    if backend not in BACKENDS:
        raise RooflawError(f"backend={backend!r}: must be one of {', '.join(BACKENDS)}")
    if backend == "numba" and not available():
        raise RooflawError("backend='numba': numba is not installed (pip install 'rooflaw[fast]')")
    if backend == "auto":
        return "numba" if rows >= AUTO_MIN_ROWS and available() else "numpy"
    return backend


def fallback(why: str) -> None:
    """Warn (once per process and reason) that ``auto`` runs numpy instead of the numba kernel, and why."""
    if why in _WARNED:
        return
    _WARNED.add(why)
    warnings.warn(f"backend='auto' runs numpy (5-50x slower) because {why}", SlowPathWarning, stacklevel=3)
