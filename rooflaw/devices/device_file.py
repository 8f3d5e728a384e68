"""The device catalog: one TOML file per device, user device files and plug-in devices.

File schema (documented with a full example in ``docs/devices.md``)::

    schema = 1
    id = "h100-sxm"
    name = "NVIDIA H100 SXM5 80GB"
    vendor = "NVIDIA"
    kind = "gpu"                       # gpu | soc | tpu | cpu | npu
    provenance = "datasheet"           # default provenance of every figure
    source = "https://..."             # default source URL of every figure
    uncertain = ["fp8_tflops"]         # file keys (or Device field names) flagged as doubtful
    notes = "free text"

    fp16_tflops = 989.5                # dense peaks: <dtype>_tflops or <dtype>_tops, 1e12 FLOP/s
    fp32_tflops = { value = 67, provenance = "datasheet", source = "https://...", note = "..." }
    int8_tops = { sparse = 3958 }      # a sparse vendor figure: halved, tagged ``derived``
    bandwidth_gbs = 3350               # 1e9 bytes/s
    memory_gb = 80                     # 1e9 bytes
    l2_mb = 50                         # or l2_mib
    boost_clock_mhz = 1980             # the clock of the datasheet peaks (kernel curves count cycles of it)
    power_idle_w = 140
    power_peak_w = 700
    sm_count = 132
    sfu_ex2_per_clk_sm = 16            # exponentials per SM per clock (default 16; Blackwell Ultra 32)
    tile = [256, 128]

    [modes."30W"]                      # optional power modes -> id "h100-sxm@30W"
    provenance = "derived"
    power_peak_w = 30
    int8_tops = { value = 20.5, note = "41 sparse / 2" }

Every figure may be a bare number (file-level ``provenance``/``source`` apply) or an inline table
with ``value`` (or ``sparse``), ``provenance``, ``source`` and ``note``. The loader converts to SI.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
from pathlib import Path
from typing import Any

from ..errors import RooflawError
from .device import ARCHITECTURES, DTYPES, PROVENANCE, Device

SCHEMA_VERSION = 1

#: file key -> (Device field, factor to SI). Compute keys are generated below.
SCALAR_KEYS: dict[str, tuple[str, float]] = {
    "bandwidth_gbs": ("memory_bandwidth", 1e9),
    "bandwidth_tbs": ("memory_bandwidth", 1e12),
    "memory_gb": ("memory_capacity", 1e9),
    "memory_gib": ("memory_capacity", 2.0**30),
    "l2_mb": ("l2_bytes", 1e6),
    "l2_mib": ("l2_bytes", 2.0**20),
    "boost_clock_mhz": ("clock", 1e6),
    "power_idle_w": ("power_idle", 1.0),
    "power_peak_w": ("power_peak", 1.0),
    "energy_per_flop_pj": ("energy_per_flop", 1e-12),
    "energy_per_byte_pj": ("energy_per_byte", 1e-12),
    "compute_efficiency": ("compute_efficiency", 1.0),
    "memory_efficiency": ("memory_efficiency", 1.0),
    "kernel_overhead_us": ("kernel_overhead", 1e-6),
    "gemm_half_rows": ("gemm_half_rows", 1.0),
    "gemv_half_k": ("gemv_half_k", 1.0),
    "gemv16_bandwidth_gbs": ("gemv16_bandwidth", 1e9),
    "gemv16_half_k": ("gemv16_half_k", 1.0),
    "vector_gflops": ("vector_rate", 1e9),
    "sfu_ex2_per_clk_sm": ("ex2_per_clk_sm", 1.0),
}
for _dt in DTYPES:
    SCALAR_KEYS[f"{_dt}_tflops"] = (f"peak_flops.{_dt}", 1e12)
    SCALAR_KEYS[f"{_dt}_tops"] = (f"peak_flops.{_dt}", 1e12)
_INT_KEYS = {"sm_count": "sm_count"}
_META_KEYS = {
    "schema",
    "id",
    "name",
    "vendor",
    "kind",
    "architecture",
    "kernel_architecture",
    "provenance",
    "source",
    "uncertain",
    "notes",
    "modes",
    "achieved",
}
_MODE_META_KEYS = {"name", "provenance", "source", "notes", "uncertain", "compute_scale"}
_FIGURE_TABLE_KEYS = {"value", "sparse", "provenance", "source", "note"}
KINDS = ("gpu", "soc", "tpu", "cpu", "npu", "accelerator")

#: Device field -> preferred file key (used by the writer and to normalise ``uncertain``).
FIELD_TO_KEY: dict[str, str] = {
    "memory_bandwidth": "bandwidth_gbs",
    "memory_capacity": "memory_gb",
    "l2_bytes": "l2_mb",
    "clock": "boost_clock_mhz",
    "power_idle": "power_idle_w",
    "power_peak": "power_peak_w",
    "energy_per_flop": "energy_per_flop_pj",
    "energy_per_byte": "energy_per_byte_pj",
    "compute_efficiency": "compute_efficiency",
    "memory_efficiency": "memory_efficiency",
    "kernel_overhead": "kernel_overhead_us",
    "gemm_half_rows": "gemm_half_rows",
    "gemv_half_k": "gemv_half_k",
    "gemv16_bandwidth": "gemv16_bandwidth_gbs",
    "gemv16_half_k": "gemv16_half_k",
    "vector_rate": "vector_gflops",
    "ex2_per_clk_sm": "sfu_ex2_per_clk_sm",
    "sm_count": "sm_count",
    "tile": "tile",
}
for _dt in DTYPES:
    FIELD_TO_KEY[f"peak_flops.{_dt}"] = f"{_dt}_tops" if _dt.startswith("int") else f"{_dt}_tflops"


#: Largest integer field of a device file (SM count, tile sides) and longest device id.
MAX_FILE_INT = 2**31 - 1
MAX_ID = 100


def _err(where: str, field: str, value: object, why: str) -> RooflawError:
    return RooflawError(f"{where}: {field}={value!r}: {why}")


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _normalise_field(name: str) -> str:
    """A file key or Device field name -> Device field name (``fp8_tflops`` -> ``peak_flops.fp8``)."""
    if name in SCALAR_KEYS:
        return SCALAR_KEYS[name][0]
    return name


def _check_provenance(where: str, field: str, value: object) -> str:
    if value not in PROVENANCE:
        raise _err(where, field, value, f"provenance must be one of {', '.join(PROVENANCE)}")
    return str(value)


def _check_url(where: str, field: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _err(where, field, value, "source must be a non-empty string (a URL or a citation)")
    return value


class _Builder:
    """Accumulates Device keyword arguments from the figures of one file (or mode)."""

    def __init__(self, where: str, provenance: str, source: str | None):
        self.where = where
        self.provenance = provenance
        self.source = source
        self.kwargs: dict[str, Any] = {}
        self.peak: dict[str, float] = {}
        self.prov: dict[str, str] = {}
        self.src: dict[str, str] = {}
        self.notes: list[tuple[str, str]] = []  # (field, note)

    def figure(self, key: str, raw: object) -> None:
        field_name, factor = SCALAR_KEYS[key]
        prov, src, note = self.provenance, self.source, None
        if isinstance(raw, dict):
            extra = set(raw) - _FIGURE_TABLE_KEYS
            if extra:
                raise _err(self.where, f"{key}.{sorted(extra)[0]}", raw[sorted(extra)[0]], "unknown key in figure")
            if ("value" in raw) == ("sparse" in raw):
                raise _err(self.where, key, raw, "a figure table needs exactly one of 'value' or 'sparse'")
            if "sparse" in raw:
                value = raw["sparse"]
                if not _is_number(value) or value <= 0:
                    raise _err(self.where, f"{key}.sparse", value, "must be a positive number")
                value = value / 2
                prov = "derived"
                note = f"dense = {raw['sparse']:g} sparse / 2"
            else:
                value = raw["value"]
            if "provenance" in raw:
                prov = _check_provenance(self.where, f"{key}.provenance", raw["provenance"])
            if "source" in raw:
                src = _check_url(self.where, f"{key}.source", raw["source"])
            if "note" in raw:
                if not isinstance(raw["note"], str):
                    raise _err(self.where, f"{key}.note", raw["note"], "must be a string")
                note = raw["note"] if note is None else f"{note}; {raw['note']}"
        else:
            value = raw
        if not _is_number(value) or value <= 0:
            raise _err(self.where, key, value, "must be a positive finite number")
        si = float(value) * factor
        if not math.isfinite(si):
            raise _err(self.where, key, value, "overflows a double in SI units")
        if field_name in self.prov:
            first = FIELD_TO_KEY.get(field_name, field_name)
            raise _err(self.where, key, value, f"sets {field_name} again (already given, e.g. as {first!r})")
        if field_name in ("compute_efficiency", "memory_efficiency") and si > 1:
            raise _err(self.where, key, value, "must be in (0, 1]")
        if field_name.startswith("peak_flops."):
            self.peak[field_name.split(".", 1)[1]] = si
        else:
            self.kwargs[field_name] = si
        self.prov[field_name] = prov
        if src:
            self.src[field_name] = src
        if note:
            self.notes.append((field_name, note))

    def integer(self, key: str, raw: object) -> None:
        prov, src = self.provenance, self.source
        if isinstance(raw, dict):
            prov = _check_provenance(self.where, f"{key}.provenance", raw.get("provenance", prov))
            src = _check_url(self.where, f"{key}.source", raw["source"]) if "source" in raw else src
            if raw.get("note"):
                self.notes.append((_INT_KEYS[key], str(raw["note"])))
            raw = raw.get("value")
        if not isinstance(raw, int) or isinstance(raw, bool) or not 0 < raw <= MAX_FILE_INT:
            raise _err(self.where, key, raw, f"must be a positive integer ≤ {MAX_FILE_INT}")
        self.kwargs[_INT_KEYS[key]] = raw
        self.prov[_INT_KEYS[key]] = prov
        if src:
            self.src[_INT_KEYS[key]] = src

    def tile(self, raw: object) -> None:
        prov, src = "assumed", self.source
        if isinstance(raw, dict):
            prov = _check_provenance(self.where, "tile.provenance", raw.get("provenance", prov))
            src = _check_url(self.where, "tile.source", raw["source"]) if "source" in raw else src
            if raw.get("note"):
                self.notes.append(("tile", str(raw["note"])))
            raw = raw.get("value")
        if (
            not isinstance(raw, list)
            or len(raw) != 2
            or not all(isinstance(x, int) and not isinstance(x, bool) and 0 < x <= MAX_FILE_INT for x in raw)
        ):
            raise _err(self.where, "tile", raw, f"must be two positive integers ≤ {MAX_FILE_INT}, e.g. [128, 128]")
        self.kwargs["tile"] = (raw[0], raw[1])
        self.prov["tile"] = prov
        if src:
            self.src["tile"] = src

    def take(self, data: dict[str, Any], meta: set[str]) -> None:
        for key, raw in data.items():
            if key in meta:
                continue
            if key in SCALAR_KEYS:
                self.figure(key, raw)
            elif key in _INT_KEYS:
                self.integer(key, raw)
            elif key == "tile":
                self.tile(raw)
            else:
                near = difflib.get_close_matches(key, [*SCALAR_KEYS, *_INT_KEYS, "tile", *meta], n=1)
                hint = f" (did you mean {near[0]!r}?)" if near else ""
                raise _err(self.where, key, raw, f"unknown field{hint}")


def _str_field(where: str, data: dict[str, Any], key: str, default: str | None = None) -> str:
    if key not in data:
        if default is None:
            raise _err(where, key, None, "required field is missing")
        return default
    v = data[key]
    if not isinstance(v, str) or (key == "id" and not v.strip()):
        raise _err(where, key, v, "must be a non-empty string" if key == "id" else "must be a string")
    return v


def _uncertain(where: str, raw: object) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise _err(where, "uncertain", raw, "must be a list of field names")
    return tuple(dict.fromkeys(_normalise_field(x) for x in raw))


#: Keys of an ``[achieved]`` table (fitted achieved-performance figures, see constraints/engines.py).
_ACHIEVED_KEYS = {"family", "engine", "provenance", "rows", "command", "memory", "kernel_s", *DTYPES}


def _achieved(where: str, raw: object) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise _err(where, "achieved", raw, "must be a table")
    extra = set(raw) - _ACHIEVED_KEYS
    if extra:
        k = sorted(extra)[0]
        raise _err(where, f"achieved.{k}", raw[k], f"unknown key; known: {', '.join(sorted(_ACHIEVED_KEYS))}")
    return dict(raw)


def _make_device(where: str, **kw: Any) -> Device:
    try:
        return Device(**kw)
    except RooflawError as e:
        raise RooflawError(f"{where}: {e}") from None
    except TypeError as e:  # pragma: no cover - defensive
        raise RooflawError(f"{where}: {e}") from None


def parse_device_dict(data: dict[str, Any], where: str = "<device>") -> list[Device]:
    """Parse one device table (the file schema) into the base device followed by its power modes."""
    if not isinstance(data, dict):
        raise _err(where, "device", data, "must be a table")
    schema = data.get("schema", SCHEMA_VERSION)
    if schema != SCHEMA_VERSION:
        raise _err(where, "schema", schema, f"unsupported schema version; this rooflaw reads {SCHEMA_VERSION}")
    dev_id = _str_field(where, data, "id")
    if "@" in dev_id or any(c.isspace() for c in dev_id):
        raise _err(where, "id", dev_id, "must not contain '@' or whitespace")
    if len(dev_id) > MAX_ID:
        raise _err(where, "id", dev_id[:40] + "...", f"is {len(dev_id)} characters long; at most {MAX_ID}")
    name = _str_field(where, data, "name", dev_id)
    vendor = _str_field(where, data, "vendor", "")
    kind = _str_field(where, data, "kind", "gpu")
    if kind not in KINDS:
        raise _err(where, "kind", kind, f"must be one of {', '.join(KINDS)}")
    architecture = _str_field(where, data, "architecture", "") or None
    if architecture is not None and architecture not in ARCHITECTURES:
        raise _err(where, "architecture", architecture, f"must be one of {', '.join(ARCHITECTURES)}")
    kernel_architecture = _str_field(where, data, "kernel_architecture", "") or None
    if kernel_architecture is not None and kernel_architecture not in ARCHITECTURES:
        raise _err(where, "kernel_architecture", kernel_architecture, f"must be one of {', '.join(ARCHITECTURES)}")
    notes = _str_field(where, data, "notes", "")
    prov = _check_provenance(where, "provenance", data.get("provenance", "datasheet"))
    source = _check_url(where, "source", data["source"]) if "source" in data else None
    uncertain = _uncertain(where, data.get("uncertain"))

    b = _Builder(where, prov, source)
    b.take(data, _META_KEYS)
    for req in ("memory_bandwidth", "memory_capacity"):
        if req not in b.kwargs:
            raise _err(where, FIELD_TO_KEY[req], None, "required field is missing")
    if not b.peak:
        raise _err(where, "fp16_tflops", None, "a device needs at least one compute roof (<dtype>_tflops)")
    all_notes = "; ".join(x for x in [notes, *(f"{f}: {n}" for f, n in b.notes)] if x)
    base = _make_device(
        where,
        id=dev_id,
        name=name,
        vendor=vendor,
        kind=kind,
        architecture=architecture,
        kernel_architecture=kernel_architecture,
        peak_flops=dict(b.peak),
        provenance=dict(b.prov),
        sources=dict(b.src),
        uncertain=uncertain,
        notes=all_notes,
        achieved=_achieved(where, data.get("achieved")),
        **b.kwargs,
    )
    out = [base]
    modes = data.get("modes", {})
    if not isinstance(modes, dict):
        raise _err(where, "modes", modes, "must be a table of tables, e.g. [modes.30W]")
    for mode, mdata in modes.items():
        out.append(_parse_mode(where, base, str(mode), mdata, notes, b.notes))
    return out


def _parse_mode(
    where: str,
    base: Device,
    mode: str,
    mdata: object,
    base_notes: str,
    base_field_notes: list[tuple[str, str]],
) -> Device:
    mwhere = f"{where}: modes.{mode}"
    if not isinstance(mdata, dict):
        raise _err(where, f"modes.{mode}", mdata, "must be a table")
    if not mode or "@" in mode or any(c.isspace() for c in mode):
        raise _err(where, f"modes.{mode}", mode, "mode names must be non-empty without '@' or whitespace")
    prov = _check_provenance(mwhere, "provenance", mdata.get("provenance", "derived"))
    source = _check_url(mwhere, "source", mdata["source"]) if "source" in mdata else None
    b = _Builder(mwhere, prov, source)
    b.take(mdata, _MODE_META_KEYS)
    peak = dict(base.peak_flops)
    provenance = dict(base.provenance)
    sources = dict(base.sources)
    overridden = set(b.prov)
    notes = [base_notes] if base_notes else []
    notes.extend(f"{f}: {n}" for f, n in base_field_notes if f not in overridden)
    scale = mdata.get("compute_scale")
    if scale is not None:
        if not _is_number(scale) or scale <= 0:
            raise _err(mwhere, "compute_scale", scale, "must be a positive number")
        for dt in peak:
            if dt not in b.peak:
                peak[dt] = peak[dt] * scale
                provenance[f"peak_flops.{dt}"] = prov
        notes.append(f"mode {mode}: compute roofs not given scaled by {scale:g}")
    peak.update(b.peak)
    provenance.update(b.prov)
    sources.update(b.src)
    if mdata.get("notes"):
        notes.append(f"mode {mode}: {mdata['notes']}")
    notes.extend(f"mode {mode}: {f}: {n}" for f, n in b.notes)
    uncertain = tuple(dict.fromkeys([*base.uncertain, *_uncertain(mwhere, mdata.get("uncertain"))]))
    name = mdata.get("name", f"{base.name} @ {mode}")
    return _make_device(
        mwhere,
        **{
            **{f.name: getattr(base, f.name) for f in dataclasses.fields(Device)},
            "id": f"{base.id}@{mode}",
            "name": str(name),
            "peak_flops": peak,
            "provenance": provenance,
            "sources": sources,
            "uncertain": uncertain,
            "notes": "; ".join(x for x in notes if x),
            **b.kwargs,
        },
    )


def _read_file(path: Path) -> dict[str, Any]:
    from ..safe_io import load

    if not path.exists():
        raise RooflawError(f"device file {str(path)!r} not found")
    data = load(path, "device", ".json" if path.suffix.lower() == ".json" else ".toml")
    if not isinstance(data, dict):
        raise RooflawError(f"{path}: top level must be a table")
    return data


def load_device_file(path: str | os.PathLike[str]) -> Device | list[Device]:
    """Load a user device file (TOML, or JSON with the same schema).

    Returns one :class:`Device` when the file describes a single device without power modes,
    otherwise the list ``[base, base@mode1, ...]`` (a file may also hold several devices as a
    ``[[devices]]`` array of tables).
    """
    p = Path(path)
    data = _read_file(p)
    if "devices" in data:
        items = data["devices"]
        if not isinstance(items, list) or not items:
            raise _err(str(p), "devices", items, "must be a non-empty array of tables ([[devices]])")
        out: list[Device] = []
        for i, item in enumerate(items):
            out.extend(parse_device_dict(item, f"{p} [devices #{i}]"))
        return out
    devs = parse_device_dict(data, str(p))
    return devs[0] if len(devs) == 1 else devs


__all__ = ["SCHEMA_VERSION", "load_device_file", "parse_device_dict"]
