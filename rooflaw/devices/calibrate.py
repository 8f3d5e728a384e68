"""Measure this machine with numpy and write device files.

:func:`calibrate` times these kernels within a small budget (a few seconds):

* **GEMM**: an ``n×n @ n×n`` float32 matmul (BLAS), ``2n³`` FLOPs per call;
* **memory bandwidth**: ``np.copyto`` of an array much larger than the caches (read + write =
  ``2 × nbytes`` counted; write-allocate traffic is *not* counted, so this is what a kernel sees)
  and ``ndarray.sum`` (``nbytes`` read); the better of the two;
* **vector rate**: an elementwise float32 multiply on cache-resident arrays (1 FLOP/element);
With PyTorch installed, at a stated intra-op thread count (``threads``, default 1: a co-tenant on a
small machine otherwise turns OpenMP barriers into the cost), also:

* **fp32 and bf16 GEMM**: ``F.linear`` of a 128-token chunk through 8 separate 4096×1024 weights
  (above the caches, read from DRAM as in a forward pass), the kernel a decoder's projections run
  (numpy has no 16-bit GEMM); fp32 also at 16 and 32 rows, fitted to r(M) = R·M/(M + h)
  (``gemm_half_rows`` = h: a MoE expert's GEMM of ~T·K/E rows runs slower than a 128-row one);
* **GEMV bandwidth**: one token through the same cold weights, what a decode step streams at, and
  through 4096×512 ones: bytes/s ∝ K/(K + k½) (``gemv_half_k``: a fixed cost per output row); the same in
  bf16 (``gemv16_bandwidth``, ``gemv16_half_k``): the roof of a 16-bit decode step's GEMVs (a CPU without
  native bf16 math converts every weight and streams them at half the fp32 GEMV's bytes/s or less);
* **eager kernel overhead**: the extra time of one more layer of a probe decoder whose 2.4 MB
  layers exceed the L2 (d=256, one token: :mod:`.eager_decoder`), less that layer's weight reads at
  the GEMV bandwidth, divided by the aten kernels it launches (counted with a ``TorchDispatchMode``):
  dispatch, Python, allocator and cold-cache cost per kernel.

The best (fastest) repetition of each is kept (``validate`` compares best against best), on the
wall clock or, with ``clock="cpu"``, the calling thread's CPU time. Capacity comes from ``/proc/meminfo`` (else
``os.sysconf``). :func:`save_device_toml` writes the schema :func:`load_device_file` reads.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import platform
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..errors import ExternalError, bad
from .calibrate_torch import GEMM_M, PROBE_K, PROBE_N, release_weights, use_clock
from .device import DTYPES, Device
from .device_file import FIELD_TO_KEY, SCALAR_KEYS, SCHEMA_VERSION
from .measurements import Measurements, memory_capacity

__all__ = ["Measurements", "calibrate", "measure", "save_device_toml", "device_toml"]


Progress = Callable[[str, float], None]
#: Device figures written only when measured (a flat curve fits 0; no torch: no GEMV rates).
_OPTIONAL = ("gemm_half_rows", "gemv_half_k", "gemv16_bandwidth", "gemv16_half_k")


def measure(
    seconds: float = 2.0, progress: Progress | None = None, threads: int | None = 1, clock: str = "wall"
) -> Measurements:
    """Time GEMM, memory bandwidth, the vector rate and the per-op overhead within about ``seconds``.

    The torch measurements run with ``threads`` intra-op threads (``None``: torch's current setting),
    the count ``validate`` must run with too; every timing reads ``clock`` (``wall``, or the thread's
    ``cpu`` time: see :data:`.calibrate_torch.CLOCKS`). ``progress(step, fraction_done)`` is called
    before each step and once at the end (1.0).
    """
    try:
        with use_clock(clock):
            return _measure(seconds, progress, threads, clock)
    finally:
        release_weights()


def _measure(seconds: float, progress: Progress | None, threads: int | None, clock: str) -> Measurements:
    check_budget(seconds, threads)
    from .calibrate_session import Session

    say = progress or (lambda step, frac: None)
    say("setting up (weights, arrays, probe decoders)", 0.0)
    session = Session(memory_capacity(), threads, gemm_budget=0.25 * seconds)
    for r in range(ROUNDS):

        def round_say(step: str, frac: float, r: int = r) -> None:
            say(step, 0.05 + 0.95 * (r + frac) / ROUNDS)

        session.sample(seconds / ROUNDS, round_say)
    return session.measurements(clock)


#: Samples (rounds) of each timer a calibration keeps the best of: as many as ``validate``'s full run takes.
ROUNDS = 5


def check_budget(seconds: float, threads: int | None) -> None:
    """One clear error for a bad calibration budget (seconds) or torch thread count."""
    if not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds > 0):
        raise bad("seconds", seconds, "must be a positive number")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise bad("threads", threads, "must be a positive integer")


def _summary(m: Measurements) -> str:
    torch_part = (
        f"; with torch ({m.torch_threads} threads): fp32 GEMM {m.linear_flops / 1e9:.1f} GFLOP/s "
        f"(F.linear, {GEMM_M} tokens x cold {PROBE_N}x{PROBE_K} weights), "
        f"bf16 GEMM {m.gemm16_flops / 1e9:.1f} GFLOP/s, "
        f"GEMV bandwidth {m.gemv_bandwidth / 1e9:.1f} GB/s (bf16 {m.gemv16_bandwidth / 1e9:.1f} GB/s), "
        f"eager kernel {m.op_overhead * 1e6:.2f} us, "
        f"GEMM half-rate rows {m.gemm_half_rows:.3g}, GEMV half-rate K {m.gemv_half_k:.3g} "
        f"(bf16 {m.gemv16_half_k:.3g}); "
        f"threads={m.torch_threads}"
        if m.torch_threads
        else ""
    )
    return (
        f"measured with numpy {np.__version__}: fp32 GEMM {m.gemm_flops / 1e9:.1f} GFLOP/s (n={m.gemm_n}), "
        f"bandwidth {m.memory_bandwidth / 1e9:.1f} GB/s (copy {m.copy_bandwidth / 1e9:.1f}, "
        f"read {m.read_bandwidth / 1e9:.1f}; {m.array_bytes / 1e6:.0f} MB array), "
        f"vector fp32 {m.vector_flops / 1e9:.2f} GFLOP/s" + torch_part + f"; clock={m.clock}"
    )


def calibrate(
    base: Device | None = None,
    seconds: float = 2.0,
    progress: Progress | None = None,
    threads: int | None = 1,
    clock: str = "wall",
    power: float | None = None,
) -> Device:
    """Measure this machine (see module docstring); torch figures with ``threads`` intra-op threads.

    ``power`` (W, under load; ``--power 65W``) gives the device its energy figures (provenance ``assumed``:
    stated by the user); without it, Linux RAPL's package energy over the measurements (and over 0.5 s idle
    before them) where the machine exposes it (``measured``); else the device has no power figures (energy n/a).

    Without ``base``: a ``local-cpu`` device whose roofs are the measured rates (``fp32``, ``tf32``
    = torch's fp32 ``F.linear`` rate, else numpy's GEMM; ``fp16`` = torch's bf16 ``F.linear``, else the
    fp32 rate; ``vector_rate`` = the elementwise rate), bandwidth (torch's decode GEMV, else numpy's
    copy/read), capacity and the per-kernel eager overhead (``kernel_overhead``), all with provenance
    ``measured``; the thread count is in the name and ``notes`` (``threads=N``). Its GEMM tile is (1, 1) (a CPU
    GEMM pads no output tiles), ``gemm_half_rows`` the fitted GEMM rate curve in M and ``gemv_half_k`` the
    one-token GEMV's bandwidth curve in K, all used with ``tiles=True``.
    ``clock``: ``wall`` (default) or the thread's ``cpu`` time for every timing (``clock=cpu`` in ``notes``).
    ``progress(step, fraction)`` reports progress (no terminal I/O here).

    With ``base`` (the catalog device this machine is): ``<base.id>-calibrated``, the base's peaks
    kept, with ``compute_efficiency`` = measured GEMM / base fp32-GEMM roof (tf32 else fp32) and
    ``memory_efficiency`` = measured / peak bandwidth, tagged ``measured``. A ratio above 1 (the
    base does not describe this machine) is capped at 1.0 and said so in ``notes``.
    """
    from .power import PowerReading, rapl_power, stated_power, with_power

    reading: PowerReading | None
    if power is not None:
        m, reading = measure(seconds, progress, threads, clock), stated_power(power)
    else:
        m, reading = rapl_power(lambda: measure(seconds, progress, threads, clock))
    return with_power(local_device(m) if base is None else _on_base(base, m), reading)


def local_device(m: Measurements) -> Device:
    """The ``local-cpu`` device of :func:`calibrate` (no base) from measured figures."""
    summary = _summary(m)
    fields: tuple[str, ...] = (
        "peak_flops.fp32",
        "peak_flops.tf32",
        "peak_flops.fp16",
        "memory_bandwidth",
        "memory_capacity",
        "vector_rate",
        "kernel_overhead",
        "gemm_half_rows",
        "gemv_half_k",
        "gemv16_bandwidth",
        "gemv16_half_k",
    )
    # a curve the fit found flat (0) or a rate not measured is not written to a device file, nor its provenance
    fields = tuple(f for f in fields if f not in _OPTIONAL or getattr(m, f) > 0)
    prov = dict.fromkeys(fields, "measured")
    prov["sm_count"] = "measured"
    prov["tile"] = "assumed"
    src = "rooflaw.devices.calibrate (numpy" + (f", torch {m.torch_threads} threads)" if m.torch_threads else ")")
    return Device(
        id="local-cpu",
        name=f"This machine ({platform.machine() or 'cpu'}, {m.threads} CPUs, {m.torch_threads} torch threads)",
        peak_flops={"fp32": m.linear_flops, "tf32": m.linear_flops, "fp16": m.gemm16_flops or m.linear_flops},
        vector_rate=m.vector_flops,
        kernel_overhead=m.op_overhead,
        gemm_half_rows=m.gemm_half_rows,
        gemv_half_k=m.gemv_half_k,
        gemv16_bandwidth=m.gemv16_bandwidth,
        gemv16_half_k=m.gemv16_half_k,
        memory_bandwidth=m.stream_bandwidth,
        memory_capacity=m.memory_capacity,
        sm_count=m.torch_threads or m.threads,
        tile=(1, 1),
        kind="cpu",
        vendor="",
        provenance=prov,
        sources=dict.fromkeys(fields, src) | {"sm_count": "torch threads (else os.cpu_count())"},
        notes=summary + "; roofs: fp32/tf32 = the torch fp32 GEMM (else numpy's), fp16 = the bf16 torch GEMM "
        "(else the fp32 rate), bandwidth = the torch GEMV (else numpy's copy/read), "
        "16-bit decode GEMVs at the bf16 GEMV",
        achieved={},
    )


def _on_base(base: Device, m: Measurements) -> Device:
    """``<base.id>-calibrated``: the base's peaks with measured efficiency factors (see :func:`calibrate`)."""
    roof_dtype, roof = base.roof("tf32")
    notes = [base.notes] if base.notes else []
    notes.append(_summary(m))

    def ratio(measured: float, peak: float, what: str) -> float:
        r = measured / peak
        if r > 1.0:
            notes.append(f"{what}: measured/peak = {r:.3g} > 1 (the base device is not this machine); capped at 1.0")
            return 1.0
        return r

    ce = ratio(m.gemm_flops, roof, f"compute_efficiency vs {roof_dtype}")
    me = ratio(m.memory_bandwidth, base.memory_bandwidth, "memory_efficiency")
    return dataclasses.replace(
        base,
        id=f"{base.id.replace('@', '-')}-calibrated",
        name=f"{base.name} (calibrated)",
        compute_efficiency=ce,
        memory_efficiency=me,
        provenance={**base.provenance, "compute_efficiency": "measured", "memory_efficiency": "measured"},
        sources={
            **base.sources,
            "compute_efficiency": "rooflaw.devices.calibrate (numpy)",
            "memory_efficiency": "rooflaw.devices.calibrate (numpy)",
        },
        notes="; ".join(notes),
    )


