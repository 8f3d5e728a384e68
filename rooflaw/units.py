"""Human units <-> SI. The CLI accepts ``20ms``, ``8GB``, ``204.8GB/s``, ``2J``; everything inside is SI.

Text must carry its unit (``"20"`` is refused: 20 what?); a Python number is already SI (seconds, bytes, joules).
"""

from __future__ import annotations

import re

from .errors import bad

_TIME = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "min": 60.0}
_BYTES = {
    "b": 1.0,
    "kb": 1e3,
    "mb": 1e6,
    "gb": 1e9,
    "tb": 1e12,
    "kib": 2.0**10,
    "mib": 2.0**20,
    "gib": 2.0**30,
    "tib": 2.0**40,
}
_POWER = {"w": 1.0, "mw": 1e-3, "kw": 1e3}
_ENERGY = {"j": 1.0, "mj": 1e-3, "kj": 1e3, "uj": 1e-6, "wh": 3600.0}
_NUM = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"


def _parse(text: str | float, table: dict[str, float], field: str, default_unit: str) -> float:
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        m = re.fullmatch(_NUM + r"\s*([A-Za-zµ/]*)", str(text).strip())
        if not m:
            raise bad(field, text, f"not a number with a unit (e.g. 20{default_unit})")
        if not m.group(2):
            raise bad(field, text, f"needs a unit, e.g. {m.group(1)}{default_unit} (units: {', '.join(table)})")
        unit = m.group(2).lower()
        if unit == "mj" and table is _ENERGY and m.group(2) == "MJ":
            unit = "MJ"
        if unit not in table:
            raise bad(field, text, f"unknown unit {m.group(2)!r}; use one of {', '.join(table)}")
        value = float(m.group(1)) * table[unit]
    if not value > 0 or value == float("inf"):
        raise bad(field, text, "must be a positive, finite number")
    return value


def parse_time(text: str | float, field: str = "time") -> float:
    """``"20ms"`` -> 0.02 (seconds); a float is seconds already; text without a unit is refused."""
    return _parse(text, _TIME, field, "ms")


def parse_bytes(text: str | float, field: str = "memory") -> float:
    """``"8GB"`` -> 8e9, ``"8GiB"`` -> 8·2³⁰ (bytes); a float is bytes already; text without a unit is refused.
    A unit ending in a lowercase ``b`` (``8Gb``) means bits and is refused rather than read as bytes."""
    if isinstance(text, str) and re.search(r"[0-9.\s][kKmMgGtT]?i?b\s*$", text.strip()):
        raise bad(field, text, "a lowercase b means bits; write bytes with a capital B (e.g. 8GB, 8GiB)")
    return _parse(text, _BYTES, field, "GB")


def parse_energy(text: str | float, field: str = "energy") -> float:
    """``"2J"`` -> 2.0 (joules); a float is joules already; text without a unit is refused."""
    return _parse(text, _ENERGY, field, "J")


def parse_power(text: str | float, field: str = "power") -> float:
    """``"65W"`` -> 65.0 (watts), ``"1.2kW"`` -> 1200.0; a float is watts already; text without a unit is refused."""
    if isinstance(text, str) and re.fullmatch(r"\s*" + _NUM + r"\s*MW\s*", text):
        raise bad(field, text, "MW is megawatts; write mW for milliwatts or W for watts")
    return _parse(text, _POWER, field, "W")


def fmt_time(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.3g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} µs"


def fmt_energy(joules: float | None) -> str:
    """``"2.5 J"``; ``None``/NaN (a device with no power figures): ``"n/a (device has no power figures)"``."""
    if joules is None or joules != joules:
        return "n/a (device has no power figures)"
    return f"{joules:.3g} J"


def fmt_bytes(n: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def fmt_count(n: float) -> str:
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.4g}{unit}"
    return f"{n:.0f}"
