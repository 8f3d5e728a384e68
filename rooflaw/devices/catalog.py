"""The device catalog: the bundled TOML files (one per device, format in :mod:`.device_file`), user device
files and plug-in devices (entry points ``rooflaw.devices``), and looking a device up by id, id@mode or path."""

from __future__ import annotations

import difflib
import os
import warnings
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..errors import RooflawError
from .device import Device

__all__ = [
    "CATALOG_DIR",
    "ENTRY_POINT_GROUP",
    "SCHEMA_VERSION",
    "device_ids",
    "get_device",
    "list_devices",
    "load_device_file",
    "parse_device_dict",
    "plugin_devices",
    "devices_from_entry_point",
    "clear_cache",
]

from .device_file import (  # noqa: F401 (re-exported: the catalog's public file functions)
    SCHEMA_VERSION,
    load_device_file,
    parse_device_dict,
)

CATALOG_DIR = Path(__file__).with_name("catalog")
ENTRY_POINT_GROUP = "rooflaw.devices"


def _as_list(x: Device | list[Device]) -> list[Device]:
    return x if isinstance(x, list) else [x]


@lru_cache(maxsize=1)
def _catalog() -> dict[str, Device]:
    out: dict[str, Device] = {}
    for f in sorted(CATALOG_DIR.glob("*.toml")):
        for d in _as_list(load_device_file(f)):
            if d.id in out:
                raise RooflawError(f"{f}: id={d.id!r}: duplicate device id in the catalog")
            out[d.id] = d
    return out


# ----------------------------------------------------------------------------- plug-ins


def _entry_points() -> Iterable[Any]:
    from importlib.metadata import entry_points

    return entry_points(group=ENTRY_POINT_GROUP)


def devices_from_entry_point(ep: Any) -> list[Device]:
    """Resolve one ``rooflaw.devices`` entry point.

    The object it loads may be a :class:`Device`, a callable returning a Device or a list of
    them, or a path (``str``/``PathLike``) to a device file.
    """
    label = f"plug-in {getattr(ep, 'name', '?')!r} ({getattr(ep, 'value', '?')})"
    try:
        obj = ep.load()
    except Exception as e:  # noqa: BLE001 - report any import failure as one line
        raise RooflawError(f"{label}: failed to load: {type(e).__name__}: {e}") from None
    if callable(obj) and not isinstance(obj, Device):
        try:
            obj = obj()
        except RooflawError as e:
            raise RooflawError(f"{label}: {e}") from None
        except Exception as e:  # noqa: BLE001
            raise RooflawError(f"{label}: raised {type(e).__name__}: {e}") from None
    if isinstance(obj, (str, os.PathLike)):
        return _as_list(load_device_file(obj))
    items = list(obj) if isinstance(obj, (list, tuple)) else [obj]
    for it in items:
        if not isinstance(it, Device):
            raise RooflawError(
                f"{label}: loaded {type(it).__name__}, expected a Device, a list of Devices or a file path"
            )
    return items


_plugin_cache: dict[str, Device] | None = None


def plugin_devices(strict: bool = False) -> dict[str, Device]:
    """Devices registered in the ``rooflaw.devices`` entry-point group, by id (cached).

    A plug-in that fails to load raises ``RooflawError`` when ``strict``, else it is skipped
    with a warning naming it.
    """
    global _plugin_cache
    if _plugin_cache is not None and not strict:
        return _plugin_cache
    out: dict[str, Device] = {}
    for ep in _entry_points():
        try:
            devs = devices_from_entry_point(ep)
        except RooflawError as e:
            if strict:
                raise
            warnings.warn(str(e), stacklevel=2)
            continue
        for d in devs:
            out.setdefault(d.id, d)
    _plugin_cache = out
    return out


def clear_cache() -> None:
    """Forget the loaded catalog and plug-ins (after installing a plug-in or editing files)."""
    global _plugin_cache
    _catalog.cache_clear()
    _plugin_cache = None


# ----------------------------------------------------------------------------- lookup


def _all_devices() -> dict[str, Device]:
    out = dict(plugin_devices())
    out.update(_catalog())  # the catalog wins over a plug-in with the same id
    return out


def list_devices(plugins: bool = True) -> list[Device]:
    """Every catalog device and power mode (and plug-in devices), sorted by id."""
    devs = _all_devices() if plugins else dict(_catalog())
    return [devs[k] for k in sorted(devs)]


def device_ids(plugins: bool = True) -> list[str]:
    """Sorted ids of :func:`list_devices`."""
    return [d.id for d in list_devices(plugins)]


def _looks_like_path(s: str) -> bool:
    low = s.lower().split("@", 1)[0]
    return os.sep in s or "/" in s or low.endswith((".toml", ".json"))


def _find_mode(devs: list[Device], mode: str, where: str) -> Device:
    base = devs[0].id
    for d in devs[1:]:
        if d.id.split("@", 1)[1].lower() == mode.lower():
            return d
    modes = [d.id.split("@", 1)[1] for d in devs[1:]]
    avail = f"; modes: {', '.join(modes)}" if modes else "; it has no power modes"
    raise RooflawError(f"{where}: unknown power mode {mode!r} of {base!r}{avail}")


def get_device(id_or_path: str | os.PathLike[str] | Device) -> Device:
    """A device by catalog id, ``id@mode``, path to a device file (``file.toml[@mode]``) or plug-in id.

    Example (dense figures from the datasheet; SI units)::

        >>> import rooflaw as rl
        >>> orin = rl.get_device("jetson-agx-orin-64gb")
        >>> orin.name, orin.peak("fp16") / 1e12, orin.memory_bandwidth / 1e9, orin.memory_capacity / 1e9
        ('NVIDIA Jetson AGX Orin 64GB', 42.5, 204.8, 64.0)
    """
    if isinstance(id_or_path, Device):
        return id_or_path
    if isinstance(id_or_path, os.PathLike):
        id_or_path = os.fspath(id_or_path)
    if not isinstance(id_or_path, str) or not id_or_path.strip():
        raise RooflawError(f"device={id_or_path!r}: expected a device id or a path to a device file")
    key = id_or_path.strip()
    if len(key) > 4096 or any(len(part.encode("utf-8", "replace")) > 255 for part in Path(key).parts):
        raise RooflawError(f"device={key[:40] + '...'!r}: too long for a device id or a file name")
    if _looks_like_path(key):
        path, _, mode = key.partition("@") if not Path(key).exists() else (key, "", "")
        devs = _as_list(load_device_file(path))
        return _find_mode(devs, mode, path) if mode else devs[0]
    cat = _catalog()
    if key in cat:
        return cat[key]
    lowered = {k.lower(): v for k, v in cat.items()}
    if key.lower() in lowered:
        return lowered[key.lower()]
    plug = plugin_devices()
    if key in plug:
        return plug[key]
    if Path(key).is_file():
        return _as_list(load_device_file(key))[0]
    ids = sorted({*cat, *plug})
    base_id, sep, mode = key.partition("@")
    if sep and base_id.lower() in {i.lower() for i in ids}:
        family = [d for i, d in sorted({**plug, **cat}.items()) if i.lower().split("@")[0] == base_id.lower()]
        family.sort(key=lambda d: ("@" in d.id, d.id))
        return _find_mode(family, mode, "device")
    near = difflib.get_close_matches(key.lower(), ids, n=3, cutoff=0.4)
    if not near:
        near = [i for i in ids if key.lower().split("@")[0] in i][:3]
    hint = f"; did you mean {', '.join(near)}?" if near else ""
    raise RooflawError(f"device={key!r}: unknown device id{hint} (see `rooflaw devices list`)")
