"""How many worker processes a solver may start: at most one per CPU of this machine.

More processes than CPUs only slow a CPU-bound scan down (and each holds its own chunk buffers), so a larger
request is refused (exit 2, with the CPU count), never silently clipped. ``-k`` means "all CPUs but k − 1"
(``-1``: all), as in joblib.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from ..errors import bad

T = TypeVar("T")


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


def _exit_with_parent(parent_pid: int) -> None:
    """Worker initializer: a daemon thread ends this process (``os._exit``) once ``parent_pid`` is no longer its
    parent -- the parent died, even by SIGKILL, and the worker was re-parented. Polling ``getppid`` is used
    rather than PR_SET_PDEATHSIG, which fires when the parent *thread* that started the worker exits."""
    import threading
    import time

    if os.getppid() != parent_pid:
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(0.2)
        os._exit(1)

    threading.Thread(target=watch, name="rooflaw-parent-watchdog", daemon=True).start()


@contextlib.contextmanager
def sigint_blocked() -> Iterator[None]:
    """Block SIGINT in this thread while worker processes (and threads) are started: they inherit the blocked
    mask, so a Ctrl-C at the terminal reaches only this process (which stops them) instead of printing a
    traceback from every worker. A Ctrl-C meanwhile stays pending and is delivered when the block ends."""
    import signal
    import threading

    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    # the standard resource tracker UNBLOCKs SIGINT after starting itself: start it (and loky's) first
    from multiprocessing import resource_tracker

    from joblib.externals.loky.backend import resource_tracker as loky_tracker

    resource_tracker.ensure_running()
    loky_tracker.ensure_running()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def run_parallel(jobs: int, fn: Callable[..., T], arg_tuples: Sequence[tuple]) -> list[T]:
    """``[fn(*args) for args in arg_tuples]`` on ``jobs`` loky worker processes, in order.

    The workers exit within ~0.2 s of this process dying (SIGKILL included: no orphan keeps computing), ignore
    the terminal's Ctrl-C (this process gets it, stops them and exits 130), and are stopped when the call fails.
    """
    from joblib.externals.loky import get_reusable_executor

    with sigint_blocked():  # the workers are started here, by the first submit
        ex = get_reusable_executor(max_workers=jobs, initializer=_exit_with_parent, initargs=(os.getpid(),))
        first = ex.submit(os.getpid)
    try:
        first.result()
        return list(ex.map(fn, *zip(*arg_tuples, strict=True))) if arg_tuples else []
    except BaseException:
        _quiet_pool_manager()
        ex.shutdown(wait=False, kill_workers=True)
        raise


def _quiet_pool_manager() -> None:
    """Silence loky's manager thread while the pool is shut down under it: it can race the shutdown we asked for
    and print an ``InvalidStateError`` traceback after the one line the CLI promises; other threads' errors still
    print."""
    import threading

    prev = threading.excepthook

    def hook(args: threading.ExceptHookArgs) -> None:
        if args.thread is not None and args.thread.name == "ExecutorManagerThread":
            return
        prev(args)

    threading.excepthook = hook


__all__ = ["cpu_count", "resolve_jobs", "run_parallel", "sigint_blocked"]
