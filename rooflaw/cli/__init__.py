"""The ``rooflaw`` command. Thin: parses arguments, calls the public API, prints tables or JSON.

Each sub-module registers its commands on :data:`app`. Errors: bad input exits 2 with a one-line
message, an infeasible budget exits 3; no tracebacks.
"""

from __future__ import annotations

import sys

import typer

from ..errors import Infeasible, RooflawError

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


# Sub-commands register themselves on `app` when imported.
from . import compare as _compare  # noqa: E402,F401
from . import devices as _devices  # noqa: E402,F401
from . import evaluate as _evaluate  # noqa: E402,F401
from . import fit as _fit  # noqa: E402,F401
from . import frontier as _frontier  # noqa: E402,F401
from . import laws as _laws  # noqa: E402,F401
from . import plot as _plot  # noqa: E402,F401
from . import repro as _repro  # noqa: E402,F401
from . import search as _search  # noqa: E402,F401
from . import solve as _solve  # noqa: E402,F401


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    try:
        app(args=argv, prog_name="rooflaw", standalone_mode=False)
    except Infeasible as e:
        print(f"rooflaw: infeasible: {e}", file=sys.stderr)
        return 3
    except RooflawError as e:
        print(f"rooflaw: error: {e}", file=sys.stderr)
        return 2
    except typer.Exit as e:
        return int(getattr(e, "exit_code", 0) or 0)
    except typer.Abort:
        print("rooflaw: aborted", file=sys.stderr)
        return 130
    except (FileNotFoundError, IsADirectoryError, PermissionError) as e:
        print(f"rooflaw: error: {e.filename}: {e.strerror}", file=sys.stderr)
        return 2
    except Exception as e:
        # usage errors of typer's (vendored) click: unknown option, missing parameter, bad value
        if hasattr(e, "show") and hasattr(e, "exit_code"):
            e.show()
            return int(e.exit_code) if e.exit_code else 2
        raise
    return 0


def _console_main() -> None:  # pragma: no cover - thin wrapper
    sys.exit(main())
