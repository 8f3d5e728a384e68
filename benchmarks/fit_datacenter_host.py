"""Fit the ``tensorrt-llm`` serving stack's host and front-end seconds (:class:`rooflaw.parallel.ServingHost`: per
executor step, per layer and per sequence per step, per request and per prompt token through a server) on the
published datacenter rows of ``benchmarks/data/datacenter.csv``, and report them held out one source at a time.

Each row is priced by ``bench_datacenter.predict`` four times: without host time, with 1 ms per step, 10 µs per
sequence per step and 1 ms per request; its prediction is linear in the figures (seconds per output token, TTFT,
TPOT; but for the arrival wait's small dependence on the step times), so these give its line (``y0``, ``k_step``,
``k_seq``, ``k_request``; the front end's per-token time rides ``k_request`` times the prompt's tokens), written to
``benchmarks/data/datacenter_host_rows.csv``, the fit's input. The figures minimise Σ soft_l1(log(predicted /
measured)) (:func:`rooflaw.parallel.fit_host`). A source is a published table of one engine version (its URL and
version): leave-one-source-out refits on the others and predicts the left-out rows -- the held-out figure.
``--write`` writes the table and ``rooflaw/constraints/serving_host.toml``; ``--from-table`` refits from the
written table (no pricing).

    python benchmarks/fit_datacenter_host.py [--write] [--from-table] [--json]
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

import rooflaw as rl

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_datacenter as bd  # noqa: E402

TABLE = HERE / "data" / "datacenter_host_rows.csv"
TOML = HERE.parent / "rooflaw" / "constraints" / "serving_host.toml"
ENGINE = "tensorrt-llm"
DELTA = 1e-3  #: seconds of host time the lines are measured over
COLUMNS = ("row_id", "group", "metric", "layers", "y0", "k_step", "k_seq", "k_request", "prompt_tokens", "measured")


def source(r: dict[str, str]) -> str:
    """A row's source: the published page and the engine version its table measured."""
    page = r["source_url"].rsplit("/", 1)[-1]
    return f"{page} {r['engine_version']}"


def _time(r: dict[str, str], value: float) -> float:
    return 1.0 / value if r["metric"] == "output_tok_s" else value


def line(r: dict[str, str]) -> dict[str, object]:
    """One row's prediction as a line in the host figures (seconds; a throughput row as seconds per token)."""
    y0 = _time(r, bd.predict(r)[0])
    ys = _time(r, bd.predict(r, host=rl.parallel.ServingHost(step_s=DELTA))[0])
    yq = _time(r, bd.predict(r, host=rl.parallel.ServingHost(seq_s=DELTA * 1e-2))[0])  # 10 us a sequence
    yr = _time(r, bd.predict(r, host=rl.parallel.ServingHost(request_s=DELTA))[0])
    lay = rl.parallel.parse_layout(bd.layout_text(r))
    layers = rl.load_architecture(r["model"]).layers / lay.pp
    return dict(row_id=r["row_id"], group=source(r), metric=r["metric"], layers=layers, y0=y0,
                k_step=(ys - y0) / DELTA, k_seq=(yq - y0) / (DELTA * 1e-2), k_request=(yr - y0) / DELTA,
                prompt_tokens=int(r["isl"]), measured=_time(r, bd.measured(r)))  # fmt: skip


def read_table(path: Path = TABLE) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def host_rows(table: list[dict]) -> rl.parallel.HostRows:
    col = lambda k: np.array([float(t[k]) for t in table])  # noqa: E731
    return rl.parallel.HostRows(col("y0"), col("k_step"), col("layers"), col("k_seq"), col("k_request"),
                                col("prompt_tokens"), col("measured"),
                                np.array([t["metric"] == "output_tok_s" for t in table]),
                                tuple(str(t["group"]) for t in table))  # fmt: skip


