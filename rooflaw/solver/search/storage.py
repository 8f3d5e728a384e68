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
            _regular_if_there(path, url)
            return JournalStorage(journal_backend(path))  # fsync in batches: as fast as in memory (see .journal)
        url = _driver_url(url)
        if "://" not in url:
            raise ValueError("not a storage URL (sqlite:///file.db, journal:///file.log, postgresql://…)")
        if url.startswith(("postgresql", "postgres")):  # a server that never answers: bounded, and Ctrl-C ends it
            from ...net import CONNECT_TIMEOUT_S, within

            kw = {"pool_pre_ping": True, "connect_args": {"connect_timeout": int(CONNECT_TIMEOUT_S)}}
            return within(lambda: _rdb(optuna, url, kw), 3 * CONNECT_TIMEOUT_S, "storage", url, "the PostgreSQL server")
        if _sqlite_path(url) is not None:
            _regular_if_there(_sqlite_path(url) or "", url)
        return _rdb(optuna, url, {"pool_pre_ping": True})
    except RooflawError:
        raise
    except Exception as e:  # sqlalchemy, driver, OS errors: one line
        raise RooflawError(f"storage={url!r}: cannot open: {_why(e, url)}") from None


def _rdb(optuna: Any, url: str, engine_kwargs: dict[str, Any]) -> Any:
    """``RDBStorage(url)``, retried when concurrent first starts race on creating the schema."""
    try:
        for attempt in range(6):  # concurrent first starts race on creating the schema; creation is idempotent
            try:
                return optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs)
            except Exception as e:
                text = str(e).lower()
                if attempt == 5 or not ("duplicate" in text or "already exists" in text or "unique" in text):
                    raise
                time.sleep(0.2 + 0.3 * attempt)
        raise AssertionError("unreachable")
    except Exception as e:  # sqlalchemy, driver, OS errors: one line
        raise RooflawError(f"storage={url!r}: cannot open: {_why(e, url)}") from None


def _why(e: BaseException, url: str) -> str:
    """One line saying why a storage did not open; for a SQLite file, which directory cannot be written and why
    (SQLite itself says only "an exception is raised during the commit" or "unable to open database file")."""
    msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    path = _sqlite_path(url)
    if path is not None:
        parent = os.path.dirname(os.path.abspath(path)) or "."
        if not os.path.isdir(parent):
            return f"directory {parent!r} does not exist"
        if not os.access(parent, os.W_OK | os.X_OK):
            return f"directory {parent!r} is not writable (SQLite writes its journal beside the database)"
        if os.path.exists(path) and not os.access(path, os.R_OK | os.W_OK):
            return f"file {path!r} is not readable and writable by this user"
    return msg[:300]


def _regular_if_there(path: str, url: str) -> None:
    """A storage file that exists must be a regular file: a FIFO would block the journal's reader forever."""
    if os.path.lexists(path):
        from ...safe_io import check_regular

        try:
            check_regular(path, "storage")
        except RooflawError as e:
            raise RooflawError(f"storage={url!r}: {str(e).split(': ', 1)[1]}") from None


def _sqlite_path(url: str) -> str | None:
    if not url.startswith("sqlite:///") or url.startswith("sqlite:///:memory:"):
        return None
    return url[len("sqlite:///") :]


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
