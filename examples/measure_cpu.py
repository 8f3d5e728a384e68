"""A measured latency objective: build a small torch decoder from an ``Architecture`` and time it on this CPU.

    rooflaw search --device my-laptop.toml --space my-small-space.toml --measure examples.measure_cpu:measure \
        --n-trials 50 --memory-budget 4GB --out trials.csv

(run from the repository root so ``examples`` is importable, or install this file as a module / register it
under the ``rooflaw.measure`` entry-point group). ``rooflaw`` calls ``measure(arch, workload)`` only for
candidates that the analytic model says fit in memory, and never twice for the same architecture; it returns
the seconds of the searched phase (here: ``decode`` = ``workload.output_tokens`` decode steps after a prompt).

The model is a faithful-shape stand-in (attention with GQA, SwiGLU FFN or top-k MoE, untrained random weights),
good for timing, not for quality. Keep spaces small: a 3B-parameter candidate takes a while on a CPU.
"""

from __future__ import annotations

import time

import torch
from torch import nn

from rooflaw import Architecture, Workload


class _Block(nn.Module):
    def __init__(self, a: Architecture) -> None:
        super().__init__()
        d, hd = a.d_model, a.head_dim
        self.a = a
        self.q = nn.Linear(d, a.heads * hd, bias=False)
        self.kv = nn.Linear(d, 2 * a.kv_heads * hd, bias=False)
        self.o = nn.Linear(a.heads * hd, d, bias=False)
        self.n1, self.n2 = nn.RMSNorm(d), nn.RMSNorm(d)
        self.router = nn.Linear(d, a.experts, bias=False) if a.experts > 1 else None
        self.up = nn.ModuleList(nn.Linear(d, 2 * a.ffn, bias=False) for _ in range(a.experts))
        self.down = nn.ModuleList(nn.Linear(a.ffn, d, bias=False) for _ in range(a.experts))

    def _ffn(self, x: torch.Tensor) -> torch.Tensor:
        if self.router is None:
            g, u = self.up[0](x).chunk(2, dim=-1)
            return self.down[0](nn.functional.silu(g) * u)
        flat = x.reshape(-1, x.shape[-1])
        w, idx = self.router(flat).softmax(-1).topk(self.a.top_k, dim=-1)
        out = torch.zeros_like(flat)
        for e in idx.unique().tolist():
            rows, slot = (idx == e).nonzero(as_tuple=True)
            g, u = self.up[e](flat[rows]).chunk(2, dim=-1)
            out.index_add_(0, rows, w[rows, slot, None] * self.down[e](nn.functional.silu(g) * u))
        return out.reshape(x.shape)

    def forward(self, x: torch.Tensor, cache: list) -> torch.Tensor:
        a, (b, s, _) = self.a, x.shape
        h = self.n1(x)
        q = self.q(h).view(b, s, a.heads, a.head_dim).transpose(1, 2)
        k, v = self.kv(h).view(b, s, 2, a.kv_heads, a.head_dim).unbind(2)
        k, v = k.transpose(1, 2), v.transpose(1, 2)
        if cache:
            k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
        cache[:] = [k, v]
        rep = a.heads // a.kv_heads
        att = nn.functional.scaled_dot_product_attention(
            q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1), is_causal=not cache or s > 1
        )
        x = x + self.o(att.transpose(1, 2).reshape(b, s, -1))
        return x + self._ffn(self.n2(x))


@torch.inference_mode()
def measure(arch: Architecture, workload: Workload, phase: str = "decode", repeats: int = 2) -> float:
    """Seconds of ``phase`` (prefill, decode or total) for ``arch`` at ``workload``, best of ``repeats``."""
    torch.manual_seed(0)
    emb = nn.Embedding(arch.vocab, arch.d_model)
    blocks = [_Block(arch).eval() for _ in range(arch.layers)]
    head = nn.Linear(arch.d_model, arch.vocab, bias=False)
    best = {"prefill": float("inf"), "decode": float("inf"), "total": float("inf")}
    for _ in range(repeats):
        caches: list[list] = [[] for _ in blocks]
        tok = torch.randint(0, arch.vocab, (workload.batch, workload.input_tokens))
        t0 = time.perf_counter()
        x = emb(tok)
        for blk, c in zip(blocks, caches, strict=True):
            x = blk(x, c)
        nxt = head(x[:, -1:]).argmax(-1)
        t1 = time.perf_counter()
        for _ in range(workload.output_tokens):
            x = emb(nxt)
            for blk, c in zip(blocks, caches, strict=True):
                x = blk(x, c)
            nxt = head(x[:, -1:]).argmax(-1)
        t2 = time.perf_counter()
        best = {k: min(best[k], v) for k, v in {"prefill": t1 - t0, "decode": t2 - t1, "total": t2 - t0}.items()}
    return best[phase]


if __name__ == "__main__":
    a = Architecture(layers=2, d_model=256, heads=4, kv_heads=2, head_dim=64, ffn=512, experts=4, top_k=2, vocab=1000)
    print(f"decode of {a.spec()}: {measure(a, Workload(1, 64, 8)) * 1e3:.2f} ms")
