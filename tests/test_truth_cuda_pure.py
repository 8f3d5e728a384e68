"""The CUDA calibration and ``validate --cuda`` on a machine without a GPU: the pure parts, and the code paths run on
the CPU with stand-ins for ``torch.cuda`` (so that the one real run on a GPU does not fail on a typo).

The checks that need a GPU are in ``tests/test_truth_cuda.py``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from rooflaw.api import from_mapping, get_device, load_device_file
from rooflaw.devices import calibrate_cuda as cc
from rooflaw.devices.calibrate import save_device_toml
from rooflaw.validate_cuda import CONFIGS_CUDA, QUICK_CUDA, WORKLOAD_CUDA, measured_rows, predict, run_cuda, syncs

ROOT = Path(__file__).resolve().parents[1]
H200_L2 = 60e6  # bytes: the larger of the published 50 MB (catalog) and 60 MB figures, to be safe


def test_gpu_configs_cover_the_space_and_exceed_the_l2() -> None:
    archs = {n: (from_mapping(s, name=n), p) for n, (s, p) in CONFIGS_CUDA.items()}
    assert len(archs) >= 10 and set(QUICK_CUDA) <= set(archs)
    assert {p for _, p in archs.values()} == {"bf16", "fp16"}
    kinds = {(a.experts > 1, "mha" if a.kv_heads == a.heads else "mqa" if a.kv_heads == 1 else "gqa")
             for a, _ in archs.values()}  # fmt: skip
    assert {(False, "mha"), (False, "gqa"), (False, "mqa"), (True, "mha"), (True, "gqa")} <= kinds
    layers = [a.layers for a, _ in archs.values()]
    widths = [a.d_model for a, _ in archs.values()]
    assert min(layers) <= 4 and max(layers) >= 48 and min(widths) <= 1024 and max(widths) >= 6144
    params = [a.params_total for a, _ in archs.values()]
    assert min(params) >= 0.25e9 and 7.5e9 <= max(params) <= 8.1e9
    assert min(a.vocab for a, _ in archs.values()) == 32000 and max(a.vocab for a, _ in archs.values()) >= 128000
    for name, (a, _) in archs.items():
        weight_bytes = 2 * a.params_total  # bf16 / fp16
        assert weight_bytes >= 4 * H200_L2, name
    assert 2 * sum(params) < 141e9 / 2  # one at a time, but even all together fit an H200 twice over
    wl = WORKLOAD_CUDA
    assert (wl.batch, wl.output_tokens) == (1, 32) and 512 <= wl.input_tokens <= 2048


def test_prefill_is_compute_bound_and_decode_memory_bound_on_the_catalog_h200() -> None:
    """The workload puts the big dense configs where the issue wants them: prefill on the tensor roof, decode on
    bandwidth (the roofline part, without launch overhead)."""
    h200 = get_device("h200-sxm")
    spec, prec = CONFIGS_CUDA["llama3-8b"]
    p = predict(from_mapping(spec, name="llama3-8b"), prec, h200, WORKLOAD_CUDA)
    flops = 2 * 8.03e9 * WORKLOAD_CUDA.input_tokens
    assert p["prefill_roofline_s"] > flops / h200.peak("fp16")  # at least the dense GEMM work at peak
    stream = p["weight_bytes"] / h200.memory_bandwidth
    from rooflaw.constraints.engines import applied

    assert stream < p["decode_roofline_s"] < 1.5 * stream / applied(h200, "torch-eager").memory
    # eager PyTorch on a GPU: the host launches while the GPU runs -- the longer of the two
    assert p["combine"] == "max" and p["prefill_launch_s"] < p["prefill_roofline_s"] == p["prefill_s"]
    assert p["decode_s"] == pytest.approx(max(p["decode_roofline_s"], p["decode_launch_s"]), rel=1e-12)


def test_host_launch_overlaps_the_roofline_only_on_an_accelerator() -> None:
    """torch-eager (host launch) on a GPU: max(roofline, launches); on a CPU (host = device) and for the engines
    whose per-kernel cost is on the device (graphs, fused engines): roofline + launches."""
    from rooflaw.api import Workload, evaluate, get_engine
    from rooflaw.constraints.engines import applied

    h200 = get_device("h200-sxm")
    cpu = dataclasses.replace(h200, id="cpu-like", kind="cpu")
    assert get_engine("torch-eager").launch == "host"
    assert [get_engine(e).launch for e in ("tensorrt-llm", "vllm", "llama.cpp", "gpt-fast")] == ["device"] * 4
    assert applied(h200, "torch-eager").overlap and not applied(cpu, "torch-eager").overlap
    assert not applied(h200, "tensorrt-llm").overlap
    arch = from_mapping(CONFIGS_CUDA["mha-narrow-1024x12"][0], name="n")
    wl = Workload(1, 1024, 32)
    eager = get_engine("torch-eager")
    no_launch = dataclasses.replace(eager, kernels_per_layer=0.0, kernels_per_pass=0.0, moe_kernels=0.0)
    for dev, combine in ((h200, max), (cpu, lambda a, b: a + b)):
        full = evaluate(arch, dev, wl, "bf16", engine="torch-eager")
        bare = evaluate(arch, dev, wl, "bf16", engine=no_launch)
        kernel_s = applied(dev, "torch-eager").kernel_s  # the GPU's per-kernel latency (kernel curves or [achieved])
        assert kernel_s > 0
        launch = kernel_s * (12 * eager.kernels_per_layer + eager.kernels_per_pass) + eager.pass_s
        assert full.prefill_s == pytest.approx(combine(bare.prefill_s, launch), rel=1e-12), dev.kind
        assert full.tpot_s == pytest.approx(combine(bare.tpot_s, launch), rel=1e-12), dev.kind
        ops = full.to_frame()
        assert ops.seconds.sum() == pytest.approx(full.prefill_s + full.decode_s, rel=1e-9)


@pytest.mark.parametrize("R,h", [(7.0e14, 96.0), (5.0e14, 0.5), (3.0e13, 1500.0)])
def test_rate_curve_fit_recovers_r_and_h(R: float, h: float) -> None:
    rows = cc.ROWS
    exact = [R * m / (m + h) for m in rows]
    r, hh = cc.fit_rate_curve(rows, exact)
    assert r == pytest.approx(R, rel=1e-9) and hh == pytest.approx(h, rel=1e-6)
    # ±1 % alternating noise moves them by a few percent at most
    noisy = [v * (1.01 if i % 2 else 0.99) for i, v in enumerate(exact)]
    r, hh = cc.fit_rate_curve(rows, noisy)
    assert r == pytest.approx(R, rel=0.03) and hh == pytest.approx(h, rel=0.1, abs=0.2)


def test_rate_curve_fit_flat_and_bad_input() -> None:
    assert cc.fit_rate_curve([1, 8, 64], [5e14, 5e14, 5e14]) == pytest.approx((5e14, 0.0))
    R, h = cc.fit_rate_curve([1, 8, 64], [6e14, 5e14, 4e14])  # rises toward small M: no half-rate point
    assert h == 0.0 and R > 0
    for rows, rates in (([1], [1.0]), ([1, 2], [1.0, -1.0]), ([1, 2], [1.0, math.inf]), ([1, 2], [1.0])):
        with pytest.raises(cc.RooflawError):
            cc.fit_rate_curve(rows, rates)


def _fake(**kw) -> cc.CudaMeasurements:
    base = dict(
        name="NVIDIA H200", capability=(9, 0), sm_count=132, memory_capacity=150e9, l2_bytes=62914560.0,
        gemm_bf16=7.2e14, gemm_fp16=7.3e14, gemm_tf32=4.1e14, gemm_fp32=5.1e13, rows=(1, 64, 4096),
        row_rates=(5e12, 2.8e14, 7.0e14), rate_limit=7.1e14, half_rows=80.0, copy_bandwidth=4.1e12,
        read_bandwidth=4.3e12, gemv_bandwidth=4.0e12, launch_host_s=4.5e-6, launch_event_s=4.6e-6,
        launch_graph_s=1.9e-6, kernel_overhead=7.5e-6, probe_kernels=38.0, sync_s=1.2e-5,
        medians={"gemm_bf16": 7.1e14}, versions="torch 2.11.0+cu130, CUDA 13.0",
    )  # fmt: skip
    return cc.CudaMeasurements(**(base | kw))


def test_device_from_measurements_and_toml_round_trip(tmp_path: Path) -> None:
    m = _fake()
    dev = cc.device_from(m)
    assert (dev.id, dev.kind) == ("local-cuda", "gpu")
    assert dev.peak_flops == {"fp32": 5.1e13, "tf32": 4.1e14, "fp16": 7.2e14}  # fp16 roof: the lower 16-bit rate
    assert (dev.memory_bandwidth, dev.kernel_overhead, dev.gemm_half_rows) == (4.0e12, 7.5e-6, 80.0)
    assert (dev.sm_count, dev.l2_bytes, dev.memory_capacity) == (132, 62914560.0, 150e9)
    assert dev.achieved["kernel_s"] == 1.9e-6 and dev.achieved["provenance"] == "measured"  # the CUDA-graph gap
    assert dev.tile == get_device("h100-sxm").tile and dev.provenance["tile"] == "assumed"
    for f in ("peak_flops.fp16", "memory_bandwidth", "kernel_overhead", "gemm_half_rows", "sm_count"):
        assert dev.provenance[f] == "measured" and "calibrate_cuda" in dev.sources[f] or f == "sm_count"
    for figure in ("720.0", "4000 (0) GB/s", "7.50", "torch 2.11.0+cu130", "12.0 us (not priced)"):
        assert figure in dev.notes, figure
    back = load_device_file(save_device_toml(dev, tmp_path / "gpu.toml"))
    for f in ("peak_flops", "memory_bandwidth", "memory_capacity", "sm_count", "tile", "kernel_overhead",
              "gemm_half_rows", "l2_bytes", "kind", "provenance", "achieved"):  # fmt: skip
        a, b = getattr(back, f), getattr(dev, f)
        assert a == (pytest.approx(b, rel=1e-12) if isinstance(b, float) else b), f
    assert back.notes == dev.notes
    # an unknown architecture keeps a 128x128 tile, said to be assumed; no curve and no L2: not written
    other = cc.device_from(_fake(capability=(7, 5), half_rows=0.0, l2_bytes=0.0))
    assert other.tile == (128, 128) and "no catalog GPU" in other.sources["tile"]
    assert "gemm_half_rows" not in other.provenance and other.l2_bytes is None
    assert "gemm_half_rows" not in save_device_toml(other, tmp_path / "o.toml").read_text()


@pytest.mark.parametrize("argv", [["devices", "calibrate", "--cuda"], ["validate", "--cuda"],
                                  ["validate", "--cuda", "--device", "h200-sxm", "--json"]])  # fmt: skip
def test_cli_without_cuda_says_so_in_one_line_and_exits_0(argv, monkeypatch, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from typer.testing import CliRunner

    from rooflaw.cli import app

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "gpu.toml"
    r = CliRunner().invoke(app, [*argv, "--out", str(out)] if argv[0] == "devices" else argv)
    assert r.exit_code == 0, r.output
    what = "calibration" if argv[0] == "devices" else "validation"
    assert r.output.strip().splitlines() == [f"no CUDA device: GPU {what} skipped"]
    assert not out.exists()


class _Event:
    """A stand-in for ``torch.cuda.Event`` on the host clock."""

    def __init__(self, enable_timing: bool = False) -> None:
        self.t = 0.0

    def record(self) -> None:
        self.t = time.perf_counter()

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: _Event) -> float:
        return max(end.t - self.t, 1e-7) * 1e3  # ms, as CUDA events


@pytest.fixture
def fake_cuda(monkeypatch):
    """``torch.cuda`` stand-ins and tiny sizes: calibrate_cuda's code runs on the CPU."""
    torch = pytest.importorskip("torch")
    props = SimpleNamespace(name="Fake GPU", major=9, minor=0, multi_processor_count=4, total_memory=8e9,
                            L2_cache_size=4 << 20)  # fmt: skip
    for name, value in {"is_available": lambda: True, "synchronize": lambda *a, **k: None, "Event": _Event,
                        "get_device_properties": lambda *a: props, "empty_cache": lambda: None}.items():  # fmt: skip
        monkeypatch.setattr(torch.cuda, name, value)
    sizes = {"_DEV": "cpu", "GEMM_N": 32, "ROWS": (1, 4, 16, 64), "COPY_BYTES": 1 << 20, "GEMV_N": 256,
             "GEMV_K": 128, "GEMV_WEIGHTS": 2, "CHAIN": 50, "_graph": lambda fn: fn}  # fmt: skip
    for name, value in sizes.items():
        monkeypatch.setattr(cc, name, value)
    return torch


