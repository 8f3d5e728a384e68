"""docs/errors.md's exit-code table is the contract: every code it lists is one ``rooflaw.cli`` returns (each is
produced here by a real command or a planted failure), and the CLI returns no code the table does not list."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import rooflaw.cli as cli
from tests.cli_helpers import TINY_SPACE, run_cli

ROOT = Path(__file__).resolve().parents[1]


def documented() -> dict[int, str]:
    """code -> meaning, read from the first table of docs/errors.md (``| code | meaning | stderr |``)."""
    text = (ROOT / "docs/errors.md").read_text()
    section = text.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\|\s*(\d+)\s*\|\s*([^|]+?)\s*\|", section, flags=re.M)
    assert rows, "no exit-code table in docs/errors.md"
    return {int(c): m for c, m in rows}


def returned_by_the_cli() -> set[int]:
    """Every integer literal ``rooflaw.cli.main``'s dispatcher returns or exits with (read from its source)."""
    tree = ast.parse(Path(cli.__file__).read_text())
    codes: set[int] = set()
    for node in ast.walk(tree):
        value = node.value.value if isinstance(node, ast.Return) and isinstance(node.value, ast.Constant) else None
        if isinstance(value, int) and not isinstance(value, bool):
            codes.add(value)
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") in ("_exit", "exit"):
            codes |= {a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, int)}
    return codes


def test_the_table_lists_exactly_the_codes_the_cli_returns():
    doc = documented()
    used = returned_by_the_cli() | {0}  # 0: falling off the end of _run
    assert set(doc) == used, f"documented {sorted(doc)}, returned {sorted(used)}"
    assert all(len(m) > 5 for m in doc.values())


def test_each_documented_code_is_produced(capsys, tmp_path, monkeypatch):
    doc = documented()
    space = tmp_path / "tiny.toml"
    space.write_text(TINY_SPACE)
    seen: dict[int, str] = {}

    code, _, err = run_cli(capsys, "laws", "list")
    seen[code] = err
    code, _, err = run_cli(capsys, "evaluate", "--device", "h100-sxm", "--arch", "layers=-1,d_model=8,heads=1")
    seen[code] = err
    code, _, err = run_cli(capsys, "solve", "--device", "h100-sxm", "--space", space, "--method", "exhaustive",
                           "--latency-budget", "1ns")  # fmt: skip
    seen[code] = err
    out = tmp_path / "full.csv"
    out.symlink_to("/dev/full")
    code, _, err = run_cli(capsys, "frontier", "--device", "h100-sxm", "--space", space, "--n-jobs", "1", "--out", out)
    seen[code] = err

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.app, "__call__", interrupted, raising=False)
    monkeypatch.setattr(type(cli.app), "__call__", interrupted)
    code, _, err = run_cli(capsys, "laws", "list")
    seen[code] = err

    def bug(*a, **k):
        raise ZeroDivisionError("planted")

    monkeypatch.setattr(type(cli.app), "__call__", bug)
    code, _, err = run_cli(capsys, "laws", "list")
    seen[code] = err

    assert set(seen) == set(doc), sorted(seen)
    assert seen[2].startswith("rooflaw: error: layers=")
    assert seen[3].startswith("rooflaw: infeasible: ")
    assert seen[4].startswith("rooflaw: error: ") and "No space left" in seen[4]
    assert seen[130] == "rooflaw: interrupted\n"
    assert seen[1].startswith("rooflaw: internal error: ZeroDivisionError: planted")
    for c in (1, 2, 3, 4, 130):
        assert seen[c].count("\n") == 1, (c, seen[c])


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_the_table_says_what_a_full_disk_is():
    assert "disk full" in documented()[4]
