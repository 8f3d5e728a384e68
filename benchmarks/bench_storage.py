"""Speed of ``rooflaw search`` on each Optuna storage: in memory, the journal file (rooflaw's, fsync in batches),
Optuna's own journal file backend (fsync on every operation) and SQLite.

    python benchmarks/bench_storage.py [--n-trials 1000] [--repeats 2] [--storages memory,journal,optuna-journal,sqlite]

Each run is a fresh ``rooflaw search --device jetson-orin-nano-8gb --n-trials N --json`` process (TPE, seed 0, the
paper space) on a new file; runs of different storages alternate, so a change in the machine's load hits them
alike. The table gives the search's own seconds (``seconds`` of ``--json``: study creation to the last trial), the
process's wall and CPU seconds, and each one's ratio to the in-memory run of the same repeat (medians over the
repeats). CPU seconds are the steadier figure on a shared machine.
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

ROOT = Path(__file__).resolve().parents[1]
STORAGES = ("memory", "journal", "optuna-journal", "sqlite")

#: Runs a search on Optuna's own JournalFileBackend (fsync on every append), for comparison.
_OPTUNA_JOURNAL = """
import sys
from optuna.storages.journal import JournalFileBackend
import importlib
j = importlib.import_module("rooflaw.solver.search.journal")
j.journal_backend = lambda path: JournalFileBackend(path)  # Optuna's backend instead of rooflaw's
from rooflaw.cli import main
sys.exit(main(sys.argv[1:]))
"""


def run(storage: str, n_trials: int, folder: Path) -> dict[str, float]:
    args = ["search", "--device", "jetson-orin-nano-8gb", "--n-trials", str(n_trials), "--json"]
    if storage in ("journal", "optuna-journal"):
        args += ["--storage", f"journal:///{folder / f'{storage}.log'}"]
    elif storage == "sqlite":
        args += ["--storage", f"sqlite:///{folder / 'study.db'}"]
    code = ["-c", _OPTUNA_JOURNAL] if storage == "optuna-journal" else ["-m", "rooflaw"]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, *code, *args], env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{storage}: exit {out.returncode}: {out.stderr.strip()[-2000:]}")
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    d = json.loads(out.stdout)
    assert d["trials"] == n_trials, d
    return {"search": d["seconds"], "wall": wall, "cpu": cpu, "hypervolume": d["hypervolume"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-trials", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--storages", default=",".join(STORAGES))
    a = ap.parse_args()
    names = a.storages.split(",")
    if "memory" not in names or any(n not in STORAGES for n in names):
        raise SystemExit(f"--storages: memory plus any of {', '.join(STORAGES)}")
    rows: dict[str, list[dict[str, float]]] = {n: [] for n in names}
    for rep in range(a.repeats):
        for n in names if rep % 2 == 0 else reversed(names):
            with tempfile.TemporaryDirectory(prefix="rooflaw-bench-storage-") as tmp:
                rows[n].append(run(n, a.n_trials, Path(tmp)))
            r = rows[n][-1]
            print(f"  repeat {rep}: {n:15s} search {r['search']:7.1f} s, wall {r['wall']:7.1f} s, "
                  f"cpu {r['cpu']:7.1f} s", flush=True)  # fmt: skip
    hv = {n: {round(r["hypervolume"], 12) for r in rs} for n, rs in rows.items()}
    print(f"\n{a.n_trials} trials, TPE seed 0, median of {a.repeats} (ratio: to the in-memory run of the same repeat)")
    print(
        f"{'storage':15s} {'search s':>9s} {'wall s':>8s} {'cpu s':>8s} {'search ×':>9s} {'wall ×':>7s} {'cpu ×':>6s}"
    )
    for n in names:
        med = {k: statistics.median(r[k] for r in rows[n]) for k in ("search", "wall", "cpu")}
        ratio = {k: statistics.median(r[k] / m[k] for r, m in zip(rows[n], rows["memory"], strict=True))
                 for k in ("search", "wall", "cpu")}  # fmt: skip
        print(f"{n:15s} {med['search']:9.1f} {med['wall']:8.1f} {med['cpu']:8.1f} {ratio['search']:9.2f} "
              f"{ratio['wall']:7.2f} {ratio['cpu']:6.2f}")  # fmt: skip
    same = len({x for s in hv.values() for x in s}) == 1
    print(f"same trials on every storage (hypervolume {next(iter(hv['memory']))}): {'yes' if same else 'NO'}")
    print(f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
