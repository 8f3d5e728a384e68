"""``System``: N devices and the interconnect between them (the scale-up domain and the scale-out network).

A system is read from the catalog (:file:`systems.toml`: HGX A100/H100/H200/B200, GB200/GB300 NVL72, PCIe-only
L4 and RTX 4090 boxes, a Jetson AGX Orin pair over 10 GbE, each with its source), from ``device:count``
(``h100-sxm:8``: that device's catalog interconnect, any count), from ``system-id`` or ``system-id:count``, or
from a TOML file with the same fields as a catalog entry plus ``device`` (a catalog id or device file).

Units inside: bytes/s per GPU and per direction, seconds. Catalog TOML uses GB/s and microseconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..errors import bad
from .catalog import get_device
from .device import Device

#: Most devices in one system (a count beyond it is a typo, not a cluster).
MAX_DEVICES = 2**20

SYSTEMS_FILE = Path(__file__).with_name("systems.toml")
#: Fields of a system entry (catalog or file) and whether they are required.
FIELDS = {
    "name": False, "device": False, "devices": False, "count": True, "node_size": True, "link": False,
    "link_gbs": True, "link_latency_us": True, "scale_out": False, "scale_out_gbs": True,
    "scale_out_latency_us": True, "latency_provenance": False, "source": False, "schema": False,
    "link_pj_per_bit": False, "scale_out_pj_per_bit": False, "energy_provenance": False, "energy_source": False,
    "link_contention": False, "contention_source": False,
}  # fmt: skip


@dataclass(frozen=True)
class System:
    """``count`` identical ``device`` s; groups of ``node_size`` share the scale-up links.

    ``link_bw``/``link_latency``: per-GPU bandwidth each way (bytes/s) and per-step latency (s) inside a node;
    ``scale_out_bw``/``scale_out_latency``: the same between nodes. ``link_pj_per_bit`` / ``scale_out_pj_per_bit``:
    energy per bit sent on each tier (pJ/bit, end to end: both ports and any switch; 0 = not modelled).
    ``link_contention``: exponent ``c`` of the fall of each rank's collective bandwidth with the group inside a
    node, ``(2/n)^c`` (:func:`rooflaw.constraints.kernels.collectives.rank_bandwidth`); ``None``: the link kind's
    (:data:`~rooflaw.constraints.kernels.collectives.CONTENTION`). A property of the box's topology (PCIe
    switches, peer-to-peer over the host bridge), with its ``contention_source``.
    """

    id: str
    name: str
    device: Device
    count: int
    node_size: int
    link_bw: float
    link_latency: float
    scale_out_bw: float
    scale_out_latency: float
    link: str = ""
    scale_out: str = ""
    source: str = ""
    latency_provenance: str = ""
    link_pj_per_bit: float = 0.0
    scale_out_pj_per_bit: float = 0.0
    energy_provenance: str = ""
    energy_source: str = ""
    link_contention: float | None = None
    contention_source: str = ""

    def __post_init__(self) -> None:
        for key in ("count", "node_size"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 < v <= MAX_DEVICES:
                raise bad(key, v, f"must be a positive integer ≤ {MAX_DEVICES}")
        for key in ("link_bw", "link_latency", "scale_out_bw", "scale_out_latency", "link_pj_per_bit",
                    "scale_out_pj_per_bit"):  # fmt: skip
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise bad(key, v, "must be a finite non-negative number")
        c = self.link_contention
        if c is not None and (isinstance(c, bool) or not isinstance(c, (int, float)) or not 0 <= c <= 4):
            raise bad("link_contention", c, "must be a number in [0, 4] (the exponent of (2/n))")
        for key in ("link_bw", "scale_out_bw"):
            if getattr(self, key) <= 0:
                raise bad(key, getattr(self, key), "must be positive")

    @property
    def nodes(self) -> int:
        return math.ceil(self.count / self.node_size)

    def spans_nodes(self, n: int) -> bool:
        """Whether a group of ``n`` consecutive ranks crosses a node boundary."""
        return n > self.node_size

    def describe(self) -> str:
        link = f"{self.link} " if self.link else ""
        out = f"{self.count}x {self.device.id}; {link}{self.link_bw / 1e9:.4g} GB/s each way per GPU"
        if self.count > self.node_size or self.node_size == 1:
            out += f", {self.node_size} per node, scale-out {self.scale_out_bw / 1e9:.4g} GB/s"
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "name": self.name, "device": self.device.id, "count": self.count,
            "node_size": self.node_size, "link": self.link, "link_bytes_per_s": self.link_bw,
            "link_latency_s": self.link_latency, "scale_out": self.scale_out,
            "scale_out_bytes_per_s": self.scale_out_bw, "scale_out_latency_s": self.scale_out_latency,
            "latency_provenance": self.latency_provenance, "source": self.source,
            "link_pj_per_bit": self.link_pj_per_bit, "scale_out_pj_per_bit": self.scale_out_pj_per_bit,
            "energy_provenance": self.energy_provenance, "energy_source": self.energy_source,
            "link_contention": self.link_contention, "contention_source": self.contention_source,
        }  # fmt: skip


def _read_toml(path: Path) -> dict[str, Any]:
    from ..safe_io import load

    data = load(path, "system", ".toml")
    if not isinstance(data, dict):  # pragma: no cover - TOML's top level is always a table
        raise bad("system", str(path), "must be a TOML table")
    return data


@lru_cache(maxsize=1)
def system_catalog() -> dict[str, dict[str, Any]]:
    """The catalog entries (raw TOML tables, GB/s and µs) by system id."""
    data = _read_toml(SYSTEMS_FILE)
    return {k: v for k, v in data.items() if isinstance(v, dict)}


def system_ids() -> list[str]:
    return sorted(system_catalog())


def _positive_int(v: object, key: str, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise bad(key, v, f"in {where} must be a positive integer")
    return v


def _number(entry: dict[str, Any], key: str, where: str) -> float:
    v = entry.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise bad(key, v, f"in {where} must be a finite non-negative number")
    return float(v)


def _build(sid: str, entry: dict[str, Any], device: Device, count: int | None, where: str) -> System:
    unknown = sorted(set(entry) - set(FIELDS))
    if unknown:
        raise bad(unknown[0], entry[unknown[0]], f"unknown field in {where}; known: {', '.join(FIELDS)}")
    missing = [k for k, req in FIELDS.items() if req and k not in entry and not (k == "count" and count)]
    if missing:
        raise bad(missing[0], None, f"missing in {where}")
    n = _positive_int(entry.get("count") if count is None else count, "count", where)
    node_size = _positive_int(entry["node_size"], "node_size", where)
    return System(
        id=sid if count is None or count == entry.get("count") else f"{sid}:{count}",
        name=str(entry.get("name", sid)), device=device, count=n, node_size=node_size,
        link_bw=_number(entry, "link_gbs", where) * 1e9, link_latency=_number(entry, "link_latency_us", where) * 1e-6,
        scale_out_bw=_number(entry, "scale_out_gbs", where) * 1e9,
        scale_out_latency=_number(entry, "scale_out_latency_us", where) * 1e-6,
        link=str(entry.get("link", "")), scale_out=str(entry.get("scale_out", "")), source=str(entry.get("source", "")),
        latency_provenance=str(entry.get("latency_provenance", "")),
        link_pj_per_bit=_number(entry, "link_pj_per_bit", where) if "link_pj_per_bit" in entry else 0.0,
        scale_out_pj_per_bit=_number(entry, "scale_out_pj_per_bit", where) if "scale_out_pj_per_bit" in entry else 0.0,
        energy_provenance=str(entry.get("energy_provenance", "" if "link_pj_per_bit" in entry else "not given")),
        energy_source=str(entry.get("energy_source", "")),
        link_contention=contention(entry, where), contention_source=str(entry.get("contention_source", "")),
    )  # fmt: skip


def contention(entry: dict[str, Any], where: str = "systems.toml") -> float | None:
    """The entry's ``link_contention`` exponent (``None`` when not given: the link kind's)."""
    if "link_contention" not in entry:
        return None
    v = entry["link_contention"]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 4:
        raise bad("link_contention", v, f"in {where} must be a number in [0, 4] (the exponent of (2/n))")
    return float(v)


def _parse_count(text: str, spec: str) -> int:
    if not (text.isascii() and text.isdigit()) or not 0 < int(text) <= MAX_DEVICES:
        raise bad("system", spec, f"count {text!r} after ':' must be a positive integer ≤ {MAX_DEVICES}")
    return int(text)


def get_system(spec: str | Path | System) -> System:
    """A :class:`System` from ``device:count`` (``h100-sxm:8``), a catalog system id (``hgx-h100``, optionally
    ``:count``) or a TOML file (catalog fields plus ``device``)."""
    if isinstance(spec, System):
        return spec
    text = str(spec).strip()
    path = Path(text).expanduser()
    if text.endswith(".toml") or path.is_file():
        from ..safe_io import exists

        if not exists(path):
            raise bad("system", text, "no such file")
        entry = _read_toml(path)
        if "device" not in entry:
            raise bad("device", None, f"missing in {text} (a catalog device id or device file)")
        dev = get_device(entry["device"])
        return _build(path.stem, entry, dev, None, text)
    name, _, cnt = text.partition(":")
    count = _parse_count(cnt, text) if cnt else None
    cat = system_catalog()
    if name in cat:
        entry = cat[name]
        return _build(name, entry, get_device(entry["devices"][0]), count, f"systems catalog entry {name}")
    for sid, entry in cat.items():
        if name in entry.get("devices", ()):
            return _build(sid, entry, get_device(name), count if count is not None else 1, f"systems catalog {sid}")
    known = sorted({d for e in cat.values() for d in e.get("devices", ())})
    raise bad("system", text, f"no interconnect known for {name!r}; systems: {', '.join(cat)}; devices with an "
              f"interconnect: {', '.join(known)}; or give a system TOML file")  # fmt: skip


def single(device: Device) -> System:
    """A one-device system (no interconnect is ever used)."""
    return System(device.id, device.name, device, 1, 1, 1.0, 0.0, 1.0, 0.0)


__all__ = ["SYSTEMS_FILE", "System", "get_system", "single", "system_catalog", "system_ids"]
