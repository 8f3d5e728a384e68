"""Devices: the ``Device`` record, the TOML catalog (with power modes), user/plug-in devices, calibration.

Calibration (numpy) loads on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from .catalog import (
    CATALOG_DIR,
    ENTRY_POINT_GROUP,
    clear_cache,
    device_ids,
    devices_from_entry_point,
    get_device,
    list_devices,
    load_device_file,
    plugin_devices,
)
from .device import DTYPES, PROVENANCE, Device

_LAZY = {"calibrate": ".calibrate", "save_device_toml": ".calibrate"}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    globals()[name] = value  # after the submodule import, which bound the package attribute to the module
    return value


__all__ = [
    "CATALOG_DIR",
    "DTYPES",
    "ENTRY_POINT_GROUP",
    "PROVENANCE",
    "Device",
    "calibrate",
    "clear_cache",
    "device_ids",
    "devices_from_entry_point",
    "get_device",
    "list_devices",
    "load_device_file",
    "plugin_devices",
    "save_device_toml",
]