def test_calibrate_cuda_code_path_runs_with_stand_ins(fake_cuda, one_thread) -> None:
    steps: list[str] = []
    m = cc.measure_cuda(lambda step, frac: steps.append(step))
    assert steps[0].startswith("GEMM") and steps[-1] == "done"
    assert m.rows == (1, 4, 16, 64) and len(m.row_rates) == 4 and all(r > 0 for r in m.row_rates)
    for f in ("gemm_bf16", "gemm_fp16", "gemm_tf32", "gemm_fp32", "copy_bandwidth", "read_bandwidth",
              "gemv_bandwidth", "launch_host_s", "launch_event_s", "kernel_overhead"):  # fmt: skip
        assert 0 < getattr(m, f) < math.inf, f
    assert m.probe_kernels > 20  # the probe decoder's layer launches tens of aten kernels (counted)
    assert m.probe_graph_s > 0
    dev = cc.device_from(m)
    assert dev.achieved["kernel_s"] == m.probe_graph_s  # the decoder's device-side cost per kernel
    assert dev.tile == get_device("h100-sxm").tile and dev.sm_count == 4 and "Fake GPU" in dev.name


TINY = {
    "tiny-gqa": ({"layers": 2, "d_model": 64, "heads": 4, "kv_heads": 2, "ffn": 128, "vocab": 256}, "bf16"),
    "tiny-moe": ({"layers": 2, "d_model": 64, "heads": 4, "ffn": 64, "experts": 4, "top_k": 2, "vocab": 256}, "fp16"),
}


