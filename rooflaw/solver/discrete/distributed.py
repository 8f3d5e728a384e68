"""Chunks of an exhaustive scan on Dask: ``local:N`` (a ``dask.distributed`` LocalCluster of N worker processes)
or the address of a running scheduler (``tcp://host:8786``; its workers need rooflaw importable).

Each task scans a range of architecture indices and returns only its non-dominated rows and a few statistics
(the reduction runs on the workers); the caller merges them exactly. The problem is sent to every worker once.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import ExternalError, RooflawError, bad

_LOCAL = re.compile(r"local:(\d{1,4})")
_ADDRESS = re.compile(r"(tcp|tls|inproc|ucx)://[A-Za-z0-9_.\-\[\]:]+")


@dataclass(frozen=True)
class Scheduler:
    """Where the chunks run: ``workers`` local processes, or the scheduler at ``address``."""

    text: str
    workers: int | None = None
    address: str | None = None


def parse_scheduler(text: str) -> Scheduler:
    """``local:N`` (1 ≤ N ≤ 256) or ``tcp://host:port``; anything else raises naming the field."""
    s = str(text).strip()
    m = _LOCAL.fullmatch(s)
    if m:
        n = int(m.group(1))
        if not 1 <= n <= 256:
            raise bad("scheduler", text, "local:N needs 1 ≤ N ≤ 256 worker processes")
        return Scheduler(s, workers=n)
    if _ADDRESS.fullmatch(s):
        return Scheduler(s, address=s)
    raise bad("scheduler", text, "use local:N (a Dask LocalCluster of N processes) or tcp://host:8786")


def _client(sched: Scheduler) -> tuple[Any, Any]:
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise RooflawError("--scheduler needs dask.distributed: pip install 'rooflaw[dist]'") from None
    if sched.workers is not None:
        from ..jobs import sigint_blocked

        with sigint_blocked():  # the workers ignore the terminal's Ctrl-C: this process stops them (no traceback flood)
            cluster = LocalCluster(n_workers=sched.workers, threads_per_worker=1, processes=True,
                                   dashboard_address=None, silence_logs=logging.CRITICAL)  # fmt: skip
            return Client(cluster), cluster
    from ...net import CONNECT_TIMEOUT_S, within

    _probe(sched)
    return within(lambda: Client(sched.address, timeout=CONNECT_TIMEOUT_S), CONNECT_TIMEOUT_S + 5, "scheduler",
                  sched.text, "the Dask scheduler"), None  # fmt: skip


def _probe(sched: Scheduler) -> None:
    """Ask the scheduler at ``sched.address`` who it is, with a deadline on the connection, the handshake and the
    answer: a server that accepts and never answers, answers garbage, is not a Dask scheduler or has no workers
    (the scan would wait forever) is refused naming ``--scheduler``."""
    import asyncio

    from distributed.comm import connect

    from ...net import CONNECT_TIMEOUT_S, within

    async def ask() -> Any:
        comm = await connect(sched.address, timeout=CONNECT_TIMEOUT_S)
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            comm.abort()

    def run() -> Any:
        try:
            return asyncio.run(asyncio.wait_for(ask(), CONNECT_TIMEOUT_S))
        except (asyncio.TimeoutError, TimeoutError):
            raise bad("scheduler", sched.text, f"no answer within {CONNECT_TIMEOUT_S:g} s (connect/handshake "
                      "timeout)") from None  # fmt: skip
        except OSError as e:
            why = " ".join(str(e).split())
            raise bad("scheduler", sched.text, f"no Dask scheduler answers there ({why})") from None
        except Exception as e:  # noqa: BLE001 - bytes that do not decode as Dask messages (even a huge "length")
            raise bad("scheduler", sched.text, f"answered, but not as a Dask scheduler ({type(e).__name__})") from None

    info = within(run, CONNECT_TIMEOUT_S + 5, "scheduler", sched.text, "the Dask scheduler")
    if not isinstance(info, dict) or info.get("type") != "Scheduler":
        raise bad("scheduler", sched.text, "answered, but not as a Dask scheduler")
    if not info.get("n_workers", len(info.get("workers") or {})):
        raise bad("scheduler", sched.text, "has no workers: start some with `dask worker ADDRESS`")


def map_ranges(sched: Scheduler, fn: Callable[..., Any], problem: Any, joint: Any,
               ranges: Sequence[tuple[int, int]], *args: Any) -> tuple[list[Any], int]:  # fmt: skip
    """``[fn(problem, joint, a, b, *args) for (a, b) in ranges]`` on Dask, in range order, and the worker count."""
    return _map(sched, fn, problem, joint, [(a, b) for a, b in ranges], args)


def map_tasks(sched: Scheduler, fn: Callable[..., Any], problem: Any, joint: Any, tasks: Sequence[Any],
              *args: Any) -> tuple[list[Any], int]:  # fmt: skip
    """``[fn(problem, joint, task, *args) for task in tasks]`` on Dask, in task order, and the worker count."""
    return _map(sched, fn, problem, joint, [(t,) for t in tasks], args)


def _map(sched: Scheduler, fn: Callable[..., Any], problem: Any, joint: Any, heads: Sequence[tuple],
         args: tuple) -> tuple[list[Any], int]:  # fmt: skip
    # Dask's own tracebacks on a lost connection are silenced: the one line below says it
    with contextlib.suppress(ImportError):
        import distributed  # noqa: F401 - its loggers exist once it is imported
    names = ["asyncio", "distributed", *logging.root.manager.loggerDict]  # asyncio: Dask's pending tasks on close
    quiet = [logging.getLogger(n) for n in names if n == "asyncio" or n.startswith("distributed")]
    levels = [q.level for q in quiet]
    for q in quiet:
        q.setLevel(logging.CRITICAL)
    try:
        client, cluster = _client(sched)
        try:
            workers = max(1, len(client.scheduler_info().get("workers", {})))
            p, j = client.scatter([problem, joint], broadcast=True)
            futures = [client.submit(fn, p, j, *h, *args, pure=False) for h in heads]
            try:
                return client.gather(futures), workers
            except Exception as e:
                if not _lost(e):
                    raise  # the task's own error (bad input: exit 2; a bug: exit 1)
                why = f"{type(e).__name__}: {' '.join(str(e).split())}"[:200]
                raise ExternalError(
                    f"scheduler={sched.text!r}: the Dask cluster failed during the scan ({why})"
                ) from None
        finally:
            with contextlib.suppress(Exception):
                client.close()
            if cluster is not None:
                with contextlib.suppress(Exception):
                    cluster.close()
    except KeyboardInterrupt:  # the process is ending: Dask's pending tasks would be reported at shutdown
        levels = [logging.CRITICAL] * len(quiet)
        raise
    finally:
        for q, lv in zip(quiet, levels, strict=True):
            q.setLevel(lv)


def _lost(e: BaseException) -> bool:
    """Whether ``e`` says the cluster failed (scheduler gone, connection lost, a worker killed), not the task."""
    import concurrent.futures

    if isinstance(e, RooflawError):
        return False
    return isinstance(e, (OSError, TimeoutError, concurrent.futures.CancelledError)) or type(e).__module__.startswith(
        "distributed"
    )
