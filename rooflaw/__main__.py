"""``python -m rooflaw`` runs the CLI."""

import sys

try:
    from .cli import exit_with, main

    code = main()
except KeyboardInterrupt:  # Ctrl-C while the CLI is still importing, or a late one: the same exit
    print("rooflaw: interrupted", file=sys.stderr)
    code = 130
try:
    exit_with(code)
except KeyboardInterrupt:  # pragma: no cover - a Ctrl-C between the return and the handler being ignored
    sys.exit(130)
