"""Kernels that issue Ampere's warp-level ``mma.sync`` on a GPU whose tensor peak needs another instruction.

Some kernels issue ``mma.sync.m16n8k16`` on every architecture: vLLM's Marlin MoE (``marlin_moe_wna16``, the
dequantising W4A16 / MXFP4 kernels) and llm-awq's INT4 GEMMs that TensorRT Edge-LLM runs for AWQ/GPTQ prefill. Where
the dense 16-bit datasheet peak is that instruction's (Ampere, Ada) they can reach the peak; where the peak needs
Hopper's ``wgmma`` or Blackwell's ``tcgen05.mma`` they cannot: their rate is the warp-level one,
``WARP_FLOP_CLK_SM`` FLOP per SM per clock (fp16 in, fp32 accumulate), taken at Hopper's (two thirds of H100's 4,096
FLOP/clk/SM ``wgmma`` peak, 989 TFLOPS = 132 x 1.83 GHz x 4096; no published Blackwell figure). So such a kernel's
compute runs at

    share = min(1, WARP_FLOP_CLK_SM / (peak_fp16 / (SMs · clock)))

of the rate the curves give the device (B200: 2,731 / (2,250 TFLOPS / (148 x 1.98 GHz)) = 0.356; H100 0.72; Jetson
Thor 2,731 / 8,240 = 0.331) -- from the device's datasheet and architecture, so an unseen GPU gets its own share.
sm_120 Blackwell (RTX 50, RTX PRO) has no ``tcgen05``: its datasheet peaks are ``mma.sync``'s own (CUTLASS's
``SM120_16x8x32_TN``: ``mma.sync.aligned.kind::f8f6f4.m16n8k32``; at most 1,076 FLOP/clk/SM at 16 bits), so its
share is 1 whether its device file names ``kernel_architecture = "ada"`` or not.
"""

from __future__ import annotations

from ...devices.device import Device

#: kernel libraries (:data:`.moe.KERNEL_PATHS` names) whose grouped GEMMs are warp-level ``mma.sync`` kernels
MMA_SYNC_PATHS = ("marlin",)
#: architectures whose dense tensor peak needs an instruction ``mma.sync`` kernels do not issue
WIDE_MMA = ("hopper", "blackwell")
#: warp-level ``mma.sync`` m16n8k16 rate (FLOP per SM per clock) there: Hopper's, 2/3 x 4096
WARP_FLOP_CLK_SM = 2.0 / 3.0 * 4096.0


def warp_mma_share(device: Device) -> float:
    """The factor on an ``mma.sync`` kernel's compute rate on ``device`` (module docstring): 1 but on a device whose
    kernels' architecture (``Device.curves_architecture``) is :data:`WIDE_MMA`, with an SM count and a clock."""
    if device.curves_architecture not in WIDE_MMA or not device.sm_count or not device.clock:
        return 1.0
    per_sm_clk = device.roof("fp16")[1] / (float(device.sm_count) * float(device.clock))
    return min(1.0, WARP_FLOP_CLK_SM / per_sm_clk)


def warp_share(device: Device, path: str) -> float:
    """:func:`warp_mma_share` for an ``mma.sync`` MoE kernel library ``path`` (:data:`MMA_SYNC_PATHS`), else 1."""
    return warp_mma_share(device) if path in MMA_SYNC_PATHS else 1.0


__all__ = ["MMA_SYNC_PATHS", "WARP_FLOP_CLK_SM", "WIDE_MMA", "warp_mma_share", "warp_share"]
