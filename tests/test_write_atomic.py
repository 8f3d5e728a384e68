"""safe_io.write_text_atomic: the fits' catalog writers replace a file whole or not at all."""

from __future__ import annotations

import pytest

from rooflaw.safe_io import write_text_atomic


def test_replaces_the_file(tmp_path):
    p = tmp_path / "engines.toml"
    p.write_text("old\n", encoding="utf-8")
    assert write_text_atomic(p, "new\n") == p
    assert p.read_text(encoding="utf-8") == "new\n"
    assert [f.name for f in tmp_path.iterdir()] == ["engines.toml"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    p = tmp_path / "kernel_curves.toml"
    p.write_text("old\n", encoding="utf-8")
    with pytest.raises(UnicodeEncodeError):
        write_text_atomic(p, "half written \ud800")  # a lone surrogate cannot be encoded: the write fails midway
    assert p.read_text(encoding="utf-8") == "old\n"
    assert [f.name for f in tmp_path.iterdir()] == ["kernel_curves.toml"]
