"""Marlin's MoE kernels on a GPU whose tensor peak needs another instruction: the warp-level ``mma.sync`` rate.

vLLM's Marlin MoE (``marlin_moe_wna16``, the dequantising W4A16 / MXFP4 kernels) issues Ampere's warp-level
``mma.sync.m16n8k16`` on every architecture. Where the dense 16-bit datasheet peak is that instruction's (Ampere,
Ada) it can reach the peak; where the peak needs Hopper's ``wgmma`` or Blackwell's ``tcgen05.mma`` it cannot: its
rate is the warp-level one, ``WARP_FLOP_CLK_SM`` FLOP per SM per clock (fp16 in, fp32 accumulate), taken at
Hopper's (two thirds of H100's 4,096 FLOP/clk/SM ``wgmma`` peak, 989 TFLOPS = 132 x 1.83 GHz x 4096; no published
Blackwell figure, the same assumption as :data:`.curves_applied.WARP_MMA_SHARE`). So a Marlin layer's compute runs at

    share = min(1, WARP_FLOP_CLK_SM / (peak_fp16 / (SMs · clock)))

of the rate the curves give the device (B200: 2,731 / (2,250 TFLOPS / (148 x 1.98 GHz)) = 0.356; H100 0.72) -- from
the device's datasheet and architecture, so a held-out GPU's Marlin layers are priced at its own share.
"""

from __future__ import annotations

from ...devices.device import Device

#: kernel libraries (:data:`.moe.KERNEL_PATHS` names) whose grouped GEMMs are warp-level ``mma.sync`` kernels
MMA_SYNC_PATHS = ("marlin",)
#: architectures whose dense tensor peak needs an instruction ``mma.sync`` kernels do not issue
WIDE_MMA = ("hopper", "blackwell")
#: warp-level ``mma.sync`` m16n8k16 rate (FLOP per SM per clock) there: Hopper's, 2/3 x 4096
WARP_FLOP_CLK_SM = 2.0 / 3.0 * 4096.0


def warp_share(device: Device, path: str) -> float:
    """The factor on the compute rate of kernel library ``path`` on ``device`` (module docstring): 1 but for an
    ``mma.sync`` library on a :data:`WIDE_MMA` architecture with an SM count and a clock."""
    if path not in MMA_SYNC_PATHS or device.architecture not in WIDE_MMA or not device.sm_count or not device.clock:
        return 1.0
    per_sm_clk = device.roof("fp16")[1] / (float(device.sm_count) * float(device.clock))
    return min(1.0, WARP_FLOP_CLK_SM / per_sm_clk)


__all__ = ["MMA_SYNC_PATHS", "WARP_FLOP_CLK_SM", "WIDE_MMA", "warp_share"]
