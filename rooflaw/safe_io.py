"""Reading user files safely: only regular files (a FIFO or a device never blocks a command), a size
cap, and TOML/JSON parsed with a nesting limit -- every failure is a one-line :class:`RooflawError`
naming the option and the file (CLI exit 2)."""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .errors import RooflawError, bad

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: Deepest nesting of tables/lists accepted in a TOML or JSON input (real files nest 3-4 levels).
MAX_DEPTH = 32
#: Largest input file read (bytes): a device, space or config file is a few kB; a fit CSV a few MB.
MAX_BYTES = 256 * 2**20


def check_regular(path: str | os.PathLike[str], field: str) -> Path:
    """``path`` if it names a regular file (symlinks followed); a one-line error naming ``field`` otherwise.

    Checked with ``stat`` before anything opens the file, so a FIFO, a terminal or ``/dev/zero`` is refused
    instead of blocking or reading forever.
    """
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise bad(field, str(p), "no such file") from None
    except NotADirectoryError:
        raise bad(field, str(p), "no such file (a parent is not a directory)") from None
    except OSError as e:
        raise bad(field, str(p), f"cannot be read ({e.strerror or type(e).__name__})") from None
    if stat.S_ISDIR(st.st_mode):
        raise bad(field, str(p), "is a directory; give a file")
    if not stat.S_ISREG(st.st_mode):
        raise bad(field, str(p), f"is not a regular file ({_kind(st.st_mode)}); give a file")
    return p


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):  # fmt: skip
        if test(mode):
            return name
    return "not a file"


def read_bytes(path: str | os.PathLike[str], field: str, limit: int = MAX_BYTES) -> bytes:
    """The bytes of a regular file (checked before and after opening, opened non-blocking)."""
    p = check_regular(path, field)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise bad(field, str(p), f"cannot be read ({e.strerror or type(e).__name__})") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):  # replaced between stat and open
            raise bad(field, str(p), "is not a regular file; give a file")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise bad(field, str(p), f"is larger than {limit // 2**20} MiB")
    return data


def read_text(path: str | os.PathLike[str], field: str, limit: int = MAX_BYTES) -> str:
    """A regular file's text as UTF-8 (one-line error naming the first bad byte)."""
    data = read_bytes(path, field, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise bad(field, str(path), f"is not UTF-8 text (byte {e.start})") from None


def check_depth(obj: Any, field: str, limit: int = MAX_DEPTH) -> Any:
    """``obj`` if its lists/tables nest at most ``limit`` deep (walked without recursion)."""
    stack = [(obj, 1)]
    while stack:
        o, depth = stack.pop()
        if isinstance(o, dict):
            children: Any = o.values()
        elif isinstance(o, (list, tuple)):
            children = o
        else:
            continue
        if depth > limit:
            raise bad(field, _short(obj), f"nests lists/tables more than {limit} levels deep")
        stack.extend((c, depth + 1) for c in children)
    return obj


def _short(obj: Any) -> str:
    try:
        text = repr(obj)
    except RecursionError:
        return f"<{type(obj).__name__}>"
    return text if len(text) <= 40 else text[:37] + "..."


def parse(text: str, suffix: str, field: str, where: str) -> Any:
    """Parse TOML (``.toml`` or no suffix) or JSON (``.json``) text with the nesting limit; ``where`` names
    the file in the error (``field='path': does not parse (...)``)."""
    loads: Callable[[str], Any] = json.loads if suffix.lower() == ".json" else tomllib.loads
    kind = "JSON" if loads is json.loads else "TOML"
    try:
        data = loads(text)
    except RecursionError:
        raise bad(field, where, f"nests lists/tables more than {MAX_DEPTH} levels deep") from None
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as e:
        msg = (str(e).splitlines() or [type(e).__name__])[0]
        raise bad(field, where, f"not valid {kind} ({msg})") from None
    except ValueError as e:  # json: an integer literal over sys.get_int_max_str_digits() digits
        raise bad(field, where, f"not valid {kind} ({(str(e).splitlines() or [''])[0]})") from None
    try:
        return check_depth(data, field)
    except RooflawError:
        raise bad(field, where, f"nests lists/tables more than {MAX_DEPTH} levels deep") from None


def load(path: str | os.PathLike[str], field: str, suffix: str | None = None) -> Any:
    """Read and parse a TOML/JSON input file (regular file, UTF-8, nesting limit)."""
    p = Path(path)
    return parse(read_text(p, field), p.suffix if suffix is None else suffix, field, str(p))


def exists(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` exists; False (not an ``OSError``) for a name too long or otherwise unusable."""
    try:
        os.stat(path)
    except (OSError, ValueError):  # ValueError: an embedded NUL byte
        return False
    return True


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` through a temporary file in its folder, renamed over it: a reader (or an
    interrupted fit) sees the old file or the new one, never half of one. Returns the path."""
    import tempfile

    p = Path(path)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return p
