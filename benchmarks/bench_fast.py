"""The numba backend against the numpy backend, measured in one run (same machine, same load).

Usage: python benchmarks/bench_fast.py [--parts lines,rows,scan,wide,query2,pareto3,giga,compile,pareto,fit]
       [--numpy-wide] [--batches 84]

Every part runs under the defaults: the ``full`` preset, the device's fitted engine profile (its per-pass overhead
included) and, for the frontier parts, the law's fitted domain (no extrapolation).

* lines: the size of the numba path (``wc -l``): the modules that exist only for it (:data:`NUMBA_FILES`; the
  issue's count of 1,868 lines covered the same modules, then with ``numba_printer`` and ``numba_schedule``) and
  the functions of shared modules that only it calls (:data:`NUMBA_FUNCTIONS`, counted from their syntax trees).
* rows: candidates/s on one core with all 17 outputs (``evaluate_columns``), 2²¹ candidates of space ``wide`` in
  enumeration order and in random order, numpy vs numba (the general row kernel); both results are checked equal
  with ``np.array_equal``. ``Space.columns_at`` gives the columns the space holds fixed as stride-0 broadcasts
  (read once by the kernel); ``enumeration_materialized`` is the same table with every column a full array.
* scan: the frontier path per core (cost model + loss law + feasibility + Pareto bookkeeping): numpy's frontier
  of ``wide`` cut to its first 8 widths (d_model 512…960) on one process vs the numba scan of all of ``wide`` on
  one thread, process CPU per point.
* query2: in a fresh cache, one process runs the (loss, latency) frontier of ``wide`` (cold: compiles); a second,
  fresh process then runs a different query (loss, latency, memory with a 20 GB memory budget, the law's domain
  off) on numba, then on numpy: the files in the cache's ``numba/`` folder before and after (none new: nothing
  compiled), each backend's wall and CPU seconds, the ratio, and whether the frontiers are identical. The first
  process's CPU seconds are the cold first ``frontier`` of ``wide``.
* pareto3: the three-objective frontier of ``wide`` (loss, latency, memory) on numba: its Pareto step (wall and
  CPU) and feasible points; and ``pareto_mask`` on that many random 3-D points.
* wide: the exact loss–latency frontier of ``wide`` (11.9 M points) end to end on 2 workers (numba; numpy too with
  ``--numpy-wide``, about a minute on a quiet machine).
* giga: ``wide`` × ``--batches`` batch sizes 1…N (84: 1.0 × 10⁹ points): each batch size is one problem, its exact
  frontier from the numba scan; the union is filtered exactly once more (a point dominated in the union is
  dominated by a member of the union's frontier, which survives in its own batch). Peak memory is this process's
  VmHWM (threads, no worker processes).
* compile: the one-time compile of the row kernel in a fresh cache, then the load time of a new process.
* fit: the 4,500-start Chinchilla fit (``fit_law``) with the fused numba objective (the default when numba is
  installed, :mod:`rooflaw.objectives.huber_fused`, 2 threads) against the numpy objective (256 starts per call),
  best wall time of 2 runs each, process CPU, both optima (``--chinchilla PATH``, default
  ``../shared/data/chinchilla/svg_extracted_data.csv``).
* pareto: ``pareto_mask`` / ``hypervolume`` against moocore's own calls (thread CPU time).

Only the public API is used (the fit part's numpy objective runs in a process where numba cannot be imported).

Prints one JSON object; the machine's load average (1 min) is recorded before and after each part.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _hwm() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def _best(fn, repeat: int = 3) -> tuple[float, float]:
    """Best wall time and best thread CPU time of ``repeat`` calls (CPU time is robust to a loaded machine)."""
    wall, cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.thread_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
    return min(wall), min(cpu)


#: Modules of the numba path: the generated kernels, their tracer, loader and scan template, the exhaustive and
#: joint solvers' numba scans, and the backend choice with its fallback warning.
NUMBA_FILES = ("rooflaw/constraints/backend_numba.py", "rooflaw/constraints/numba_native.py",
               "rooflaw/constraints/numba_trace.py", "rooflaw/constraints/scan_source.py",
               "rooflaw/solver/discrete/exhaustive_fast.py", "rooflaw/solver/discrete/joint_scan.py",
               "rooflaw/constraints/backends.py")  # fmt: skip
#: Functions of shared modules that only the numba path calls (none since this round).
NUMBA_FUNCTIONS: tuple[tuple[str, str], ...] = ()


def lines() -> dict:
    """``wc -l`` of :data:`NUMBA_FILES` and the lines of :data:`NUMBA_FUNCTIONS` (decorators to last line)."""
    import ast

    root = Path(__file__).resolve().parents[1]
    files = {f: len((root / f).read_text().splitlines()) for f in NUMBA_FILES}
    funcs = {}
    for f, name in NUMBA_FUNCTIONS:
        node = next(n for n in ast.walk(ast.parse((root / f).read_text())) if getattr(n, "name", None) == name)
        funcs[f"{f}:{name}"] = node.end_lineno - min([node.lineno, *(d.lineno for d in node.decorator_list)]) + 1
    return {"files": files, "functions": funcs, "files_total": sum(files.values()),
            "total": sum(files.values()) + sum(funcs.values())}  # fmt: skip


def rows(dev) -> dict:
    from rooflaw import evaluate_columns, get_space

    space = get_space("wide")
    n = 1 << 21
    out = {"candidates": n}
    cases = (("enumeration", np.arange(n)), ("random", np.random.default_rng(0).integers(0, space.size, n)),
             ("enumeration_materialized", np.arange(n)))  # fmt: skip
    for order, idx in cases:
        cols = space.columns_at(idx, np.float64)
        if order.endswith("materialized"):  # every column a full array, as a table read from a file would be
            cols = {k: np.array(v) for k, v in cols.items()}
        a = evaluate_columns(cols, dev, backend="numpy")
        b = evaluate_columns(cols, dev, backend="numba")
        same = all(np.array_equal(a[k], b[k], equal_nan=a[k].dtype != bool) for k in a)
        tn, cn = _best(lambda c=cols: evaluate_columns(c, dev, backend="numpy"))
        tb, cb = _best(lambda c=cols: evaluate_columns(c, dev, backend="numba"))
        same = same and all(np.array_equal(a[k], b[k], equal_nan=a[k].dtype != bool) for k in a)
        out[order] = {"numpy_M_per_s": round(n / tn / 1e6, 2), "numba_M_per_s": round(n / tb / 1e6, 2),
                      "ratio": round(tn / tb, 2), "numpy_cpu_ns": round(cn / n * 1e9, 1),
                      "numba_cpu_ns": round(cb / n * 1e9, 1), "cpu_ratio": round(cn / cb, 2), "identical": same,
                      "outputs": len(a)}  # fmt: skip
    return out


def scan(prob) -> dict:
    import dataclasses

    from rooflaw import frontier

    part = dataclasses.replace(prob.space, name="wide-part", d_model=prob.space.d_model[:8])
    sub = dataclasses.replace(prob, space=part)
    n = sub.space.size
    c0 = time.process_time()
    frontier(sub, ("loss", "latency"), n_jobs=1, cloud=0, backend="numpy")
    cn = time.process_time() - c0
    frontier(prob, ("loss", "latency"), n_jobs=1, cloud=0, backend="numba")  # warm (kernel load)
    c0 = time.process_time()
    res = frontier(prob, ("loss", "latency"), n_jobs=1, cloud=0, backend="numba")
    cb = time.process_time() - c0
    return {"numpy_points": n, "numpy_cpu_ns": round(cn / n * 1e9, 1),
            "numba_cpu_ns": round(cb / res.evaluated * 1e9, 1), "cpu_ratio": round((cn / n) / (cb / res.evaluated), 2),
            "numba_points": res.evaluated, "numba_survivors": res.timings["survivors"],
            "feasible": res.feasible}  # fmt: skip


def wide(prob, with_numpy: bool) -> dict:
    from rooflaw import frontier

    out = {}
    for backend in ("numba", "numpy") if with_numpy else ("numba",):
        t0 = time.perf_counter()
        res = frontier(prob, ("loss", "latency"), n_jobs=2, cloud=0, backend=backend)
        out[backend] = {
            "seconds": round(time.perf_counter() - t0, 2),
            "frontier_size": res.frontier_size,
            "evaluated": res.evaluated,
            "feasible": res.feasible,
            "eval_seconds": round(res.eval_seconds, 2),
            "pareto_seconds": round(res.pareto_seconds, 3),
        }
        out[backend + "_frontier"] = res.frontier  # fmt: skip
    if with_numpy:
        out["identical_frontier"] = bool(out["numba_frontier"].equals(out["numpy_frontier"]))
    out.pop("numba_frontier", None)
    out.pop("numpy_frontier", None)
    return out


def _child(code: str, env: dict) -> dict:
    """Run ``code`` in a fresh process; its JSON line plus the process's CPU seconds (user + system)."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out["process_cpu_s"] = round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 2)
    return out


