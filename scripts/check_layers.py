"""Layering check: import cycles, upward imports and private reaches, over rooflaw/, benchmarks/ and paper_repro/.

Every import counts, including those inside functions (a cycle hidden in a function is still a cycle). Faults:

- **cycle**: a set of rooflaw modules that import each other (a strongly connected component of more than one);
- **upward**: a module importing from a package above its own in design.md's order (``arch``/``devices`` <
  ``objectives`` < ``constraints`` < ``solver`` < ``api``/``validate``/``plots`` < ``cli``; ``errors``, ``units``
  and ``cache`` sit below everything);
- **reach**: ``benchmarks``/``paper_repro``/``cli`` importing anything but the public ``rooflaw`` namespace
  (``import rooflaw`` / ``from rooflaw import name``, or a public submodule listed in :data:`PUBLIC_MODULES`);
- **private-name**: a name starting with ``_`` imported from another module (a name another module needs is
  public inside its package, as in scipy and optuna).

Layering faults are cycles, upward imports and reaches; private names are counted apart.

Prints one line per fault and the counts; ``--max-faults N`` exits 1 when there are more (CI keeps the count from
growing). Standard library only.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Package rank (design.md): a module may import from its own rank or below.
RANK = {
    "errors": 0, "units": 0, "cache": 0, "_version": 0,
    "arch": 1, "devices": 1,
    "objectives": 2,
    "constraints": 3,
    "solver": 4,
    "api": 5, "validate": 6, "validate_cuda": 6, "plots": 5, "report": 5, "__init__": 7, "__main__": 8,
    "bands": 5, "speculative": 5, "parallel": 5, "fitting": 5, "explain": 5,
    "cli": 8,
}  # fmt: skip
#: Submodules the CLI, benchmarks and paper_repro may import besides ``rooflaw`` itself.
PUBLIC_MODULES = {"rooflaw", "rooflaw.api", "rooflaw.errors", "rooflaw.units", "rooflaw.validate",
                  "rooflaw.validate_cuda"}  # fmt: skip
#: The groups of the public API (``rooflaw.api.GROUPS``): ``from rooflaw.bands import value_band`` is public too.
PUBLIC_MODULES |= {f"rooflaw.{g}" for g in ("bands", "speculative", "parallel", "fitting", "explain", "plots",
                                             "report")}  # fmt: skip


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _resolve(mod: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
    return ".".join(base + ([node.module] if node.module else []))


def imports(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, module imported, name or None) for every import in ``path``."""
    mod, is_pkg = module_name(path), path.name == "__init__.py"
    out = []
    for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(n, ast.Import):
            out += [(n.lineno, a.name, None) for a in n.names]
        elif isinstance(n, ast.ImportFrom):
            target = _resolve(mod, is_pkg, n)
            out += [(n.lineno, target, a.name) for a in n.names]
    return out


def _package(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _sccs(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def faults() -> list[str]:
    files = sorted((ROOT / "rooflaw").rglob("*.py"))
    mods = {module_name(p): p for p in files}
    graph: dict[str, set[str]] = defaultdict(set)
    out = []
    for mod, path in mods.items():
        for line, target, name in imports(path):
            if not target.startswith("rooflaw"):
                continue
            full = f"{target}.{name}" if name and f"{target}.{name}" in mods else target
            dest = full if full in mods else next((m for m in (target,) if m in mods), None)
            if dest is None or dest == mod:
                continue
            where = f"{path.relative_to(ROOT)}:{line}"
            # the package __init__ of an ancestor is not an edge of a cycle (it re-exports lazily)
            if not mod.startswith(dest + ".") and dest != "rooflaw":
                graph[mod].add(dest)
            src_pkg, dst_pkg = _package(mod), _package(dest)
            if src_pkg in RANK and dst_pkg in RANK and RANK[dst_pkg] > RANK[src_pkg] and dest != "rooflaw":
                out.append(f"upward: {where} {mod} imports {dest} ({dst_pkg} is above {src_pkg})")
            if src_pkg == "cli" and dst_pkg != "cli" and dest not in PUBLIC_MODULES:
                out.append(f"reach: {where} the CLI imports {dest} (not the public API)")
            if name and name.startswith("_") and not name.startswith("__") and dest != mod:
                out.append(f"private-name: {where} {mod} imports {name} from {dest}")
    for comp in _sccs(graph):
        out.append(f"cycle: {' <-> '.join(comp)}")
    for folder in ("benchmarks", "paper_repro"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for line, target, name in imports(path):
                if target.startswith("rooflaw") and target not in PUBLIC_MODULES:
                    out.append(f"reach: {path.relative_to(ROOT)}:{line} imports {target} (not the public API)")
                elif target == "rooflaw" and name and name.startswith("_"):
                    out.append(f"reach: {path.relative_to(ROOT)}:{line} imports rooflaw.{name}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-faults", type=int, default=None, help="exit 1 when there are more faults than this")
    ap.add_argument("--quiet", action="store_true", help="print the counts only")
    args = ap.parse_args(argv)
    found = faults()
    if not args.quiet:
        print("\n".join(found))
    kinds = defaultdict(int)
    for f in found:
        kinds[f.split(":", 1)[0]] += 1
    print(f"{len(found)} faults: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())) if found else "0 faults")
    return 1 if args.max_faults is not None and len(found) > args.max_faults else 0


if __name__ == "__main__":
    sys.exit(main())
