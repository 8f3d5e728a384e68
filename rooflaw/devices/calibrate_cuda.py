"""Measure the CUDA GPU with torch micro-benchmarks and describe it as a ``Device`` (``devices calibrate --cuda``).

Every GPU time is read with CUDA events after a warm-up; each figure keeps the best of its repeats (the
median is in ``notes``). Bytes and FLOPs are counted from the shapes, never from the timed decoders:

* **GEMM rate**: ``a @ b`` of 8192×8192 matrices in bf16, fp16, fp32 with TF32 and strict fp32 (2·n³ FLOPs);
* **GEMM rate in M**: a bf16 ``F.linear`` of M = 1…4096 rows through one 8192×8192 weight, fitted to
  r(M) = R·M/(M + h) (least squares in 1/r against 1/M): ``gemm_half_rows`` = h, as the CPU's calibration;
* **bandwidth**: a device-to-device copy of 2 GiB (read + write = 2 × nbytes counted) and a float32 sum of
  2 GiB (nbytes read);
* **decode GEMV**: one bf16 token through 8 cold 14336×4096 weights (940 MB, many times the L2), weight bytes
  per second: the rate a decode step streams at, stored as ``memory_bandwidth``;
* **eager per-kernel cost**: (a) a chain of 2000 dependent one-element ``add_`` kernels timed on the host wall
  clock with one sync at the end, on CUDA events, and replayed as a CUDA graph (the GPU's own cost per kernel);
  (b) the extra host time of 8 more layers of the probe decoder (:data:`.calibrate_torch._PROBE`, bf16, one
  token) per aten kernel they launch (counted): ``kernel_overhead``, the figure the ``torch-eager`` engine
  charges per kernel (an eager decode step of a small model is bound by the host's launch rate); and the same
  layers replayed as CUDA graphs (less their weight reads at the GEMV bandwidth) per kernel: ``achieved.kernel_s``,
  the device-side cost per kernel an engine launching from graphs pays;
* **host sync**: one ``.item()`` round trip after a tiny kernel (what ``nonzero``/``.tolist()`` cost), in notes;
* capacity, SM count, L2 size and compute capability from ``torch.cuda.get_device_properties``.

torch is imported inside the functions; without CUDA :func:`measure_cuda` raises :class:`NoCuda`.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import RooflawError
from .device import Device

__all__ = ["CudaMeasurements", "NoCuda", "calibrate_cuda", "capture_graph", "cuda_available", "device_from",
           "fit_rate_curve", "measure_cuda"]  # fmt: skip

GEMM_N = 8192  #: square GEMM size of the rate figures
ROWS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)  #: M of the rate curve (N = K = GEMM_N)
COPY_BYTES = 2 << 30  #: bytes of the copy and read arrays
GEMV_N, GEMV_K, GEMV_WEIGHTS = 14336, 4096, 8  #: the cold decode-GEMV weights (bf16)
CHAIN = 2000  #: tiny kernels in the launch chain
PROBE_LAYERS = (1, 9)  #: depths of the probe decoder whose difference gives the per-kernel host cost
#: Catalog device whose (assumed) GEMM tile a GPU of this compute-capability major takes.
TILE_FROM = {8: "a100-sxm-80gb", 9: "h100-sxm", 10: "b200"}
_DEV = "cuda"  #: the torch device measured (tests run the code path on ``cpu`` with stand-ins for ``torch.cuda``)

Progress = Callable[[str, float], None]


class NoCuda(RooflawError):
    """No CUDA device (or no torch): GPU calibration and validation are skipped."""


@dataclass(frozen=True)
class CudaMeasurements:
    """Raw results of :func:`measure_cuda` (SI units; rates in FLOP/s, bandwidths in bytes/s, times in s)."""

    name: str
    capability: tuple[int, int]
    sm_count: int
    memory_capacity: float
    l2_bytes: float
    gemm_bf16: float
    gemm_fp16: float
    gemm_tf32: float
    gemm_fp32: float
    rows: tuple[int, ...]
    row_rates: tuple[float, ...]  #: bf16 F.linear FLOP/s at each of ``rows``
    rate_limit: float  #: R of the fitted r(M) = R·M/(M + h)
    half_rows: float  #: h of that fit (0: no fall with M)
    copy_bandwidth: float
    read_bandwidth: float
    gemv_bandwidth: float
    launch_host_s: float  #: chain of tiny kernels: host wall seconds per kernel (sync at the end)
    launch_event_s: float  #: the same chain on CUDA events, per kernel
    launch_graph_s: float  #: the chain replayed as a CUDA graph, per kernel (the GPU's own cost)
    kernel_overhead: float  #: probe decoder: host seconds per aten kernel
    probe_kernels: float  #: aten kernels per probe layer (counted)
    sync_s: float  #: one host sync round trip (``.item()`` after a tiny kernel), less that kernel's launch
    medians: dict[str, float]  #: the median of the repeats of each best-of figure above
    versions: str  #: torch / CUDA / driver-visible versions
    #: probe decoder replayed as CUDA graphs: device seconds per aten kernel (0: not measured)
    probe_graph_s: float = 0.0


def cuda_available() -> bool:
    """True when torch is installed and sees a CUDA device."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def fit_rate_curve(rows: Sequence[float], rates: Sequence[float]) -> tuple[float, float]:
    """(R, h) of r(M) = R·M/(M + h) fitted to measured ``rates`` (FLOP/s) at ``rows`` by least squares on
    1/r = 1/R + (h/R)/M, with weights r² (relative errors in r weigh the same at every M). h = 0 when the rate
    does not fall with M (the fitted slope is not positive)."""
    import numpy as np

    m, r = np.asarray(rows, dtype=np.float64), np.asarray(rates, dtype=np.float64)
    if m.shape != r.shape or m.size < 2 or not (np.all(m > 0) and np.all(r > 0) and np.all(np.isfinite(r))):
        raise RooflawError("fit_rate_curve: needs ≥ 2 positive, finite (rows, rate) points")
    b, a = np.polyfit(1.0 / m, 1.0 / r, 1, w=r)  # 1/r = a + b/M
    if a <= 0:
        return float(r.max()), 0.0
    return float(1.0 / a), float(max(b / a, 0.0))


