"""The softmax's exponentials on the special-function units (SFUs) of a GPU whose SFUs are faster than its family's.

An attention kernel's softmax (:func:`.attention.seconds`: ``B·H·P · attention_softmax / peak_fp32``, fitted per
architecture) is one base-2 exponential (``MUFU.EX2``) per (query, key) pair plus a few fp32 vector operations (max,
scale, sum, convert). The SFUs return :data:`EX2_PER_CLK_SM` exponentials per SM per clock on every architecture
fitted here (the CUDA throughput table's 16 from Volta to Blackwell; H100's "3.9 TFLOPS of special functions" in the
FlashAttention-3 paper = 132 SMs x 16 x 1.83 GHz), so the fitted softmax holds the exponentials at that rate:

    t_exp = B·H·P / (SMs · clock · 16),   e = min(1, t_exp / t_softmax)   (the share of the softmax they take)

A device whose SFUs return ``r`` per SM per clock (its ``ex2_per_clk_sm``; Blackwell Ultra doubles them: 32, NVIDIA's
"10.7 TeraExponentials/s" for B300/GB300 against 5 for B200/GB200) runs the exponentials ``r / 16`` times as fast and
the rest of the softmax as its family does:

    t_softmax' = t_softmax · ((1 - e) + e · 16 / r)

Nothing is fitted: every measured GPU has ``r = 16`` (factor 1), and ``e`` comes from the curves and the datasheet.
"""

from __future__ import annotations

from ...devices.device import Device

#: base-2 exponentials per SM per clock on the architectures the curves are fitted on (Volta to Blackwell)
EX2_PER_CLK_SM = 16.0


def softmax_scale(attention_softmax: float, device: Device) -> float:
    """The factor on the fitted softmax time (``attention_softmax`` FLOP-equivalents per pair on ``device``'s fp32
    roof) for ``device``'s exponential rate (module docstring): 1 unless ``device.ex2_per_clk_sm`` differs from 16
    and the device has an SM count and a clock."""
    r = device.ex2_per_clk_sm
    if r is None or r == EX2_PER_CLK_SM or not device.sm_count or not device.clock or attention_softmax <= 0:
        return 1.0
    peak32 = device.roof("fp32")[1]
    # seconds per pair: the exponential at 16 per SM-clock over the fitted softmax's time
    e = min(1.0, (peak32 / attention_softmax) / (float(device.sm_count) * float(device.clock) * EX2_PER_CLK_SM))
    return (1.0 - e) + e * EX2_PER_CLK_SM / float(r)


__all__ = ["EX2_PER_CLK_SM", "softmax_scale"]