def _moe_keys(r: dict[str, str] | None) -> tuple[str, ...]:
    """A row's class, and for an MoE row its layout (DEP: attention DP + EP; TP; one GPU), GPU and source."""
    if r is None:
        return ()
    if r["arch_class"] != "moe":
        return (f"class={r['arch_class']}",)
    lay = "DEP" if r.get("dp_attn") else "TP" if int(r["gpus"]) > 1 else "one GPU"
    return ("class=moe", f"moe layout={lay}", f"moe gpu={r['device_id']}", f"moe source={source(r)}")


def report(table: list[dict]) -> dict[str, object]:
    """The in-sample figures and errors, and the leave-one-source-out ones, per metric and per source."""
    rows = host_rows(table)
    fit = rl.parallel.fit_host(rows)
    loso, per = rl.parallel.leave_one_source_out(rows)
    err = {
        "none": np.abs(rl.parallel.ratios(rows, rows.y0) - 1),
        "in-sample": np.abs(rl.parallel.ratios(rows, rows.predict(fit)) - 1),
        "loso": np.abs(rl.parallel.ratios(rows, loso) - 1),
    }
    keys: dict[str, list[int]] = defaultdict(list)
    with open(bd.CSV, newline="") as f:
        rows_by_id = {r["row_id"]: r for r in csv.DictReader(f)}
    for i, t in enumerate(table):
        for k in ("all", f"metric={t['metric']}", f"source={t['group']}", *_moe_keys(rows_by_id.get(str(t["row_id"])))):
            keys[k].append(i)
    summary = {k: {"n": len(ix), **{m: float(np.median(e[ix])) for m, e in err.items()}} for k, ix in keys.items()}
    return {"fit": fit.__dict__, "loso_fits": {g: h.__dict__ for g, h in per.items()}, "summary": summary}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"write {TABLE.name} and {TOML.name}")
    ap.add_argument("--from-table", action="store_true", help=f"refit from {TABLE.name} (no pricing)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.from_table:
        table: list[dict] = read_table()
    else:
        with open(bd.CSV, newline="") as f:
            table = [line(r) for r in csv.DictReader(f) if r["engine"] == ENGINE]
    out = report(table)
    if a.write:
        if not a.from_table:
            with open(TABLE, "w", newline="") as f:
                w = csv.DictWriter(f, COLUMNS, lineterminator="\n")
                w.writeheader()
                w.writerows({k: (f"{v:.9g}" if isinstance(v, float) else v) for k, v in t.items()} for t in table)
            table = read_table()  # fit what was written (the shipped figures refit from the table exactly)
            out = report(table)
        sources = sorted({str(t["group"]) for t in table})
        TOML.write_text(rl.parallel.host_toml({ENGINE: rl.parallel.ServingHost(**out["fit"])}, {ENGINE: sources}))
    if a.json:
        print(json.dumps(out))
        return
    f = out["fit"]
    print(f"fit ({ENGINE}): step_s {f['step_s'] * 1e3:.4g} ms, layer_s {f['layer_s'] * 1e6:.4g} us, "
          f"seq_s {f['seq_s'] * 1e6:.4g} us, request_s {f['request_s'] * 1e3:.4g} ms, "
          f"prompt_token_s {f['prompt_token_s'] * 1e6:.4g} us")  # fmt: skip
    print(f"\n{'median |pred/meas - 1|':60s} {'n':>4s} {'none':>7s} {'in-sample':>9s} {'LOSO':>7s}")
    for k, v in out["summary"].items():
        print(f"  {k:58s} {v['n']:4d} {v['none']:7.1%} {v['in-sample']:9.1%} {v['loso']:7.1%}")
    print("\nleft-out fits (step ms, layer us, sequence us, request ms, prompt token us):")
    for g, h in out["loso_fits"].items():
        print(f"  {g:58s} {h['step_s'] * 1e3:7.3f} {h['layer_s'] * 1e6:7.2f} {h['seq_s'] * 1e6:7.2f} "
              f"{h['request_s'] * 1e3:7.3f} {h['prompt_token_s'] * 1e6:7.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
