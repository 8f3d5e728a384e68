"""Accuracy of the latency model against measured runs on this machine's CPU.

    python benchmarks/bench_accuracy_cpu.py [--threads 1] [--seconds 2] [--calibrate-with torch|numpy]

1. ``rooflaw.devices.calibrate`` measures this CPU (fp32 GEMM rate, memory bandwidth, vector rate).
2. Real torch decoder models (embedding, unfused attention with a KV cache, SwiGLU FFN or MoE,
   LM head) are built from ``Architecture`` objects and timed: prefill of S_in tokens, then S_out
   decode steps, best of several repeats.
   The per-operator launch overhead is fitted on a separate tiny probe model (2 layers, d = 64),
   whose roofline time is negligible.
3. rooflaw predicts the same runs on the calibrated device (precision ``tf32`` = 4-byte elements on
   the measured GEMM roof) with the ``full`` preset; the table shows measured/predicted.

A pure roofline is a lower bound: framework overheads (Python, kernel launches, small-GEMM
inefficiency) make measured times longer, most of all for small decode steps -- that is the gap
the device's efficiency factors and this benchmark quantify.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time

import numpy as np

import rooflaw
from rooflaw.fitting import calibrate

ARCHS = {
    "dense-512x4": rooflaw.Architecture(layers=4, d_model=512, heads=8, kv_heads=2, ffn=1536, vocab=8000),
    "dense-1024x8": rooflaw.Architecture(layers=8, d_model=1024, heads=16, kv_heads=4, ffn=2816, vocab=16000),
    "wide-2048x2": rooflaw.Architecture(layers=2, d_model=2048, heads=16, kv_heads=4, ffn=5632, vocab=16000),
    "moe-768x6-e8k2": rooflaw.Architecture(
        layers=6, d_model=768, heads=12, kv_heads=4, ffn=768, experts=8, top_k=2, vocab=8000
    ),
}


def build(a: rooflaw.Architecture):
    import torch

    nn = torch.nn

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            q, kv = a.heads * a.head_dim, a.kv_heads * a.head_dim
            self.n1, self.n2 = nn.RMSNorm(a.d_model), nn.RMSNorm(a.d_model)
            self.q, self.k, self.v = (nn.Linear(a.d_model, n, bias=False) for n in (q, kv, kv))
            self.o = nn.Linear(q, a.d_model, bias=False)
            self.router = nn.Linear(a.d_model, a.experts, bias=False) if a.experts > 1 else None
            self.gate = nn.ModuleList(nn.Linear(a.d_model, a.ffn, bias=False) for _ in range(a.experts))
            self.up = nn.ModuleList(nn.Linear(a.d_model, a.ffn, bias=False) for _ in range(a.experts))
            self.down = nn.ModuleList(nn.Linear(a.ffn, a.d_model, bias=False) for _ in range(a.experts))

        def forward(self, x, cache):
            B, S, _ = x.shape
            h = self.n1(x)
            q = self.q(h).view(B, S, a.heads, a.head_dim).transpose(1, 2)
            k = self.k(h).view(B, S, a.kv_heads, a.head_dim).transpose(1, 2)
            v = self.v(h).view(B, S, a.kv_heads, a.head_dim).transpose(1, 2)
            if cache:
                k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
            cache[:] = [k, v]
            rep = a.heads // a.kv_heads
            kk, vv = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
            att = torch.softmax(q @ kk.transpose(-1, -2) * a.head_dim**-0.5, -1) @ vv
            x = x + self.o(att.transpose(1, 2).reshape(B, S, -1))
            t = self.n2(x).reshape(B * S, -1)
            out = torch.zeros_like(t)
            idx = (
                torch.zeros(B * S, 1, dtype=torch.long)
                if self.router is None
                else self.router(t).topk(a.top_k, -1).indices
            )
            for e in range(a.experts):
                rows = (idx == e).any(-1).nonzero().flatten()
                if len(rows):
                    z = t[rows]
                    out[rows] += self.down[e](torch.nn.functional.silu(self.gate[e](z)) * self.up[e](z))
            return x + out.view(B, S, -1)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(a.vocab, a.d_model)
            self.layers = nn.ModuleList(Layer() for _ in range(a.layers))
            self.norm = nn.RMSNorm(a.d_model)
            self.head = nn.Linear(a.d_model, a.vocab, bias=False)

        def forward(self, ids, caches):
            x = self.emb(ids)
            for layer, c in zip(self.layers, caches, strict=True):
                x = layer(x, c)
            return self.head(self.norm(x[:, -1:]))

    return Model().eval()


def measure(a: rooflaw.Architecture, wl: rooflaw.Workload, repeats: int = 3) -> tuple[float, float]:
    import torch

    model = build(a)
    best_p = best_d = float("inf")
    with torch.inference_mode():
        for _ in range(repeats + 1):  # first run warms up
            caches = [[] for _ in range(a.layers)]
            ids = torch.randint(0, a.vocab, (wl.batch, wl.input_tokens))
            t0 = time.perf_counter()
            logits = model(ids, caches)
            t1 = time.perf_counter()
            for _ in range(wl.output_tokens):
                logits = model(logits.argmax(-1), caches)
            t2 = time.perf_counter()
            best_p, best_d = min(best_p, t1 - t0), min(best_d, t2 - t1)
    return best_p, best_d


def torch_rates(seconds: float) -> dict[str, float]:
    """The same three kernels as ``calibrate``, run through torch (the framework being predicted)."""
    import torch

    def best(fn, reps=5):
        fn()
        t = float("inf")
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            t = min(t, time.perf_counter() - t0)
        return t

    n = 2048
    a, b = torch.randn(n, n), torch.randn(n, n)
    gemm = 2 * n**3 / best(lambda: a @ b)
    big, dst = torch.randn(64 * 2**20), torch.empty(64 * 2**20)  # 256 MB each, preallocated
    bw = 2 * big.numel() * 4 / best(lambda: dst.copy_(big))
    x, y = torch.randn(2**16), torch.randn(2**16)
    vec = x.numel() / best(lambda: [torch.mul(x, y) for _ in range(100)], reps=5) * 100
    return {"gemm": gemm, "bandwidth": bw, "vector": vec}


#: A model too small for its roofline time to matter: its measured decode time is launch overhead.
PROBE = rooflaw.Architecture(layers=2, d_model=64, heads=2, kv_heads=1, ffn=128, vocab=256)


def launch_overhead(dev, args) -> float:
    """Seconds per operator launch, from the measured decode of :data:`PROBE` (not one of the test models)."""
    wl = rooflaw.Workload(1, args.input_tokens, args.output_tokens)
    _, md = measure(PROBE, wl, repeats=5)
    base = rooflaw.evaluate(PROBE, dev, wl, precision="tf32").decode_s
    unit = dataclasses.replace(dev, kernel_overhead=1e-6)
    launches = (rooflaw.evaluate(PROBE, unit, wl, precision="tf32").decode_s - base) / 1e-6
    return max(md - base, 0.0) / launches


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--input-tokens", type=int, default=256)
    ap.add_argument("--output-tokens", type=int, default=16)
    ap.add_argument(
        "--calibrate-with",
        choices=("torch", "numpy"),
        default="torch",
        help="measure the roofs with the framework that runs the model (default) or numpy",
    )
    args = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import torch

    torch.set_num_threads(args.threads)
    from threadpoolctl import threadpool_limits

    with threadpool_limits(args.threads):
        dev = calibrate(seconds=args.seconds)
    print(
        f"numpy-calibrated {dev.id}: GEMM {dev.peak_flops['tf32'] / 1e9:.1f} GFLOP/s, vector "
        f"{dev.peak_flops['fp32'] / 1e9:.1f} GFLOP/s, bandwidth {dev.memory_bandwidth / 1e9:.1f} GB/s"
    )
    if args.calibrate_with == "torch":
        r = torch_rates(args.seconds)
        dev = dataclasses.replace(
            dev,
            id="local-cpu-torch",
            memory_bandwidth=r["bandwidth"],
            peak_flops={**dev.peak_flops, "tf32": r["gemm"], "fp16": r["gemm"], "fp32": r["vector"]},
        )
        dev = dataclasses.replace(dev, kernel_overhead=launch_overhead(dev, args))
    print(
        f"calibrated {dev.id}: GEMM {dev.peak_flops['tf32'] / 1e9:.1f} GFLOP/s, vector "
        f"{dev.peak_flops['fp32'] / 1e9:.1f} GFLOP/s, bandwidth {dev.memory_bandwidth / 1e9:.1f} GB/s, "
        f"per-kernel overhead {dev.kernel_overhead * 1e6:.1f} us ({args.threads} thread(s))"
    )
    plain = dataclasses.replace(dev, kernel_overhead=0.0)
    wl = rooflaw.Workload(1, args.input_tokens, args.output_tokens)
    print(
        f"{'model':18s} {'prefill meas':>12s} {'pred':>9s} {'ratio':>6s} {'decode meas':>12s} {'pred':>9s} "
        f"{'ratio':>6s}  ratio without overhead (prefill / decode)"
    )
    ratios = []
    for name, a in ARCHS.items():
        mp, md = measure(a, wl)
        rep = rooflaw.evaluate(a, dev, wl, precision="tf32")
        roof = rooflaw.evaluate(a, plain, wl, precision="tf32")
        ratios.append((mp / rep.prefill_s, md / rep.decode_s, mp / roof.prefill_s, md / roof.decode_s))
        rp, rd, rp0, rd0 = ratios[-1]
        print(
            f"{name:18s} {mp * 1e3:10.2f}ms {rep.prefill_s * 1e3:7.2f}ms {rp:6.2f} {md * 1e3:10.2f}ms "
            f"{rep.decode_s * 1e3:7.2f}ms {rd:6.2f}  {rp0:.2f} / {rd0:.2f}"
        )
    r = np.array(ratios)
    print(
        f"measured/predicted: prefill median {np.median(r[:, 0]):.2f} (range {r[:, 0].min():.2f}-"
        f"{r[:, 0].max():.2f}); decode median {np.median(r[:, 1]):.2f} (range {r[:, 1].min():.2f}-"
        f"{r[:, 1].max():.2f}); without the per-kernel overhead: prefill {np.median(r[:, 2]):.2f}, "
        f"decode {np.median(r[:, 3]):.2f}"
    )


if __name__ == "__main__":
    main()