# ----------------------------------------------------------------------------- timing


def _events(fn: Callable[[], object], reps: int, warmup: int = 2) -> tuple[float, float]:
    """(best, median) seconds of one call of ``fn`` on CUDA events, each repeat synchronised."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return min(times), statistics.median(times)


def _host(fn: Callable[[], object], reps: int, warmup: int = 2) -> tuple[float, float]:
    """(best, median) host wall seconds of ``fn`` followed by a device synchronisation."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times)


# ----------------------------------------------------------------------------- the benchmarks


def _gemm(dtype, tf32: bool, reps: int) -> tuple[float, float]:
    import torch

    n = GEMM_N
    a = torch.empty(n, n, device=_DEV, dtype=dtype).normal_()
    b = torch.empty(n, n, device=_DEV, dtype=dtype).normal_()
    c = torch.empty(n, n, device=_DEV, dtype=dtype)
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        best, med = _events(lambda: torch.matmul(a, b, out=c), reps)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before
    return 2.0 * n**3 / best, 2.0 * n**3 / med


def _row_rates(reps: int) -> list[float]:
    import torch

    n = GEMM_N
    w = torch.empty(n, n, device=_DEV, dtype=torch.bfloat16).normal_()
    rates = []
    for m in ROWS:
        x = torch.empty(m, n, device=_DEV, dtype=torch.bfloat16).normal_()
        best, _ = _events(functools.partial(torch.nn.functional.linear, x, w), reps)
        rates.append(2.0 * m * n * n / best)
    return rates


