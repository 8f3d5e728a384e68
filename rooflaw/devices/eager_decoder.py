"""An eager PyTorch decoder built from an architecture (used by ``validate`` and ``calibrate``).

RMSNorm, Hugging-Face-style RoPE, GQA attention with a preallocated KV cache (``repeat_interleave``
+ SDPA), SwiGLU or a top-k MoE FFN (one loop over the experts the router picked), an LM head on the
last token. ``arch`` needs ``layers, d_model, heads, kv_heads, head_dim, ffn, experts, top_k, vocab``.

The weights are created on ``device`` in ``dtype`` (an 8 B-parameter bf16 model is 16 GB on the GPU, never a
32 GB fp32 copy on the host), and the RoPE frequencies live on ``device`` (no host-to-device copy, hence no
host sync, per pass). The MoE path does sync the host on a GPU: ``unique(...).tolist()`` once per routed layer
and ``nonzero`` once per expert picked (:func:`host_syncs`), as eager Hugging-Face-style MoE code does.
"""

from __future__ import annotations

__all__ = ["build", "host_syncs"]


def host_syncs(moe_layers: int, experts_touched: float) -> float:
    """Host-device synchronisations of one forward pass on a GPU: per routed layer ``unique`` (which reads its
    output size back) and ``.tolist()`` of the experts picked, plus one ``nonzero`` per expert picked
    (``experts_touched`` distinct experts per layer)."""
    return float(moe_layers) * (2.0 + float(experts_touched))


def build(arch, dtype, device: str = "cpu"):
    """An eager decoder for ``arch`` (random weights) with a preallocated KV cache."""
    import torch
    from torch import nn

    d, hd, nh, nkv = arch.d_model, arch.head_dim, arch.heads, arch.kv_heads
    kw = {"device": device, "dtype": dtype}

    class RMSNorm(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.w = nn.Parameter(torch.ones(n, **kw))

        def forward(self, x):
            v = x.pow(2).mean(-1, keepdim=True)
            return x * torch.rsqrt(v + 1e-6) * self.w

    inv_freq = 1.0 / (10000 ** (torch.arange(0, hd, 2, dtype=torch.float32, device=device) / hd))

    def rope(x, cos, sin):  # Hugging Face style: x·cos + rotate_half(x)·sin
        half = x.shape[-1] // 2
        return x * cos + torch.cat([-x[..., half:], x[..., :half]], -1) * sin

    class FFN(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.gate, self.up = nn.Linear(d, width, bias=False, **kw), nn.Linear(d, width, bias=False, **kw)
            self.down = nn.Linear(width, d, bias=False, **kw)

        def forward(self, x):
            return self.down(nn.functional.silu(self.gate(x)) * self.up(x))

    class MoE(nn.Module):
        def __init__(self):
            super().__init__()
            self.router = nn.Linear(d, arch.experts, bias=False, **kw)
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
            self.q, self.k = nn.Linear(d, nh * hd, bias=False, **kw), nn.Linear(d, nkv * hd, bias=False, **kw)
            self.v, self.o = nn.Linear(d, nkv * hd, bias=False, **kw), nn.Linear(nh * hd, d, bias=False, **kw)
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
            self.emb = nn.Embedding(arch.vocab, d, **kw)
            self.layers = nn.ModuleList(Layer() for _ in range(arch.layers))
            self.norm = RMSNorm(d)
            self.head = nn.Linear(d, arch.vocab, bias=False, **kw)

        def forward(self, ids, caches, start):
            pos = torch.arange(start, start + ids.shape[1], device=ids.device, dtype=torch.float32)
            ang = torch.outer(pos, inv_freq)
            ang = torch.cat([ang, ang], -1)
            x = self.emb(ids)
            cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
            for layer, c in zip(self.layers, caches, strict=False):
                x = layer(x, cos, sin, c, start)
            return self.head(self.norm(x[:, -1:]))

    torch.manual_seed(0)
    return Decoder().to(device=device, dtype=dtype).eval()
