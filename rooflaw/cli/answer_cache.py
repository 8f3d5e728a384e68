"""The command line's answer cache: what a deterministic command printed, kept on disk for the same inputs.

A warm ``rooflaw solve`` (closed form or GP) spends most of its time importing sympy, pandas and numpy and
rebuilding what earlier processes built already; the answer itself is a pure function of the command's
options, the files they name, the package (code and data) and the numerical libraries. This module keys an
answer by all of those and stores what the command printed -- text, tables, JSON and the warnings it raised --
as plain data in the signed disk cache (:mod:`rooflaw.cache`), so the next identical command prints it without
importing the solver.

The key (:func:`rooflaw.cache.answer_key`) hashes: the command name and every option value; the path and bytes of
every option value that names a file (``--device my.toml``, ``--space s.toml``, ``file.toml@mode``); every file
of the installed ``rooflaw`` package (sources and its catalogs, so any edit or refit invalidates the entry); the
versions of Python and of the numerical libraries; and the ``ROOFLAW_*`` environment. There is none (the command
computes as usual) when an option names a directory or a file over 4 MiB, or when a ``rooflaw.devices`` plug-in
is installed (plug-in code is outside the package and not hashed).
``ROOFLAW_NO_CACHE=1`` turns it off with the rest of the disk cache. It serves the command line only
(:func:`rooflaw.cli.main` with no ``argv``): in-process callers (tests, embedding) always compute.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

from .. import api
from .common import json_text

#: Whether :func:`answer_key` may give a key at all: set by the command-line entry point (``main()`` without argv).
enabled = False


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def answer_key(command: str, options: Mapping[str, Any]) -> str | None:
    """The disk-cache key of ``command`` run with ``options`` (option groups may be dataclasses), or None when the
    answer must be computed (not the command line, or :func:`rooflaw.cache.answer_key` gives none)."""
    return api.answer_key(command, _plain(dict(options))) if enabled else None


class Recorder:
    """What a command prints, as plain data: ``("print", text, console kwargs)``, ``("table", title, columns, rows)``,
    ``("json", obj)``, ``("timing", text)`` (the line saying how long the answer took)."""

    def __init__(self) -> None:
        self.items: list[tuple[Any, ...]] = []
        self.warnings: list[str] = []

    def print(self, text: str, **kw: Any) -> None:
        """``console.print(text, **kw)`` (``style``, ``markup``, ``highlight``)."""
        self.items.append(("print", text, kw))

    def table(self, title: str, columns: list[str], rows: list[list[Any]]) -> None:
        self.items.append(("table", title, list(columns), [[str(x) for x in r] for r in rows]))

    def json(self, obj: Any) -> None:
        self.items.append(("json", json.loads(json_text(obj))))

    def timing(self, text: str) -> None:
        self.items.append(("timing", text))

    @contextlib.contextmanager
    def catching_warnings(self) -> Iterator[None]:
        """Record the warnings raised inside (they are re-raised by :func:`replay`, so ``main`` prints them)."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
        self.warnings += [str(w.message) for w in caught]


def load(key: str | None) -> Recorder | None:
    """The recorded answer under ``key`` (None: absent, unreadable or no key)."""
    hit = None if key is None else api.load_answer(key)
    if not (isinstance(hit, dict) and isinstance(hit.get("items"), list) and isinstance(hit.get("warnings"), list)):
        return None
    rec = Recorder()
    rec.items, rec.warnings = list(hit["items"]), list(hit["warnings"])
    return rec


def store(key: str | None, rec: Recorder) -> None:
    """Keep ``rec`` under ``key`` (nothing when no key)."""
    if key is not None:
        api.store_answer(key, {"items": rec.items, "warnings": rec.warnings})


def replay(rec: Recorder, cached_seconds: float | None = None) -> None:
    """Print ``rec`` as the command printed it and re-raise its warnings; ``cached_seconds``: the answer came from
    the disk cache after that long (the timing line and the JSON say so)."""
    from .common import console, print_json, table

    for w in rec.warnings:
        warnings.warn(w, UserWarning, stacklevel=2)
    for item in rec.items:
        kind = item[0]
        if kind == "print":
            console.print(item[1], **item[2])
        elif kind == "table":
            console.print(table(item[1], item[2], item[3]))
        elif kind == "json":
            obj = item[1]
            if cached_seconds is not None:
                obj = {**obj, "answer_cache": {"hit": True, "seconds": cached_seconds}}
            print_json(obj)
        elif kind == "timing":
            text = item[1]
            if cached_seconds is not None:
                text += f"; read from the answer cache in {cached_seconds * 1e3:.1f} ms"
            console.print(f"[dim]{text}[/dim]")
