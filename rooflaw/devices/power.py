"""Power figures for a calibrated device: stated by the user, or read from the machine where it exposes them.

- Linux RAPL (``/sys/class/powercap/intel-rapl:N/energy_uj``, package domains): the average power over a run is
  the energy counter's increase divided by the run's wall time (the counter wraps at ``max_energy_range_uj``);
- ``nvidia-smi --query-gpu=power.draw,power.limit``: a GPU's present draw and its enforced board power limit.

Every reader returns ``None`` where the machine does not expose the figure; nothing here guesses.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from .device import Device

RAPL_ROOT = Path("/sys/class/powercap")
T = TypeVar("T")


@dataclass(frozen=True)
class PowerReading:
    """Watts, and where they came from (``provenance`` as in the device catalog, ``source`` in words)."""

    idle: float | None
    peak: float | None
    provenance: str
    source: str


def _rapl_domains(root: Path = RAPL_ROOT) -> list[Path]:
    """Package-level RAPL domains (``intel-rapl:0``, ``intel-rapl:1`` …; not their ``:0:0`` sub-domains)."""
    if not root.is_dir():
        return []
    out = []
    for d in sorted(root.glob("intel-rapl:*")):
        if d.name.count(":") == 1 and (d / "energy_uj").is_file():
            out.append(d)
    return out


def _read_uj(domains: list[Path]) -> list[int] | None:
    try:
        return [int((d / "energy_uj").read_text().strip()) for d in domains]
    except (OSError, ValueError):  # unreadable (permissions) or odd contents: not exposed
        return None


def _joules(before: list[int], after: list[int], domains: list[Path]) -> float:
    total = 0
    for b, a, d in zip(before, after, domains, strict=True):
        delta = a - b
        if delta < 0:  # the counter wrapped
            try:
                delta += int((d / "max_energy_range_uj").read_text().strip())
            except (OSError, ValueError):
                return float("nan")
        total += delta
    return total * 1e-6


def rapl_average_power(run: Callable[[], T], root: Path = RAPL_ROOT) -> tuple[T, float | None]:
    """``run()``'s result and the average package power (W) RAPL saw during it; ``None`` without RAPL."""
    domains = _rapl_domains(root)
    before = _read_uj(domains) if domains else None
    t0 = time.perf_counter()
    out = run()
    dt = time.perf_counter() - t0
    after = _read_uj(domains) if before is not None else None
    if before is None or after is None or dt <= 0:
        return out, None
    j = _joules(before, after, domains)
    return out, (j / dt if j == j and j >= 0 else None)


def rapl_power(
    run: Callable[[], T], idle_seconds: float = 0.5, root: Path = RAPL_ROOT
) -> tuple[T, PowerReading | None]:
    """``run()``'s result and a :class:`PowerReading`: idle = RAPL over ``idle_seconds`` of sleep, peak = RAPL
    over ``run`` (the calibration's measurements load the cores); ``None`` where RAPL is not exposed."""
    _, idle = rapl_average_power(lambda: time.sleep(idle_seconds), root)
    out, loaded = rapl_average_power(run, root)
    if idle is None or loaded is None:
        return out, None
    return out, PowerReading(min(idle, loaded), loaded, "measured", "RAPL package energy (/sys/class/powercap)")


def nvidia_smi_power(timeout: float = 5.0) -> PowerReading | None:
    """The first GPU's present draw (as idle, read before any load) and its enforced power limit (as peak), from
    ``nvidia-smi``; ``None`` without it, on an error, or after ``timeout`` seconds."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        r = subprocess.run(
            [exe, "--query-gpu=power.draw,power.limit", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        draw, limit = (float(x) for x in r.stdout.splitlines()[0].split(",")[:2])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None
    if not (0 < draw <= limit < 1e5):
        return None
    return PowerReading(draw, limit, "measured", "nvidia-smi power.draw (idle) and power.limit")


def stated_power(watts: float) -> PowerReading:
    """A power under load the user gave (``--power 65W``); no idle figure."""
    return PowerReading(None, float(watts), "assumed", f"stated by the user: --power {watts:g}W")


def with_power(device: Device, reading: PowerReading | None) -> Device:
    """``device`` with the power figures of ``reading`` (and their provenance and source); unchanged for ``None``.

    A base device's own idle figure is kept when the reading has none and it does not exceed the new peak."""
    if reading is None:
        return device
    prov, src = dict(device.provenance), dict(device.sources)
    idle = reading.idle
    if (
        idle is None
        and device.power_idle is not None
        and reading.peak is not None
        and device.power_idle <= reading.peak
    ):
        idle = device.power_idle
    elif idle is not None:
        prov["power_idle"], src["power_idle"] = reading.provenance, reading.source
    if idle is None:
        prov.pop("power_idle", None)
        src.pop("power_idle", None)
    prov["power_peak"], src["power_peak"] = reading.provenance, reading.source
    return dataclasses.replace(
        device, power_idle=idle, power_peak=reading.peak, provenance=prov, sources=src,
        energy_per_flop=None, energy_per_byte=None,
    )  # fmt: skip
