"""The MoE flows whose first grouped GEMM applies the gated activation itself: one kernel launch fewer.

TensorRT-LLM-gen's MoE runner (FlashInfer's ``trtllm_*_moe``, as vLLM hands the layer to it on Blackwell;
``csrc/trtllm_fused_moe_runner.cu``, ``MoE::Runner::run``) launches routing, ``PermuteGemm1`` (the first grouped GEMM,
which gathers its rows through the routing's permuted index and applies SwiGLU in its epilogue), ``Gemm2`` and
``finalize`` (the weighted scatter-reduce): four kernels where the other flows launch five (:data:`.moe.KERNELS`),
as it runs no activation kernel -- but for block-scaled DeepSeek FP8, whose cubins have no fused activation
(``activation::run``). The flows are named by the tables' ``kernel_source`` (:data:`FUSED_ACT`, :data:`UNFUSED_ACT`);
no figure is fitted, so a GPU the curves never saw runs the same flow at its own ``kernel_s`` (SM cycles).

Only the launch is dropped: the activation's bytes stay counted (the layer's element-wise bytes without the
activation's read and write, and without the gather's, fitted B200 worse in sample, 9.9 → 10.2 %; see
docs/kernels-moe-collectives.md, session 14).
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: ``kernel_source`` substrings of the flows whose first grouped GEMM applies the activation (TensorRT-LLM-gen's MoE)
FUSED_ACT = ("flashinfer_trtllm",)
#: ... but these, which run the activation as a kernel of its own: block-scaled DeepSeek FP8
#: (``vllm_fp8moe_flashinfer_trtllm_*``)
UNFUSED_ACT = ("fp8moe_flashinfer_trtllm",)


def fused_activation(kernel_source: Any) -> np.ndarray:
    """Whether each of ``kernel_source`` (strings, lower case) names a flow with the activation fused into GEMM1."""
    src = [str(s) for s in np.asarray(kernel_source, dtype=object).ravel()]
    return np.array([any(k in s for k in FUSED_ACT) and not any(k in s for k in UNFUSED_ACT) for s in src], bool)


def launches(kernels: int, fused: Any) -> Any:
    """Kernel launches of a layer: ``kernels``, one fewer where the activation is ``fused``."""
    return kernels - np.asarray(fused, dtype=float)


__all__ = ["FUSED_ACT", "UNFUSED_ACT", "fused_activation", "launches"]
