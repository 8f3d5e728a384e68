"""``python -m rooflaw`` runs the CLI."""

import sys

try:
    from .cli import main

    code = main()
except KeyboardInterrupt:  # Ctrl-C while the CLI is still importing, or a late one: the same exit
    print("rooflaw: interrupted", file=sys.stderr)
    code = 130
if code == 130:
    try:
        from .cli import exit_interrupted
    except BaseException:  # Ctrl-C cut a library's import short (a half-imported typer): end as it would
        import os
        import signal

        signal.signal(signal.SIGINT, signal.SIG_IGN)
        sys.stderr.flush()
        os._exit(130)
    exit_interrupted()
sys.exit(code)
