"""Held-out check: datacenter and multi-GPU serving against published measurements (docs/benchmarks.md).

Prices every row of ``benchmarks/data/datacenter.csv`` (TensorRT-LLM's and NVIDIA NIM's published throughput,
static-batch and online-serving tables; never used for fitting) with rooflaw's serving model on the catalog system
``<device>:<gpus>``, under the row's layout (tp/ep/pp), precision and engine profile, and prints per-row
predicted/measured and the median |predicted/measured − 1| by metric, GPU, dense/MoE, TP, batching and row set.

- ``output_tok_s`` rows (``concurrency = max``: offline, every request queued): the engine runs as many
  sequences as fit; the batch is the largest that fits one replica's memory (:func:`rooflaw.parallel.max_batch`
  at the row's ISL/OSL), capped at :data:`MAX_BATCH` (trtllm-bench's runtime batch limit printed in the same
  document), with the tokens per step trtllm-bench sets for it (:func:`rooflaw.parallel.trtllm_bench_settings`;
  ``--budget fixed``: :data:`TOKEN_BUDGET`). Compared per GPU (the published total / the row's GPUs).
- rows with a ``concurrency``: that many requests in flight (TTFT/TPOT rows: the mean in flight); a row's
  ``max_num_tokens`` (per rank: times ``dp_attn`` under attention DP) is its token budget per step. Arrivals
  (:func:`rooflaw.parallel.inflight`): ``poisson`` for rows measured at a request rate, ``clients`` for a
  client holding the concurrency (requests land at any phase of the engine's steps).
- a quantised TensorRT-LLM checkpoint keeps its LM head 16-bit (:func:`precision_of`).
- ``batching = static`` rows (TensorRT-LLM's early ``gptSessionBenchmark`` tables): one static batch of
  ``concurrency`` requests, all prompts prefilled at once, then every decode step
  (:func:`rooflaw.parallel.evaluate_layout`); throughput = batch·OSL / (TTFT + decode time) per GPU, the
  sources' own definition; ``ttft_ms`` rows: the prefill of one prompt.

- ``--host fitted`` (default): the engine's host and front-end seconds (:func:`rooflaw.parallel.serving_host`:
  per step, per layer per step, per request through a server), fitted on these rows by
  ``benchmarks/fit_datacenter_host.py`` (which reports them left out one source at a time); ``none``: without.

    python benchmarks/bench_datacenter.py [--csv PATH] [--json] [--model steady|decode] [--budget fixed]
        [--host fitted|none]
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import functools
import json
import math
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

import rooflaw as rl

HERE = Path(__file__).resolve().parent
CSV = HERE / "data" / "datacenter.csv"
#: trtllm-bench's runtime batch limit ("Max Runtime Batch Size: 4096" in the perf-overview's printed example).
MAX_BATCH = 4096
#: trtllm-bench's tokens per engine step ("Max Runtime Tokens: 8192", the same printed example).
TOKEN_BUDGET = 8192


def layout_text(r: dict[str, str]) -> str:
    parts = [f"tp={r['tp']}"]
    if int(r["ep"]) > 1:
        parts.append(f"ep={r['ep']}")
    if r.get("dp_attn"):
        parts.append(f"dp_attn={r['dp_attn']}")
    if int(r["pp"]) > 1:
        parts.append(f"pp={r['pp']}")
    return ",".join(parts)


def precision_of(r: dict[str, str]) -> rl.Precision:
    """The row's precision; a quantised TensorRT-LLM checkpoint (ModelOpt FP8/NVFP4) keeps its LM head 16-bit
    (ModelOpt's default quantiser configuration disables ``*lm_head*``), as the published rows' mapping does."""
    p = rl.Precision.parse(r["precision"])
    if r["engine"] == "tensorrt-llm" and p.weights.bytes < 2 and p.head is None:
        p = dataclasses.replace(p, head=rl.Precision.parse("bf16").weights)
    return p


@functools.cache
def fits(model: str, system: str, layout: str, isl: int, osl: int, precision: str, engine: str) -> int:
    """Requests of ISL + OSL tokens whose weights and KV cache fit the layout (:func:`rooflaw.parallel.max_batch`)."""
    prec = precision_of({"precision": precision, "engine": engine})
    wl = rl.Workload(1, isl, osl)
    return rl.parallel.max_batch(rl.load_architecture(model), rl.get_system(system), layout, wl, prec)


def predict(r: dict[str, str], model: str = "steady", budgets: str = "trtllm-bench",
            host: rl.parallel.ServingHost | None = None) -> tuple[float, int]:  # fmt: skip
    """(predicted value in the row's unit, batch used). ``model``: ``steady`` (in-flight batching's steady state,
    :func:`rooflaw.parallel.inflight`) or ``decode`` (the first result's pricing, on today's model: batch·OSL over
    the decode time, TTFT of the whole batch's prompts). ``host``: the serving stack's host seconds
    (:class:`rooflaw.parallel.ServingHost`; None: none)."""
    arch = rl.load_architecture(r["model"])
    system = rl.get_system(f"{r['device_id']}:{r['gpus']}")
    lay = rl.parallel.parse_layout(layout_text(r))
    isl, osl = int(r["isl"]), int(r["osl"])
    prec, engine = precision_of(r), r["engine"]
    if r.get("batching") == "static":  # one static batch: its prompts at once, then every decode step
        batch = int(r["concurrency"])
        out = rl.parallel.evaluate_layout(arch, system, lay, rl.Workload(batch, isl, osl), prec, engine)
        if host is not None:
            out = rl.parallel.static_batch(out, host, arch.layers / lay.pp, osl, batch)
        if r["metric"] == "ttft_ms":
            return out["ttft_s"] * 1e3, batch
        return batch * osl / out["latency_s"] / lay.devices, batch
    budget = TOKEN_BUDGET
    if r["concurrency"] == "max":
        fit = rl.parallel.max_batch(arch, system, lay, rl.Workload(1, isl, osl), prec)
        batch = max(1, min(fit, MAX_BATCH))
        if budgets == "trtllm-bench":  # the run's max_num_tokens: trtllm-bench's heuristic at its ISL/OSL
            budget = rl.parallel.trtllm_bench_settings(fit, isl, osl, lay.pp)[1]
    else:
        batch = max(1, round(float(r["concurrency"])))
    wl = rl.Workload(batch, isl, osl)
    if model == "steady":
        budget = int(r["max_num_tokens"]) * int(r["dp_attn"] or 1) if r.get("max_num_tokens") else budget
        # offline rows: requests queued inside the engine (closed); a client holding a concurrency (clients:
        # requests land at any phase of the steps); the online rows: open loop at a rate (poisson)
        arrivals = "poisson" if r["request_rate"] != "inf" else "closed" if r["concurrency"] == "max" else "clients"
        slots = None  # a concurrency past what the engine holds (its batch limit, or the KV cache) queues outside
        if r["concurrency"] != "max":
            where = f"{r['device_id']}:{r['gpus']}"
            slots = fits(r["model"], where, layout_text(r), isl, osl, r["precision"], engine)
            if r.get("max_batch_size"):
                slots = min(slots, int(r["max_batch_size"]) * int(r["dp_attn"] or 1))
        out = rl.parallel.inflight(arch, system, lay, wl, prec, engine, max(budget, batch), arrivals=arrivals,
                                   max_seqs=max(1, slots) if slots is not None else None, host=host)  # fmt: skip
    else:
        out = rl.parallel.evaluate_layout(arch, system, lay, wl, prec, engine)
    if r["metric"] == "output_tok_s":
        return out["tokens_per_s_per_device"], batch
    if r["metric"] == "ttft_ms":
        return out["ttft_s"] * 1e3, batch
    return out["tpot_s"] * 1e3, batch


#: Row sets reported apart, by first row: session 9's 119 rows; session 10's static batches and first-token
#: latencies of TensorRT-LLM's early performance pages (DC120-151), NVIDIA NIM's closed-loop serving table
#: (DC152-163), the v0.14 online table's QPS 4 and 16 rows (DC164-199) and session 11's rows of a later
#: perf-overview that prints tokens/s per GPU (DC200-).
ROW_SETS = ((200, "DC200-s11"), (164, "DC164-online"), (152, "DC152-nim"), (120, "DC120-151"), (1, "DC001-119"))


def row_set(row_id: str) -> str:
    """The set (:data:`ROW_SETS`) a row belongs to."""
    n = int(row_id[2:])
    return next(name for first, name in ROW_SETS if n >= first)


def measured(r: dict[str, str]) -> float:
    v = float(r["value"])
    # the in-flight rows print the TP group's total (but the pages that print per GPU, their metric_scope says so);
    # the static-batch pages print tokens/s per GPU already
    per_gpu = r.get("batching") == "static" or r["metric_scope"].startswith("per GPU")
    total = r["metric"] == "output_tok_s" and not per_gpu
    return v / int(r["gpus"]) if total else v


def summary(rows: list[dict[str, object]]) -> dict[str, float]:
    groups: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        e = abs(float(r["ratio"]) - 1)  # type: ignore[arg-type]
        for key in ("all", f"metric={r['metric']}", f"gpu={r['gpu']}", f"class={r['class']}", f"tp={r['tp']}",
                    f"gpus={r['gpus']}", f"metric={r['metric']},class={r['class']}", f"batching={r['batching']}",
                    f"rows={r['set']}"):  # fmt: skip
            groups[key].append(e)
    return {k: float(np.median(v)) for k, v in sorted(groups.items())} | {
        f"n[{k}]": float(len(v)) for k, v in sorted(groups.items())
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=Path, default=CSV)
    ap.add_argument("--json", action="store_true", help="one JSON line with every row and figure")
    ap.add_argument(
        "--model",
        choices=("steady", "decode"),
        default="steady",
        help="steady: in-flight batching (default); decode: the first result's decode-only pricing",
    )
    ap.add_argument(
        "--budget",
        choices=("trtllm-bench", "fixed"),
        default="trtllm-bench",
        help="tokens per step of the max-throughput rows: trtllm-bench's heuristic at the row's ISL/OSL (default) "
        f"or a fixed {TOKEN_BUDGET}",
    )
    ap.add_argument(
        "--host",
        choices=("fitted", "none"),
        default="fitted",
        help="host and front-end seconds: the shipped tensorrt-llm figures (rooflaw.parallel.serving_host; "
        "benchmarks/fit_datacenter_host.py) or none",
    )
    a = ap.parse_args()
    with open(a.csv, newline="") as f:
        data = list(csv.DictReader(f))
    t0 = time.perf_counter()
    rows = []
    for r in data:
        host = rl.parallel.serving_host(r["engine"]) if a.host == "fitted" else None
        p, batch = predict(r, a.model, a.budget, host)
        m = measured(r)
        rows.append(dict(row=r["row_id"], model=r["model"], gpu=r["device_id"], tp=int(r["tp"]), gpus=int(r["gpus"]),
                         cls=r["arch_class"], **{"class": r["arch_class"]}, metric=r["metric"], isl=int(r["isl"]),
                         osl=int(r["osl"]), batch=batch, precision=r["precision"], predicted=p, measured=m,
                         ratio=p / m if m else math.nan, batching=r.get("batching") or "inflight",
                         set=row_set(r["row_id"])))  # fmt: skip
    secs = time.perf_counter() - t0
    s = summary(rows)
    if a.json:
        print(json.dumps({"rows": rows, "summary": s, "seconds": secs}))
        return
    print(f"{'row':6s} {'model':16s} {'gpu':14s} {'tp':>2s} {'metric':12s} {'isl/osl':>10s} {'batch':>5s} "
          f"{'pred':>10s} {'meas':>10s} {'pred/meas':>9s}")  # fmt: skip
    for r in rows:
        print(f"{r['row']:6s} {r['model']:16s} {r['gpu']:14s} {r['tp']:2d} {r['metric']:12s} "
              f"{str(r['isl']) + '/' + str(r['osl']):>10s} {r['batch']:5d} {r['predicted']:10.4g} "
              f"{r['measured']:10.4g} {r['ratio']:9.3f}")  # fmt: skip
    print("\nmedian |pred/meas - 1|")
    for k, v in s.items():
        if not k.startswith("n["):
            print(f"  {k:34s} n={int(s[f'n[{k}]']):3d}  {v:6.1%}")
    print(f"\n{len(rows)} rows in {secs:.1f} s")


if __name__ == "__main__":
    main()