def _bandwidth(reps: int) -> tuple[float, float, float, float]:
    """(copy, read) bytes/s best and median: copy counts read + write, the sum counts the bytes it reads."""
    import torch

    n = COPY_BYTES // 4
    src = torch.ones(n, device=_DEV, dtype=torch.float32)
    dst = torch.empty_like(src)
    c_best, c_med = _events(lambda: dst.copy_(src), reps)
    r_best, r_med = _events(lambda: src.sum(), reps)
    nbytes = 4.0 * n
    return 2 * nbytes / c_best, nbytes / r_best, 2 * nbytes / c_med, nbytes / r_med


def _gemv(reps: int) -> tuple[float, float]:
    """Weight bytes/s of one bf16 token through GEMV_WEIGHTS cold GEMV_N×GEMV_K weights (best, median)."""
    import torch

    ws = [torch.empty(GEMV_N, GEMV_K, device=_DEV, dtype=torch.bfloat16).normal_() for _ in range(GEMV_WEIGHTS)]
    x = torch.empty(1, GEMV_K, device=_DEV, dtype=torch.bfloat16).normal_()

    def sweep() -> None:
        for w in ws:
            torch.nn.functional.linear(x, w)

    best, med = _events(sweep, reps)
    nbytes = 2.0 * GEMV_N * GEMV_K * GEMV_WEIGHTS
    return nbytes / best, nbytes / med


def _launch_chain(reps: int) -> tuple[float, float, float, float, float]:
    """Per tiny kernel: (host best, host median, events best, graph best, sync round trip) seconds."""
    import torch

    x = torch.zeros(1, device=_DEV)

    def chain() -> None:
        for _ in range(CHAIN):
            x.add_(1.0)

    host_best, host_med = _host(chain, reps)
    ev_best, _ = _events(chain, reps)
    g_best, _ = _events(_graph(chain), reps)

    def round_trip() -> None:
        for _ in range(200):
            x.add_(1.0)
            x.item()

    rt_best, _ = _host(round_trip, reps)
    sync = max(rt_best / 200 - host_best / CHAIN, 0.0)
    return host_best / CHAIN, host_med / CHAIN, ev_best / CHAIN, g_best / CHAIN, sync


