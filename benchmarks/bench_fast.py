"""The numba backend against the numpy backend, measured in one run (same machine, same load).

Usage: python benchmarks/bench_fast.py [--parts rows,scan,wide,giga,compile,pareto,fit] [--numpy-wide] [--batches 84]

Every part runs under the defaults: the ``full`` preset, the device's fitted engine profile (its per-pass overhead
included) and, for the frontier parts, the law's fitted domain (no extrapolation).

* rows: candidates/s on one core with all 17 outputs (``evaluate_columns``), 2²¹ candidates of space ``wide`` in
  enumeration order and in random order, numpy vs numba (the vectorized kernel: tables ≥ 2¹⁶ rows); both results
  are checked equal with ``np.array_equal``. ``Space.columns_at`` gives the columns the space holds fixed as
  stride-0 broadcasts (read once by the kernel); ``enumeration_materialized`` is the same table with every
  column a full array, as a table read from a file would be. ``numba_out_reused_*``: the same call with
  ``out=`` an earlier result (its arrays overwritten: no fresh output pages for the OS to zero-fill).
* scan: the frontier path per core (cost model + loss law + feasibility + Pareto bookkeeping): numpy's chunked
  scan of the first 2²¹ points of ``wide`` vs the numba scan of all of ``wide`` on one thread.
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
* pareto: the hand-written non-dominated filter / hypervolume against moocore's (thread CPU time).

The scan, pareto and fit parts time private implementations (the numpy scan, the hand-written Pareto code, the
fit objective's path switch) against the public paths; they import those three modules directly, the only non-public
imports of ``benchmarks/``.

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
        tr, cr = _best(lambda c=cols, o=b: evaluate_columns(c, dev, backend="numba", out=o))  # b's arrays reused
        same = same and all(np.array_equal(a[k], b[k], equal_nan=a[k].dtype != bool) for k in a)
        out[order] = {"numpy_M_per_s": round(n / tn / 1e6, 2), "numba_M_per_s": round(n / tb / 1e6, 2),
                      "ratio": round(tn / tb, 2), "numpy_cpu_ns": round(cn / n * 1e9, 1),
                      "numba_cpu_ns": round(cb / n * 1e9, 1), "cpu_ratio": round(cn / cb, 2),
                      "numba_out_reused_cpu_ns": round(cr / n * 1e9, 1),
                      "numba_out_reused_M_per_s": round(n / tr / 1e6, 2), "identical": same,
                      "outputs": len(a)}  # fmt: skip
    return out


def scan(prob) -> dict:
    from rooflaw import frontier
    from rooflaw.solver.discrete import exhaustive as ex  # the numpy scan itself (private; see module doc)

    n = 1 << 21
    t0, c0 = time.perf_counter(), time.process_time()
    ex._scan(prob, 0, n, ("loss", "latency"), 0, ex.SUB_CHUNK)
    tn, cn = time.perf_counter() - t0, time.process_time() - c0
    frontier(prob, ("loss", "latency"), n_jobs=1, cloud=0, backend="numba")  # warm (kernel load)
    c0 = time.process_time()
    res = frontier(prob, ("loss", "latency"), n_jobs=1, cloud=0, backend="numba")
    cb = time.process_time() - c0
    rate_b = res.evaluated / res.eval_seconds
    return {"numpy_M_per_s": round(n / tn / 1e6, 2), "numba_M_per_s": round(rate_b / 1e6, 2),
            "ratio": round(rate_b / (n / tn), 2), "numpy_cpu_ns": round(cn / n * 1e9, 1),
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
    """The hand-written non-dominated filter and hypervolume against moocore's (thread CPU time, best of 3)."""
    import moocore

    from rooflaw.solver.discrete import pareto  # the hand-written implementations (private; see module doc)

    def cpu(fn) -> float:
        best = np.inf
        for _ in range(3):
            t0 = time.thread_time()
            fn()
            best = min(best, time.thread_time() - t0)
        return round(best * 1e3, 2)

    rng = np.random.default_rng(0)
    out: dict = {"nondominated_ms": [], "hypervolume_ms": []}
    for n, k in ((10_000, 2), (1_000_000, 2), (10_000, 3), (100_000, 3), (10_000, 4)):
        x = rng.random((n, k))
        if k > 2:  # a front with many members, as a 3- or 4-objective frontier has
            x[:, -1] = 1 - x[:, :-1].mean(axis=1) + 0.1 * x[:, -1]
        out["nondominated_ms"].append({
            "n": n, "k": k, "ours": cpu(lambda x=x, k=k: pareto._pareto_2d(x) if k == 2 else pareto._pareto_kd(x)),
            "moocore": cpu(lambda x=x: moocore.is_nondominated(x, keep_weakly=True)),
        })  # fmt: skip
    for n, k in ((1000, 2), (1000, 3), (300, 4)):
        x = rng.random((n, k))
        x = x[pareto.pareto_mask(x)]
        ref = np.full(k, 1.1)
        out["hypervolume_ms"].append({
            "n": len(x), "k": k, "ours": cpu(lambda x=x, ref=ref: pareto._hv(np.unique(x, axis=0), ref)),
            "moocore": cpu(lambda x=x, ref=ref: moocore.hypervolume(x, ref=ref)),
        })  # fmt: skip
    return out


