"""``python -m rooflaw`` runs the CLI."""

import sys

try:
    from .cli import main

    code = main()
except KeyboardInterrupt:  # Ctrl-C while the CLI is still importing, or a late one: the same exit
    print("rooflaw: interrupted", file=sys.stderr)
    code = 130
if code == 130:
    from .cli import exit_interrupted

    exit_interrupted()
sys.exit(code)
