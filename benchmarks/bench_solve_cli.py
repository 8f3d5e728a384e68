"""``rooflaw solve`` from the command line on a warm cache, in fresh processes (issue #25: ≤ 1 s wall, quiet machine).

The main job of the README: the closed-form answer for a Jetson AGX Orin under a decode-latency budget
(``solve --device jetson-agx-orin-64gb --latency-budget 20ms``, the default method). After one warm-up process
(fills the disk cache: derivations, compiled evaluators, the answer), ``--repeat`` fresh processes each of:

- ``same``: the same command again: the answer cache serves it (:mod:`rooflaw.cli.answer_cache`);
- ``new-budget``: a budget not asked before (20 ms + i·0.37 ms): a miss of the answer cache, so the solve runs,
  on the derivation and the compiled evaluator cached on disk;
- ``no-answer-cache`` (with ``--compare-miss``): the same command through ``rooflaw.cli.main(argv)``, the
  in-process entry, which never reads the answer cache: what the warm solve costs without it.

Per case: median and min wall of the child, median CPU (user + sys of the child), n; the 1-min load average
before and after; and whether ``PYTHONDONTWRITEBYTECODE`` was set for the children (``--pyc`` unsets it, as an
installed package has its bytecode compiled). One JSON object.

    python benchmarks/bench_solve_cli.py --repeat 10 [--pyc]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TREE = Path(__file__).resolve().parents[1]
BASE = ["solve", "--device", "jetson-agx-orin-64gb"]
#: ``main(argv)`` with argv given: the in-process entry, which never reads the answer cache.
_NO_ANSWER_CACHE = "import sys; from rooflaw.cli import main; sys.exit(main(sys.argv[1:]))"


def run_once(args: list[str], env: dict[str, str], answer_cache: bool = True) -> tuple[float, float]:
    """(wall s, user+sys CPU s) of one ``python -m rooflaw ARGS`` (or the in-process entry) in a fresh process."""
    cmd = [sys.executable, "-m", "rooflaw", *args] if answer_cache else [sys.executable, "-c", _NO_ANSWER_CACHE, *args]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=tempfile.gettempdir(), stdout=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def summary(samples: list[tuple[float, float]]) -> dict:
    walls, cpus = [w for w, _ in samples], [c for _, c in samples]
    return {"median_wall_s": round(statistics.median(walls), 3), "min_wall_s": round(min(walls), 3),
            "median_cpu_s": round(statistics.median(cpus), 3), "n": len(samples)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--pyc", action="store_true", help="let the children write and use .pyc files")
    ap.add_argument("--compare-miss", action="store_true", help="also time the same command without the answer cache")
    a = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(TREE)}
    if a.pyc:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    out: dict = {"command": "python -m rooflaw " + " ".join([*BASE, "--latency-budget", "20ms"]),
                 "load_before": round(os.getloadavg()[0], 2), "repeat": a.repeat,
                 "PYTHONDONTWRITEBYTECODE": env.get("PYTHONDONTWRITEBYTECODE")}  # fmt: skip
    run_once([*BASE, "--latency-budget", "20ms"], env)  # warm-up: the disk cache holds what the solve derives
    cases: dict[str, list[tuple[float, float]]] = {"same": [], "new-budget": []}
    if a.compare_miss:
        cases["no-answer-cache"] = []
    for i in range(a.repeat):  # interleaved, so a change of load hits every case alike
        cases["same"].append(run_once([*BASE, "--latency-budget", "20ms"], env))
        budget = f"{20 + 0.37 * (i + 1) + (time.time_ns() % 1000) * 1e-6:.6f}ms"  # never asked before
        cases["new-budget"].append(run_once([*BASE, "--latency-budget", budget], env))
        if a.compare_miss:
            cases["no-answer-cache"].append(run_once([*BASE, "--latency-budget", "20ms"], env, answer_cache=False))
    out.update({k: summary(v) for k, v in cases.items()})
    out["load_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
