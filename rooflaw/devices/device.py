"""``Device``: what the roofline needs to know about one accelerator. SI units throughout."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from ..errors import bad

#: Compute roofs a device may carry, from widest to narrowest. ``fp32`` is the non-tensor
#: vector rate (softmax, norms, activations run there); the others are dense tensor-core peaks.
DTYPES = ("fp32", "tf32", "fp16", "fp8", "int8", "int4", "fp4")
PROVENANCE = ("datasheet", "derived", "secondary", "measured", "assumed", "fitted")
#: GPU architectures with achieved-performance curves fitted to measured kernels (``constraints.kernels``);
#: a device names its own (``architecture``), an SoC the architecture of its GPU (Jetson Orin: ampere).
ARCHITECTURES = ("ampere", "ada", "hopper", "blackwell")


def _real(v: object) -> bool:
    """A finite int or float that is not a bool."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


@dataclass(frozen=True)
class Device:
    """One accelerator.

    ``peak_flops`` maps a compute dtype of :data:`DTYPES` to its **dense** peak in FLOP/s (OP/s
    for integers); a missing dtype means the device has no such roof. ``memory_bandwidth`` is in
    bytes/s, ``memory_capacity`` in bytes, powers in watts, ``energy_per_flop`` in J/FLOP and
    ``energy_per_byte`` in J/byte. ``tile`` is the GEMM output tile (rows, cols) of the tile/wave
    quantisation model and ``sm_count`` the number of SMs/CUs that run tiles in waves.
    ``kernel_overhead`` (seconds) is added once per operator launch (per layer, per pass) -- the
    fixed cost a pure roofline misses, which dominates small decode steps in eager frameworks.
    ``provenance`` maps a field name (or ``peak_flops.fp16``) to one of :data:`PROVENANCE`;
    ``sources`` maps field names to URLs; ``uncertain`` lists fields flagged as doubtful.
    """

    id: str
    name: str
    peak_flops: dict[str, float]
    memory_bandwidth: float
    memory_capacity: float
    sm_count: int | None = None
    tile: tuple[int, int] = (128, 128)
    power_idle: float | None = None
    power_peak: float | None = None
    energy_per_flop: float | None = None
    energy_per_byte: float | None = None
    compute_efficiency: float = 1.0
    memory_efficiency: float = 1.0
    kernel_overhead: float = 0.0
    l2_bytes: float | None = None
    #: Boost (maximum) clock in Hz of the datasheet peaks; ``None``: not given. The kernel curves count a GEMM's
    #: fixed GPU-side times in cycles of it (``constraints.kernels.gemm``).
    clock: float | None = None
    kind: str = "gpu"
    vendor: str = ""
    #: GPU architecture (:data:`ARCHITECTURES`) whose kernel curves price this device; ``None``: none (a CPU, an NPU,
    #: a GPU of another vendor) -- then the device's own scalar efficiencies and overheads apply.
    architecture: str | None = None
    #: Architecture (:data:`ARCHITECTURES`) of the kernels that run on this device where it differs from
    #: ``architecture`` (the product family, whose datasheet peaks and NCCL's compute-capability tables apply): sm_120
    #: Blackwell (RTX 50, RTX PRO) runs warp-level ``mma.sync`` kernels as Ada does, not sm_100's ``tcgen05``
    #: ones. ``None``: ``architecture``. :attr:`curves_architecture` resolves it.
    kernel_architecture: str | None = None
    provenance: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    uncertain: tuple[str, ...] = ()
    notes: str = ""
    #: Achieved-performance figures of the device family (``rooflaw devices fit-efficiency``):
    #: ``family``, ``memory`` (fraction of bandwidth), one fraction per roof dtype (``fp16``, ``fp4``
    #: …), ``kernel_s`` (seconds per kernel launch), ``engine`` (default profile), ``provenance``,
    #: ``rows`` (the published rows fitted on). Empty: none fitted.
    achieved: dict[str, Any] = field(default_factory=dict)
    #: Non-tensor (vector) rate in FLOP/s for softmax/norms/activations when it differs from the
    #: ``fp32`` GEMM roof (a CPU: BLAS GEMM ≫ elementwise numpy). ``None``: the ``fp32`` roof.
    vector_rate: float | None = None
    #: Rows (tokens) at which a GEMM runs at half its large-M rate, fitted by ``calibrate`` from ``F.linear`` at a
    #: few M: with ``tiles`` on, a GEMM of M > 1 rows runs at (M/(M + h)) / (128/(128 + h)) (capped at 1) of the
    #: roof measured at 128 rows (one-row GEMVs are memory-bound kernels of their own). 0: no such curve.
    gemm_half_rows: float = 0.0
    #: Inner dimension K at which a one-token GEMV streams weights at half its long-row rate (a fixed cost per
    #: output row, fitted by ``calibrate``): with ``tiles`` on, a GEMV reads its weights at
    #: ``memory_bandwidth`` × (K/(K + k))/(1024/(1024 + k)) (capped at 1; the bandwidth is measured at K = 1024).
    gemv_half_k: float = 0.0
    #: Weight bytes/s of a one-token 16-bit (bf16/fp16) GEMV, measured by ``calibrate`` (a CPU without native
    #: 16-bit math converts every weight: its own roof, below ``memory_bandwidth``), and its K curve as
    #: ``gemv_half_k``. With ``tiles`` on, a 16-bit-weight decode GEMV streams at this rate. 0: none measured.
    gemv16_bandwidth: float = 0.0
    gemv16_half_k: float = 0.0
    #: Base-2 exponentials (``MUFU.EX2``) the special-function units return per SM per clock, where it differs from
    #: the architecture's 16 (Blackwell Ultra doubles it: 32). ``None``: 16, the CUDA throughput table's figure from
    #: Volta to Blackwell. The attention kernels' softmax runs its exponentials there (``constraints.kernels.sfu``).
    ex2_per_clk_sm: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id.strip():
            raise bad("device.id", self.id, "must be a non-empty string")
        if not isinstance(self.peak_flops, dict):
            raise bad(f"{self.id}.peak_flops", self.peak_flops, "must be a mapping dtype -> FLOP/s")
        if not self.peak_flops:
            raise bad(f"{self.id}.peak_flops", self.peak_flops, "needs at least one compute roof")
        for k, v in self.peak_flops.items():
            if k not in DTYPES:
                raise bad(f"{self.id}.peak_flops", k, f"unknown dtype; use one of {', '.join(DTYPES)}")
            if not (_real(v) and v > 0):
                raise bad(f"{self.id}.peak_flops.{k}", v, "must be a positive, finite number (FLOP/s)")
        for k in ("memory_bandwidth", "memory_capacity"):
            v = getattr(self, k)
            if not (_real(v) and v > 0):
                raise bad(f"{self.id}.{k}", v, "must be a positive, finite number")
        for k in ("power_idle", "power_peak", "energy_per_flop", "energy_per_byte", "l2_bytes", "clock"):
            v = getattr(self, k)
            if v is not None and not (_real(v) and v >= 0):
                raise bad(f"{self.id}.{k}", v, "must be a non-negative, finite number (or absent)")
        if self.power_idle is not None and self.power_peak is not None and self.power_idle > self.power_peak:
            raise bad(f"{self.id}.power_idle", self.power_idle, f"exceeds power_peak={self.power_peak}")
        if self.sm_count is not None and (isinstance(self.sm_count, bool) or not isinstance(self.sm_count, int)
                                          or self.sm_count <= 0):  # fmt: skip
            raise bad(f"{self.id}.sm_count", self.sm_count, "must be a positive integer (or absent)")
        tile = self.tile
        if not (
            isinstance(tile, (tuple, list)) and len(tile) == 2
            and all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in tile)
        ):  # fmt: skip
            raise bad(f"{self.id}.tile", tile, "must be two positive integers, e.g. (128, 128)")
        for k in ("compute_efficiency", "memory_efficiency"):
            v = getattr(self, k)
            if not (_real(v) and 0 < v <= 1):
                raise bad(f"{self.id}.{k}", v, "must be in (0, 1]")
        if self.vector_rate is not None and not (_real(self.vector_rate) and self.vector_rate > 0):
            raise bad(f"{self.id}.vector_rate", self.vector_rate, "must be a positive number (FLOP/s)")
        if not (_real(self.gemm_half_rows) and self.gemm_half_rows >= 0):
            raise bad(f"{self.id}.gemm_half_rows", self.gemm_half_rows, "must be a number of rows ≥ 0")
        if not (_real(self.gemv_half_k) and self.gemv_half_k >= 0):
            raise bad(f"{self.id}.gemv_half_k", self.gemv_half_k, "must be a number of elements ≥ 0")
        if not (_real(self.gemv16_half_k) and self.gemv16_half_k >= 0):
            raise bad(f"{self.id}.gemv16_half_k", self.gemv16_half_k, "must be a number of elements ≥ 0")
        if not (_real(self.gemv16_bandwidth) and self.gemv16_bandwidth >= 0 and math.isfinite(self.gemv16_bandwidth)):
            raise bad(f"{self.id}.gemv16_bandwidth", self.gemv16_bandwidth, "must be a finite bandwidth ≥ 0 (bytes/s)")
        if self.ex2_per_clk_sm is not None and not (_real(self.ex2_per_clk_sm) and self.ex2_per_clk_sm > 0):
            raise bad(f"{self.id}.ex2_per_clk_sm", self.ex2_per_clk_sm, "must be a positive number (per SM per clock)")
        if not (_real(self.kernel_overhead) and 0 <= self.kernel_overhead < 1):
            raise bad(f"{self.id}.kernel_overhead", self.kernel_overhead, "must be in [0, 1) seconds")
        for k, v in self.achieved.items():
            if k in DTYPES or k == "memory":
                if not (isinstance(v, (int, float)) and 0 < v <= 1):
                    raise bad(f"{self.id}.achieved.{k}", v, "must be a fraction in (0, 1]")
            elif k == "kernel_s" and not (isinstance(v, (int, float)) and 0 <= v < 1):
                raise bad(f"{self.id}.achieved.{k}", v, "must be in [0, 1) seconds")
        for k in ("architecture", "kernel_architecture"):
            v = getattr(self, k)
            if v is not None and v not in ARCHITECTURES:
                raise bad(f"{self.id}.{k}", v, f"must be one of {', '.join(ARCHITECTURES)}")
        if self.kernel_architecture is not None and self.architecture is None:
            raise bad(f"{self.id}.kernel_architecture", self.kernel_architecture, "needs an architecture")
        for k, tag in self.provenance.items():
            if tag not in PROVENANCE:
                raise bad(f"{self.id}.provenance.{k}", tag, f"must be one of {', '.join(PROVENANCE)}")

    def peak(self, dtype: str) -> float:
        """Dense peak of ``dtype`` in FLOP/s; raises if the device has no such roof."""
        if dtype not in self.peak_flops:
            raise bad("precision", dtype, f"device {self.id} has no {dtype} compute roof")
        return float(self.peak_flops[dtype])

    def roof(self, dtype: str) -> tuple[str, float]:
        """The roof a ``dtype`` GEMM runs on: its own, else the next wider one the device has.

        Returns ``(dtype_used, FLOP/s)``. An INT8 GEMM on a device without INT8 tensor cores runs
        at the FP16 rate, and so on up to the FP32 vector rate.
        """
        order = list(DTYPES)
        i = order.index(dtype)
        for cand in reversed(order[: i + 1]):
            if cand in self.peak_flops:
                return cand, float(self.peak_flops[cand])
        raise bad("precision", dtype, f"device {self.id} has no compute roof at or above {dtype}")

    @property
    def curves_architecture(self) -> str | None:
        """The architecture whose kernel curves and kernel choices price this device: ``kernel_architecture``, else
        ``architecture`` (``None``: no kernel curves)."""
        return self.kernel_architecture or self.architecture

    @property
    def vector_flops(self) -> float:
        """Non-tensor rate for softmax/norms/activations (``vector_rate``, else fp32, else the widest roof -- a
        stated fallback: :attr:`vector_fallback` says so in the run's notes)."""
        if self.vector_rate is not None:
            return float(self.vector_rate)
        return (
            self.roof("fp32")[1] if "fp32" in self.peak_flops else float(self.peak_flops[next(iter(self.peak_flops))])
        )

    @property
    def has_energy(self) -> bool:
        """True when energy can be priced: a peak power, or both per-FLOP and per-byte energies."""
        return self.power_peak is not None or (self.energy_per_flop is not None and self.energy_per_byte is not None)

    @property
    def vector_fallback(self) -> str | None:
        """How the vector roof (softmax, norms, activations) is guessed when the device gives neither
        ``vector_rate`` nor an ``fp32`` roof (a sentence for the run's notes), else ``None``."""
        if self.vector_rate is not None or "fp32" in self.peak_flops:
            return None
        dt = next(iter(self.peak_flops))
        return (
            f"device {self.id} gives no fp32 or vector figure: softmax, norms and activations run on its {dt} roof "
            f"({self.peak_flops[dt] / 1e12:.3g} TFLOP/s, optimistic); add fp32_tflops or vector_gflops to its file"
        )

    def ridge(self, dtype: str = "fp16") -> float:
        """Ridge point (FLOP/byte) of ``dtype``: peak / bandwidth."""
        return self.roof(dtype)[1] / self.memory_bandwidth

    def with_efficiency(self, compute: float | None = None, memory: float | None = None) -> Device:
        return dataclasses.replace(
            self,
            compute_efficiency=self.compute_efficiency if compute is None else compute,
            memory_efficiency=self.memory_efficiency if memory is None else memory,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict in SI units."""
        d = dataclasses.asdict(self)
        d["tile"] = list(self.tile)
        d["uncertain"] = list(self.uncertain)
        return d
