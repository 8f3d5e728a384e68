"""Start-up in fresh processes: the CLI (``rooflaw --help``, ``rooflaw laws list``; target ≤ 0.5 s) and, with
``--kernels``, a fresh process (or joblib/Dask worker) running its first numba-backend call on cached kernels.

CLI: per command, the minimum over ``--repeat`` runs of the wall time and of the CPU time (user + sys of the
child, less sensitive to other jobs on a shared machine). ``--compare PATH`` runs the same commands against
another checkout (e.g. the previous commit in a worktree) alternately with this one.

``--kernels``: two first calls, each in ``--repeat`` fresh processes (median and min), with the kernels already
in the cache directory (a warm-up process fills it): ``rows`` (``evaluate_columns`` of an 8-row table) and
``frontier`` (the exact loss-latency frontier of space ``paper``, 1 thread). Each is run with the native loader
(the default: cached machine code linked with llvmlite, numba not imported) and with numba's own dispatchers
(``ROOFLAW_NUMBA_NATIVE=0``: numba import + its registries + its cache), alternately. Per process: ``import_s``
(``import rooflaw``), ``first_s`` (the first call, kernel load included), ``to_ready_s`` (process start to the
end of the first call: interpreter, imports, kernel load, the call), CPU (user + sys) and whether numba was
imported; the 1-min load average before and after. One JSON object.

    python benchmarks/bench_startup.py --repeat 10 [--compare /path/to/other/checkout]
    python benchmarks/bench_startup.py --kernels --repeat 7
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


#: The first numba-backend call a fresh process makes (``T0``: the interpreter's start, from /proc).
KERNEL_CODE = {
    "rows": "import numpy as np; a = rooflaw.evaluate_columns({'layers': np.arange(1, 9), 'd_model': 512, "
            "'heads': 8, 'ffn': 2048}, rooflaw.get_device('h100-sxm'), backend='numba')",
    "frontier": "a = rooflaw.frontier(rooflaw.Problem(law='paper-2602.10377', device='jetson-orin-nano-8gb', "
                "space='paper'), ('loss', 'latency'), n_jobs=1, cloud=0, backend='numba')",
}  # fmt: skip
_PROBE = """
import json, os, resource, sys, time
t0 = time.perf_counter()
import rooflaw
t1 = time.perf_counter()
{code}
t2 = time.perf_counter()
ticks = os.sysconf("SC_CLK_TCK")
start = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19]) / ticks
boot = float(open("/proc/uptime").read().split()[0])
ready = boot - start - (time.perf_counter() - t2)  # seconds from process start to the end of the first call
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({{"import_s": t1 - t0, "first_s": t2 - t1, "to_ready_s": ready, "cpu_s": ru.ru_utime + ru.ru_stime,
                  "numba_imported": "numba" in sys.modules}}))
"""


def kernels(repeat: int) -> dict:
    import json
    import statistics

    tree = Path(__file__).resolve().parents[1]
    out: dict = {"load_before": round(os.getloadavg()[0], 2), "repeat": repeat}
    for name, code in KERNEL_CODE.items():
        src = _PROBE.format(code=code)
        runs: dict[str, list[dict]] = {"native": [], "numba": []}
        for i in range(repeat + 1):
            for mode in runs:
                env = {**os.environ, "PYTHONPATH": str(tree), "ROOFLAW_NUMBA_NATIVE": "1" if mode == "native" else "0"}
                r = subprocess.run([sys.executable, "-c", src], env=env, cwd=tempfile.gettempdir(), check=True,
                                   capture_output=True, text=True)  # fmt: skip
                if i:  # the first round only fills the cache
                    runs[mode].append(json.loads(r.stdout.strip().splitlines()[-1]))
        for mode, rs in runs.items():
            row = {k: {"median": round(statistics.median(r[k] for r in rs), 3), "min": round(min(r[k] for r in rs), 3)}
                   for k in ("import_s", "first_s", "to_ready_s", "cpu_s")}  # fmt: skip
            row["numba_imported"] = sorted({r["numba_imported"] for r in rs})
            out[f"{name}_{mode}"] = row
    out["load_after"] = round(os.getloadavg()[0], 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--compare", type=Path, default=None, help="another checkout to time alternately")
    ap.add_argument("--kernels", action="store_true", help="the first numba-backend call instead of the CLI")
    a = ap.parse_args()
    if a.kernels:
        import json

        print(json.dumps(kernels(a.repeat), indent=1))
        return
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
