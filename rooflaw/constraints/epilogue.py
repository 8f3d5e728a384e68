"""The arithmetic after a compiled model's ``fast`` function, shared by the numpy backend (:mod:`.roofline`, on
arrays) and the numba kernels (:mod:`.backend_numba`, on its tracer): the engine's per-pass overhead, the exact
decode-step sums of the varying segments, and memory and energy from the phase times and totals. Plain
arithmetic only (numbers, arrays, ``np.where``/``np.clip`` and ufuncs), so the kernels record it instead of a copy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from . import assembly as A
from .assembly import sum_max_affine
from .engines import experts_touched


def phase_overheads(r: A.Rates, cols: Mapping[str, Any], batch: Any, input_tokens: Any) -> tuple[Any, Any]:
    """(prefill, one decode step) engine overhead of candidate columns ``cols`` (``layers, moe, experts, top_k``):
    :func:`device_rates.engine_overhead` with the experts touched by B·S_in and by B tokens (scalars or arrays)."""
    E, K = cols["experts"], cols["top_k"]

    def num(v: Any) -> Any:  # a scalar as a Python float (numpy's scalar-power path), else a float array
        if getattr(v, "__traced__", False):  # the numba tracer (constraints.numba_trace): passed through
            return v
        a = np.asarray(v, dtype=np.float64)
        return float(a) if a.ndim == 0 else a

    pre = A.engine_overhead(r, cols["layers"], cols["moe"], experts_touched(E, K, num(batch) * num(input_tokens)))
    dec = A.engine_overhead(r, cols["layers"], cols["moe"], experts_touched(E, K, num(batch)))
    return pre, dec


def with_overhead(overlap: bool, roofline_s: Any, overhead_s: Any) -> Any:
    """Seconds of a phase from its roofline time and its engine overhead: their sum, or, when the host launches
    while an accelerator runs (``Applied.overlap``), the longer of the two (numbers, arrays, the numba tracer)."""
    if getattr(overlap, "__traced__", False):  # the numba kernel takes the flag at run time: both, selected
        return np.where(overlap, np.maximum(roofline_s, overhead_s), roofline_s + overhead_s)
    return np.maximum(roofline_s, overhead_s) if overlap else roofline_s + overhead_s


def fast_outputs(vals: list, n_varying: int, overlap: Any, extra: Any, extra_dec: Any, S_out: Any,
                 memory: tuple[str, ...], coef: A.EnergyCoefficients | None) -> dict[str, Any]:  # fmt: skip
    """The outputs from the values of a compiled model's ``fast`` function: the decode-step sums of its
    ``n_varying`` varying segments, the engine overhead per pass (``extra``, ``extra_dec``: prefill, one decode
    step), memory and energy. Plain arithmetic: numpy arrays here, the numba kernels' tracer there."""
    pre_t, dec_t, k = vals[0], vals[1], 2
    for _ in range(n_varying):
        cnt, steps, a0, a1, b0, b1 = vals[k : k + 6]
        dec_t = dec_t + cnt * sum_max_affine(a0, a1, b0, b1, steps)[0]
        k += 6
    pre_t = with_overhead(overlap, pre_t, extra)
    dec_t = with_overhead(overlap, dec_t, S_out * extra_dec)
    return outputs(pre_t, dec_t, vals[k:], S_out, memory, coef)


def outputs(pre_t: Any, dec_t: Any, totals: list, S_out: Any, memory: tuple[str, ...],
            coef: A.EnergyCoefficients | None) -> dict[str, Any]:  # fmt: skip
    """Every output but ``fits_in_memory`` from phase times and the compiled model's totals (plain arithmetic;
    one value may serve two outputs)."""
    t = dict(zip(A.TOTAL_KEYS, totals, strict=True))
    mem = sum(t[m] for m in memory)
    total = pre_t + dec_t
    flops = {c: t[f"fpre_{c}"] + t[f"fdec_{c}"] for c in A.ROOF_CLASSES}
    return dict(
        prefill_s=pre_t, decode_s=dec_t, ttft_s=pre_t, tpot_s=dec_t / S_out, total_s=total,
        prefill_flops=t["fpre_linear"] + t["fpre_attention"] + t["fpre_vector"],
        decode_flops=t["fdec_linear"] + t["fdec_attention"] + t["fdec_vector"],
        prefill_bytes=t["bytes_pre"], decode_bytes=t["bytes_dec"], weight_bytes=t["weights"],
        kv_cache_bytes=t["kv"], activation_bytes=t["act"], memory_bytes=mem,
        energy_j=A.energy(coef, total, flops, t["bytes_pre"] + t["bytes_dec"]),
        params_total=t["params_total"], params_active=t["params_active"],
    )  # fmt: skip
