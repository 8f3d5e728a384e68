"""``rooflaw.calibrate`` is the calibration function and ``rooflaw.devices.calibrate`` its module, in any import order.

The package ``rooflaw.devices`` used to export a lazy function named like its submodule, so whichever import ran
last decided what ``rooflaw.calibrate`` was. Each order runs in a fresh interpreter (import state is per process).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

CHECK = """
import inspect, types
import rooflaw, rooflaw.devices
assert inspect.isfunction(rooflaw.calibrate), rooflaw.calibrate
assert rooflaw.calibrate.__module__ == "rooflaw.devices.calibrate"
assert isinstance(rooflaw.devices.calibrate, types.ModuleType), rooflaw.devices.calibrate
assert rooflaw.devices.calibrate.calibrate is rooflaw.calibrate
from rooflaw import calibrate as f
from rooflaw.devices import calibrate as m
assert f is rooflaw.calibrate and m is rooflaw.devices.calibrate
assert rooflaw.save_device_toml is rooflaw.devices.save_device_toml is m.save_device_toml
print("ok")
"""

ORDERS = {
    "submodule first": "import rooflaw.devices.calibrate as m0\nassert m0.__name__ == 'rooflaw.devices.calibrate'\n",
    "function first": "import rooflaw\nf0 = rooflaw.calibrate\nimport rooflaw.devices.calibrate as m0\n"
    "assert m0.__name__ == 'rooflaw.devices.calibrate' and f0 is m0.calibrate\n",
    "from-import of the package first": "from rooflaw.devices import calibrate as m0\nfrom rooflaw import calibrate\n"
    "assert m0.calibrate is calibrate\n",
}


@pytest.mark.parametrize("order", list(ORDERS))
def test_calibrate_is_the_function_in_any_import_order(order: str) -> None:
    r = subprocess.run([sys.executable, "-c", ORDERS[order] + CHECK], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)  # fmt: skip
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
