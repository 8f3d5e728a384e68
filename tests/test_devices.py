"""rooflaw.devices: catalog, loader, power modes, plug-ins, calibration, and the `rooflaw devices` CLI."""

from __future__ import annotations

import json
import math
import sys
import textwrap
from importlib.metadata import EntryPoint

import pytest

from rooflaw.devices import (
    DTYPES,
    PROVENANCE,
    Device,
    clear_cache,
    device_ids,
    devices_from_entry_point,
    get_device,
    list_devices,
    load_device_file,
    save_device_toml,
)
from rooflaw.devices import catalog as catalog_mod
from rooflaw.devices.calibrate import calibrate  # rooflaw.devices.calibrate is the module (rooflaw.calibrate)
from rooflaw.errors import RooflawError

REQUIRED_IDS = [
    "jetson-agx-orin-64gb",
    "jetson-agx-orin-32gb",
    "jetson-orin-nx-16gb",
    "jetson-orin-nano-8gb",
    "jetson-orin-nano-8gb@Super",
    "jetson-agx-thor",
    "a100-sxm-80gb",
    "h100-sxm",
    "h200-sxm",
    "b200",
    "gb200",
    "gb300",
    "rtx-4090",
    "l4",
    "mi300x",
    "tpu-v5e",
    "apple-m4-max",
    "snapdragon-x-elite",
]


@pytest.fixture(autouse=True)
def _fresh_cache():
    clear_cache()
    yield
    clear_cache()


@pytest.fixture
def no_plugins(monkeypatch):
    monkeypatch.setattr(catalog_mod, "_entry_points", lambda: [])


# ----------------------------------------------------------------------------- catalog


def test_catalog_has_required_devices(no_plugins):
    ids = device_ids()
    assert len(list_devices()) >= 15
    assert ids == sorted(ids)
    for i in REQUIRED_IDS:
        assert i in ids, i


def test_every_device_is_complete(no_plugins):
    for d in list_devices():
        assert isinstance(d, Device)
        assert "fp16" in d.peak_flops and "fp32" in d.peak_flops, d.id
        assert all(k in DTYPES and v > 0 for k, v in d.peak_flops.items())
        assert d.memory_bandwidth > 0 and d.memory_capacity > 0
        assert d.power_peak and d.power_idle and 0 < d.power_idle < d.power_peak, d.id
        assert d.tile[0] > 0 and d.tile[1] > 0
        # every numeric figure has a provenance and an http(s) source
        figures = [f"peak_flops.{k}" for k in d.peak_flops] + [
            f
            for f in (
                "memory_bandwidth",
                "memory_capacity",
                "power_idle",
                "power_peak",
                "l2_bytes",
                "sm_count",
            )
            if getattr(d, f) is not None
        ]
        for f in figures:
            assert d.provenance.get(f) in PROVENANCE, (d.id, f)
            assert d.sources.get(f, "").startswith(("http://", "https://")), (d.id, f)
        assert all(v in PROVENANCE for v in d.provenance.values())


def test_published_dense_figures():
    h100 = get_device("h100-sxm")
    assert h100.peak("fp16") == pytest.approx(989.5e12)
    assert h100.peak("fp8") == pytest.approx(1979e12)
    assert h100.peak("fp32") == pytest.approx(67e12)
    assert h100.sm_count == 132 and h100.tile == (256, 128)
    h200 = get_device("h200-sxm")
    assert h200.memory_bandwidth == pytest.approx(4.8e12)
    assert h200.memory_capacity == pytest.approx(141e9)
    orin = get_device("jetson-agx-orin-64gb")
    assert orin.peak("fp16") == pytest.approx(42.5e12)
    assert orin.peak("int8") == pytest.approx(85e12)
    assert orin.memory_bandwidth == pytest.approx(204.8e9)
    assert orin.memory_capacity == pytest.approx(64e9)
    assert orin.provenance["peak_flops.fp16"] == "derived"
    assert get_device("a100-sxm-80gb").peak("int8") == pytest.approx(624e12)
    gb300 = get_device("gb300")
    assert gb300.peak("int8") == pytest.approx(330e12)
    assert gb300.peak("fp4") == pytest.approx(15e15)
    assert get_device("b200").peak("fp4") == pytest.approx(9e15)
    thor = get_device("jetson-agx-thor")
    assert thor.peak("fp4") == pytest.approx(1035e12)
    assert "peak_flops.fp8" in thor.uncertain
    assert get_device("rtx-4090").peak("fp16") == pytest.approx(165.2e12)
    assert get_device("mi300x").peak("fp16") == pytest.approx(1307.4e12)


