"""The ``rooflaw`` command. Thin: parses arguments, calls the public API, prints tables or JSON.

Each sub-module registers its commands on :data:`app`. Errors: bad input exits 2 with a one-line
message, an infeasible budget exits 3; no tracebacks.
"""

from __future__ import annotations

import os
import sys

import typer

from ..errors import ExternalError, Infeasible, RooflawError, bad

app = typer.Typer(
    name="rooflaw",
    help="Hardware/model co-design of language models: loss laws, roofline cost models, solvers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        print(f"rooflaw {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Hardware/model co-design of language models: loss laws, roofline cost models, solvers."""


# Sub-commands register themselves on `app` (the `devices` sub-app's on `devices_app`) when imported: here, in one
# place, so no sub-module imports another to register it.
from . import compare as _compare  # noqa: E402,F401
from . import devices as _devices  # noqa: E402,F401
from . import evaluate as _evaluate  # noqa: E402,F401
from . import fit as _fit  # noqa: E402,F401
from . import fit_efficiency as _fit_efficiency  # noqa: E402,F401  (`devices fit-efficiency`)
from . import frontier as _frontier  # noqa: E402,F401
from . import kernels as _kernels  # noqa: E402,F401  (`devices fit-kernels`, `devices check-kernels`)
from . import laws as _laws  # noqa: E402,F401
from . import plot as _plot  # noqa: E402,F401
from . import report as _report  # noqa: E402,F401
from . import repro as _repro  # noqa: E402,F401
from . import search as _search  # noqa: E402,F401
from . import solve as _solve  # noqa: E402,F401
from . import systems as _systems  # noqa: E402,F401  (`devices systems`)
from . import validate as _validate  # noqa: E402,F401


def _one_line(e: BaseException | str) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= 600 else text[:597] + "..."


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code.

    0 success; 2 bad input (one line naming the field, value and what is allowed); 3 nothing meets
    the budget; 4 a failure outside rooflaw (disk full, an unwritable output, a ``--measure``
    function that failed); 130 interrupted. Never a traceback: warnings raised while a command runs
    are printed (one line each) only if it succeeds. ``ROOFLAW_DEBUG=1`` re-raises internal errors. Without
    ``argv`` (the command line) a deterministic ``solve`` may be answered from the disk (:mod:`.answer_cache`).
    """
    import warnings

    if argv is None:  # the command line itself, not an in-process caller: the answer cache may serve it
        from . import answer_cache

        answer_cache.enabled = True
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")
            code = _run(argv)
        if code == 0:
            seen = set()
            for w in caught:
                line = f"rooflaw: warning: {_one_line(w.message)}"
                if line not in seen:
                    seen.add(line)
                    print(line, file=sys.stderr)
    except KeyboardInterrupt:  # outside the command (printing warnings): the same exit
        print("rooflaw: interrupted", file=sys.stderr)
        code = 130
    return code


#: Largest magnitude of an integer on the command line: what a C long (int64) holds. Each option may refuse less.
INT_OPTION_MAX = 2**63 - 1


def _check_int_sizes(argv: list[str]) -> None:
    """Refuse (exit 2, naming the option) an integer argument beyond ±(2⁶³ − 1) before any command sees it:
    numpy would otherwise overflow on it later (``OverflowError``, an internal error)."""
    import re

    prev = ""
    for tok in argv:
        opt, value = tok.split("=", 1) if tok.startswith("--") and "=" in tok else (prev, tok)
        if re.fullmatch(r"[+-]?[0-9_]{19,}", value.strip()) and abs(int(value)) > INT_OPTION_MAX:
            raise bad(opt.lstrip("-") or "argument", value, "must be an integer of magnitude at most 2**63 - 1")
        prev = tok if tok.startswith("-") else ""


def _run(argv: list[str] | None) -> int:
    try:
        _check_int_sizes(sys.argv[1:] if argv is None else list(argv))
        rv = app(args=argv, prog_name="rooflaw", standalone_mode=False)
        if rv == 130 and not isinstance(rv, bool):  # typer turns Ctrl-C into a returned 130
            raise KeyboardInterrupt
    except Infeasible as e:
        print(f"rooflaw: infeasible: {_one_line(e)}", file=sys.stderr)
        return 3
    except ExternalError as e:
        print(f"rooflaw: error: {_one_line(e)}", file=sys.stderr)
        return 4
    except RooflawError as e:
        print(f"rooflaw: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except typer.Exit as e:
        return int(getattr(e, "exit_code", 0) or 0)
    except (typer.Abort, KeyboardInterrupt):
        print("rooflaw: interrupted", file=sys.stderr)
        return 130
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError) as e:
        print(f"rooflaw: error: {e.filename or ''}: {e.strerror or _one_line(e)}", file=sys.stderr)
        return 2
    except UnicodeDecodeError as e:
        print(f"rooflaw: error: input is not valid UTF-8 ({e.reason} at byte {e.start})", file=sys.stderr)
        return 2
    except (OSError, MemoryError) as e:
        filename = getattr(e, "filename", None)  # an OSError's; MemoryError has none
        what = f"{filename}: " if filename else ""
        why = getattr(e, "strerror", None) or _one_line(e)
        print(f"rooflaw: error: {what}{why}", file=sys.stderr)
        return 4
    except Exception as e:
        # usage errors of typer's (vendored) click: unknown option, missing parameter, bad value
        if hasattr(e, "format_message") and hasattr(e, "exit_code"):
            print(f"rooflaw: error: {_one_line(e.format_message())}", file=sys.stderr)
            return int(e.exit_code) if e.exit_code else 2
        if os.environ.get("ROOFLAW_DEBUG"):
            raise
        print(f"rooflaw: internal error: {type(e).__name__}: {_one_line(e)} (ROOFLAW_DEBUG=1 shows where)",
              file=sys.stderr)  # fmt: skip
        return 1
    return 0


def _stop_workers() -> None:
    """Kill this process's worker processes (loky's, multiprocessing's) before the exit handlers join them: they
    ignore Ctrl-C by design, and a worker in the middle of a long scan chunk would hold the exit for its whole chunk."""
    import contextlib
    import multiprocessing
    import signal

    for child in multiprocessing.active_children():  # loky's processes are here too; their Popen has no kill()
        with contextlib.suppress(Exception):
            if child.pid:
                os.kill(child.pid, signal.SIGKILL)


def exit_interrupted() -> None:  # pragma: no cover - ends the process; tested through `python -m rooflaw`
    """End the process with 130 after an interrupt: Ctrl-C is ignored from here, the exit handlers run (loky
    workers, temporary files), then the process exits at once. A plain ``sys.exit(130)`` can still end "by the
    signal" (status -2): CPython does so when a KeyboardInterrupt escaped any code it ran, even one caught later."""
    import atexit
    import contextlib
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        # the one line is out: what the pool's threads say about workers killed under them is noise
        with contextlib.suppress(Exception):
            sys.stderr.flush()
            os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
        _stop_workers()
        atexit._run_exitfuncs()
    finally:
        import contextlib

        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a closed pipe must not change the exit status
                stream.flush()
        os._exit(130)


def _console_main() -> None:  # pragma: no cover - thin wrapper
    try:
        code = main()
    except KeyboardInterrupt:
        print("rooflaw: interrupted", file=sys.stderr)
        code = 130
    if code == 130:
        exit_interrupted()
    sys.exit(code)
