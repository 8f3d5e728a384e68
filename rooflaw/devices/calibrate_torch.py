"""The PyTorch half of :mod:`.calibrate`: eager kernel overhead, GEMM and GEMV rates at a thread count.

Each function returns 0 (or ``inf`` for a time) without torch installed. See :mod:`.calibrate`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

__all__ = ["eager_kernels", "torch_threads_now"]


def _time_best(fn: Callable[[], object], budget: float, min_reps: int = 3, max_reps: int = 1000) -> float:
    """Best wall time of ``fn`` over repetitions until ``budget`` seconds are spent (after a warm-up)."""
    fn()
    best = math.inf
    start = time.perf_counter()
    reps = 0
    while reps < max_reps and (reps < min_reps or time.perf_counter() - start < budget):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
        reps += 1
    return max(best, 1e-9)


def _torch_threads(threads: int | None):
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


#: A tiny decoder (d=16, one token): each layer's time is all dispatch overhead, no bytes or FLOPs to speak of.
_TINY = {"d_model": 16, "heads": 2, "kv_heads": 1, "head_dim": 8, "ffn": 32, "experts": 1, "top_k": 1, "vocab": 32}


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


def _op_overhead(budget: float) -> float:
    """Seconds per eager aten kernel launch (dispatch, Python, allocator): the extra wall time of one more
    layer of a tiny eager decoder (d=16, one decode token, :mod:`.eager_decoder`) divided by the aten
    kernels that layer launches; median of repeats. 0 without torch."""
    try:
        import torch
    except ImportError:
        return 0.0
    from types import SimpleNamespace

    from .eager_decoder import build

    def setup(layers: int):
        arch = SimpleNamespace(layers=layers, **_TINY)
        model = build(arch, torch.float32)
        caches = [(torch.zeros(1, 1, 32, 8), torch.zeros(1, 1, 32, 8)) for _ in range(layers)]
        tok = torch.zeros(1, 1, dtype=torch.long)
        return lambda m: m(tok, caches, 8), model

    lo, hi = 1, 5
    with torch.inference_mode():
        (step_lo, m_lo), (step_hi, m_hi) = setup(lo), setup(hi)
        kernels = (eager_kernels(m_hi, step_hi) - eager_kernels(m_lo, step_lo)) / (hi - lo)
        samples: list[float] = []
        start = time.perf_counter()
        while len(samples) < 7 or (time.perf_counter() - start < budget and len(samples) < 200):
            t0 = time.perf_counter()
            step_lo(m_lo)
            t1 = time.perf_counter()
            step_hi(m_hi)
            samples.append((time.perf_counter() - t1) - (t1 - t0))
    return max(float(np.median(samples)) / (hi - lo) / kernels, 1e-9)


#: The torch rates run ``F.linear`` over 8 separate 4096×1024 weights (128 MB in fp32, 64 MB in bf16:
#: above the caches, so each call reads its weight from DRAM as a forward pass does), with M rows:
#: a 128-token prompt chunk for the GEMM roofs, one token for the decode (GEMV) bandwidth.
_WEIGHTS, _N, _K, _M_GEMM = 8, 4096, 1024, 128


def _torch_linear_time(dtype_name: str, rows: int, budget: float) -> float:
    """Best seconds of one ``F.linear`` of ``rows`` tokens through a cold 4096×1024 weight (``inf`` without torch)."""
    try:
        import torch
    except ImportError:
        return math.inf
    dtype = getattr(torch, dtype_name)
    ws = [torch.randn(_N, _K).to(dtype) for _ in range(_WEIGHTS)]
    x = torch.randn(rows, _K).to(dtype)

    def sweep() -> None:
        for w in ws:
            torch.nn.functional.linear(x, w)

    with torch.inference_mode():
        return _time_best(sweep, budget, min_reps=3) / _WEIGHTS


def _torch_gemm(dtype_name: str, budget: float) -> float:
    """FLOP/s of ``F.linear`` (the kernel a decoder's projections run) on a 128-token chunk, 0 without torch."""
    return 2.0 * _M_GEMM * _N * _K / _torch_linear_time(dtype_name, _M_GEMM, budget)


def _gemv_bandwidth(budget: float) -> float:
    """Weight bytes/s of a one-token fp32 ``F.linear`` (a decode step's GEMV) on cold weights, 0 without torch."""
    return 4.0 * _N * _K / _torch_linear_time("float32", 1, budget)


def _gemm16(budget: float) -> float:
    """bf16 GEMM FLOP/s with torch (0 without torch); see :func:`_torch_gemm`."""
    return _torch_gemm("bfloat16", budget)