@pytest.fixture
def one_thread():
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny kernels: threads only add barriers on a shared machine
    yield torch
    torch.set_num_threads(threads)


def _tiny_run(**kw) -> dict:
    from rooflaw.api import Workload

    return run_cuda(kw.pop("device", cc.device_from(_fake())), configs=TINY, workload=Workload(1, 16, 4),
                    torch_device="cpu", **kw)  # fmt: skip


def test_validate_cuda_code_path_runs_on_the_cpu(one_thread, tmp_path: Path) -> None:
    rep = _tiny_run()
    assert (rep["device"], rep["engine"], rep["torch_device"]) == ("local-cuda", "torch-eager", "cpu")
    assert rep["kernel_s"] == 7.5e-6 and rep["graphs"] is False and rep["measured_here"] is True
    rows = rep["configs"]
    assert [(r["name"], r["phase"]) for r in rows] == [(n, p) for n in TINY for p in ("prefill", "decode")]
    for r in rows:
        assert r["predicted_by"] == "local-cuda" and r["measured_s"] > 0
        # eager PyTorch on a GPU: the host launches while the GPU runs, the longer of the two counts
        assert r["combine"] == "max" and r["predicted_s"] == pytest.approx(max(r["roofline_s"], r["launch_s"]))
        assert r["host_syncs_counted"] is None  # counted on CUDA only
        assert r["launch_s"] > 0 and r["error"] == pytest.approx(r["predicted_s"] / r["measured_s"] - 1)
    syn = {(r["name"], r["phase"]): r["host_syncs"] for r in rows}
    assert syn[("tiny-gqa", "prefill")] == syn[("tiny-gqa", "decode")] == 0
    assert syn[("tiny-moe", "decode")] == 2 * (2 + 2)  # per layer: unique, .tolist(), a nonzero per expert picked
    moe = from_mapping(TINY["tiny-moe"][0], name="m")
    assert syn[("tiny-moe", "prefill")] == pytest.approx(syncs(moe, 16)) and 2 * 5 < syncs(moe, 16) <= 2 * 6
    for phase in ("prefill", "decode"):
        errs = [abs(r["error"]) for r in rows if r["phase"] == phase]
        assert rep[f"mape_{phase}"] == pytest.approx(sum(errs) / len(errs))
    # the same measurements predicted on the catalog H200: no new measurement, other predictions
    path = tmp_path / "rep.json"
    path.write_text(json.dumps(rep))
    again = _tiny_run(device=get_device("h200-sxm"), measured=measured_rows(str(path)))
    assert again["measured_here"] is False and again["device"] == "h200-sxm"
    for r0, r1 in zip(rows, again["configs"], strict=True):
        assert r1["measured_s"] == r0["measured_s"] and r1["wall_median_s"] == r0["wall_median_s"]
        assert r1["predicted_by"] == "h200-sxm" and r1["predicted_s"] != r0["predicted_s"]
    path.write_text('{"configs": [{"name": "x"}]}')
    with pytest.raises(cc.RooflawError, match="--measured"):
        measured_rows(str(path))


