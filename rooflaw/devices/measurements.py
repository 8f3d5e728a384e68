"""What the CPU calibration measured (:class:`Measurements`, SI units) and the machine's memory capacity: below both
the measuring session (:mod:`.calibrate_session`) and the device it becomes (:mod:`.calibrate`)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import RooflawError


@dataclass(frozen=True)
class Measurements:
    """Raw results of :func:`measure` (SI units)."""

    gemm_flops: float  #: float32 GEMM FLOP/s
    gemm_n: int  #: matrix size used
    memory_bandwidth: float  #: bytes/s
    copy_bandwidth: float  #: bytes/s of the copy kernel (2 x nbytes per call)
    read_bandwidth: float  #: bytes/s of the sum kernel (nbytes per call)
    array_bytes: int  #: size of the bandwidth array
    vector_flops: float  #: float32 elementwise FLOP/s
    memory_capacity: float  #: bytes
    threads: int  #: logical CPUs
    op_overhead: float = 0.0  #: seconds per eager torch op (0: torch not installed)
    gemm16_flops: float = 0.0  #: bf16 torch ``F.linear`` FLOP/s (0: torch not installed)
    torch_gemm_flops: float = 0.0  #: fp32 torch ``F.linear`` FLOP/s, 128 tokens, cold weights (0: no torch)
    gemv_bandwidth: float = 0.0  #: bytes/s of a one-token fp32 GEMV over cold weights (0: no torch)
    torch_threads: int = 0  #: torch intra-op threads the torch figures were measured with (0: no torch)
    gemm_half_rows: float = 0.0  #: rows at which torch fp32 ``F.linear`` runs at half its large-M rate (0: none)
    gemv_half_k: float = 0.0  #: inner dimension at which a one-token GEMV streams at half its long-row rate
    clock: str = "wall"  #: the clock the timings read (``wall`` or thread ``cpu`` time)
    gemv16_bandwidth: float = 0.0  #: bytes/s of a one-token bf16 GEMV over cold weights (0: no torch)
    gemv16_half_k: float = 0.0  #: its K curve, as ``gemv_half_k``

    @property
    def linear_flops(self) -> float:
        """The fp32 GEMM roof: torch's rate when measured (what eager decoders run), else numpy's."""
        return self.torch_gemm_flops or self.gemm_flops

    @property
    def stream_bandwidth(self) -> float:
        """The bandwidth roof: torch's decode GEMV when measured, else numpy's copy/read."""
        return self.gemv_bandwidth or self.memory_bandwidth


def memory_capacity() -> float:
    """This machine's physical memory in bytes (``/proc/meminfo``, else ``sysconf``)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return float(line.split()[1]) * 1024.0
    except OSError:
        pass
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        raise RooflawError("calibrate: cannot read the memory capacity of this machine") from None
