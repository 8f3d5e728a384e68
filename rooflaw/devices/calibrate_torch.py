"""The PyTorch half of :mod:`.calibrate`: eager kernel overhead, GEMM and GEMV rates at a thread count.

Each function returns 0 (or ``inf`` for a time) without torch installed. See :mod:`.calibrate`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

__all__ = ["CLOCKS", "eager_kernels", "now", "torch_threads_now", "use_clock"]


#: The clock every calibration (and ``validate``) timing reads: ``wall`` (``time.perf_counter``, the default: the
#: latency a user sees) or ``cpu`` (``time.thread_time``: the calling thread's CPU time, which time spent
#: descheduled by co-tenants does not count; meaningful with one torch thread, whose work runs on that thread).
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.thread_time}
_clock: list[Callable[[], float]] = [time.perf_counter]


def now() -> float:
    """Seconds on the current calibration clock (see :data:`CLOCKS` and :func:`use_clock`)."""
    return _clock[0]()


def use_clock(name: str):
    """Context: calibration timings read clock ``name`` (``wall`` or ``cpu``), restored on exit."""
    import contextlib

    from ..errors import bad

    if name not in CLOCKS:
        raise bad("clock", name, f"must be one of {', '.join(CLOCKS)}")

    @contextlib.contextmanager
    def ctx():
        before = _clock[0]
        _clock[0] = CLOCKS[name]
        try:
            yield
        finally:
            _clock[0] = before

    return ctx()


def _time_best(fn: Callable[[], object], budget: float, min_reps: int = 3, max_reps: int = 1000) -> float:
    """Best time of ``fn`` (on the calibration clock) over repetitions until ``budget`` wall seconds are spent
    (after a warm-up)."""
    fn()
    best = math.inf
    start = time.perf_counter()
    reps = 0
    while reps < max_reps and (reps < min_reps or time.perf_counter() - start < budget):
        t0 = now()
        fn()
        best = min(best, now() - t0)
        reps += 1
    return max(best, 1e-9)


def torch_threads(threads: int | None):
    """Context: torch's intra-op thread count set to ``threads`` (None: leave it), restored on exit."""
    import contextlib

    @contextlib.contextmanager
    def ctx():
        try:
            import torch
        except ImportError:
            yield
            return
        before = torch.get_num_threads()
        if threads is not None:
            torch.set_num_threads(threads)
        try:
            yield
        finally:
            torch.set_num_threads(before)

    return ctx()


def torch_threads_now() -> int:
    """torch's current intra-op thread count (0 without torch)."""
    try:
        import torch
    except ImportError:
        return 0
    return int(torch.get_num_threads())


#: The overhead probe: a decoder layer (d=256, GQA 4/2, FFN 512) whose 2.4 MB of fp32 weights exceed the
#: 1-2 MB L2 of a core, so that, as in a real decode step, each layer's weights evict the previous layer's
#: code and data; its one-token step is mostly dispatch (≈ 38 kernels vs 2.4 MB of GEMV reads).
PROBE_ARCH = {"d_model": 256, "heads": 4, "kv_heads": 2, "head_dim": 64, "ffn": 512, "experts": 1, "top_k": 1,
          "vocab": 64}  # fmt: skip


