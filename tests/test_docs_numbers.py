"""paper_repro.docs_numbers: the map of docs/paper_repro.md's run-derived numbers finds each on the page once and
flags the ones a run moved (a minimal fake claims.json; no paper_repro run)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from paper_repro import docs_numbers as dn  # noqa: E402


def _by_label(rows):
    return {r.label: r for r in rows}


def test_every_mapped_phrase_is_on_the_page_once():
    rows = dn.compare({}, dn.DOCS.read_text(encoding="utf-8"))
    assert len(rows) > 100
    assert [r.label for r in rows if r.mark == "?"] == []
    assert {r.mark for r in rows} == {"-"}  # nothing in the empty claims


def test_same_moved_and_missing(tmp_path, capsys):
    page = dn.DOCS.read_text(encoding="utf-8")
    median = _by_label(dn.compare({}, page))["fig5 table, prefill row, full median"].docs  # what the page says now
    low = _by_label(dn.compare({}, page))["fig5 table, prefill row, full min"].docs
    fake = {"fig5": {"int8_speedup": {"full": {"prefill": {"median": float(median), "min": float(low) + 0.5}}}}}
    rows = _by_label(dn.compare(fake, page))
    same, moved = rows["fig5 table, prefill row, full median"], rows["fig5 table, prefill row, full min"]
    assert (same.mark, same.run, same.docs) == ("=", median, median)
    assert (moved.mark, moved.run) == ("*", f"{float(low) + 0.5:.2f}") and moved.docs == low
    assert rows["fig5 table, decode row, full median"].mark == "-"
    (tmp_path / "claims.json").write_text(json.dumps(fake))
    assert dn.main([str(tmp_path), "--moved"]) == 0
    out = capsys.readouterr().out
    assert "* fig5 table, prefill row, full min" in out and "full median " not in out.split("\n")[0]


def test_phrase_holes_and_cells():
    text = "| `k` | 10 / 20 % | 30 / 40 % |\nratio a b 2.5×, spread 10–20 %"
    entries = [
        dn.Entry("cell", "a", "pct", "| `k` … | … | {} / # % |"),  # "…" may be empty: no cell shift
        dn.Entry("ratio", "a ÷ b", "1f", "ratio … {}×"),
        dn.Entry("range", "c/*", "pct-range", "spread {r} %"),
        dn.Entry("absent", "a", "pct", "nowhere {} %"),
    ]
    rows = dn.compare({"a": 0.3, "b": 0.12, "c": [0.1, 0.25]}, text, entries)
    assert [(r.mark, r.docs, r.run) for r in rows] == [
        ("=", "30", "30"), ("=", "2.5", "2.5"), ("*", "10–20", "10–25"), ("?", "<0 matches>", "30"),
    ]  # fmt: skip


def test_rewrite_sets_only_moved_numbers_found_once():
    text = "| `k` | 10 / 20 % | 30 / 40 % |\nratio a b 2.5×, spread 10–20 %, twice 7 % and twice 7 %"
    entries = [
        dn.Entry("cell", "a", "pct", "| `k` … | … | {} / # % |"),
        dn.Entry("range", "c/*", "pct-range", "spread {r} %"),
        dn.Entry("twice", "a", "pct", "twice {} %"),  # two matches: left alone
        dn.Entry("unknown", "zzz", "pct", "ratio … {}×"),  # no run value: left alone
    ]
    out, n = dn.rewrite({"a": 0.31, "c": [0.1, 0.25]}, text, entries)
    assert n == 2
    assert out == "| `k` | 10 / 20 % | 31 / 40 % |\nratio a b 2.5×, spread 10–25 %, twice 7 % and twice 7 %"
    assert [r.mark for r in dn.compare({"a": 0.31, "c": [0.1, 0.25]}, out, entries[:2])] == ["=", "="]