def test_uncertain_figures_flagged():
    for i in ("apple-m4-max", "snapdragon-x-elite", "jetson-agx-thor"):
        assert get_device(i).uncertain, i
    # file keys are normalised to Device field names
    assert "peak_flops.fp32" in get_device("tpu-v5e").uncertain


@pytest.mark.parametrize(
    "dev_id,ridge",
    [
        ("jetson-agx-orin-64gb", 208),
        ("a100-sxm-80gb", 153),
        ("h100-sxm", 295),
        ("h200-sxm", 206),
        ("b200", 292),
        ("rtx-4090", 164),
        ("l4", 403),
    ],
)
def test_ridge_points(dev_id, ridge):
    assert get_device(dev_id).ridge("fp16") == pytest.approx(ridge, rel=0.01)


# ----------------------------------------------------------------------------- power modes


def test_power_modes_resolve_and_scale():
    base = get_device("jetson-agx-orin-64gb")
    m30 = get_device("jetson-agx-orin-64gb@30W")
    assert m30.id == "jetson-agx-orin-64gb@30W"
    assert get_device("jetson-agx-orin-64gb@30w") == m30  # mode names are case-insensitive
    assert m30.peak("int8") == pytest.approx(41e12 / 2)
    assert m30.peak("fp16") == pytest.approx(41e12 / 4)
    assert m30.peak("fp32") == pytest.approx(5.3e12 * 41 / 171, rel=1e-3)
    assert m30.memory_bandwidth == base.memory_bandwidth
    assert m30.power_peak == 30
    assert m30.provenance["peak_flops.fp16"] == "derived"
    m15, m50 = get_device("jetson-agx-orin-64gb@15W"), get_device("jetson-agx-orin-64gb@50W")
    assert m15.peak("fp16") < m30.peak("fp16") < m50.peak("fp16") < base.peak("fp16")
    assert get_device("jetson-agx-orin-64gb@MAXN").peak_flops == base.peak_flops
    sup = get_device("jetson-orin-nano-8gb@Super")
    assert sup.memory_bandwidth == pytest.approx(102e9)
    assert sup.peak("fp16") > get_device("jetson-orin-nano-8gb").peak("fp16")
    with pytest.raises(RooflawError, match="20W.*modes: 15W, 30W, 50W, MAXN"):
        get_device("jetson-agx-orin-64gb@20W")
    with pytest.raises(RooflawError, match="no power modes"):
        get_device("h100-sxm@30W")


def test_unknown_id_suggests_nearest(no_plugins):
    with pytest.raises(RooflawError) as e:
        get_device("h100-smx")
    msg = str(e.value)
    assert "h100-smx" in msg and "h100-sxm" in msg and "\n" not in msg
    with pytest.raises(RooflawError, match="jetson-agx-orin-64gb"):
        get_device("jetson-orin-agx-64")


