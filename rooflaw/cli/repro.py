"""``rooflaw repro``: regenerate arXiv:2602.10377's figures and claims (``paper_repro`` ships with rooflaw)."""

from __future__ import annotations

import importlib
import os
import sys

import typer

from ..errors import RooflawError
from . import app


@app.command("repro")
def repro_cmd(
    sections: list[str] = typer.Argument(
        None, help="all (default), fig4, fig5, fig7, table2, theorems, closed_forms, search, qwen, seed, beyond"
    ),
    out: str = typer.Option("repro_out", "--out", help="Output folder for PNGs, REPORT.md and claims.json."),
    quick: bool = typer.Option(False, "--quick", help="Reduced mode (fewer fit starts) for tests."),
) -> None:
    """Reproduce the paper's frontiers, closed forms and claims under its two cost models and rooflaw's."""
    try:
        paper_repro = importlib.import_module("paper_repro")
    except ImportError:
        sys.path.insert(0, os.getcwd())  # the console script does not put the working directory on sys.path
        try:
            paper_repro = importlib.import_module("paper_repro")
        except ImportError:
            paper_repro = None
    if paper_repro is None:
        raise RooflawError(
            "paper_repro is not importable: reinstall rooflaw (`pip install -e .` or `make install`); "
            "it ships paper_repro beside the rooflaw package"
        ) from None
    try:
        paper_repro.run(sections or ["all"], out, quick=quick)
    except ValueError as e:
        raise RooflawError(str(e)) from None
