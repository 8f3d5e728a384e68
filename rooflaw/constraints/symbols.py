"""The shared sympy symbols every cost expression is written over.

Architecture symbols carry the names of :data:`rooflaw.arch.COLUMNS`; the paper's variables
(l, d, r, rho, gqa, d_m) and the workload/precision/device constants have their own. Other
modules build the same symbols by name with ``sympy.Symbol(name, positive=True)`` (sympy symbols
are equal when name and assumptions are).
"""

from __future__ import annotations

import sympy as sp

from ..arch.architecture import COLUMNS, STACK_COLUMNS


def sym(name: str) -> sp.Symbol:
    """The shared positive symbol called ``name``."""
    return sp.Symbol(name, positive=True)


#: Architecture columns (booleans as 0/1 numbers).
ARCH = {name: sym(name) for name in COLUMNS}
#: Layer-stack columns (per-kind layer counts and kind parameters).
STACK = {name: sym(name) for name in STACK_COLUMNS}

# Workload: batch, prompt tokens, generated tokens; decode step index t (1..S_out).
B, S_in, S_out, t = sym("B"), sym("S_in"), sym("S_out"), sym("t")
# Tokens processed in one pass, query length per sequence, attended context length.
T, Sq, C = sym("T"), sym("Sq"), sym("C")
#: (query, key) pairs per sequence a fused (FlashAttention-style) kernel skips in this pass: prefill C·(C − 1)/2 (the
#: queries are the last Sq ≥ C positions of the context) less the extra pairs of the whole 128 × 128 blocks it computes
#: (:func:`.fused_prefill.masked_pairs`), decode 0; unfused computes them all.
Mk = sym("Mk")
# Bytes per element of weights, activations and KV cache (scales included), and of the tensors
# the vector ops (norms, softmax, activations, RoPE) read and write: they compute in ≥ 16 bits.
b_w, b_a, b_kv, b_v = sym("b_w"), sym("b_a"), sym("b_kv"), sym("b_v")
# Bytes per element of the token embedding and LM head (often kept in 16 bits when weights are 4-bit).
b_h = sym("b_h")
# Bytes per element the activation-quantise kernel before a GEMM with quantised activations (FP8, NVFP4, INT8)
# moves: it reads the 16-bit tensor and writes the GEMM's format (b_v + b_a); 0 for 16-bit or wider activations.
b_q = sym("b_q")
# Bytes per weight a separate weight-dequantise kernel moves each pass before its GEMM (llama.cpp's F16 cuBLAS
# path for GGUF prompts: read the quantised block, write F16), 0 when the GEMM reads the weights as stored.
b_d = sym("b_d")
# Device: compute roof (FLOP/s) and memory bandwidth (bytes/s) used by the theory-mode formulas.
pi, beta = sym("pi"), sym("beta")
# The paper's variables (§2.1, §5).
l, d, r, rho, gqa, d_m = (sym(n) for n in ("l", "d", "r", "rho", "gqa", "d_m"))

# 1 when attention scores are materialised in memory (unfused kernels, the paper's Tables 10-12),
# 0 for a fused (FlashAttention-style) kernel that keeps them on chip.
unfused = sym("unfused")

WORKLOAD = (B, S_in, S_out, unfused)
PRECISION = (b_w, b_a, b_kv, b_v, b_h, b_q, b_d)