# ----------------------------------------------------------------------------- user files


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_user_toml_file_loads(tmp_path):
    p = _write(
        tmp_path,
        "mychip.toml",
        """
        schema = 1
        id = "my-chip"
        name = "My accelerator"
        provenance = "measured"
        source = "https://example.com/mychip"
        fp16_tflops = 100
        fp32_tflops = { value = 10, provenance = "assumed", note = "fp16 / 10" }
        int8_tops = { sparse = 400 }
        bandwidth_gbs = 1000
        memory_gb = 32
        l2_mib = 8
        boost_clock_mhz = 1755
        power_peak_w = 300
        tile = [256, 128]

        [modes.eco]
        compute_scale = 0.5
        power_peak_w = 150
        """,
    )
    devs = load_device_file(p)
    assert isinstance(devs, list) and [d.id for d in devs] == ["my-chip", "my-chip@eco"]
    d = get_device(str(p))
    assert d.peak("fp16") == 100e12 and d.peak("int8") == 200e12
    assert d.provenance["peak_flops.int8"] == "derived"
    assert d.provenance["peak_flops.fp16"] == "measured"
    assert d.provenance["peak_flops.fp32"] == "assumed"
    assert d.memory_bandwidth == 1e12 and d.memory_capacity == 32e9 and d.l2_bytes == 8 * 2**20
    assert d.clock == 1755e6
    assert d.tile == (256, 128)
    assert "fp16 / 10" in d.notes
    eco = get_device(f"{p}@eco")
    assert eco.peak("fp16") == 50e12 and eco.power_peak == 150
    assert eco.memory_bandwidth == d.memory_bandwidth
    # a file without modes gives one Device; JSON works too
    p2 = _write(tmp_path, "one.json", json.dumps({"id": "j", "fp16_tflops": 1, "bandwidth_gbs": 1, "memory_gb": 1}))
    assert isinstance(load_device_file(p2), Device)


@pytest.mark.parametrize(
    "body,needle",
    [
        ("fp16_tflops = -3\nbandwidth_gbs = 1\nmemory_gb = 1", "fp16_tflops=-3"),
        ('fp16_tflops = "fast"\nbandwidth_gbs = 1\nmemory_gb = 1', "fp16_tflops='fast'"),
        ("fp16_tflops = 1\nbandwith_gbs = 1\nmemory_gb = 1", "did you mean 'bandwidth_gbs'"),
        ("fp16_tflops = 1\nmemory_gb = 1", "bandwidth_gbs"),
        ('fp16_tflops = { value = 1, provenance = "guess" }\nbandwidth_gbs = 1\nmemory_gb = 1', "guess"),
        ("fp16_tflops = 1\nbandwidth_gbs = 1\nmemory_gb = 1\ntile = [128]", "tile"),
        ("fp16_tflops = 1\nbandwidth_gbs = 1\nmemory_gb = 1\ncompute_efficiency = 1.5", "compute_efficiency"),
        ("fp16_tflops = 1\nbandwidth_gbs = 1\nmemory_gb = 1\nschema = 7", "schema"),
        ("fp16_tflops = 1\nbandwidth_gbs = 1\nmemory_gb = 1\nboost_clock_mhz = -5", "boost_clock_mhz=-5"),
        ("fp16_tflops = 1 bandwidth", "not valid TOML"),
    ],
)
def test_bad_fields_are_one_line_errors(tmp_path, body, needle):
    p = _write(tmp_path, "bad.toml", 'id = "bad"\n' + body + "\n")
    with pytest.raises(RooflawError) as e:
        load_device_file(p)
    msg = str(e.value)
    assert "\n" not in msg and str(p) in msg and needle in msg, msg


def test_missing_file_error(tmp_path):
    with pytest.raises(RooflawError, match="not found"):
        get_device(str(tmp_path / "nope.toml"))


# ----------------------------------------------------------------------------- plug-ins


