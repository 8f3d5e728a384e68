"""Each run-derived number of docs/paper_repro.md beside the value a paper_repro run wrote to its claims.json.

    python -m paper_repro.docs_numbers OUT_DIR [--docs docs/paper_repro.md] [--moved]

The map is ``docs_numbers.tsv`` (next to this file), one number a line, tab-separated: a label (docs section and
what the number is), its claims.json path, how the page formats it, and the page's phrase around it. In the
phrase ``{}`` is the number (``{u}`` a latency with its unit, ``{a}`` an architecture "l 8, d 768, E16/K1"),
``{r}`` a range "3–5", ``#`` any other number, ``…`` any text on the same line; a space also matches a line
break. A path is keys joined by ``/`` (a list index is a number; ``*`` takes every item, for the ``-range`` and
``mean-`` formats), or two paths ``A ÷ B`` for their ratio.

Each output line is marked ``=`` (the page shows the run's value), ``*`` (moved: update the page), ``?`` (the
phrase is not on the page, or on it more than once: update the map) or ``-`` (the path is not in claims.json).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

MAP = Path(__file__).with_name("docs_numbers.tsv")
DOCS = Path(__file__).resolve().parents[1] / "docs" / "paper_repro.md"
HOLES = {"{}": r"([\d.,]+)", "{u}": r"([\d.,]+ m?s)", "{a}": r"(l \d+, d \d+, E\d+/K\d+)", "{r}": r"([\d.,]+–[\d.,]+)"}
TOKENS = {"#": r"[\d.,]+", "…": r"[^\n]*?", " ": r"\s+"}


def _lat(v: float) -> str:
    return f"{v * 1e3:.3g} ms" if v < 1 else f"{v:.3g} s"


def _fixed(n: int) -> Any:
    return lambda v: f"{v:.{n}f}"


def _range(fmt: str, vs: list[float]) -> str:
    lo, hi = fmt.format(min(vs)), fmt.format(max(vs))
    return lo if lo == hi else f"{lo}–{hi}"


FORMATS: dict[str, Any] = {
    **{f"{n}f": _fixed(n) for n in range(5)},
    "pct": lambda v: f"{100 * v:.0f}",
    "pct1": lambda v: f"{100 * v:.1f}",
    "ms": lambda v: f"{v * 1e3:.3g}",
    "g3": lambda v: f"{v:.3g}",
    "int,": lambda v: f"{v:,.0f}",
    "r10": lambda v: f"{round(v, -1):.0f}",
    "r1000,": lambda v: f"{round(v, -3):,.0f}",
    "pct1-above1": lambda v: f"{100 * (v - 1):.1f}",
    "pct1-below1": lambda v: f"{100 * (1 - v):.1f}",
    "pct-range": lambda vs: _range("{:.0f}", [100 * v for v in vs]),
    "int,-range": lambda vs: _range("{:,.0f}", vs),
    "mean-3f": lambda vs: f"{sum(vs) / len(vs):.3f}",
    "mean-4f": lambda vs: f"{sum(vs) / len(vs):.4f}",
    "e5": lambda v: f"{v / 1e5:.1f}",
    "lat": _lat,
    "arch": lambda a: f"l {a['layers']}, d {a['d_model']}, E{a['experts']}/K{a['top_k']}",
}


class Entry(NamedTuple):
    label: str
    path: str
    fmt: str
    phrase: str


class Row(NamedTuple):
    mark: str
    label: str
    docs: str
    run: str
    path: str


def load_map(path: Path = MAP) -> list[Entry]:
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip() and not ln.startswith("#")]
    return [Entry(*ln.split("\t")) for ln in lines]


def pattern(phrase: str) -> str:
    """The phrase as a regular expression with one group (the number); everything else is literal."""
    parts = re.split(r"(\{\}|\{u\}|\{a\}|\{r\}|#|…| )", phrase)
    rx = "".join(HOLES.get(p) or TOKENS.get(p) or re.escape(p) for p in parts)
    return rx.replace(r"\s+[^\n]*?\s+", r"\s+(?:[^\n]*?\s+)??")  # "a … b" also matches "a b"


def lookup(claims: dict, path: str) -> Any:
    if "÷" in path:
        a, b = (lookup(claims, p.strip()) for p in path.split("÷"))
        return None if a is None or b is None else a / b
    node: Any = claims
    keys = path.split("/")
    for i, key in enumerate(keys):
        if key == "*" and isinstance(node, (list, dict)):
            items = [lookup(v, "/".join(keys[i + 1 :])) if i + 1 < len(keys) else v for v in
                     (node.values() if isinstance(node, dict) else node)]  # fmt: skip
            return None if not items or any(v is None for v in items) else items
        if isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        elif isinstance(node, dict) and key in node:
            node = node[key]
        else:
            return None
    return node


def compare(claims: dict, docs: str, entries: list[Entry] | None = None) -> list[Row]:
    rows = []
    for e in load_map() if entries is None else entries:
        if e.fmt not in FORMATS:
            raise ValueError(f"{e.label}: unknown format {e.fmt!r} (one of {', '.join(FORMATS)})")
        found = re.findall(pattern(e.phrase), docs)
        value = lookup(claims, e.path)
        run = "" if value is None else FORMATS[e.fmt](value)
        shown = found[0] if len(found) == 1 else f"<{len(found)} matches>"
        mark = "?" if len(found) != 1 else "-" if value is None else "=" if run == shown else "*"
        rows.append(Row(mark, e.label, shown, run, e.path))
    return rows


def rewrite(claims: dict, docs: str, entries: list[Entry] | None = None) -> tuple[str, int]:
    """``docs`` with every moved number (a phrase found once, its run value known and different) set to the run's
    value, and how many were set; the prose around them ("was ..." history) is left to the reader."""
    n = 0
    for e in load_map() if entries is None else entries:
        value = lookup(claims, e.path)
        found = list(re.finditer(pattern(e.phrase), docs))
        if value is None or len(found) != 1 or found[0].group(1) == (run := FORMATS[e.fmt](value)):
            continue
        a, b = found[0].span(1)
        docs, n = docs[:a] + run + docs[b:], n + 1
    return docs, n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m paper_repro.docs_numbers", description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="a paper_repro output folder (its claims.json)")
    ap.add_argument("--docs", type=Path, default=DOCS, help="the page to compare (default: %(default)s)")
    ap.add_argument("--moved", action="store_true", help="print only the lines not marked '='")
    ap.add_argument("--write", action="store_true", help="set the moved numbers on the page to the run's values")
    a = ap.parse_args(argv)
    src = a.out / "claims.json" if a.out.is_dir() else a.out
    try:
        claims = json.loads(src.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"docs_numbers: cannot read {src}: {exc}", file=sys.stderr)
        return 2
    if a.write:
        text, n = rewrite(claims, a.docs.read_text(encoding="utf-8"))
        fd, tmp = tempfile.mkstemp(dir=a.docs.parent, suffix=".tmp")  # the page whole or untouched
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, a.docs.stat().st_mode & 0o777)  # mkstemp's file is 0600: keep the page's mode
        os.replace(tmp, a.docs)
        print(f"docs_numbers: set {n} numbers in {a.docs}")
    rows = compare(claims, a.docs.read_text(encoding="utf-8"))
    width = max(len(r.label) for r in rows)
    for r in rows:
        if not a.moved or r.mark != "=":
            print(f"{r.mark} {r.label:<{width}}  docs {r.docs:>22}  run {r.run:>22}  {r.path}")
    counts = {m: sum(r.mark == m for r in rows) for m in "=*?-"}
    print(f"{len(rows)} numbers: {counts['=']} as on the page, {counts['*']} moved, {counts['?']} phrase not found "
          f"once, {counts['-']} not in {src}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