def capture_graph(fn: Callable[[], object], pool=None):
    """``fn`` captured as a CUDA graph after a warm-up on a side stream (the PyTorch recipe); the graph.
    ``pool``: a memory pool shared with other graphs (``validate --cuda --graphs`` replays its steps in order)."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool):
        fn()
    return graph


def _graph(fn: Callable[[], None]) -> Callable[[], None]:
    """The replay of ``fn`` captured as a CUDA graph (:func:`capture_graph`)."""
    return capture_graph(fn).replay


def _probe(reps: int, stream_bandwidth: float) -> tuple[float, float, float, float, float]:
    """The probe decoder (bf16, one token) at PROBE_LAYERS depths on the GPU: (host seconds per aten kernel, best
    and median; kernels per layer, counted; device seconds per kernel replayed as a CUDA graph, best and median --
    the extra layers' replay time less their weight reads at ``stream_bandwidth``, over their kernels)."""
    from types import SimpleNamespace

    import torch

    from .calibrate_torch import PROBE_ARCH, eager_kernels
    from .eager_decoder import build

    def setup(layers: int):
        model = build(SimpleNamespace(layers=layers, **PROBE_ARCH), torch.bfloat16, _DEV)
        shape = (1, PROBE_ARCH["kv_heads"], 32, PROBE_ARCH["head_dim"])
        kv = lambda: torch.zeros(shape, dtype=torch.bfloat16, device=_DEV)  # noqa: E731
        caches = [(kv(), kv()) for _ in range(layers)]
        tok = torch.zeros(1, 1, dtype=torch.long, device=_DEV)
        return (lambda m=model: m(tok, caches, 8)), model

    lo, hi = PROBE_LAYERS
    (step_lo, m_lo), (step_hi, m_hi) = setup(lo), setup(hi)
    with torch.inference_mode():
        kernels = (eager_kernels(m_hi, lambda m: step_hi()) - eager_kernels(m_lo, lambda m: step_lo())) / (hi - lo)
        t_lo, t_hi = _host(step_lo, reps), _host(step_hi, reps)
    with torch.no_grad():
        g_lo, g_hi = _events(_graph(step_lo), reps), _events(_graph(step_hi), reps)
    d, f, kv = PROBE_ARCH["d_model"], PROBE_ARCH["ffn"], PROBE_ARCH["kv_heads"] * PROBE_ARCH["head_dim"]
    layer_bytes = 2.0 * (2 * d * d + 2 * d * kv + 3 * d * f + 2 * d)  # bf16 q, o, k, v, gate/up/down, two norms
    reads = layer_bytes / stream_bandwidth if stream_bandwidth > 0 else 0.0
    per = [(h - lo_) / (hi - lo) / kernels for h, lo_ in zip(t_hi, t_lo, strict=True)]
    dev = [((h - lo_) / (hi - lo) - reads) / kernels for h, lo_ in zip(g_hi, g_lo, strict=True)]
    return max(per[0], 1e-9), max(per[1], 1e-9), kernels, max(dev[0], 1e-9), max(dev[1], 1e-9)


def measure_cuda(progress: Progress | None = None) -> CudaMeasurements:
    """Run every micro-benchmark of the module docstring on ``cuda:0`` (about 20-40 s on an H100-class GPU)."""
    if not cuda_available():
        raise NoCuda("no CUDA device")
    import torch

    say = progress or (lambda step, frac: None)
    props = torch.cuda.get_device_properties(0)
    med: dict[str, float] = {}
    say("GEMM bf16/fp16/tf32/fp32", 0.0)
    bf16, med["gemm_bf16"] = _gemm(torch.bfloat16, False, 20)
    fp16, med["gemm_fp16"] = _gemm(torch.float16, False, 20)
    tf32, med["gemm_tf32"] = _gemm(torch.float32, True, 10)
    fp32, med["gemm_fp32"] = _gemm(torch.float32, False, 5)
    torch.cuda.empty_cache()
    say("GEMM rate vs rows", 0.3)
    rates = _row_rates(20)
    R, h = fit_rate_curve(ROWS, rates)
    torch.cuda.empty_cache()
    say("bandwidth", 0.45)
    copy_bw, read_bw, med["copy_bandwidth"], med["read_bandwidth"] = _bandwidth(20)
    torch.cuda.empty_cache()
    say("decode GEMV", 0.55)
    gemv, med["gemv_bandwidth"] = _gemv(20)
    torch.cuda.empty_cache()
    say("launch chain", 0.65)
    host, med["launch_host_s"], event, graph, sync = _launch_chain(7)
    say("probe decoder", 0.8)
    overhead, med["kernel_overhead"], kernels, probe_graph, med["probe_graph_s"] = _probe(15, gemv)
    torch.cuda.empty_cache()
    say("done", 1.0)
    versions = f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}"
    return CudaMeasurements(
        name=str(props.name),
        capability=(int(props.major), int(props.minor)),
        sm_count=int(props.multi_processor_count),
        memory_capacity=float(props.total_memory),
        l2_bytes=float(getattr(props, "L2_cache_size", 0) or 0),
        gemm_bf16=bf16,
        gemm_fp16=fp16,
        gemm_tf32=tf32,
        gemm_fp32=fp32,
        rows=ROWS,
        row_rates=tuple(rates),
        rate_limit=R,
        half_rows=h,
        copy_bandwidth=copy_bw,
        read_bandwidth=read_bw,
        gemv_bandwidth=gemv,
        launch_host_s=host,
        launch_event_s=event,
        launch_graph_s=graph,
        kernel_overhead=overhead,
        probe_kernels=kernels,
        probe_graph_s=probe_graph,
        sync_s=sync,
        medians=med,
        versions=versions,
    )


