"""Network calls with a deadline: a server that accepts and never answers (or answers garbage) costs at most
:data:`CONNECT_TIMEOUT_S` and a one-line error naming the option, and Ctrl-C ends the wait at once (the call
runs on a daemon thread; the main thread only waits on it)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from .errors import RooflawError, bad

#: Seconds a connection and its handshake may take (Dask scheduler, PostgreSQL storage).
CONNECT_TIMEOUT_S = 10.0

T = TypeVar("T")


def within(fn: Callable[[], T], seconds: float, field: str, value: object, what: str) -> T:
    """``fn()`` if it returns within ``seconds``; else a :class:`RooflawError` naming ``field=value`` and
    ``what`` did not answer. ``fn``'s own :class:`RooflawError` passes through; any other exception becomes
    one line naming the field (a server that answers garbage is the input's fault, not rooflaw's)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
            box["error"] = e

    t = threading.Thread(target=run, name=f"rooflaw-connect-{field}", daemon=True)
    t.start()
    t.join(seconds)  # interruptible: Ctrl-C raises KeyboardInterrupt here
    if t.is_alive():
        raise bad(field, value, f"{what} did not answer within {seconds:g} s (connect/handshake timeout)")
    err = box.get("error")
    if isinstance(err, RooflawError):
        raise err
    if isinstance(err, (KeyboardInterrupt, SystemExit)):
        raise err
    if err is not None:
        msg = " ".join(str(err).split())[:300] or type(err).__name__
        raise bad(field, value, f"{what} failed ({type(err).__name__}: {msg})") from None
    return box["value"]
