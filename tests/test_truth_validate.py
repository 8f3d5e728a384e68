"""`devices calibrate` fixes and `rooflaw validate --quick` end to end (CPU)."""

import json
import math

import pytest

from rooflaw import calibrate, load_device_file, save_device_toml
from rooflaw.cli import main

torch = pytest.importorskip("torch")


def test_calibrate_fp32_roof_is_the_gemm_rate(tmp_path):
    seen = []
    d = calibrate(seconds=0.4, progress=lambda step, f: seen.append(f))
    assert seen == sorted(seen) and seen[-1] == 1.0 and len(seen) >= 4
    # the fp32 roof GEMMs run on is the measured GEMM rate (the summary's figure), the vector ops
    # run on the separately measured elementwise rate (was: fp32 roof = elementwise rate, 12x too slow)
    assert d.peak("fp32") == d.peak("tf32") and d.vector_flops == d.vector_rate != d.peak("fp32")
    assert f"fp32 GEMM {d.peak('fp32') / 1e9:.1f} GFLOP/s" in d.notes
    assert f"vector fp32 {d.vector_rate / 1e9:.2f} GFLOP/s" in d.notes
    assert 0 < d.kernel_overhead < 1e-3
    back = load_device_file(save_device_toml(d, tmp_path / "d.toml"))
    assert back.vector_rate == pytest.approx(d.vector_rate) and back.kernel_overhead == pytest.approx(d.kernel_overhead)


def test_evaluate_energy_without_power_is_not_nan_text(capsys, tmp_path):
    p = save_device_toml(calibrate(seconds=0.3), tmp_path / "d.toml")
    code = main(["evaluate", "--arch", "layers=2,d_model=256,heads=4", "--device", str(p), "--precision", "fp32"])
    out = capsys.readouterr().out
    assert code == 0 and "nan J" not in out and "n/a" in out and "engine torch-eager" in out


def test_validate_quick_json(capsys):
    code = main(["validate", "--device", "local", "--quick", "--json"])
    rep = json.loads(capsys.readouterr().out)
    assert code == 0 and rep["device"] == "local-cpu"
    assert {c["phase"] for c in rep["configs"]} == {"prefill", "decode"} and len(rep["configs"]) >= 6
    for c in rep["configs"]:
        assert c["measured_s"] > 0 and c["predicted_s"] > 0
        assert c["error"] == pytest.approx(c["predicted_s"] / c["measured_s"] - 1)
        # wall clock: measured is the best wall time; the median, its spread and the thread CPU time come along
        assert c["measured_s"] == c["wall_best_s"] <= c["wall_median_s"] and c["cpu_s"] > 0
        assert c["spread"] == pytest.approx(c["wall_median_s"] / c["wall_best_s"] - 1)
    assert math.isfinite(rep["mape_prefill"]) and math.isfinite(rep["mape_decode"])
    assert rep["clock"] == "wall" and rep["median_spread"] >= 0 and "load_avg_1min" in rep
    assert main(["validate", "--clock", "sundial", "--quick", "--json"]) == 2


def test_validate_cuda_skips_cleanly_without_gpu(capsys):
    if torch.cuda.is_available():
        pytest.skip("has a GPU")
    assert main(["validate", "--cuda", "--quick", "--json"]) == 0