# ----------------------------------------------------------------------------- the device


def _tile(capability: tuple[int, int]) -> tuple[tuple[int, int], str]:
    """The GEMM tile of the catalog GPU of the same architecture (``assumed`` either way), and where it is from."""
    from .catalog import get_device

    cid = TILE_FROM.get(capability[0])
    if cid is None:
        return (128, 128), f"no catalog GPU of compute capability {capability[0]}.x: 128x128 assumed"
    return get_device(cid).tile, f"the catalog's {cid} tile (compute capability {capability[0]}.x)"


def _summary(m: CudaMeasurements) -> str:
    t, g = 1e12, 1e9
    curve = ", ".join(f"{r}:{v / t:.3g}" for r, v in zip(m.rows, m.row_rates, strict=True))
    md = m.medians
    return (
        f"{m.name} (sm_{m.capability[0]}{m.capability[1]}, {m.sm_count} SMs, L2 {m.l2_bytes / 1e6:.0f} MB); "
        f"{m.versions}; best of repeats on CUDA events (median in brackets): "
        f"GEMM {GEMM_N}^3 bf16 {m.gemm_bf16 / t:.1f} ({md.get('gemm_bf16', 0) / t:.1f}) TFLOP/s, "
        f"fp16 {m.gemm_fp16 / t:.1f} ({md.get('gemm_fp16', 0) / t:.1f}), tf32 {m.gemm_tf32 / t:.1f}, "
        f"fp32 {m.gemm_fp32 / t:.1f}; bf16 F.linear TFLOP/s by rows M ({GEMM_N}x{GEMM_N} weight) {curve}: "
        f"fit R {m.rate_limit / t:.1f} TFLOP/s, h {m.half_rows:.3g} rows; "
        f"copy {m.copy_bandwidth / g:.0f} ({md.get('copy_bandwidth', 0) / g:.0f}) GB/s (read+write, "
        f"{COPY_BYTES >> 30} GiB), read {m.read_bandwidth / g:.0f} GB/s (sum); "
        f"decode GEMV bf16 {m.gemv_bandwidth / g:.0f} ({md.get('gemv_bandwidth', 0) / g:.0f}) GB/s "
        f"({GEMV_WEIGHTS} cold {GEMV_N}x{GEMV_K} weights); tiny-kernel chain ({CHAIN} add_): host "
        f"{m.launch_host_s * 1e6:.2f} us/kernel, events {m.launch_event_s * 1e6:.2f}, CUDA graph "
        f"{m.launch_graph_s * 1e6:.2f}; probe decoder (bf16, one token, layers {PROBE_LAYERS[0]}->"
        f"{PROBE_LAYERS[1]}, {m.probe_kernels:g} kernels/layer): {m.kernel_overhead * 1e6:.2f} "
        f"({md.get('kernel_overhead', 0) * 1e6:.2f}) us/kernel on the host, {m.probe_graph_s * 1e6:.2f} "
        f"({md.get('probe_graph_s', 0) * 1e6:.2f}) us/kernel on the device replayed as CUDA graphs; "
        f"host sync round trip {m.sync_s * 1e6:.1f} us (not priced)"
    )


