"""CLI start-up: ``rooflaw --help`` and ``rooflaw laws list`` in fresh processes (target ≤ 0.5 s).

Reports, per command, the minimum over ``--repeat`` runs of the wall time and of the CPU time (user + sys of the
child, less sensitive to other jobs on a shared machine). ``--compare PATH`` runs the same commands against
another checkout (e.g. the previous commit in a worktree) alternately with this one.

    python benchmarks/bench_startup.py --repeat 10 [--compare /path/to/other/checkout]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS = (["--help"], ["laws", "list"])


def run_once(tree: Path, args: list[str]) -> tuple[float, float]:
    """(wall s, user+sys CPU s) of one ``python -m rooflaw ARGS`` with ``tree`` first on the path."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "rooflaw", *args], env=env, cwd=tempfile.gettempdir(),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)  # fmt: skip
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--compare", type=Path, default=None, help="another checkout to time alternately")
    a = ap.parse_args()
    trees = {"this": Path(__file__).resolve().parents[1]}
    if a.compare is not None:
        trees["compare"] = a.compare.resolve()
    for args in COMMANDS:
        samples: dict[str, list[tuple[float, float]]] = {k: [] for k in trees}
        for _ in range(a.repeat):
            for name, tree in trees.items():
                samples[name].append(run_once(tree, args))
        for name, s in samples.items():
            wall = min(w for w, _ in s)
            cpu = min(c for _, c in s)
            print(f"{name:8s} rooflaw {' '.join(args):10s} min wall {wall:.3f} s, min CPU {cpu:.3f} s (n={len(s)})")


if __name__ == "__main__":
    main()