def test_validate_cuda_graphs_code_path_runs_on_the_cpu(one_thread, monkeypatch) -> None:
    """``--graphs`` with a stand-in for graph capture (replay = the eager call): the MoE config is left out, and the
    predictions charge the device-side cost per kernel (``achieved.kernel_s``), not the host's."""
    monkeypatch.setattr(cc, "capture_graph", lambda fn, pool=None: SimpleNamespace(replay=fn))
    monkeypatch.setattr(one_thread.cuda, "graph_pool_handle", lambda: None)
    rep = _tiny_run(graphs=True)
    assert rep["graphs"] is True and rep["kernel_s"] == 1.9e-6
    assert [(r["name"], r["phase"]) for r in rep["configs"]] == [("tiny-gqa", "prefill"), ("tiny-gqa", "decode")]
    eager = _tiny_run()["configs"][:2]
    for g, e in zip(rep["configs"], eager, strict=True):
        assert g["roofline_s"] == pytest.approx(e["roofline_s"], rel=1e-12)
        assert g["combine"] == "sum" and g["predicted_s"] == pytest.approx(g["roofline_s"] + g["launch_s"], rel=1e-12)
        assert g["launch_s"] == pytest.approx(e["launch_s"] * 1.9e-6 / 7.5e-6, rel=1e-9)