def device_from(m: CudaMeasurements) -> Device:
    """The ``local-cuda`` :class:`Device` of measurements ``m``: roofs fp32 = strict fp32 GEMM, tf32 = TF32 GEMM,
    fp16 = the lower of the bf16 and fp16 GEMMs (both 16-bit formats run on it); ``memory_bandwidth`` = the decode
    GEMV's weight stream; ``gemm_half_rows`` = h of the rate curve; ``kernel_overhead`` = the probe decoder's
    host cost per kernel; ``achieved.kernel_s`` = its device-side cost per kernel replayed as CUDA graphs (what
    ``validate --cuda --graphs`` predicts with); capacity, SMs, L2 from the driver; tile from the catalog GPU of the
    same architecture (``assumed``). No vector rate of its own: the strict fp32 roof (elementwise kernels are
    memory-bound here)."""
    tile, tile_src = _tile(m.capability)
    fields = ["peak_flops.fp32", "peak_flops.tf32", "peak_flops.fp16", "memory_bandwidth", "memory_capacity",
              "kernel_overhead", "sm_count"]  # fmt: skip
    fields += ["l2_bytes"] * bool(m.l2_bytes) + ["gemm_half_rows"] * bool(m.half_rows > 0)
    bench = "rooflaw.devices.calibrate_cuda"
    src = {
        "peak_flops.fp32": f"{bench}: {GEMM_N}^3 fp32 matmul, TF32 off",
        "peak_flops.tf32": f"{bench}: {GEMM_N}^3 fp32 matmul, TF32 on",
        "peak_flops.fp16": f"{bench}: {GEMM_N}^3 bf16 and fp16 matmul (the lower)",
        "memory_bandwidth": f"{bench}: one-token bf16 F.linear over {GEMV_WEIGHTS} cold {GEMV_N}x{GEMV_K} weights",
        "memory_capacity": "torch.cuda.get_device_properties: total_memory",
        "kernel_overhead": f"{bench}: probe decoder layers {PROBE_LAYERS}, host wall time per aten kernel",
        "gemm_half_rows": f"{bench}: bf16 F.linear rate in M = 1..4096, {GEMM_N}x{GEMM_N} weight",
        "sm_count": "torch.cuda.get_device_properties: multi_processor_count",
        "l2_bytes": "torch.cuda.get_device_properties: L2_cache_size",
        "tile": tile_src,
    }
    prov = dict.fromkeys(fields, "measured") | {"tile": "assumed"}
    return Device(
        id="local-cuda",
        name=f"{m.name} (calibrated)",
        peak_flops={"fp32": m.gemm_fp32, "tf32": m.gemm_tf32, "fp16": min(m.gemm_bf16, m.gemm_fp16)},
        memory_bandwidth=m.gemv_bandwidth,
        memory_capacity=m.memory_capacity,
        sm_count=m.sm_count,
        tile=(tile[0], tile[1]),  # a catalog TOML tile may be a list
        kernel_overhead=m.kernel_overhead,
        l2_bytes=m.l2_bytes or None,
        gemm_half_rows=m.half_rows,
        kind="gpu",
        vendor="NVIDIA" if "nvidia" in m.name.lower() else "",
        provenance=prov,
        sources={k: v for k, v in src.items() if k in prov},
        notes=_summary(m),
        # the device-side cost per kernel (the probe decoder's kernels replayed as CUDA graphs): what an engine that
        # launches from a graph pays per kernel; eager PyTorch pays kernel_overhead (host-side) instead
        achieved={"family": "local-cuda", "provenance": "measured", "kernel_s": m.probe_graph_s or m.launch_graph_s},
    )


def calibrate_cuda(progress: Progress | None = None, power: float | None = None) -> Device:
    """Measure the CUDA GPU (:func:`measure_cuda`) and return it as ``local-cuda`` (:func:`device_from`).
    Raises :class:`NoCuda` (a :class:`~rooflaw.errors.RooflawError`) without a CUDA device. Power: ``power`` (W,
    stated by the user) else ``nvidia-smi``'s idle draw (read before the measurements) and board power limit."""
    from .power import nvidia_smi_power, stated_power, with_power

    reading = stated_power(power) if power is not None else nvidia_smi_power()
    try:
        return with_power(device_from(measure_cuda(progress)), reading)
    finally:
        if cuda_available():
            import torch

            torch.cuda.empty_cache()
