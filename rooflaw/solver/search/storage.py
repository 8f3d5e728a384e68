"""Optuna storages: in memory, SQLite or journal files (resumable), PostgreSQL (many workers, many machines)."""

from __future__ import annotations

import os
import time
from typing import Any

from ...errors import RooflawError


def open_storage(url: str | None) -> Any:
    """An Optuna storage for a URL (None: in memory). Raises a one-line :class:`RooflawError` if it cannot open."""
    import optuna

    if url is None:
        return optuna.storages.InMemoryStorage()
    try:
        if url.startswith("journal://") or url.endswith((".log", ".journal")):
            from optuna.storages.journal import JournalStorage

            from .journal import journal_backend

            path = url[len("journal://") :] if url.startswith("journal://") else url
            path = path[1:] if path.startswith("//") else path  # journal:///abs/path -> /abs/path
            parent = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(parent):
                raise OSError(f"directory {parent} does not exist")
            return JournalStorage(journal_backend(path))  # fsync in batches: as fast as in memory (see .journal)
        url = _driver_url(url)
        if "://" not in url:
            raise ValueError("not a storage URL (sqlite:///file.db, journal:///file.log, postgresql://…)")
        for attempt in range(6):  # concurrent first starts race on creating the schema; creation is idempotent
            try:
                return optuna.storages.RDBStorage(url, engine_kwargs={"pool_pre_ping": True})
            except Exception as e:
                text = str(e).lower()
                if attempt == 5 or not ("duplicate" in text or "already exists" in text or "unique" in text):
                    raise
                time.sleep(0.2 + 0.3 * attempt)
        raise AssertionError("unreachable")
    except Exception as e:  # sqlalchemy, driver, OS errors: one line
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise RooflawError(f"storage={url!r}: cannot open: {msg[:300]}") from None


def _driver_url(url: str) -> str:
    """``postgresql://`` means psycopg 3 to SQLAlchemy 2.1; use psycopg2 when only it is installed."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            from importlib import util

            if util.find_spec("psycopg") is None and util.find_spec("psycopg2") is not None:
                return "postgresql+psycopg2://" + url[len(prefix) :]
            return "postgresql://" + url[len(prefix) :]
    return url


__all__ = ["open_storage"]
