"""Command line: ``python -m paper_repro [all|SECTION ...] --out DIR [--quick]``."""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

from . import SECTIONS
from . import common as C
from .report import md_table, merge_claims, write_section


def _setup(ctx: C.Context) -> None:
    dev = C.device()
    law = C.law()
    prob = C.problem("full", "fp16")
    rows = [
        [
            k.upper(),
            f"{v / 1e12:.4g} T{'OP' if k.startswith('int') else 'FLOP'}/s",
            dev.provenance.get(f"peak_flops.{k}", dev.provenance.get("peak_flops", "?")),
        ]
        for k, v in dev.peak_flops.items()
    ]
    rows += [
        ["memory bandwidth", f"{dev.memory_bandwidth / 1e9:.4g} GB/s", dev.provenance.get("memory_bandwidth", "?")],
        ["memory capacity", f"{dev.memory_capacity / 1e9:.4g} GB", dev.provenance.get("memory_capacity", "?")],
        ["SMs / GEMM tile", f"{dev.sm_count} / {dev.tile[0]}×{dev.tile[1]}", dev.provenance.get("tile", "?")],
    ]
    body = (
        "The paper names only 'NVIDIA Jetson Orin' and gives no peak FLOP/s, bandwidth, capacity, SKU or power mode. "
        f"We use the catalog's **{dev.name}** (`{dev.id}`, MAXN, GPU only, dense figures):\n\n"
        + md_table(("quantity", "value", "provenance"), rows)
        + f"\nWorkload: B = {C.WORKLOAD.batch}, S_in = {C.WORKLOAD.input_tokens}, S_out = {C.WORKLOAD.output_tokens} "
        f"(S̄ = {C.WORKLOAD.mean_context}). Space: `{C.SPACE}` ({prob.space.size:,} points: {prob.space.describe()}). "
        f"Law: `{law.name}` — {law.source}.\n\n"
        "Cost presets: `paper` = the paper's §5 / App. E theory formulas (prefill compute-bound on linear-layer "
        "FLOPs, decode memory-bound on weights + KV bytes, memory = weights of all experts, no embeddings/LM head); "
        "`paper-ops` = the paper's App. D per-operator roofline as written (Eq. 16, Tables 8–15: Q/K/V/O "
        "projections, QKᵀ with stored scores, softmax at 5 ops/element, scores·V, SwiGLU/MoE FFN, each "
        "max(FLOPs/π, bytes/β); a pass reads the weights of min(E, tokens·K) experts; the score matrix stays in 16 "
        "bits; memory as `paper`) — the model the paper draws its frontiers with; `full` = rooflaw's default "
        "(every operator on its own roof with max(compute, memory), attention S² terms, softmax/norms on the FP32 "
        "vector roof, embeddings and LM head, MoE expert coverage in prefill, KV cache and activations in "
        "memory). Memory must fit the device under all three.\n"
    )
    write_section(ctx.out, "setup", "Setup", body)
    merge_claims(
        ctx.out,
        "setup",
        {
            "device": dev.id,
            "peak_flops": dict(dev.peak_flops),
            "memory_bandwidth": dev.memory_bandwidth,
            "memory_capacity": dev.memory_capacity,
            "workload": C.WORKLOAD.to_dict(),
            "space": C.SPACE,
            "space_size": prob.space.size,
            "law": law.name,
            "presets": list(C.PRESETS),
        },
    )


def run_sections(sections, out, quick: bool = False, log=print) -> dict:
    if isinstance(sections, str):
        sections = [sections]
    names = list(SECTIONS) if "all" in sections else list(dict.fromkeys(sections))
    unknown = [s for s in names if s not in SECTIONS]
    if unknown:
        raise ValueError(f"unknown section {unknown[0]!r}; choose from all, {', '.join(SECTIONS)}")
    ctx = C.Context(Path(out), quick=quick)
    t0 = time.perf_counter()
    _setup(ctx)
    results = {}
    c0 = time.process_time()
    for name in names:
        t, c = time.perf_counter(), time.process_time()
        mod = importlib.import_module(f"paper_repro.{name}")
        results[name] = mod.run(ctx)
        ctx.timings[name] = time.perf_counter() - t
        log(f"paper_repro: {name} done in {ctx.timings[name]:.1f} s (CPU {time.process_time() - c:.1f} s)")
    total = time.perf_counter() - t0
    log(f"paper_repro: {', '.join(names)} in {total:.1f} s (CPU {time.process_time() - c0:.1f} s) -> "
        f"{ctx.out / 'REPORT.md'}, {ctx.out / 'claims.json'}")  # fmt: skip
    return results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m paper_repro", description=(__doc__ or "").splitlines()[0])
    ap.add_argument(
        "sections",
        nargs="*",
        default=["all"],
        metavar="SECTION",
        help=f"all (default) or any of: {', '.join(SECTIONS)}",
    )
    ap.add_argument("--out", default="repro_out", help="output folder (created; default: repro_out)")
    ap.add_argument("--quick", action="store_true", help="reduced mode (fewer fit starts and frontiers) for tests")
    args = ap.parse_args(argv)
    try:
        run_sections(args.sections or ["all"], args.out, quick=args.quick)
    except ValueError as e:
        print(f"paper_repro: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - one-line error for rooflaw's own errors
        from rooflaw import RooflawError

        if isinstance(e, RooflawError):
            print(f"paper_repro: error: {e}", file=sys.stderr)
            return 2
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
