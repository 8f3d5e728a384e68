"""Decode attention's L2 terms (``generation_attention``): the L2 rate in bytes per SM per SM-clock cycle, the rate a
working set resident in L2 streams at, and the L2-to-SM traffic of kernels whose CTAs re-read a KV head's K and V.

TensorRT-LLM's masked-MHA kernel runs one CTA per query head; where a KV head serves ``g`` > 32 query heads its
``g`` CTAs each read the head's K and V, the first from DRAM, the others from L2: the L2-to-SM traffic is ``g`` times
the DRAM bytes (XQA's ``ceil(g/16)`` CTAs per KV head likewise). With ``g = 64`` that traffic, not DRAM, sets the
time (H100, B = 1, d = 128, 64 query heads on one KV head, 32,768 cached tokens: 235 µs, 1.07 GB of L2 reads at 4.6
TB/s, against 5 µs for its 16.8 MB from DRAM). ``t_l2 = streams · stream_bytes / r_l2``, a floor under the DRAM
stream, with ``r_l2 = max(SMs · clock · decode_l2, DRAM's rate)`` (DRAM's bytes pass through the L2); a working set
that fits in the device's L2 streams at ``r_l2``. ``decode_l2`` is an architecture's figure (the L2's bytes per
SM-cycle), pooled in ``generic``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...devices.device import Device
from . import KernelCurves

#: the op whose kernels these terms price (MLA decode keeps the prefill's ``attention_l2``)
OP = "generation_attention"
#: the decode figures' starting value, lower and upper bound and typical scale in a fit (``fit._BOUNDS``' form); each
#: fit starts from these (from a default at a bound it stalls)
BOUNDS = {
    "decode_tile_s": (3e-6, 0.0, 1e-3, 1e-6),
    "decode_half_occupancy": (0.5, 0.0, 8.0, 0.1),
    "decode_blend": (2.0, 1.0, 30.0, 1.0),
    "decode_split": (2.0, 0.0, 16.0, 1.0),
    "decode_split_tokens": (256.0, 16.0, 8192.0, 100.0),
    "decode_mha_tile_s": (1.5e-6, 0.0, 1e-3, 1e-6),
    "decode_dim_share": (0.3, 0.0, 1.0, 0.1),
    "decode_window_tokens": (32.0, 0.0, 4096.0, 10.0),
    "decode_cta_share": (0.3, 0.0, 1.0, 0.1),
    "decode_l2": (20.0, 0.0, 200.0, 10.0),
}


def l2_rate(t: Any, device: Device, curves: KernelCurves) -> float:
    """Bytes/s of the device's L2 to its SMs at ``decode_l2`` bytes per SM-cycle (0 where not fitted)."""
    return float(t.sms) * float(device.clock or 0.0) * curves.decode_l2


def l2_terms(t: Any, device: Device, curves: KernelCurves, dram: float) -> tuple[np.ndarray, np.ndarray] | None:
    """``(gain, traffic_s)`` of decode rows ``t`` (after their window): the factor on a resident working set's DRAM
    rate ``dram`` (bytes/s; ``max(1, L2 rate / dram)``, else 1) and the seconds of the CTAs' L2-to-SM traffic
    (``streams · stream_bytes``) at the L2 rate; ``None`` where ``decode_l2`` is not fitted or ``t`` is not
    :data:`OP`'s."""
    rate = l2_rate(t, device, curves)
    if rate <= 0 or t.op != OP or t.stream_bytes is None:
        return None
    rate = max(rate, dram)  # DRAM's bytes pass through the L2: it is never the slower
    gain = np.where(t.resident, rate / dram, 1.0)
    return gain, t.streams * t.stream_bytes / rate
