"""Power figures of a calibrated device: ``--power``, RAPL and nvidia-smi readers (on stand-in files/programs)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

import rooflaw.devices.power as P
from rooflaw import get_device
from rooflaw.constraints.assembly import energy_coefficients
from rooflaw.devices.precision import Precision
from rooflaw.errors import RooflawError
from rooflaw.units import parse_power
from tests.cli_helpers import run_cli


@pytest.mark.parametrize(("text", "watts"), [("65W", 65.0), ("1.2kW", 1200.0), ("500mW", 0.5), (30.0, 30.0)])
def test_parse_power(text, watts):
    assert parse_power(text) == pytest.approx(watts)


@pytest.mark.parametrize("text", ["65", "65MW", "-3W", "0W", "infW", "65J"])
def test_parse_power_refuses(text):
    with pytest.raises(RooflawError, match="power"):
        parse_power(text)


def _rapl(root: Path, uj: list[int], max_uj: int = 2**32) -> list[Path]:
    out = []
    for i, v in enumerate(uj):
        d = root / f"intel-rapl:{i}"
        (d / f"intel-rapl:{i}:0").mkdir(parents=True)  # a sub-domain: must not be counted twice
        (d / "energy_uj").write_text(f"{v}\n")
        (d / "max_energy_range_uj").write_text(f"{max_uj}\n")
        (d / f"intel-rapl:{i}:0" / "energy_uj").write_text("0\n")
        out.append(d)
    return out


def test_rapl_average_power_sums_packages_and_unwraps(tmp_path, monkeypatch):
    doms = _rapl(tmp_path, [1_000_000, 2**32 - 1_000_000])
    clock = iter([10.0, 12.0])  # the run takes 2 s
    monkeypatch.setattr(P.time, "perf_counter", lambda: next(clock))

    def run():  # package 0 uses 6 J, package 1 wraps after 4 J
        (doms[0] / "energy_uj").write_text(f"{1_000_000 + 6_000_000}\n")
        (doms[1] / "energy_uj").write_text(f"{3_000_000}\n")
        return "done"

    out, watts = P.rapl_average_power(run, tmp_path)
    assert out == "done"
    assert watts == pytest.approx(10.0 / 2.0)


def test_rapl_absent_gives_none(tmp_path):
    assert P.rapl_average_power(lambda: 1, tmp_path / "missing") == (1, None)
    out, reading = P.rapl_power(lambda: 2, idle_seconds=0.0, root=tmp_path / "missing")
    assert out == 2 and reading is None


def _fake_smi(tmp_path: Path, text: str, monkeypatch) -> None:
    exe = tmp_path / "nvidia-smi"
    exe.write_text(f"#!/bin/sh\necho '{text}'\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")


def test_nvidia_smi_power(tmp_path, monkeypatch):
    _fake_smi(tmp_path, "45.20, 300.00", monkeypatch)
    r = P.nvidia_smi_power()
    assert (r.idle, r.peak, r.provenance) == (45.2, 300.0, "measured")


@pytest.mark.parametrize("text", ["[N/A], [N/A]", "500, 300", "garbage"])
def test_nvidia_smi_unreadable_is_none(tmp_path, monkeypatch, text):
    _fake_smi(tmp_path, text, monkeypatch)
    assert P.nvidia_smi_power() is None


def test_with_power_gives_energy_and_provenance():
    dev = get_device("jetson-orin-nano-8gb")
    bare = __import__("dataclasses").replace(dev, power_idle=None, power_peak=None, energy_per_flop=None,
                                             energy_per_byte=None)  # fmt: skip
    prec = Precision.parse("bf16")
    assert energy_coefficients(bare, prec) is None
    powered = P.with_power(bare, P.stated_power(65.0))
    assert powered.power_peak == 65.0 and powered.power_idle is None
    assert powered.provenance["power_peak"] == "assumed" and "--power 65W" in powered.sources["power_peak"]
    coef = energy_coefficients(powered, prec)
    assert coef is not None and coef.p_idle == 0.0
    # the dynamic 65 W split half to compute at the raw fp16 roof, half to memory at the raw bandwidth
    assert coef.per_byte == pytest.approx(65.0 * 0.5 / dev.memory_bandwidth)
    assert P.with_power(dev, None) is dev


def test_cli_refuses_power_without_unit(capsys):
    code, out, err = run_cli(capsys, "devices", "calibrate", "--power", "65")
    assert code == 2 and "--power" in err and "needs a unit" in err and "Traceback" not in err


def test_calibrate_with_power_has_energy(tmp_path, monkeypatch):
    """calibrate(power=…) puts the stated power on the measured device (the measurements themselves are stood in
    for: ``test_truth_validate`` runs the real ones)."""
    import rooflaw.devices.calibrate as C
    from rooflaw import load_device_file, save_device_toml

    base = get_device("jetson-orin-nano-8gb")
    bare = __import__("dataclasses").replace(base, power_idle=None, power_peak=None)
    monkeypatch.setattr(C, "measure", lambda *a: "measurements")
    monkeypatch.setattr(C, "local_device", lambda m: bare if m == "measurements" else None)
    d = C.calibrate(seconds=0.2, power=65.0)
    assert d.power_peak == 65.0 and d.provenance["power_peak"] == "assumed"
    assert energy_coefficients(d, Precision.parse("fp32")) is not None
    back = load_device_file(save_device_toml(d, tmp_path / "d.toml"))
    assert back.power_peak == 65.0 and back.provenance["power_peak"] == "assumed"
    # without --power and without RAPL (this VM exposes none): no power figures, said as n/a downstream
    monkeypatch.setattr(P, "RAPL_ROOT", tmp_path / "none")
    monkeypatch.setattr(P, "rapl_power", lambda run, **k: (run(), None))
    assert C.calibrate(seconds=0.2).power_peak is None