_QUERY = """
import json, time, warnings
import rooflaw as rl
warnings.filterwarnings("error", message="backend=.auto. runs numpy")  # a fallback would be an error
dev = rl.get_device({device!r})
prob = rl.Problem(law="paper-2602.10377", device=dev, space="wide"{extra})
res = {{}}
for backend in {backends!r}:
    t0, c0 = time.perf_counter(), time.process_time()
    r = rl.frontier(prob, {objectives!r}, cloud=0, backend=backend)
    res[backend] = {{"wall_s": round(time.perf_counter() - t0, 2), "cpu_s": round(time.process_time() - c0, 2),
                    "frontier_size": r.frontier_size, "feasible": r.feasible,
                    "pareto_seconds": round(r.pareto_seconds, 3)}}
    res[backend + "_frame"] = r.frontier
if len(res) == 4:
    res["identical_frontier"] = bool(res["auto_frame"].equals(res["numpy_frame"]))
print(json.dumps({{k: v for k, v in res.items() if not k.endswith("_frame")}}))
"""


def query2(device: str) -> dict:
    """The cold first frontier of ``wide`` in a fresh cache, then a different query in a new process."""
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, ROOFLAW_CACHE_DIR=d)
        env.pop("ROOFLAW_NO_CACHE", None)
        first = _child(_QUERY.format(device=device, extra="", backends=("auto",), objectives=("loss", "latency")), env)
        files = sorted(p.name for p in Path(d, "numba").iterdir())
        second = _child(
            _QUERY.format(
                device=device,
                extra=", memory_budget=20e9, allow_extrapolation=True",
                backends=("auto", "numpy"),
                objectives=("loss", "latency", "memory"),
            ),
            env,
        )
        new = sorted(set(p.name for p in Path(d, "numba").iterdir()) - set(files))
    return {"cold_first_frontier": first, "second_query": second, "new_cache_files_in_second_process": new,
            "second_query_wall_ratio": round(second["numpy"]["wall_s"] / second["auto"]["wall_s"], 2),
            "second_query_cpu_ratio": round(second["numpy"]["cpu_s"] / second["auto"]["cpu_s"], 2)}  # fmt: skip