def eager_kernels(model, step) -> int:
    """Aten kernels (views excluded) one call of ``step(model)`` dispatches, counted with a ``TorchDispatchMode``."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if not func.is_view:
                Count.n += 1
            return func(*args, **(kwargs or {}))

    with Count():
        step(model)
    return Count.n


#: Depths of the two probe decoders whose time difference prices one layer.
PROBE_DEPTHS = (1, 5)


def probe_decoder(layers: int):
    """(step, model): a ``layers``-deep fp32 probe decoder (:data:`PROBE_ARCH`) and its one-token decode step."""
    from types import SimpleNamespace

    import torch

    from .eager_decoder import build

    model = build(SimpleNamespace(layers=layers, **PROBE_ARCH), torch.float32)
    caches = [(torch.zeros(1, 2, 32, 64), torch.zeros(1, 2, 32, 64)) for _ in range(layers)]
    tok = torch.zeros(1, 1, dtype=torch.long)
    return (lambda m: m(tok, caches, 8)), model


def _op_overhead(budget: float, stream_bandwidth: float) -> float:
    """Seconds per eager aten kernel launch (dispatch, Python, allocator, cold caches): the extra time of one
    more layer of the probe decoder (:data:`PROBE_ARCH`, one decode token, :mod:`.eager_decoder`) less its weight
    reads at ``stream_bandwidth`` (the GEMV rate, bytes/s), divided by the aten kernels that layer launches
    (counted). Each depth's best time over interleaved repeats. 0 without torch."""
    try:
        import torch
    except ImportError:
        return 0.0
    lo, hi = PROBE_DEPTHS
    with torch.inference_mode():
        (step_lo, m_lo), (step_hi, m_hi) = probe_decoder(lo), probe_decoder(hi)
        kernels = (eager_kernels(m_hi, step_hi) - eager_kernels(m_lo, step_lo)) / (hi - lo)
        best_lo = best_hi = math.inf
        start, n = time.perf_counter(), 0
        while n < 7 or (time.perf_counter() - start < budget and n < 200):
            t0 = now()
            step_lo(m_lo)
            t1 = now()
            step_hi(m_hi)
            t2 = now()
            best_lo, best_hi = min(best_lo, t1 - t0), min(best_hi, t2 - t1)
            n += 1
    return overhead_from(best_lo, best_hi, hi - lo, kernels, stream_bandwidth)


#: fp32 weight bytes of one probe layer: q, o, k, v, gate/up/down, two norms
PROBE_LAYER_BYTES = 4.0 * (
    2 * PROBE_ARCH["d_model"] ** 2 + 2 * PROBE_ARCH["d_model"] * PROBE_ARCH["kv_heads"] * PROBE_ARCH["head_dim"]
    + 3 * PROBE_ARCH["d_model"] * PROBE_ARCH["ffn"] + 2 * PROBE_ARCH["d_model"]
)  # fmt: skip


def overhead_from(best_lo: float, best_hi: float, layers: int, kernels: float, stream_bandwidth: float) -> float:
    """Seconds per eager kernel: the probe's extra time for ``layers`` more layers (best times), less their weight
    reads at ``stream_bandwidth`` (bytes/s), over the ``kernels`` each layer launches (at least 1 ns)."""
    per_layer = (best_hi - best_lo) / layers
    reads = PROBE_LAYER_BYTES / stream_bandwidth if stream_bandwidth > 0 else 0.0
    return max((per_layer - reads) / kernels, 1e-9)


#: The torch rates run ``F.linear`` over 8 separate 4096×1024 weights (128 MB in fp32, 64 MB in bf16:
#: above the caches, so each call reads its weight from DRAM as a forward pass does), with M rows:
#: a 128-token prompt chunk for the GEMM roofs, one token for the decode (GEMV) bandwidth.
_WEIGHTS, PROBE_N, PROBE_K, GEMM_M = 8, 4096, 1024, 128


_last_weights: list = [None, None]  # (dtype name, K), the weights -- emptied by :func:`release_weights`


def release_weights() -> None:
    """Free the cached cold weights (128 MB) once a calibration is done."""
    _last_weights[:] = [None, None]


def _torch_linear_time(dtype_name: str, rows: int, budget: float, k: int = PROBE_K) -> float:
    """Best seconds of one ``F.linear`` of ``rows`` tokens through a cold 4096×``k`` weight (``inf`` without torch)."""
    try:
        import torch
    except ImportError:
        return math.inf
    dtype = getattr(torch, dtype_name)
    if _last_weights[0] != (dtype_name, k):  # the last set is kept: M sweeps on one set build it once
        _last_weights[:] = [(dtype_name, k), [torch.randn(PROBE_N, k).to(dtype) for _ in range(_WEIGHTS)]]
    ws = _last_weights[1]
    x = torch.randn(rows, k).to(dtype)

    def sweep() -> None:
        for w in ws:
            torch.nn.functional.linear(x, w)

    with torch.inference_mode():
        return _time_best(sweep, budget, min_reps=3) / _WEIGHTS