# ----------------------------------------------------------------------------- writing


def _toml_str(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def _toml_num(v: float) -> str:
    r = repr(float(v))
    return r


def _figure(device: Device, field: str, value_text: str) -> str:
    parts = [f"value = {value_text}"]
    if field in device.provenance:
        parts.append(f"provenance = {_toml_str(device.provenance[field])}")
    if field in device.sources:
        parts.append(f"source = {_toml_str(device.sources[field])}")
    return "{ " + ", ".join(parts) + " }"


def device_toml(device: Device) -> str:
    """The device as text in the catalog's TOML schema (every figure with its provenance/source)."""
    if "@" in device.id:
        device = dataclasses.replace(device, id=device.id.replace("@", "-"))
    lines = [
        "# rooflaw device file (schema: docs/devices.md). Units: TFLOP/s, GB/s, GB, MB, W, pJ.",
        f"schema = {SCHEMA_VERSION}",
        f"id = {_toml_str(device.id)}",
        f"name = {_toml_str(device.name)}",
        f"vendor = {_toml_str(device.vendor)}",
        f"kind = {_toml_str(device.kind)}",
        *([f"architecture = {_toml_str(device.architecture)}"] if device.architecture else []),
        *([f"kernel_architecture = {_toml_str(device.kernel_architecture)}"] if device.kernel_architecture else []),
        'provenance = "assumed"  # for any figure below without its own tag',
    ]
    if device.uncertain:
        lines.append("uncertain = [" + ", ".join(_toml_str(u) for u in device.uncertain) + "]")
    if device.notes:
        lines.append(f"notes = {_toml_str(device.notes)}")
    lines.append("")
    for dt in DTYPES:
        if dt in device.peak_flops:
            field = f"peak_flops.{dt}"
            key = FIELD_TO_KEY[field]
            lines.append(f"{key} = {_figure(device, field, _toml_num(device.peak_flops[dt] / 1e12))}")
    for field in (
        "memory_bandwidth",
        "memory_capacity",
        "l2_bytes",
        "clock",
        "power_idle",
        "power_peak",
        "energy_per_flop",
        "energy_per_byte",
        "compute_efficiency",
        "memory_efficiency",
        "kernel_overhead",
        "vector_rate",
        "gemm_half_rows",
        "gemv_half_k",
        "gemv16_bandwidth",
        "gemv16_half_k",
        "ex2_per_clk_sm",
    ):
        v = getattr(device, field)
        if v is None or (field in ("kernel_overhead", *_OPTIONAL) and v == 0):
            continue
        if field.endswith("_efficiency") and v == 1.0 and field not in device.provenance:
            continue
        key = FIELD_TO_KEY[field]
        lines.append(f"{key} = {_figure(device, field, _toml_num(v / SCALAR_KEYS[key][1]))}")
    if device.sm_count is not None:
        lines.append(f"sm_count = {_figure(device, 'sm_count', str(int(device.sm_count)))}")
    if device.tile != (128, 128) or "tile" in device.provenance:
        lines.append(f"tile = {_figure(device, 'tile', f'[{int(device.tile[0])}, {int(device.tile[1])}]')}")
    if device.achieved:
        lines += ["", "[achieved]"]
        for k, v in device.achieved.items():
            if isinstance(v, str):
                text = _toml_str(v)
            elif isinstance(v, (list, tuple)):
                text = "[" + ", ".join(_toml_str(str(x)) for x in v) + "]"
            else:
                text = _toml_num(v)
            lines.append(f"{k} = {text}")
    return "\n".join(lines) + "\n"


def save_device_toml(device: Device, path: str | os.PathLike[str]) -> Path:
    """Write ``device`` to ``path`` in the schema :func:`~rooflaw.devices.load_device_file` reads."""
    p = Path(path)
    if not p.parent.is_dir():
        raise bad("path", str(p), f"directory {str(p.parent)!r} does not exist")
    if p.is_dir():
        raise bad("path", str(p), "is a directory; give a file name")
    text = device_toml(device)
    tmp = None
    try:  # a regular target is replaced in one step, so a failed write leaves the previous file as it was
        if p.exists() and not p.is_file():
            p.write_text(text, encoding="utf-8")
            return p
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, p)
    except OSError as e:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise ExternalError(f"cannot write device file {str(p)!r}: {e.strerror or type(e).__name__}") from None
    return p