def pareto3(prob) -> dict:
    """The three-objective frontier of ``wide`` (numba): its Pareto step; pareto_mask on as many random points."""
    from rooflaw import frontier, pareto_mask

    res = frontier(prob, ("loss", "latency", "memory"), cloud=0, backend="numba")
    x = np.random.default_rng(0).random((res.feasible, 3))
    t0, c0 = time.perf_counter(), time.thread_time()
    pareto_mask(x)
    return {"feasible": res.feasible, "frontier_size": res.frontier_size,
            "pareto_seconds": round(res.pareto_seconds, 3),
            "pareto_cpu_seconds": round(res.timings["pareto_cpu_seconds"], 3),
            "random_pareto_mask_s": round(time.perf_counter() - t0, 3),
            "random_pareto_mask_cpu_s": round(time.thread_time() - c0, 3)}  # fmt: skip


def giga(dev, batches: int) -> dict:
    import pandas as pd

    from rooflaw import Problem, Workload, frontier, pareto_mask

    t0, c0 = time.perf_counter(), time.process_time()
    fronts, evaluated, feasible = [], 0, 0
    for b in range(1, batches + 1):
        prob = Problem(law="paper-2602.10377", device=dev, space="wide", workload=Workload(batch=b))
        res = frontier(prob, ("loss", "latency"), n_jobs=2, cloud=0, backend="numba")
        fronts.append(res.frontier.assign(batch=b))
        evaluated += res.evaluated
        feasible += res.feasible
    allf = pd.concat(fronts, ignore_index=True)
    front = allf[pareto_mask(allf[["loss", "latency_s"]].to_numpy())]
    return {
        "points": evaluated, "feasible": feasible, "batches": batches,
        "seconds": round(time.perf_counter() - t0, 2), "cpu_seconds": round(time.process_time() - c0, 2),
        "frontier_size": len(front),
        "union_of_batch_frontiers": len(allf), "batches_on_frontier": sorted(set(front["batch"].tolist())),
        "peak_rss_bytes": _hwm(),
    }  # fmt: skip


