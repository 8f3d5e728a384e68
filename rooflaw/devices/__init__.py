"""Devices: the ``Device`` record, the TOML catalog (with power modes), user/plug-in devices, calibration.

Calibration (numpy) loads on first use. ``rooflaw.devices.calibrate`` is the calibration *module* (its function is
``rooflaw.calibrate`` or ``rooflaw.devices.calibrate.calibrate``): a package attribute named like a submodule would
be rebound by whichever import came last.
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

_LAZY = {"save_device_toml": ".calibrate"}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "CATALOG_DIR",
    "DTYPES",
    "ENTRY_POINT_GROUP",
    "PROVENANCE",
    "Device",
    "clear_cache",
    "device_ids",
    "devices_from_entry_point",
    "get_device",
    "list_devices",
    "load_device_file",
    "plugin_devices",
    "save_device_toml",
]
