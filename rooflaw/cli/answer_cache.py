"""The command line's answer cache: what a deterministic command printed, kept on disk for the same inputs.

A warm ``rooflaw solve`` (closed form or GP) spends most of its time importing sympy, pandas and numpy and
rebuilding what earlier processes built already; the answer itself is a pure function of the command's
options, the files they name, the package (code and data) and the numerical libraries. This module keys an
answer by all of those and stores what the command printed -- text, tables, JSON and the warnings it raised --
as plain data in the signed disk cache (:mod:`rooflaw.cache`), so the next identical command prints it without
importing the solver.

The key (:func:`answer_key`) hashes: the command name and every option value; the path and bytes of every
option value that names a file (``--device my.toml``, ``--space s.toml``, ``file.toml@mode``); every file of
the installed ``rooflaw`` package (sources and its catalogs, so any edit or refit invalidates the entry); the
versions of Python and of the numerical libraries; and the ``ROOFLAW_*`` environment. It refuses (returns
None: the command computes as usual) when an option names a directory or a file over 4 MiB, or when a
``rooflaw.devices`` plug-in is installed (plug-in code is outside the package and not hashed).
``ROOFLAW_NO_CACHE=1`` turns it off with the rest of the disk cache. It serves the command line only
(:func:`rooflaw.cli.main` with no ``argv``): in-process callers (tests, embedding) always compute.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import sys
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

#: Bump when the stored format changes.
FORMAT = 1
#: Distributions whose versions can change an answer (missing ones count as "none").
LIBRARIES = ("numpy", "scipy", "sympy", "pandas", "cloudpickle", "cvxpy", "clarabel", "scs", "ecos")
#: Files named by an option are hashed up to this size; a larger one (or a directory) turns the cache off.
MAX_FILE_BYTES = 4 << 20
_PACKAGE = Path(__file__).resolve().parent.parent

#: Whether :func:`answer_key` may give a key at all: set by the command-line entry point (``main()`` without argv).
enabled = False


def package_digest(root: Path = _PACKAGE) -> str:
    """sha256 over the relative path and bytes of every file of the package (``__pycache__`` left out)."""
    h = hashlib.sha256()
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for name in sorted(files):
            if name.endswith((".pyc", ".pyo")):
                continue
            p = os.path.join(d, name)
            h.update(f"\0{os.path.relpath(p, root)}\0".encode())
            with open(p, "rb") as f:
                h.update(f.read())
    return h.hexdigest()


def _versions() -> list[str]:
    from importlib.metadata import PackageNotFoundError, version

    out = [sys.version]
    for lib in LIBRARIES:
        try:
            out.append(f"{lib} {version(lib)}")
        except PackageNotFoundError:
            out.append(f"{lib} none")
    return out


def _plugins_installed() -> bool:
    from importlib.metadata import entry_points

    return any(True for _ in entry_points(group="rooflaw.devices"))


def _file_parts(value: str) -> list[str] | None:
    """``[path, sha256]`` for each existing file ``value`` names (itself, or before an ``@mode``); None when it
    names something the key cannot cover (a directory, a special file, a file over :data:`MAX_FILE_BYTES`)."""
    out: list[str] = []
    for cand in dict.fromkeys((value, value.partition("@")[0])):
        if not cand or len(cand) > 4096:
            continue
        try:
            st = os.stat(cand)
        except (OSError, ValueError):
            continue
        if not os.path.isfile(cand) or st.st_size > MAX_FILE_BYTES:
            return None
        with open(cand, "rb") as f:
            out += [os.path.abspath(cand), hashlib.sha256(f.read()).hexdigest()]
    return out


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def answer_key(command: str, options: Mapping[str, Any]) -> str | None:
    """The disk-cache key of ``command`` run with ``options`` (option groups may be dataclasses), or None when the
    answer must be computed (cache off, not the command line, a plug-in installed, an option naming a directory)."""
    from .. import cache

    if not enabled or cache.cache_dir() is None:
        return None
    opts = _plain(dict(options))
    files: list[str] = []
    for s in _strings(opts):
        parts = _file_parts(s)
        if parts is None:
            return None
        files += parts
    if _plugins_installed():
        return None
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith("ROOFLAW_") and k != "ROOFLAW_CACHE_DIR")
    blob = json.dumps([FORMAT, command, opts, files, _versions(), env, package_digest()], sort_keys=True, default=repr)
    return f"answer-{command}-{hashlib.sha256(blob.encode()).hexdigest()[:32]}"


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
        self.items.append(("json", json.loads(json.dumps(obj, default=_json_default))))

    def timing(self, text: str) -> None:
        self.items.append(("timing", text))

    @contextlib.contextmanager
    def catching_warnings(self) -> Iterator[None]:
        """Record the warnings raised inside (they are re-raised by :func:`replay`, so ``main`` prints them)."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
        self.warnings += [str(w.message) for w in caught]


def _json_default(o: Any) -> Any:
    from .common import _default

    return _default(o)


def load(key: str | None) -> Recorder | None:
    """The recorded answer under ``key`` (None: absent, unreadable or no key)."""
    if key is None:
        return None
    from .. import cache

    hit = cache.load(key)
    if not (isinstance(hit, dict) and hit.get("format") == FORMAT):
        return None
    rec = Recorder()
    rec.items, rec.warnings = list(hit["items"]), list(hit["warnings"])
    return rec


def store(key: str | None, rec: Recorder) -> None:
    """Keep ``rec`` under ``key`` (nothing when no key)."""
    if key is not None:
        from .. import cache

        cache.store(key, {"format": FORMAT, "items": rec.items, "warnings": rec.warnings})


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
