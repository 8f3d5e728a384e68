"""How many worker processes a solver may start: at most one per CPU of this machine.

More processes than CPUs only slow a CPU-bound scan down (and each holds its own chunk buffers), so a larger
request is refused (exit 2, with the CPU count), never silently clipped. ``-k`` means "all CPUs but k − 1"
(``-1``: all), as in joblib.
"""

from __future__ import annotations

import os

from ..errors import bad


def cpu_count() -> int:
    """CPUs this process may run on (the affinity mask where the platform has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - macOS / Windows
        return max(1, os.cpu_count() or 1)


def resolve_jobs(n_jobs: int | None, field: str = "n_jobs") -> int:
    """``n_jobs`` as a process count in 1..CPUs: ``None`` or ``-1`` all CPUs, ``-k`` all but k − 1.

    Raises :class:`~rooflaw.errors.RooflawError` (exit 2) for 0, a non-integer, or more than the CPU count either way.
    """
    cpus = cpu_count()
    if n_jobs is None:
        return cpus
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0 or not -cpus <= n_jobs <= cpus:
        raise bad(field, n_jobs, f"this machine has {cpus} CPUs: use 1 to {cpus}, or -1 for all (-k: all but k-1)")
    return n_jobs if n_jobs > 0 else cpus + 1 + n_jobs


__all__ = ["cpu_count", "resolve_jobs"]
