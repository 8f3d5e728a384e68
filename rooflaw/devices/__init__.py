"""Devices: the ``Device`` record, the TOML catalog (with power modes), user/plug-in devices, calibration."""

from .calibrate import calibrate, save_device_toml
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
