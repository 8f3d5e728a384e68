"""``rooflaw validate``: measure real torch decoders on this machine and compare with predictions.

Builds eager PyTorch decoders from :class:`~rooflaw.Architecture` specs (RMSNorm, RoPE, GQA
attention with a KV cache, SwiGLU or a top-k MoE FFN, LM head), all of them first (weights written, one
warm-up pass each), then times, in rounds, a prefill of ``S_in`` tokens and ``S_out`` KV-cached decode
steps of each, in a new seeded shuffled order every round; on this machine (``device=None``) one round
of the calibration micro-benchmarks (:class:`~rooflaw.devices.calibrate_session.Session`) runs among the
configs of every round, so calibration and measurement sample the same stretch of time. Both sides keep
their best sample on the chosen clock (wall by default, or the thread's CPU time); the median and the
spread are reported. The same runs are predicted with :func:`rooflaw.evaluate` under engine
``torch-eager``. The device's figures come from micro-benchmarks only, never from these models. Only the
CPU path runs without CUDA; ``cuda`` is used when asked and available.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from .api import Architecture, Device, Workload, evaluate

#: name -> (spec, precision). Dense and MoE, MHA/GQA/MQA, narrow/wide, shallow/deep, fp32 and bf16.
#: Most weigh more than this CPU's 32 MB L3, so decode streams them from DRAM as the model assumes.
_C = {"vocab": 16384}
CONFIGS: dict[str, tuple[dict[str, int], str]] = {
    "mha-512x4": ({"layers": 4, "d_model": 512, "heads": 8, "ffn": 1536, **_C}, "fp32"),
    "gqa-512x8": ({"layers": 8, "d_model": 512, "heads": 8, "kv_heads": 2, "ffn": 1408, **_C}, "fp32"),
    "mqa-768x4": ({"layers": 4, "d_model": 768, "heads": 12, "kv_heads": 1, "ffn": 2048, **_C}, "fp32"),
    "gqa-wide-1024x2": ({"layers": 2, "d_model": 1024, "heads": 16, "kv_heads": 4, "ffn": 2816, **_C}, "fp32"),
    "gqa-deep-256x16": ({"layers": 16, "d_model": 256, "heads": 4, "kv_heads": 2, "ffn": 768, "vocab": 8192}, "fp32"),
    "mha-768x6": ({"layers": 6, "d_model": 768, "heads": 12, "ffn": 2048, "vocab": 32000}, "fp32"),
    "gqa-640x4": ({"layers": 4, "d_model": 640, "heads": 10, "kv_heads": 2, "ffn": 1728, **_C}, "fp32"),
    "moe-8x2-384x4": (
        {"layers": 4, "d_model": 384, "heads": 6, "ffn": 512, "experts": 8, "top_k": 2, "vocab": 8192},
        "fp32",
    ),
    "moe-4x1-512x2": (
        {"layers": 2, "d_model": 512, "heads": 8, "kv_heads": 4, "ffn": 1024, "experts": 4, "top_k": 1, **_C},
        "fp32",
    ),
    "moe-16x4-256x6": (
        {"layers": 6, "d_model": 256, "heads": 4, "ffn": 256, "experts": 16, "top_k": 4, "vocab": 8192},
        "fp32",
    ),
    "gqa-512x4-bf16": ({"layers": 4, "d_model": 512, "heads": 8, "kv_heads": 2, "ffn": 1408, **_C}, "bf16"),
}
QUICK = ("gqa-deep-256x16", "gqa-wide-1024x2", "moe-8x2-384x4")


@dataclass(frozen=True)
class Timing:
    """Repeats of one timed call: the best and median wall seconds, and the best thread-CPU seconds (the
    calling thread's CPU time: with one torch thread, the work itself without the time descheduled)."""

    best_s: float
    median_s: float
    cpu_s: float

    @property
    def spread(self) -> float:
        """median / best − 1 over the repeats: how much co-tenants or noise moved this measurement."""
        return self.median_s / self.best_s - 1.0

    def per(self, n: int) -> Timing:
        return Timing(self.best_s / n, self.median_s / n, self.cpu_s / n)


@dataclass(frozen=True)
class Run:
    name: str
    phase: str
    predicted_s: float
    timing: Timing
    clock: str = "wall"

    @property
    def measured_s(self) -> float:
        """Best time of the repeats on the run's clock: the statistic calibration keeps for its micro-benchmarks."""
        return self.timing.cpu_s if self.clock == "cpu" else self.timing.best_s

    @property
    def error(self) -> float:
        return self.predicted_s / self.measured_s - 1.0

    def to_dict(self) -> dict[str, object]:
        t = self.timing
        return {"name": self.name, "phase": self.phase, "predicted_s": self.predicted_s,
                "measured_s": self.measured_s, "error": self.error, "wall_best_s": t.best_s,
                "wall_median_s": t.median_s, "spread": t.spread, "cpu_s": t.cpu_s}  # fmt: skip


def _once(fn: Callable[[], None], sync: Callable[[], None]) -> tuple[float, float]:
    """(wall, thread CPU) seconds of one call of ``fn``."""
    c0, t0 = time.thread_time(), time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - t0, time.thread_time() - c0


def _timing(samples: list[tuple[float, float]], n: int = 1) -> Timing:
    wall = [w / n for w, _ in samples]
    return Timing(min(wall), statistics.median(wall), min(c for _, c in samples) / n)


def time_calls(fn: Callable[[], None], sync: Callable[[], None], repeats: int) -> Timing:
    """:class:`Timing` of ``repeats`` calls of ``fn`` after one warm-up call (the GPU path times this way)."""
    fn()
    sync()
    return _timing([_once(fn, sync) for _ in range(repeats)])


class Bench:
    """One config's eager decoder, its KV cache and inputs, built and warmed up once (weights written, pages
    faulted in, allocator primed); :meth:`sample` times one prefill and one ``S_out``-step decode."""

    def __init__(self, arch: Architecture, precision: str, workload: Workload, device: str = "cpu") -> None:
        import torch

        from .devices.eager_decoder import build

        dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
        self.model = build(arch, dtype, device)
        B, S_in, self.S_out = workload.batch, workload.input_tokens, workload.output_tokens
        cols = arch.columns()  # the derived sizes as ints
        shape = (B, cols["kv_heads"], S_in + self.S_out + 1, cols["head_dim"])
        self.caches = [(torch.zeros(shape, dtype=dtype, device=device), torch.zeros(shape, dtype=dtype, device=device))
                       for _ in range(arch.layers)]  # fmt: skip
        self.ids = torch.randint(0, arch.vocab, (B, S_in), device=device)
        self.tok = torch.randint(0, arch.vocab, (B, 1), device=device)
        self.S_in = S_in
        self.sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        self.pre: list[tuple[float, float]] = []
        self.dec: list[tuple[float, float]] = []
        with torch.inference_mode():
            self.prefill()
            self.decode()
            self.sync()

    def prefill(self) -> None:
        self.model(self.ids, self.caches, 0)

    def decode(self) -> None:
        for t in range(self.S_out):
            self.model(self.tok, self.caches, self.S_in + t)

    def sample(self) -> None:
        import torch

        with torch.inference_mode():
            self.pre.append(_once(self.prefill, self.sync))
            self.dec.append(_once(self.decode, self.sync))

    def timings(self) -> tuple[Timing, Timing]:
        """(prefill, mean decode step) over the samples so far."""
        return _timing(self.pre), _timing(self.dec, self.S_out)


def measure(arch: Architecture, precision: str, workload: Workload, device: str = "cpu", repeats: int = 3):
    """Measured (prefill, mean decode step) :class:`Timing` of an eager decoder of ``arch`` (``repeats`` samples
    after a warm-up)."""
    bench = Bench(arch, precision, workload, device)
    for _ in range(repeats):
        bench.sample()
    return bench.timings()


#: (min rounds, max rounds, seconds after which no new round starts, calibration seconds in all) per mode
ROUNDS = {"quick": (3, 6, 15.0, 1.5), "full": (5, 12, 60.0, 3.0)}


def run(
    device: Device | None,
    quick: bool = False,
    torch_device: str = "cpu",
    progress: Callable[[str, float], None] | None = None,
    threads: int | None = 1,
    clock: str = "wall",
) -> dict[str, object]:
    """Measure and predict every config with ``threads`` torch intra-op threads (``None``: leave torch's
    setting; calibrate the device with the same count and ``clock``); returns the JSON-ready report.
    ``device=None``: calibrate this machine here, one calibration round (:class:`.calibrate_session.Session`)
    among the configs of every measurement round, so both sides sample the same stretch of time.
    ``clock``: ``wall`` compares best wall times, ``cpu`` the thread's CPU time (see
    :data:`rooflaw.devices.calibrate_torch.CLOCKS`); both are in every row."""
    from .devices.calibrate_torch import CLOCKS, torch_threads, use_clock
    from .errors import bad

    if clock not in CLOCKS:
        raise bad("clock", clock, f"must be one of {', '.join(CLOCKS)}")
    with torch_threads(threads), use_clock(clock):
        return _run(device, quick, torch_device, progress, clock)


def _rounds(benches: dict[str, Bench], session, mode: str, say: Callable[[str, float], None]) -> int:
    """Sample every bench (and the calibration session, if any) once per round, in a new shuffled order each
    round (seeded), for at least the mode's minimum rounds and then while its time budget lasts."""
    import random

    lo, hi, budget, cal_seconds = ROUNDS[mode]
    items: list[str] = [*benches, *(["calibration"] if session is not None else [])]
    rng, start, r = random.Random(0), time.perf_counter(), 0
    while r < lo or (r < hi and time.perf_counter() - start < budget):
        rng.shuffle(items)
        for j, item in enumerate(items):
            say(f"round {r + 1}: {item}", min(0.99, (r + j / len(items)) / lo))
            if item == "calibration":
                session.sample(cal_seconds / lo)
            else:
                benches[item].sample()
        r += 1
    return r


def _run(device: Device | None, quick: bool, torch_device: str, progress, clock: str) -> dict[str, object]:
    import torch

    from .api import from_mapping
    from .devices.calibrate import local_device
    from .devices.measurements import memory_capacity

    say = progress or (lambda step, frac: None)
    load_start = load_average()
    names = list(QUICK if quick else CONFIGS)
    wl = Workload(1, 64 if quick else 128, 8 if quick else 16)
    archs = {name: from_mapping(CONFIGS[name][0], name=name) for name in names}
    benches = {}
    for name in names:  # all built first: every round then samples each of them
        say(f"building {name}", 0.0)
        benches[name] = Bench(archs[name], CONFIGS[name][1], wl, torch_device)
    session = None
    if device is None:
        from .devices.calibrate_session import Session

        say("setting up calibration", 0.0)
        session = Session(memory_capacity(), None, gemm_budget=0.25 * ROUNDS["quick" if quick else "full"][3])
    rounds = _rounds(benches, session, "quick" if quick else "full", say)
    if session is not None:
        device = local_device(session.measurements(clock))
    assert device is not None
    runs: list[Run] = []
    for name in names:
        spec, prec = CONFIGS[name]
        pre, dec = benches[name].timings()
        # tiles: the device's GEMM rate curve in M (calibrate's gemm_half_rows; a (1, 1) tile pads nothing)
        rep = evaluate(archs[name], device, wl, prec, engine="torch-eager", tiles=True)
        runs += [Run(name, "prefill", rep.prefill_s, pre, clock), Run(name, "decode", rep.tpot_s, dec, clock)]
    say("done", 1.0)

    def mape(phase: str) -> float:
        errs = [abs(r.error) for r in runs if r.phase == phase]
        return float(sum(errs) / len(errs)) if errs else math.nan

    def mean_error(phase: str) -> float:
        errs = [r.error for r in runs if r.phase == phase]
        return float(sum(errs) / len(errs)) if errs else math.nan

    return {
        "device": device.id,
        "torch_device": torch_device,
        "threads": torch.get_num_threads(),
        "workload": wl.to_dict(),
        "configs": [r.to_dict() for r in runs],
        "mape_prefill": mape("prefill"),
        "mape_decode": mape("decode"),
        "mean_error_prefill": mean_error("prefill"),
        "mean_error_decode": mean_error("decode"),
        "clock": clock,
        "rounds": rounds,
        "statistic": f"best {clock} time of {rounds} rounds (calibration keeps the best too)",
        "calibration": "interleaved: one round per measurement round, shuffled order" if session else "given",
        "device_figures": _figures(device),
        # noise: median over rows of (median / best wall time − 1), and the machine's load at start and end
        "median_spread": statistics.median(r.timing.spread for r in runs) if runs else math.nan,
        "load_avg_1min_start": load_start,
        "load_avg_1min": load_average(),
    }


def _figures(device: Device) -> dict[str, float]:
    """The calibrated figures the predictions rest on (SI units), to compare runs."""
    return {"fp32_flops": device.peak("fp32"), "fp16_flops": device.peak("fp16"),
            "gemv_bandwidth": device.memory_bandwidth, "gemv16_bandwidth": device.gemv16_bandwidth,
            "kernel_overhead_s": device.kernel_overhead, "vector_flops": device.vector_flops,
            "gemm_half_rows": device.gemm_half_rows, "gemv_half_k": device.gemv_half_k}  # fmt: skip


def load_average() -> float | None:
    """The 1-minute load average (co-tenants), None where the OS has none."""
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return None