def pareto_vs_moocore() -> dict:
    """``pareto_mask`` and ``hypervolume`` against moocore's own calls (thread CPU time, best of 3)."""
    import moocore

    from rooflaw import hypervolume, pareto_mask

    def cpu(fn) -> float:
        best = np.inf
        for _ in range(3):
            t0 = time.thread_time()
            fn()
            best = min(best, time.thread_time() - t0)
        return round(best * 1e3, 2)

    rng = np.random.default_rng(0)
    out: dict = {"nondominated_ms": [], "hypervolume_ms": []}
    for n, k in ((10_000, 2), (1_000_000, 2), (10_000, 3), (535_696, 3), (10_000, 4)):
        x = rng.random((n, k))
        if k > 2:  # a front with many members, as a 3- or 4-objective frontier has
            x[:, -1] = 1 - x[:, :-1].mean(axis=1) + 0.1 * x[:, -1]
        out["nondominated_ms"].append({
            "n": n, "k": k, "pareto_mask": cpu(lambda x=x: pareto_mask(x)),
            "moocore": cpu(lambda x=x: moocore.is_nondominated(x, keep_weakly=True)),
        })  # fmt: skip
    for n, k in ((1000, 2), (1000, 3), (300, 4)):
        x = rng.random((n, k))
        x = x[pareto_mask(x)]
        ref = np.full(k, 1.1)
        out["hypervolume_ms"].append({
            "n": len(x), "k": k, "hypervolume": cpu(lambda x=x, ref=ref: hypervolume(x, ref)),
            "moocore": cpu(lambda x=x, ref=ref: moocore.hypervolume(x, ref=ref)),
        })  # fmt: skip
    return out


def compile_times() -> dict:
    """The row kernel's one-time compile in a fresh cache, then the load in a new process (wall and CPU)."""
    code = "\n".join([
        "import json, time",
        "t = time.perf_counter()",
        "import numpy as np, rooflaw",
        "t1 = time.perf_counter()",
        "cols = {'layers': np.arange(1, 9), 'd_model': 512, 'heads': 8, 'ffn': 2048}",
        "rooflaw.evaluate_columns(cols, rooflaw.get_device('h100-sxm'), backend='numba')",
        "t2 = time.perf_counter()",
        "print(json.dumps({'import_rooflaw_s': round(t1 - t, 3), 'numba_backend_first_call_s': round(t2 - t1, 3)}))",
    ])  # fmt: skip
    out = {}
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, ROOFLAW_CACHE_DIR=d)
        env.pop("ROOFLAW_NO_CACHE", None)
        for name in ("cold_compile", "fresh_process_load"):
            out[name] = _child(code, env)
    return out


