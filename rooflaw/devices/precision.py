"""Precision formats: bytes per element including scale overhead, and the compute roof they run on.

A fact about number formats and the roofs a device offers, so it sits with the devices: the cost model
(``constraints``) and the precision-aware loss laws (``objectives``) both read it.

A :class:`Precision` gives weights, activations and KV cache each a format. Linear layers run on
the roof of the (activation, weight) pair -- the wider of the two compute dtypes, so a W4A16
GEMM dequantises to the FP16 roof -- attention matmuls on the (activation, KV) pair, and
softmax/norms/activations always on the FP32 vector roof.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import bad
from .device import DTYPES


@dataclass(frozen=True)
class Format:
    """A number format: ``bytes`` per element (scales included) and the compute ``dtype`` it uses."""

    name: str
    bytes: float
    dtype: str
    note: str = ""
    #: block-quantised weights the GEMM dequantises in its inner loop (group scales: AWQ/GPTQ, GGUF
    #: blocks) even when the multiply runs at the weights' own width (llama.cpp's int8 MMQ kernels)
    dequant: bool = False
    #: bytes per weight a separate dequantise kernel moves each pass before the GEMM reads the weights in this
    #: format (``bytes``): llama.cpp's F16 cuBLAS path for GGUF prompts reads the quantised block and writes F16.
    #: 0: the GEMM reads the weights as stored (or dequantises them in its inner loop)
    staged: float = 0.0
    #: the measured kernels' compute key where the format runs other kernels than its ``dtype``'s plain ones
    #: (``fp8_block``: block-scaled FP8 GEMMs, slower per FLOP than per-tensor FP8 on Hopper); "": the dtype's
    key: str = ""


FORMATS: dict[str, Format] = {
    "fp32": Format("fp32", 4.0, "fp32"),
    "tf32": Format("tf32", 4.0, "tf32", "stored as fp32, multiplied on the TF32 roof"),
    "bf16": Format("bf16", 2.0, "fp16"),
    "fp16": Format("fp16", 2.0, "fp16"),
    "fp8": Format("fp8", 1.0, "fp8"),
    "fp8_block": Format(
        "fp8_block",
        1.0 + 4 / 128**2,
        "fp8",
        "block-scaled FP8 (DeepSeek-V3/R1's own checkpoints): an fp32 scale per "
        "128x128 weight block, activations quantised per 1x128 group inside the GEMM",
        key="fp8_block",
    ),
    "int8": Format("int8", 1.0, "int8"),
    "int4": Format("int4", 0.5 + 2 / 128, "int4", "group size 128 with an fp16 scale per group"),
    "nvfp4": Format("nvfp4", 0.5 + 1 / 16, "fp4", "fp8 (E4M3) scale per 16 elements"),
    "mxfp4": Format("mxfp4", 0.5 + 1 / 32, "fp4", "E8M0 scale per 32 elements"),
    # Weight formats deployments use (bits per weight averaged, scales and zeros included).
    "awq": Format("awq", (4 + 16 / 128) / 8, "int4", "AWQ int4, group 128, fp16 scale (4.125 b/w)", dequant=True),
    "gptq": Format(
        "gptq", (4 + 20 / 128) / 8, "int4", "GPTQ int4, group 128, fp16 scale + 4-bit zero (4.16 b/w)", dequant=True
    ),
    "int4-g64": Format(
        "int4-g64", (4 + 32 / 64) / 8, "int4", "torchao int4wo-64: bf16 scale + zero per 64 (4.5 b/w)", dequant=True
    ),
    "int4-g32": Format(
        "int4-g32", (4 + 32 / 32) / 8, "int4", "gpt-fast int4 g32: bf16 scale + zero per 32 (5.0 b/w)", dequant=True
    ),
    "int8wo": Format("int8wo", 1.0, "int8", "int8 weight-only, per-channel scale (8.0 b/w)"),
    "q4_k_m": Format(
        "q4_k_m", 4.85 / 8, "int8", "llama.cpp Q4_K_M: Q4_K + Q6_K mix, ~4.85 b/w for 7-8B models", dequant=True
    ),
    "q6_k": Format("q6_k", 6.5625 / 8, "int8", "llama.cpp Q6_K (6.5625 b/w)", dequant=True),
    "q8_0": Format("q8_0", 8.5 / 8, "int8", "llama.cpp Q8_0: 32 int8 + fp16 scale (8.5 b/w)", dequant=True),
}
_BITS = {"32": "fp32", "16": "fp16", "8": "int8", "4": "int4"}


def wider(a: str, b: str) -> str:
    """The wider (higher-precision) of two compute dtypes, in :data:`DTYPES` order."""
    return a if DTYPES.index(a) <= DTYPES.index(b) else b


@dataclass(frozen=True)
class Precision:
    """Formats of weights, activations and KV cache, e.g. ``Precision.parse("w4a16kv8")``."""

    weights: Format
    activations: Format
    kv: Format
    #: Token embedding and LM head (``None``: same as ``weights``); engines often keep them 16-bit.
    head: Format | None = None

    @property
    def head_format(self) -> Format:
        """Format of the token embedding / LM head weights."""
        return self.head or self.weights

    @property
    def name(self) -> str:
        w, a, k = self.weights.name, self.activations.name, self.kv.name
        text = w if w == a == k else f"w={w},a={a},kv={k}"
        if self.head is not None and self.head != self.weights:
            text += f",head={self.head.name}"
        return text

    @property
    def vector_bytes(self) -> float:
        """Bytes per element of the tensors vector ops read and write: max(activation bytes, 2)."""
        return max(self.activations.bytes, 2.0)

    @property
    def dequantise_bytes(self) -> float:
        """Bytes per weight a separate weight-dequantise kernel moves each pass (``Format.staged``; 0 for none)."""
        return float(self.weights.staged)

    @property
    def quantise_bytes(self) -> float:
        """Bytes per element an activation-quantise kernel moves before each GEMM whose activations are narrower
        than 16 bits (FP8, NVFP4, INT8: read the 16-bit tensor, write the quantised one, scales included); 0 for
        16-bit or wider activations, which the GEMM reads as they are."""
        a = self.activations.bytes
        return self.vector_bytes + a if a < 2.0 else 0.0

    @property
    def bits(self) -> dict[str, float]:
        """``P_w``, ``P_a``, ``P_kv``: bits per element of the weights, activations and KV cache, scale overhead
        included (the precision-aware loss laws' variables)."""
        return {"P_w": 8.0 * self.weights.bytes, "P_a": 8.0 * self.activations.bytes, "P_kv": 8.0 * self.kv.bytes}

    @property
    def linear_dtype(self) -> str:
        """Compute dtype of the linear layers (wider of weights and activations)."""
        return wider(self.weights.dtype, self.activations.dtype)

    @property
    def linear_key(self) -> str:
        """The measured kernels' compute key of the linear layers: the weights' format ``key`` (``fp8_block``) where
        the layers run on that format's roof, else :attr:`linear_dtype`."""
        dt = self.linear_dtype
        return self.weights.key if self.weights.key and self.weights.dtype == dt else dt

    @property
    def attention_dtype(self) -> str:
        """Compute dtype of QKᵀ and scores·V (wider of activations and KV cache)."""
        return wider(self.activations.dtype, self.kv.dtype)

    @classmethod
    def parse(cls, text: str | Precision) -> Precision:
        """Parse ``fp16``, ``int8``, ``w4a16``, ``w4a16kv8``, ``wnvfp4afp8kvfp8`` or ``w=awq,a=bf16,kv=fp8,head=bf16``.

        A single format name applies to weights, activations and KV cache alike. In the compact
        ``wXaY[kvZ][hH]`` form X/Y/Z/H are bit widths (32, 16, 8, 4 -> fp32, fp16, int8, int4) or format
        names; KV defaults to the activation format, the embedding/LM head (``h``, ``head=``) to the weights'.
        """
        if isinstance(text, Precision):
            return text
        s = str(text).strip().lower()
        if s in FORMATS:
            f = FORMATS[s]
            return cls(f, f, f)
        names = "|".join(sorted(FORMATS, key=len, reverse=True))
        if "=" in s:
            parts = dict(p.split("=", 1) for p in s.split(",") if "=" in p)
            unknown = set(parts) - {"w", "a", "kv", "head"}
            if unknown:
                raise bad("precision", text, f"unknown part {sorted(unknown)[0]!r}; use w=, a=, kv=, head=")
            w, a = parts.get("w", "fp16"), parts.get("a", "fp16")
            k, h = parts.get("kv", a), parts.get("head")
        else:
            tok = rf"(\d+|{names})"
            m = re.fullmatch(rf"w{tok}a{tok}(?:kv{tok})?(?:h{tok})?", s)
            if not m:
                raise bad("precision", text, f"unknown precision; use one of {', '.join(FORMATS)} or e.g. w4a16kv8")
            w, a, k, h = m.group(1), m.group(2), m.group(3) or m.group(2), m.group(4)
        head = _fmt(h, text) if h is not None else None
        return cls(_fmt(w, text), _fmt(a, text), _fmt(k, text), head)

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "weights": self.weights.name,
            "activations": self.activations.name,
            "kv": self.kv.name,
            "head": self.head_format.name,
            "b_w": self.weights.bytes,
            "b_h": self.head_format.bytes,
            "b_a": self.activations.bytes,
            "b_kv": self.kv.bytes,
            "b_v": self.vector_bytes,
            "linear_dtype": self.linear_dtype,
            "attention_dtype": self.attention_dtype,
        }


def _fmt(token: str, text: str) -> Format:
    token = _BITS.get(token, token)
    if token not in FORMATS:
        raise bad("precision", text, f"unknown format {token!r}; use one of {', '.join(FORMATS)}")
    return FORMATS[token]