PLUGIN_SRC = """
from rooflaw.devices import Device

CHIP = Device(id="plug-chip", name="Plugged", peak_flops={"fp16": 1e12, "fp32": 1e11},
              memory_bandwidth=1e11, memory_capacity=1e9)

def family():
    return [Device(id=f"plug-fam-{i}", name=f"fam {i}", peak_flops={"fp16": i * 1e12, "fp32": 1e11},
                   memory_bandwidth=1e11, memory_capacity=1e9) for i in (1, 2)]

PATH = __PATH__

def broken():
    raise RuntimeError("boom")
"""


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    dev_file = _write(tmp_path, "plugdev.toml", 'id = "plug-file"\nfp16_tflops = 3\nbandwidth_gbs = 3\nmemory_gb = 3\n')
    (tmp_path / "fake_rooflaw_plugin.py").write_text(PLUGIN_SRC.replace("__PATH__", repr(str(dev_file))))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("fake_rooflaw_plugin", None)
    group = "rooflaw.devices"
    eps = [
        EntryPoint("plug-chip", "fake_rooflaw_plugin:CHIP", group),
        EntryPoint("fam", "fake_rooflaw_plugin:family", group),
        EntryPoint("plug-file", "fake_rooflaw_plugin:PATH", group),
    ]
    monkeypatch.setattr(catalog_mod, "_entry_points", lambda: eps)
    yield eps
    sys.modules.pop("fake_rooflaw_plugin", None)


def test_entry_point_plugins(plugin):
    assert get_device("plug-chip").name == "Plugged"
    assert get_device("plug-fam-2").peak("fp16") == 2e12
    assert get_device("plug-file").peak("fp16") == 3e12
    ids = device_ids()
    assert {"plug-chip", "plug-fam-1", "plug-fam-2", "plug-file", "h100-sxm"} <= set(ids)
    assert [d.id for d in devices_from_entry_point(plugin[1])] == ["plug-fam-1", "plug-fam-2"]


def test_entry_point_failures_are_clear(plugin, monkeypatch):
    bad_eps = [EntryPoint("broken", "fake_rooflaw_plugin:broken", "rooflaw.devices")]
    with pytest.raises(RooflawError, match="plug-in 'broken'.*RuntimeError: boom"):
        devices_from_entry_point(bad_eps[0])
    with pytest.raises(RooflawError, match="failed to load"):
        devices_from_entry_point(EntryPoint("missing", "no_such_module_xyz:X", "rooflaw.devices"))
    monkeypatch.setattr(catalog_mod, "_entry_points", lambda: bad_eps)
    clear_cache()
    with pytest.warns(UserWarning, match="broken"):
        ids = device_ids()  # a broken plug-in does not break the listing
    assert "h100-sxm" in ids


# ----------------------------------------------------------------------------- calibration


def test_calibrate_local_and_round_trip(tmp_path):
    d = calibrate(seconds=0.3)
    assert d.id == "local-cpu" and d.kind == "cpu"
    for k in ("fp32", "fp16"):
        assert d.peak(k) > 0 and math.isfinite(d.peak(k))
        assert d.provenance[f"peak_flops.{k}"] == "measured"
    assert d.memory_bandwidth > 1e8 and d.provenance["memory_bandwidth"] == "measured"
    assert d.memory_capacity > 1e8 and d.provenance["memory_capacity"] == "measured"
    p = save_device_toml(d, tmp_path / "local.toml")
    back = load_device_file(p)
    assert isinstance(back, Device)
    assert _same(back, d)
    assert get_device(str(p)).id == "local-cpu"


def _same(a: Device, b: Device) -> bool:
    da, db = a.to_dict(), b.to_dict()
    assert da.keys() == db.keys()
    for k in da:
        if k == "peak_flops":
            assert da[k].keys() == db[k].keys()
            for t in da[k]:
                assert da[k][t] == pytest.approx(db[k][t], rel=1e-12)
        elif isinstance(da[k], float):
            assert da[k] == pytest.approx(db[k], rel=1e-12)
        else:
            assert da[k] == db[k], k
    return True