def _torch_gemm(dtype_name: str, budget: float) -> float:
    """FLOP/s of ``F.linear`` (the kernel a decoder's projections run) on a 128-token chunk, 0 without torch."""
    return 2.0 * GEMM_M * PROBE_N * PROBE_K / _torch_linear_time(dtype_name, GEMM_M, budget)


def _half_rows(budget: float, rate_128: float) -> float:
    """Rows at which fp32 ``F.linear`` on the cold weights runs at half its large-M rate: r(M) = R·M/(M + h)
    fitted (least squares in 1/r against 1/M) to M = 16, 32 and the 128-row rate ``rate_128``; 0 when the rate
    does not fall with M (or without torch)."""
    if not rate_128 or not math.isfinite(rate_128):
        return 0.0
    return fit_half_rows({m: _torch_linear_time("float32", m, budget / 2) for m in HALF_ROWS_M}, rate_128)


#: Row counts (besides 128) the GEMM rate curve is measured at.
HALF_ROWS_M = (16, 32)


def fit_half_rows(times: dict[int, float], rate_128: float) -> float:
    """h of r(M) = R·M/(M + h), least squares in 1/r against 1/M over the best one-weight times at ``times``'
    row counts and the 128-row rate; 0 when the rate does not fall with M or a time is missing."""
    if not rate_128 or not math.isfinite(rate_128) or not all(math.isfinite(t) for t in times.values()):
        return 0.0
    ms, inv = [float(GEMM_M)], [1.0 / rate_128]
    for m, t in times.items():
        ms.append(float(m))
        inv.append(t / (2.0 * m * PROBE_N * PROBE_K))
    b, a = np.polyfit(1.0 / np.asarray(ms), np.asarray(inv), 1)  # 1/r = a + b/M, a = 1/R, b = h/R
    return float(b / a) if a > 0 and b > 0 else 0.0


#: bytes per element of the dtypes the GEMV probes run
_BYTES = {"float32": 4.0, "bfloat16": 2.0, "float16": 2.0}


def _gemv_bandwidth(budget: float, dtype_name: str = "float32") -> float:
    """Weight bytes/s of a one-token ``F.linear`` (a decode step's GEMV) on cold weights of ``dtype_name``
    (``bfloat16``: the 16-bit GEMV roof; a CPU without native bf16 converts every weight), 0 without torch."""
    return _BYTES[dtype_name] * PROBE_N * PROBE_K / _torch_linear_time(dtype_name, 1, budget)


def _gemv_half_k(budget: float, bandwidth_1024: float, dtype_name: str = "float32") -> float:
    """Inner dimension K at which a one-token GEMV streams its weights at half its long-row rate: each
    output row is a dot product with a fixed cost, so bytes/s ∝ K/(K + k½); from the cold 4096×512 GEMV's rate
    and ``bandwidth_1024`` (the 4096×1024 one), both in ``dtype_name``. 0 when the rate does not rise with K (or
    without torch)."""
    return fit_half_k(bandwidth_1024, _torch_linear_time(dtype_name, 1, budget, k=PROBE_K // 2), dtype_name)


def fit_half_k(bandwidth_1024: float, t_512: float, dtype_name: str = "float32") -> float:
    """k½ of bytes/s ∝ K/(K + k½) from the K = 1024 bandwidth and the best time of one cold 4096×512 GEMV."""
    if not (bandwidth_1024 > 0 and math.isfinite(t_512)):
        return 0.0
    t = t_512
    q = bandwidth_1024 / (_BYTES[dtype_name] * PROBE_N * (PROBE_K // 2) / t)  # = 2 (512 + k½) / (1024 + k½)
    return float(PROBE_K * (q - 1.0) / (2.0 - q)) if 1.0 < q < 2.0 else 0.0


def _gemm16(budget: float) -> float:
    """bf16 GEMM FLOP/s with torch (0 without torch); see :func:`_torch_gemm`."""
    return _torch_gemm("bfloat16", budget)
