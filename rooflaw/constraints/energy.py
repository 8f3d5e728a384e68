"""Energy of a run: idle power over its seconds plus per-FLOP and per-byte energies (for :mod:`.assembly`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from .streams import ROOF_CLASSES, roof

#: Share of the dynamic power attributed to compute (the rest to memory traffic) when a device
#: gives only idle and peak power: E = P_idle·T + (P_peak − P_idle)·(w·Σ F/π + (1 − w)·Σ bytes/β).
COMPUTE_POWER_SHARE = 0.5


@dataclass(frozen=True)
class EnergyCoefficients:
    """E = p_idle·seconds + Σ_class per_flop[class]·FLOPs + per_byte·bytes (J); ``None`` when unknown."""

    p_idle: float
    per_flop: dict[str, float]
    per_byte: float


class EnergyTerms(Protocol):
    """What :func:`energy` reads: :class:`EnergyCoefficients`, or the same three terms as any backend's numbers
    (sympy symbols in the theory mode, traced names in the numba source)."""

    @property
    def p_idle(self) -> Any: ...
    @property
    def per_flop(self) -> Mapping[str, Any]: ...
    @property
    def per_byte(self) -> Any: ...


def energy_coefficients(device: Any, precision: Any) -> EnergyCoefficients | None:
    """Per-FLOP/per-byte energies of a device: given (``energy_per_flop``/``_byte``), or from idle and peak
    power: the dynamic power split COMPUTE_POWER_SHARE to compute at the raw roofs, the rest to memory."""
    idle = float(device.power_idle or 0.0)
    if device.energy_per_flop is not None and device.energy_per_byte is not None:
        ef = float(device.energy_per_flop)
        return EnergyCoefficients(idle, {c: ef for c in ROOF_CLASSES}, float(device.energy_per_byte))
    if device.power_peak is None:
        return None
    dyn = float(device.power_peak) - idle
    per_flop = {c: dyn * COMPUTE_POWER_SHARE / float(roof(c, device, precision)[1]) for c in ROOF_CLASSES}
    return EnergyCoefficients(idle, per_flop, dyn * (1 - COMPUTE_POWER_SHARE) / float(device.memory_bandwidth))


def energy(coef: EnergyTerms | None, seconds: Any, flops: Mapping[str, Any], nbytes: Any) -> Any:
    """Energy (J) of ``seconds`` of runtime doing ``flops`` per class and moving ``nbytes`` (any backend's
    numbers: floats, arrays, sympy expressions)."""
    if coef is None:
        return seconds * float("nan")
    out = coef.p_idle * seconds + coef.per_byte * nbytes
    for c in ROOF_CLASSES:
        out = out + coef.per_flop[c] * flops[c]
    return out
