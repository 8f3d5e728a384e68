"""``rooflaw repro``: regenerate arXiv:2602.10377's figures and claims (``paper_repro`` ships with rooflaw)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import typer

from ..errors import RooflawError
from . import app


def _load_paper_repro() -> ModuleType:
    """``paper_repro`` from beside the ``rooflaw`` package that is running -- never from the working
    directory or another ``sys.path`` entry (a stray ``paper_repro/`` there must not run)."""
    import rooflaw

    home = Path(rooflaw.__file__).resolve().parent.parent
    init = home / "paper_repro" / "__init__.py"
    loaded = sys.modules.get("paper_repro")
    if loaded is not None:
        if Path(getattr(loaded, "__file__", "") or "").resolve() == init:
            return loaded
        raise RooflawError(f"paper_repro is already imported from {loaded.__file__}, not from {init.parent}")
    if not init.is_file():
        raise RooflawError(
            f"paper_repro is not installed beside rooflaw (looked in {init.parent}); "
            "install rooflaw with its paper_repro package or run from a source checkout"
        )
    spec = importlib.util.spec_from_file_location("paper_repro", init, submodule_search_locations=[str(init.parent)])
    if spec is None or spec.loader is None:  # pragma: no cover - a .py file always gets a spec with a loader
        raise RooflawError(f"cannot import paper_repro from {init}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["paper_repro"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop("paper_repro", None)
        raise
    return module


@app.command("repro")
def repro_cmd(
    sections: list[str] = typer.Argument(
        None, help="all (default), fig4, fig5, fig7, table2, theorems, closed_forms, search, qwen, seed, beyond"
    ),
    out: str = typer.Option("repro_out", "--out", help="Output folder for PNGs, REPORT.md and claims.json."),
    quick: bool = typer.Option(False, "--quick", help="Reduced mode (fewer fit starts) for tests."),
) -> None:
    """Reproduce the paper's frontiers, closed forms and claims under its two cost models and rooflaw's."""
    if Path(out).exists() and not Path(out).is_dir():
        raise RooflawError(f"--out={out!r}: exists and is not a directory; give a folder for the report")
    if not Path(out).parent.is_dir():
        raise RooflawError(f"--out={out!r}: directory {str(Path(out).parent)!r} does not exist")
    paper_repro = _load_paper_repro()
    try:
        paper_repro.run(sections or ["all"], out, quick=quick)
    except ValueError as e:
        raise RooflawError(str(e)) from None