_FIT = """
import json, sys, time
if {no_numba}:
    sys.modules["numba"] = None  # numba cannot be imported: the numpy objective
import pandas as pd
from rooflaw import fit_law
df = pd.read_csv({path!r}).sort_values("loss").iloc[:-5]  # as benchmarks/bench_fit.py and Epoch's replication
df = df.assign(N=df["Model Size"], D=df["Training FLOP"] / (6 * df["Model Size"])).reset_index(drop=True)
law = "E + A/N**alpha + B/D**beta"
fit_law(law, df)  # warm (sympy lambdify of the objective; the fused kernel compiled or loaded)
best = None
for _ in range(2):
    t0, c0 = time.perf_counter(), time.process_time()
    res = fit_law(law, df)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if best is None or wall < best["wall_s"]:
        best = {{"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "objective": res.objective,
                 "params": {{k: float(v) for k, v in res.params.items()}}}}
print(json.dumps(best))
"""


def fit(path: str) -> dict:
    """The Chinchilla fit with numba (the fused objective) and in a process where numba cannot be imported."""
    out = {name: _child(_FIT.format(no_numba=name == "numpy", path=path), dict(os.environ))
           for name in ("fused", "numpy")}  # fmt: skip
    out["wall_ratio"] = round(out["numpy"]["wall_s"] / out["fused"]["wall_s"], 2)
    out["cpu_ratio"] = round(out["numpy"]["cpu_s"] / out["fused"]["cpu_s"], 2)
    out["objective_rel_diff"] = abs(out["fused"]["objective"] / out["numpy"]["objective"] - 1.0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", default="lines,rows,scan,wide,query2,pareto3,giga,compile,pareto,fit")
    ap.add_argument("--chinchilla", default=str(Path(__file__).resolve().parents[2] / "shared/data/chinchilla/"
                                                "svg_extracted_data.csv"))  # fmt: skip
    ap.add_argument("--numpy-wide", action="store_true")
    ap.add_argument("--batches", type=int, default=84)
    ap.add_argument("--device", default="jetson-orin-nano-8gb")
    a = ap.parse_args()
    import numba

    import rooflaw
    from rooflaw import Problem

    # the defaults: the device's fitted engine profile, the law's fitted domain
    dev = rooflaw.get_device(a.device)
    prob = Problem(law="paper-2602.10377", device=dev, space="wide")
    out: dict = {"device": a.device, "cpus": os.cpu_count(), "numba": numba.__version__, "numpy": np.__version__}
    parts = a.parts.split(",")
    for part in parts:
        before = _load()
        t0 = time.perf_counter()
        if part == "lines":
            res = lines()
        elif part == "rows":
            res = rows(dev)
        elif part == "scan":
            res = scan(prob)
        elif part == "wide":
            res = wide(prob, a.numpy_wide)
        elif part == "query2":
            res = query2(a.device)
        elif part == "pareto3":
            res = pareto3(prob)
        elif part == "giga":
            res = giga(dev, a.batches)
        elif part == "compile":
            res = compile_times()
        elif part == "pareto":
            res = pareto_vs_moocore()
        elif part == "fit":
            res = fit(a.chinchilla)
        else:
            raise SystemExit(f"--parts: unknown part {part!r}")
        res["load_before_after"] = [before, _load()]
        res["part_seconds"] = round(time.perf_counter() - t0, 1)
        out[part] = res
        print(json.dumps({part: res}), file=sys.stderr, flush=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
