"""Cost-model speed (candidates/s, one core) and agreement, side by side with GenZ (genz-llm).

    python benchmarks/bench_cost_model.py [--n 1000000] [--genz-python /path/to/python-with-genz]

rooflaw: the ``full`` preset for every candidate -- prefill, all S_out decode steps (exact closed-form
sum), memory and energy -- through ``evaluate_columns``; then the same candidates as heterogeneous layer stacks
(5:1 sliding-window, 5:1 short-conv hybrid), timed relative to the uniform run. GenZ: ``prefill_moddeling`` and one
``decode_moddeling`` step per candidate, the same dims, the same device numbers (Jetson AGX Orin
64GB: 42.5 TFLOP/s dense FP16, 204.8 GB/s; GenZ gets a huge capacity because it refuses models that do not fit,
and capacity does not change latency). GenZ is optional: install it in a separate
environment (`python -m venv /tmp/genz && /tmp/genz/bin/pip install genz-llm`) and pass its python.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core

import numpy as np  # noqa: E402

import rooflaw  # noqa: E402

DEVICE = "jetson-agx-orin-64gb"
WL = rooflaw.Workload(1, 1024, 16)


def random_candidates(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    heads = rng.integers(4, 33, n)
    experts = rng.choice([1, 8, 16], n)
    return {
        "layers": rng.integers(4, 41, n),
        "d_model": heads * 128,
        "heads": heads,
        "kv_heads": np.ones(n, dtype=int),
        "head_dim": np.full(n, 128),
        "ffn": rng.integers(2, 48, n) * 128,
        "experts": experts,
        "top_k": np.where(experts > 1, 2, 1),
        "vocab": np.full(n, 32000),
    }


def stacks(cands: dict[str, np.ndarray]) -> dict[str, dict[str, np.ndarray]]:
    """The same candidates as heterogeneous layer stacks (per-kind layer-count columns)."""
    n = len(cands["layers"])
    rng = np.random.default_rng(1)
    local = cands["layers"] * 5 // 6
    sliding = {**cands, "local_layers": local, "window": rng.choice([512, 1024, 4096], n)}
    conv = {**cands, "mixer_layers": local, "attn_layers": cands["layers"] - local, "mixer_in": 3 * cands["d_model"],
            "mixer_inner": cands["d_model"], "mixer_state": 2 * cands["d_model"], "mixer_flops": 8 * cands["d_model"],
            "mixer_params": 3 * cands["d_model"]}  # fmt: skip
    return {"sliding-window 5:1 (Gemma 3 style)": sliding, "short-conv hybrid 5:1 (LFM2 style)": conv}


GENZ_SCRIPT = textwrap.dedent(
    """
    import json, sys, time, warnings
    warnings.filterwarnings("ignore")
    from GenZ import prefill_moddeling, decode_moddeling
    from GenZ.Models.default_models import ModelConfig
    cands = json.load(sys.stdin)
    system = {"Flops": 42.5, "Memory_size": 100000, "Memory_BW": 204.8, "ICN": 150, "real_values": True}
    out, t0 = [], time.perf_counter()
    for i, c in enumerate(cands):
        kw = dict(model=f"c{i}", vocab_size=c["vocab"], hidden_size=c["d_model"], intermediate_size=c["ffn"],
                  num_decoder_layers=c["layers"], num_attention_heads=c["heads"], head_dim=c["head_dim"],
                  num_key_value_heads=c["kv_heads"], num_ffi=2)
        if c["experts"] > 1:
            kw.update(num_experts=c["experts"], expert_top_k=c["top_k"], moe_intermediate_size=c["ffn"])
        m = ModelConfig(**kw)
        p = prefill_moddeling(model=m, batch_size=1, input_tokens=1024, system_name=system, bits="bf16")
        d = decode_moddeling(model=m, batch_size=1, input_tokens=1024, output_tokens=1, system_name=system,
                             bits="bf16")
        out.append({"prefill_ms": float(p["Latency"]), "decode_step_ms": float(d["Latency"])})
    json.dump({"seconds": time.perf_counter() - t0, "results": out}, sys.stdout)
    """
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--genz-n", type=int, default=40)
    ap.add_argument("--genz-python", default=None)
    args = ap.parse_args()
    dev = rooflaw.get_device(DEVICE)
    cands = random_candidates(args.n)
    t0 = time.perf_counter()
    rooflaw.evaluate_columns({k: v[:10] for k, v in cands.items()}, dev, WL, "bf16")
    compile_s = time.perf_counter() - t0
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        res = rooflaw.evaluate_columns(cands, dev, WL, "bf16")
        best = min(best, time.perf_counter() - t0)
    rate = args.n / best
    print(
        f"rooflaw full preset: {args.n:,} candidates in {best:.3f} s -> {rate:,.0f} candidates/s (one core); "
        f"one-time compile {compile_s:.2f} s"
    )
    assert np.all(np.isfinite(res["total_s"]))
    for label, stack in stacks(cands).items():
        rooflaw.evaluate_columns({k: v[:10] for k, v in stack.items()}, dev, WL, "bf16")
        t_stack = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            res = rooflaw.evaluate_columns(stack, dev, WL, "bf16")
            t_stack = min(t_stack, time.perf_counter() - t0)
        assert np.all(np.isfinite(res["total_s"]))
        print(f"  {label}: {args.n / t_stack:,.0f} candidates/s ({t_stack / best:.2f}x the uniform time)")

    genz_py = args.genz_python
    if genz_py is None:
        try:
            import GenZ  # noqa: F401

            genz_py = sys.executable
        except ImportError:
            print("GenZ not available: pass --genz-python PATH (a python with `pip install genz-llm`)")
            return
    sub = {k: v[: args.genz_n].tolist() for k, v in random_candidates(args.genz_n, seed=1).items()}
    rows = [dict(zip(sub, vals, strict=True)) for vals in zip(*sub.values(), strict=True)]
    proc = subprocess.run([genz_py, "-c", GENZ_SCRIPT], input=json.dumps(rows), capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"GenZ run failed: {proc.stderr.strip().splitlines()[-1]}")
    g = json.loads(proc.stdout)
    genz_rate = len(rows) / g["seconds"]
    ours = rooflaw.evaluate_columns(sub, dev, rooflaw.Workload(1, 1024, 1), "bf16")
    pre_ratio = ours["prefill_s"] * 1e3 / np.array([r["prefill_ms"] for r in g["results"]])
    dec_ratio = ours["decode_s"] * 1e3 / np.array([r["decode_step_ms"] for r in g["results"]])
    print(
        f"GenZ: {len(rows)} candidates in {g['seconds']:.2f} s -> {genz_rate:,.1f} candidates/s "
        f"(prefill + one decode step each)"
    )
    print(f"speed ratio rooflaw/GenZ: {rate / genz_rate:,.0f}x")
    print(
        f"latency rooflaw/GenZ, prefill: median {np.median(pre_ratio):.3f} (range {pre_ratio.min():.3f}-"
        f"{pre_ratio.max():.3f}); decode step: median {np.median(dec_ratio):.3f} "
        f"(range {dec_ratio.min():.3f}-{dec_ratio.max():.3f})"
    )


if __name__ == "__main__":
    main()
