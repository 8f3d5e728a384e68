"""A journal file for Optuna whose appends are written at once but flushed to disk (``fsync``) in batches.

Optuna's :class:`~optuna.storages.journal.JournalFileBackend` takes the file lock, appends and calls ``fsync`` for
every storage operation; a rooflaw trial makes about ten of them (ask, user attributes, constraints, heartbeat,
tell), so on a busy disk the ``fsync`` calls cost more than the search (benchmarks/bench_storage.py). This backend
appends under the same lock (other processes and other machines sharing the file see every operation at once, in
order, as before) and calls ``fsync`` at most every :data:`SYNC_EVERY_S` seconds and when the file is closed.
A killed process loses nothing (what it wrote is in the operating system's cache); an operating-system crash or
power cut can lose the last :data:`SYNC_EVERY_S` seconds, which a resumed search reruns.
"""

from __future__ import annotations

import os
import time
import weakref
from typing import Any

#: Longest time between two ``fsync`` calls of one process's appends (seconds).
SYNC_EVERY_S = 1.0


def _fsync(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def journal_backend(path: str, sync_every_s: float = SYNC_EVERY_S) -> Any:
    """A journal backend on ``path``: appends under Optuna's file lock, ``fsync`` at most every ``sync_every_s``
    seconds and when the backend is collected or the interpreter exits."""
    from optuna.storages.journal import JournalFileBackend, JournalFileSymlinkLock

    class BatchedSyncJournalFile(JournalFileBackend):
        def __init__(self) -> None:
            self.lock = JournalFileSymlinkLock(path)
            super().__init__(path, self.lock)
            self.synced = time.monotonic()
            self.pending = False
            weakref.finalize(self, _fsync, path)

        def append_logs(self, logs: list[dict[str, Any]]) -> None:
            import json

            text = "\n".join(json.dumps(log, separators=(",", ":")) for log in logs) + "\n"
            if not self.lock.acquire():
                raise OSError(f"{path}: cannot take the journal lock")
            try:
                with open(path, "ab") as f:
                    f.write(text.encode("utf-8"))
                    f.flush()
                    now = time.monotonic()
                    self.pending = now - self.synced < sync_every_s
                    if not self.pending:
                        os.fsync(f.fileno())
                        self.synced = now
            finally:
                self.lock.release()

        def sync(self) -> None:
            """Flush what this process appended to disk now."""
            if self.pending:
                _fsync(path)
                self.pending, self.synced = False, time.monotonic()

    return BatchedSyncJournalFile()


__all__ = ["SYNC_EVERY_S", "journal_backend"]
