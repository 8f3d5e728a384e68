"""The layering check (scripts/check_layers.py) finds no cycle, upward import, reach or private-name crossing.

The check itself is tested on a fault planted in a temporary copy of one module, so a check that cannot fail
would fail here.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _checker():
    spec = importlib.util.spec_from_file_location("check_layers", ROOT / "scripts" / "check_layers.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["check_layers"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_no_layering_faults():
    found = _checker().faults()
    assert found == [], "\n".join(found)


def test_the_check_finds_a_planted_cycle_and_private_name(tmp_path, monkeypatch):
    mod = _checker()
    pkg = tmp_path / "rooflaw"
    (pkg / "arch").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "arch" / "__init__.py").write_text("")
    (pkg / "arch" / "a.py").write_text("from .b import _hidden\n")
    (pkg / "arch" / "b.py").write_text("from . import a\n_hidden = 1\n")
    (pkg / "arch" / "c.py").write_text("from ..solver import x\n")
    (pkg / "solver").mkdir()
    (pkg / "solver" / "__init__.py").write_text("x = 1\n")
    monkeypatch.setattr(mod, "ROOT", tmp_path)
    kinds = {f.split(":", 1)[0] for f in mod.faults()}
    assert {"cycle", "private-name", "upward"} <= kinds