def test_calibrate_against_base_and_round_trip(tmp_path):
    base = get_device("jetson-agx-orin-64gb@30W")
    d = calibrate(base, seconds=0.3)
    assert d.id == "jetson-agx-orin-64gb-30W-calibrated"
    assert 0 < d.compute_efficiency <= 1 and 0 < d.memory_efficiency <= 1
    assert d.provenance["compute_efficiency"] == "measured"
    assert d.peak_flops == base.peak_flops
    p = save_device_toml(d, tmp_path / "cal.toml")
    assert _same(load_device_file(p), d)


def test_catalog_devices_round_trip(tmp_path, no_plugins):
    for d in list_devices():
        p = save_device_toml(d, tmp_path / f"{d.id.replace('@', '_')}.toml")
        back = load_device_file(p)
        assert isinstance(back, Device)
        if "@" not in d.id:
            _same(back, d)


def test_calibrate_rejects_bad_seconds():
    with pytest.raises(RooflawError, match="seconds"):
        calibrate(seconds=0)


# ----------------------------------------------------------------------------- CLI


def _cli():
    from rooflaw.cli import main

    return main


def test_cli_list_json(capsys, no_plugins):
    assert _cli()(["devices", "list", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data) >= 15
    h100 = next(x for x in data if x["id"] == "h100-sxm")
    for key in ("id", "name", "peak_flops", "memory_bandwidth", "memory_capacity", "sources", "provenance"):
        assert key in h100
    assert h100["peak_flops"]["fp16"] == pytest.approx(989.5e12)
    assert h100["memory_bandwidth"] == pytest.approx(3.35e12)


def test_cli_list_table(capsys, no_plugins):
    assert _cli()(["devices", "list"]) == 0
    assert "h100-sxm" in capsys.readouterr().out


def test_cli_show(capsys):
    main = _cli()
    assert main(["devices", "show", "jetson-agx-orin-64gb@30W", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["id"] == "jetson-agx-orin-64gb@30W" and d["peak_flops"]["int8"] == pytest.approx(20.5e12)
    assert main(["devices", "show", "l4"]) == 0
    out = capsys.readouterr().out
    assert "memory_bandwidth" in out and "datasheet" in out


def test_cli_unknown_id_exit_2(capsys, no_plugins):
    assert _cli()(["devices", "show", "h100-smx"]) == 2
    err = capsys.readouterr().err
    assert "h100-sxm" in err and len(err.strip().splitlines()) == 1


def test_cli_calibrate(tmp_path, capsys):
    out = tmp_path / "me.toml"
    assert _cli()(["devices", "calibrate", "--json", "--seconds", "0.3", "--out", str(out)]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["id"] == "local-cpu" and d["provenance"]["memory_bandwidth"] == "measured"
    assert load_device_file(out).id == "local-cpu"


def test_cli_calibrate_clock(capsys):
    """--clock cpu times on the thread's CPU clock and says so in the device's notes; a bad clock exits 2."""
    assert _cli()(["devices", "calibrate", "--json", "--seconds", "0.3", "--clock", "cpu"]) == 0
    assert "clock=cpu" in json.loads(capsys.readouterr().out)["notes"]
    assert _cli()(["devices", "calibrate", "--clock", "sundial"]) == 2
    err = capsys.readouterr().err
    assert "clock" in err and "sundial" in err and len(err.strip().splitlines()) == 1


def test_docs_full_example_loads(tmp_path):
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "devices.md").read_text()
    block = doc.split("### Full example", 1)[1].split("```toml", 1)[1].split("```", 1)[0]
    p = tmp_path / "my-chip.toml"
    p.write_text(block)
    base, m30 = load_device_file(p)
    assert base.peak("fp16") == pytest.approx(42.5e12) and base.provenance["peak_flops.fp16"] == "derived"
    assert m30.id == "my-edge-chip@30W" and m30.peak("int8") == pytest.approx(20.5e12)
    assert m30.peak("fp16") == pytest.approx(42.5e12 * 0.45)
    assert "peak_flops.fp8" in base.uncertain