def compile_times() -> dict:
    code = "\n".join([
        "import json, time",
        "t = time.perf_counter()",
        "import numpy as np, rooflaw",
        "from rooflaw.constraints import evaluate_columns, backend_numba as bn",
        "t1 = time.perf_counter()",
        "cols = {'layers': np.arange(1, 9), 'd_model': 512, 'heads': 8, 'ffn': 2048}",
        "evaluate_columns(cols, rooflaw.get_device('h100-sxm'), backend='numba')",
        "t2 = time.perf_counter()",
        "out = {'import_rooflaw_s': t1 - t, 'numba_backend_first_call_s': t2 - t1, **bn.TIMINGS}",
        "print(json.dumps({k: round(v, 3) for k, v in out.items()}))",
    ])  # fmt: skip
    out = {}
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, ROOFLAW_CACHE_DIR=d)
        env.pop("ROOFLAW_NO_CACHE", None)
        for name in ("cold_compile", "fresh_process_load"):
            r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
            out[name] = json.loads(r.stdout)
    return out


def fit(path: str) -> dict:
    import pandas as pd

    from rooflaw import fit_law
    from rooflaw.objectives import huber_fused  # the path switch (private; see module doc)

    df = pd.read_csv(path).sort_values("loss").iloc[:-5]  # as benchmarks/bench_fit.py and Epoch's replication
    df = df.assign(N=df["Model Size"], D=df["Training FLOP"] / (6 * df["Model Size"])).reset_index(drop=True)
    law = "E + A/N**alpha + B/D**beta"
    fit_law(law, df)  # warm (sympy lambdify of the objective; the fused kernel compiled or loaded)
    out: dict = {"threads": huber_fused.THREADS}
    default = huber_fused.MIN_PAIRS
    for _ in range(2):
        for name, floor in (("numpy", 10**18), ("fused", default)):
            huber_fused.MIN_PAIRS = floor
            t0, c0 = time.perf_counter(), time.process_time()
            res = fit_law(law, df)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            best = out.get(name)
            if best is None or wall < best["wall_s"]:
                out[name] = {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "objective": res.objective,
                             "params": {k: float(v) for k, v in res.params.items()}}  # fmt: skip
    huber_fused.MIN_PAIRS = default
    out["wall_ratio"] = round(out["numpy"]["wall_s"] / out["fused"]["wall_s"], 2)
    out["cpu_ratio"] = round(out["numpy"]["cpu_s"] / out["fused"]["cpu_s"], 2)
    out["objective_rel_diff"] = abs(out["fused"]["objective"] / out["numpy"]["objective"] - 1.0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", default="rows,scan,wide,giga,compile,pareto,fit")
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
        if part == "rows":
            res = rows(dev)
        elif part == "scan":
            res = scan(prob)
        elif part == "wide":
            res = wide(prob, a.numpy_wide)
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
