"""Calibration as a session: every micro-benchmark set up once, then sampled in rounds.

Each timer (numpy GEMM, copy, sum, elementwise; torch ``F.linear`` at each shape and dtype; the two eager probe
decoders) takes one sample per round -- its mean time per call over calls back to back for its share of the
round's budget (tens of ms: as long as ``validate``'s samples of a prefill or a decode loop) -- and keeps its
**best** sample over the rounds. :func:`.calibrate.measure` runs one session in one go;
``rooflaw validate`` runs one round of it between each round of its own measurements (in a shuffled order), so
that calibration and measurement sample the same stretch of time -- the same frequency, co-tenants and cache
state -- and both keep their best. The figures (:class:`.measurements.Measurements`) are computed from the bests.
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from . import calibrate_torch as ct

if TYPE_CHECKING:
    from .measurements import Measurements

__all__ = ["Session"]

Progress = Callable[[str, float], None]

#: (dtype, K, rows) of every ``F.linear`` timer: the 128-row GEMM roofs (fp32, bf16), the fp32 rate curve in M,
#: the one-token GEMVs at K = 1024 and 512 in fp32 and bf16; each with its share of a round's budget.
_LINEAR = {
    ("float32", ct.PROBE_K, ct.GEMM_M): 0.10, ("float32", ct.PROBE_K, 16): 0.04, ("float32", ct.PROBE_K, 32): 0.04,
    ("float32", ct.PROBE_K, 1): 0.05, ("float32", ct.PROBE_K // 2, 1): 0.05,
    ("bfloat16", ct.PROBE_K, 1): 0.04, ("bfloat16", ct.PROBE_K // 2, 1): 0.04,
    ("bfloat16", ct.PROBE_K, ct.GEMM_M): 0.08,
}  # fmt: skip


def _mean_call(fn: Callable[[], object], seconds: float, last: float | None = None) -> tuple[float, float]:
    """(mean seconds per call on the calibration clock, mean wall seconds) of one sample: ``fn`` called back to
    back for about ``seconds`` of wall time (at least once) -- a sample as long as ``validate``'s, so that best of
    the rounds means the same on both sides. ``last``: the wall time per call of the previous sample, which sizes
    this one (``None``: a first, untimed warm-up call sizes it)."""
    if last is None:
        t0 = time.perf_counter()
        fn()
        last = time.perf_counter() - t0
    n = max(1, int(seconds / max(last, 1e-9)))
    c0, t0 = ct.now(), time.perf_counter()
    for _ in range(n):
        fn()
    return max((ct.now() - c0) / n, 1e-12), (time.perf_counter() - t0) / n


@dataclass
class _TorchSetup:
    """What the torch timers reuse every round."""

    weights: dict[tuple[str, int], list[Any]]  #: cold weight copies per (dtype, K), one list per timer
    probe: tuple[Any, Any, Any, Any]  #: (step, model) of the shallow then the deep probe decoder
    kernels: float  #: eager kernels per probe layer


class Session:
    """Calibration timers of this machine with their best times so far (seconds, on the calibration clock).

    ``threads``: torch intra-op threads while sampling (``None``: leave torch's setting). Holds ~290 MB of cold
    weights and a 2 × 256 MB copy array (at most 1/16 of the memory) until dropped.
    """

    def __init__(self, capacity: float, threads: int | None = 1, gemm_budget: float = 0.5) -> None:
        self.capacity, self.threads = capacity, threads
        self.best: dict[object, float] = {}
        self.wall: dict[object, float] = {}  # wall seconds per call of each timer's last sample (sizes the next)
        self.rounds = 0
        rng = np.random.default_rng(0)
        self.n = self._gemm_size(rng, gemm_budget)
        self.a = rng.standard_normal((self.n, self.n), dtype=np.float32)
        self.b = rng.standard_normal((self.n, self.n), dtype=np.float32)
        self.c = np.empty((self.n, self.n), dtype=np.float32)
        nbytes = int(min(256e6, capacity / 16))
        self.src = np.ones(max(nbytes // 4, 1 << 20), dtype=np.float32)
        self.dst = np.empty_like(self.src)
        self.va, self.vb = np.full(1 << 17, 1.0001, dtype=np.float32), np.full(1 << 17, 0.9999, dtype=np.float32)
        self.vc = np.empty_like(self.va)
        self.torch = self._torch_setup()

    @staticmethod
    def _gemm_size(rng: np.random.Generator, budget: float) -> int:
        """The numpy GEMM size: doubled from 256 until one call takes budget/40 (at most 4096)."""
        n = 256
        while n < 4096:
            a = rng.standard_normal((n, n), dtype=np.float32)
            if ct._time_best(functools.partial(np.matmul, a, a), budget / 8, min_reps=2) > budget / 40:
                break
            n *= 2
        return n

    def _torch_setup(self) -> _TorchSetup | None:
        try:
            import torch
        except ImportError:
            return None
        with ct.torch_threads(self.threads):
            torch.manual_seed(0)
            full = [torch.empty(ct.PROBE_N, ct.PROBE_K).uniform_(-1.0, 1.0) for _ in range(ct._WEIGHTS)]
            # separate copies per (dtype, K): each timer streams its own cold weights
            weights: dict[tuple[str, int], list[Any]] = {}
            for dtype, k, _ in _LINEAR:
                if (dtype, k) not in weights:
                    weights[(dtype, k)] = [w[:, :k].to(getattr(torch, dtype), copy=True).contiguous() for w in full]
            lo, hi = ct.PROBE_DEPTHS
            with torch.inference_mode():
                (s_lo, m_lo), (s_hi, m_hi) = ct.probe_decoder(lo), ct.probe_decoder(hi)
                kernels = (ct.eager_kernels(m_hi, s_hi) - ct.eager_kernels(m_lo, s_lo)) / (hi - lo)
        return _TorchSetup(weights, (s_lo, m_lo, s_hi, m_hi), kernels)

    def _keep(self, key: object, t: float) -> None:
        self.best[key] = min(self.best.get(key, math.inf), t)

    def _sample(self, key: object, fn: Callable[[], object], seconds: float) -> None:
        """One sample of timer ``key`` (see :func:`_mean_call`), kept if it is the best so far."""
        t, self.wall[key] = _mean_call(fn, seconds, self.wall.get(key))
        self._keep(key, t)

    def sample(self, seconds: float, progress: Progress | None = None) -> None:
        """One round: one sample of every timer, for its share of ``seconds`` (wall), each keeping its best."""
        say = progress or (lambda step, frac: None)
        say("fp32 GEMM (numpy)", 0.0)
        self._sample("gemm", lambda: np.matmul(self.a, self.b, out=self.c), 0.05 * seconds)
        say("memory bandwidth", 0.05)
        self._sample("copy", lambda: np.copyto(self.dst, self.src), 0.04 * seconds)
        self._sample("sum", lambda: self.src.sum(), 0.03 * seconds)
        say("vector rate", 0.12)

        def vector() -> None:
            for _ in range(8):
                np.multiply(self.va, self.vb, out=self.vc)

        self._sample("vector", vector, 0.08 * seconds)
        if self.torch is not None:
            with ct.torch_threads(self.threads):
                self._sample_torch(seconds, say)
        self.rounds += 1
        say("done", 1.0)

    def _sample_torch(self, seconds: float, say: Progress) -> None:
        import torch

        assert self.torch is not None  # sample() calls this only with torch set up
        weights = self.torch.weights
        with torch.inference_mode():
            for i, ((dtype, k, rows), share) in enumerate(_LINEAR.items()):
                say(f"F.linear {dtype} K={k} rows={rows}", 0.2 + 0.44 * i / len(_LINEAR))
                ws, x = weights[(dtype, k)], torch.randn(rows, k).to(getattr(torch, dtype))
                nxt = itertools.cycle(ws)  # one call per weight in turn: each read cold (8 weights > the caches)

                def linear(x: Any = x, nxt: Iterator[Any] = nxt) -> object:
                    return torch.nn.functional.linear(x, next(nxt))

                self._sample((dtype, k, rows), linear, share * seconds)
            say("per-op overhead", 0.64)
            s_lo, m_lo, s_hi, m_hi = self.torch.probe
            s_lo(m_lo), s_hi(m_hi)  # warm-up
            start, n, lo, hi = time.perf_counter(), 0, 0.0, 0.0
            # the largest share: a difference of two times, and what an overhead-bound decode step rests on
            while n < 3 or time.perf_counter() - start < 0.36 * seconds:  # alternating depths, one sample
                t0 = ct.now()
                s_lo(m_lo)
                t1 = ct.now()
                s_hi(m_hi)
                lo, hi, n = lo + t1 - t0, hi + ct.now() - t1, n + 1
            self._keep("probe_lo", lo / n)
            self._keep("probe_hi", hi / n)

    def measurements(self, clock: str = "wall") -> Measurements:
        """The figures (:class:`.measurements.Measurements`) from the best times of every round so far."""
        from .measurements import Measurements

        b = self.best
        copy_bw, read_bw = 2.0 * self.src.nbytes / b["copy"], self.src.nbytes / b["sum"]
        torch_part: dict[str, float] = {}
        if self.torch is not None:

            def lin(dtype: str, k: int, rows: int) -> float:
                return b[(dtype, k, rows)]

            flops128 = 2.0 * ct.GEMM_M * ct.PROBE_N * ct.PROBE_K
            tgemm = flops128 / lin("float32", ct.PROBE_K, ct.GEMM_M)
            gemv = 4.0 * ct.PROBE_N * ct.PROBE_K / lin("float32", ct.PROBE_K, 1)
            gemv16 = 2.0 * ct.PROBE_N * ct.PROBE_K / lin("bfloat16", ct.PROBE_K, 1)
            lo, hi = ct.PROBE_DEPTHS
            torch_part = dict(
                torch_gemm_flops=tgemm,
                gemm16_flops=flops128 / lin("bfloat16", ct.PROBE_K, ct.GEMM_M),
                gemm_half_rows=ct.fit_half_rows({m: lin("float32", ct.PROBE_K, m) for m in ct.HALF_ROWS_M}, tgemm),
                gemv_bandwidth=gemv,
                gemv_half_k=ct.fit_half_k(gemv, lin("float32", ct.PROBE_K // 2, 1)),
                gemv16_bandwidth=gemv16,
                gemv16_half_k=ct.fit_half_k(gemv16, lin("bfloat16", ct.PROBE_K // 2, 1), "bfloat16"),
                op_overhead=ct.overhead_from(b["probe_lo"], b["probe_hi"], hi - lo, self.torch.kernels, gemv),
            )
        return Measurements(
            gemm_flops=2.0 * self.n**3 / b["gemm"],
            gemm_n=self.n,
            memory_bandwidth=max(copy_bw, read_bw),
            copy_bandwidth=copy_bw,
            read_bandwidth=read_bw,
            array_bytes=int(self.src.nbytes),
            vector_flops=8.0 * self.va.size / b["vector"],
            memory_capacity=self.capacity,
            threads=os.cpu_count() or 1,
            clock=clock,
            torch_threads=self._threads_used() if self.torch is not None else 0,
            **torch_part,
        )

    def _threads_used(self) -> int:
        with ct.torch_threads(self.threads):
            return ct.torch_threads_now()