def test_validate_flags_that_need_cuda(capsys) -> None:
    from rooflaw.cli import main

    for argv in (["validate", "--graphs"], ["validate", "--measured", "x.json"]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].endswith("needs --cuda"), err


def test_only_the_sync_warning_counts_as_a_sync(monkeypatch) -> None:
    """``count_syncs`` counts torch's per-sync warning, not the one-time notice that the debug mode is a prototype
    (which says "synchronizing operations" too: it made the first count of a GPU process one too high)."""
    import warnings

    torch = pytest.importorskip("torch")
    import rooflaw.validate_cuda as vc

    mode = [0]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_sync_debug_mode", lambda: mode[0])
    monkeypatch.setattr(torch.cuda, "set_sync_debug_mode", lambda m: mode.__setitem__(0, m))

    def two_syncs() -> None:
        warnings.warn("Synchronization debug mode is a prototype feature and does not yet detect all "
                      "synchronizing operations", UserWarning, stacklevel=1)  # fmt: skip
        for _ in range(2):
            warnings.warn(vc.SYNC_WARNING, UserWarning, stacklevel=1)

    assert vc.count_syncs(two_syncs) == 2 and mode[0] == 0


BLOCKER = """
import sys
BLOCK = {"cvxpy", "optuna", "moocore", "distributed"}
class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCK:
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, Blocker())
from typer.testing import CliRunner
from rooflaw.cli import app
import rooflaw.validate, rooflaw.validate_cuda, rooflaw.devices.calibrate, rooflaw.devices.calibrate_cuda
from rooflaw.api import from_mapping, get_device
from rooflaw.validate_cuda import CONFIGS_CUDA, WORKLOAD_CUDA, predict
spec, prec = CONFIGS_CUDA["moe-8x2-2048x16"]
predict(from_mapping(spec, name="m"), prec, get_device("h200-sxm"), WORKLOAD_CUDA)
for argv in (["validate", "--help"], ["devices", "calibrate", "--help"]):
    r = CliRunner().invoke(app, argv)
    assert r.exit_code == 0, r.output
print("loaded:", sorted(m for m in sys.modules if m.split(".")[0] in BLOCK))
"""


def test_validate_and_calibrate_import_no_optional_solver_packages() -> None:
    """The GPU machine has no cvxpy, optuna, moocore or distributed: the CLI, calibration and validation (and the
    cost model they evaluate) must load without them -- here they are blocked at import."""
    r = subprocess.run([sys.executable, "-c", BLOCKER], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().splitlines()[-1] == "loaded: []"
