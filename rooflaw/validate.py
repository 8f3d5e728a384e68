"""``rooflaw validate``: measure real torch decoders on this machine and compare with predictions.

Builds eager PyTorch decoders from :class:`~rooflaw.Architecture` specs (RMSNorm, RoPE, GQA
attention with a KV cache, SwiGLU or a top-k MoE FFN, LM head), times a prefill of ``S_in``
tokens and ``S_out`` KV-cached decode steps (warm-up, median of repeats), and predicts the same
runs with :func:`rooflaw.evaluate` on the given (calibrated) device under engine ``torch-eager``.
The device's figures come from micro-benchmarks (``rooflaw devices calibrate``), never from
these models. Only the CPU path runs without CUDA; ``cuda`` is used when asked and available.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from .api import Architecture, Device, Workload, evaluate

#: name -> (spec, precision). Dense and MoE, MHA/GQA/MQA, narrow/wide, shallow/deep, fp32 and bf16.
#: Most weigh more than this CPU's 32 MB L3, so decode streams them from DRAM as the model assumes.
_C = {"vocab": 16384}
CONFIGS: dict[str, tuple[dict[str, int], str]] = {
    "mha-512x4": ({"layers": 4, "d_model": 512, "heads": 8, "ffn": 1536, **_C}, "fp32"),
    "gqa-512x8": ({"layers": 8, "d_model": 512, "heads": 8, "kv_heads": 2, "ffn": 1408, **_C}, "fp32"),
    "mqa-768x4": ({"layers": 4, "d_model": 768, "heads": 12, "kv_heads": 1, "ffn": 2048, **_C}, "fp32"),
    "gqa-wide-1024x2": ({"layers": 2, "d_model": 1024, "heads": 16, "kv_heads": 4, "ffn": 2816, **_C}, "fp32"),
    "gqa-deep-256x16": ({"layers": 16, "d_model": 256, "heads": 4, "kv_heads": 2, "ffn": 768, "vocab": 8192}, "fp32"),
    "mha-768x6": ({"layers": 6, "d_model": 768, "heads": 12, "ffn": 2048, "vocab": 32000}, "fp32"),
    "gqa-640x4": ({"layers": 4, "d_model": 640, "heads": 10, "kv_heads": 2, "ffn": 1728, **_C}, "fp32"),
    "moe-8x2-384x4": (
        {"layers": 4, "d_model": 384, "heads": 6, "ffn": 512, "experts": 8, "top_k": 2, "vocab": 8192},
        "fp32",
    ),
    "moe-4x1-512x2": (
        {"layers": 2, "d_model": 512, "heads": 8, "kv_heads": 4, "ffn": 1024, "experts": 4, "top_k": 1, **_C},
        "fp32",
    ),
    "moe-16x4-256x6": (
        {"layers": 6, "d_model": 256, "heads": 4, "ffn": 256, "experts": 16, "top_k": 4, "vocab": 8192},
        "fp32",
    ),
    "gqa-512x4-bf16": ({"layers": 4, "d_model": 512, "heads": 8, "kv_heads": 2, "ffn": 1408, **_C}, "bf16"),
}
QUICK = ("gqa-deep-256x16", "gqa-wide-1024x2", "moe-8x2-384x4")


@dataclass(frozen=True)
class Run:
    name: str
    phase: str
    predicted_s: float
    measured_s: float

    @property
    def error(self) -> float:
        return self.predicted_s / self.measured_s - 1.0

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "phase": self.phase, "predicted_s": self.predicted_s,
                "measured_s": self.measured_s, "error": self.error}  # fmt: skip


def _model(arch: Architecture, dtype, device: str):
    """An eager decoder for ``arch`` (random weights) with a preallocated KV cache."""
    import torch
    from torch import nn

    d, hd, nh, nkv = arch.d_model, arch.head_dim, arch.heads, arch.kv_heads

    class RMSNorm(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.w = nn.Parameter(torch.ones(n))

        def forward(self, x):
            v = x.pow(2).mean(-1, keepdim=True)
            return x * torch.rsqrt(v + 1e-6) * self.w

    inv_freq = 1.0 / (10000 ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))

    def rope(x, cos, sin):  # Hugging Face style: x·cos + rotate_half(x)·sin
        half = x.shape[-1] // 2
        return x * cos + torch.cat([-x[..., half:], x[..., :half]], -1) * sin

    class FFN(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.gate, self.up = nn.Linear(d, width, bias=False), nn.Linear(d, width, bias=False)
            self.down = nn.Linear(width, d, bias=False)

        def forward(self, x):
            return self.down(nn.functional.silu(self.gate(x)) * self.up(x))

    class MoE(nn.Module):
        def __init__(self):
            super().__init__()
            self.router = nn.Linear(d, arch.experts, bias=False)
            self.experts = nn.ModuleList(FFN(arch.ffn) for _ in range(arch.experts))

        def forward(self, x):
            flat = x.reshape(-1, d)
            w, idx = torch.topk(self.router(flat).softmax(-1), arch.top_k, dim=-1)
            out = torch.zeros_like(flat)
            for e in torch.unique(idx).tolist():
                rows, slot = torch.nonzero(idx == e, as_tuple=True)
                out.index_add_(0, rows, self.experts[e](flat[rows]) * w[rows, slot, None])
            return out.reshape(x.shape)

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.n1, self.n2 = RMSNorm(d), RMSNorm(d)
            self.q, self.k = nn.Linear(d, nh * hd, bias=False), nn.Linear(d, nkv * hd, bias=False)
            self.v, self.o = nn.Linear(d, nkv * hd, bias=False), nn.Linear(nh * hd, d, bias=False)
            self.ffn = MoE() if arch.experts > 1 else FFN(arch.ffn)

        def forward(self, x, cos, sin, cache, start):
            B, S, _ = x.shape
            h = self.n1(x)
            q = rope(self.q(h).view(B, S, nh, hd).transpose(1, 2), cos, sin)
            k = rope(self.k(h).view(B, S, nkv, hd).transpose(1, 2), cos, sin)
            v = self.v(h).view(B, S, nkv, hd).transpose(1, 2)
            cache[0][:, :, start : start + S] = k
            cache[1][:, :, start : start + S] = v
            K, V = cache[0][:, :, : start + S], cache[1][:, :, : start + S]
            if nkv != nh:
                K, V = K.repeat_interleave(nh // nkv, 1), V.repeat_interleave(nh // nkv, 1)
            a = nn.functional.scaled_dot_product_attention(q, K, V, is_causal=S > 1)
            x = x + self.o(a.transpose(1, 2).reshape(B, S, nh * hd))
            return x + self.ffn(self.n2(x))

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(arch.vocab, d)
            self.layers = nn.ModuleList(Layer() for _ in range(arch.layers))
            self.norm = RMSNorm(d)
            self.head = nn.Linear(d, arch.vocab, bias=False)

        def forward(self, ids, caches, start):
            pos = torch.arange(start, start + ids.shape[1], device=ids.device, dtype=torch.float32)
            ang = torch.outer(pos, inv_freq.to(ids.device))
            ang = torch.cat([ang, ang], -1)
            x = self.emb(ids)
            cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
            for layer, c in zip(self.layers, caches, strict=False):
                x = layer(x, cos, sin, c, start)
            return self.head(self.norm(x[:, -1:]))

    torch.manual_seed(0)
    return Decoder().to(device=device, dtype=dtype).eval()


def _time(fn: Callable[[], None], sync: Callable[[], None], repeats: int) -> float:
    fn()
    sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(arch: Architecture, precision: str, workload: Workload, device: str = "cpu", repeats: int = 3):
    """Measured (prefill seconds, mean decode-step seconds) of an eager decoder of ``arch``."""
    import torch

    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    model = _model(arch, dtype, device)
    B, S_in, S_out = workload.batch, workload.input_tokens, workload.output_tokens
    shape = (B, arch.kv_heads, S_in + S_out + 1, arch.head_dim)
    caches = [(torch.zeros(shape, dtype=dtype, device=device), torch.zeros(shape, dtype=dtype, device=device))
              for _ in range(arch.layers)]  # fmt: skip
    ids = torch.randint(0, arch.vocab, (B, S_in), device=device)
    tok = torch.randint(0, arch.vocab, (B, 1), device=device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def prefill() -> None:
        model(ids, caches, 0)

    def decode() -> None:
        for t in range(S_out):
            model(tok, caches, S_in + t)

    with torch.inference_mode():
        pre = _time(prefill, sync, repeats)
        dec = _time(decode, sync, repeats) / S_out
    return pre, dec


def run(
    device: Device,
    quick: bool = False,
    torch_device: str = "cpu",
    progress: Callable[[str, float], None] | None = None,
) -> dict[str, object]:
    """Measure and predict every config; returns the JSON-ready report (see module docstring)."""
    import torch

    from .api import from_mapping

    names = list(QUICK if quick else CONFIGS)
    wl = Workload(1, 64 if quick else 128, 8 if quick else 16)
    repeats = 3 if quick else 5
    runs: list[Run] = []
    for i, name in enumerate(names):
        spec, prec = CONFIGS[name]
        if progress:
            progress(name, i / len(names))
        arch = from_mapping(spec, name=name)
        pre, dec = measure(arch, prec, wl, torch_device, repeats)
        rep = evaluate(arch, device, wl, "fp32" if prec == "fp32" else prec, engine="torch-eager")
        runs += [Run(name, "prefill", rep.prefill_s, pre), Run(name, "decode", rep.tpot_s, dec)]
    if progress:
        progress("done", 1.0)

    def mape(phase: str) -> float:
        errs = [abs(r.error) for r in runs if r.phase == phase]
        return float(sum(errs) / len(errs)) if errs else math.nan

    return {
        "device": device.id,
        "torch_device": torch_device,
        "threads": torch.get_num_threads(),
        "workload": wl.to_dict(),
        "configs": [r.to_dict() for r in runs],
        "mape_prefill": mape("prefill"),
        "mape_decode": mape("decode"),
    }
