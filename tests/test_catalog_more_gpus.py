"""The session-10 catalog GPUs (H100 PCIe/NVL, H800, H20, GH200, A100 PCIe and SXM 40GB, A30, A10, A10G, A40, L40, L20,
RTX 6000 Ada, RTX 5090, RTX 3090): each loads with the figures its datasheet prints (re-typed here from the
sources cited in the files, sparse figures written as ``sparse / 2``), its FP32 peak is SMs x FP32 lanes x 2 x clock,
its FP16 tensor rate per SM and clock is one its architecture has, and its architecture's kernel curves price a GEMM
on it no faster than the roofline."""

from __future__ import annotations

import json

import pytest
from cli_helpers import run_cli

from rooflaw import api
from rooflaw.constraints.kernels import curves_for
from rooflaw.devices.catalog import get_device
from rooflaw.devices.system import get_system

# id -> (architecture, {dtype: dense TFLOP/s}, bandwidth GB/s, memory GB, power W). Sparse-printed figures as "/ 2".
EXPECTED = {
    # H100 datasheet, PCIe column (sparse starred figures)
    "h100-pcie": ("hopper", {"fp32": 51, "tf32": 756 / 2, "fp16": 1513 / 2, "fp8": 3026 / 2, "int8": 3026 / 2},
                  2000, 80, 350),
    # H100 product page, H100 NVL column
    "h100-nvl": ("hopper", {"fp32": 60, "tf32": 835 / 2, "fp16": 1671 / 2, "fp8": 3341 / 2, "int8": 3341 / 2},
                 3900, 94, 400),
    # H800 SXM: H100 SXM compute and memory (secondary)
    "h800-sxm": ("hopper", {"fp32": 67, "tf32": 989 / 2, "fp16": 1979 / 2, "fp8": 3958 / 2, "int8": 3958 / 2},
                 3350, 80, 700),
    # H20: reported dense figures (secondary)
    "h20": ("hopper", {"fp32": 44, "tf32": 74, "fp16": 148, "fp8": 296, "int8": 296}, 4000, 96, 400),
    # GH200 product page (96 GB HBM3 variant), module TDP upper end
    "gh200": ("hopper", {"fp32": 67, "tf32": 989 / 2, "fp16": 1979 / 2, "fp8": 3958 / 2, "int8": 3958 / 2},
              4000, 96, 1000),
    # A100 product page / 40GB datasheet, PCIe columns (dense | sparse pairs: dense kept)
    "a100-pcie-80gb": ("ampere", {"fp32": 19.5, "tf32": 156, "fp16": 312, "int8": 624}, 1935, 80, 300),
    "a100-pcie-40gb": ("ampere", {"fp32": 19.5, "tf32": 156, "fp16": 312, "int8": 624}, 1555, 40, 250),
    "a100-sxm-40gb": ("ampere", {"fp32": 19.5, "tf32": 156, "fp16": 312, "int8": 624}, 1555, 40, 400),
    "a30": ("ampere", {"fp32": 10.3, "tf32": 82, "fp16": 165, "int8": 330}, 933, 24, 165),
    "a10": ("ampere", {"fp32": 31.2, "tf32": 62.5, "fp16": 125, "int8": 250}, 600, 24, 150),
    # A10G datasheet (NVIDIA, hosted by AWS): TF32 35 | 70*, BF16/FP16 70 | 140*
    "a10g": ("ampere", {"fp32": 35, "tf32": 35, "fp16": 70}, 600, 24, 300),
    "a40": ("ampere", {"fp32": 37.4, "tf32": 74.8, "fp16": 149.7, "int8": 299.3}, 696, 48, 300),
    "l40": ("ada", {"fp32": 90.5, "tf32": 90.5, "fp16": 181.05, "fp8": 362, "int8": 362}, 864, 48, 300),
    "l20": ("ada", {"fp32": 59.35}, 864, 48, 275),
    "rtx-6000-ada": ("ada", {"fp32": 91.1, "fp8": 1457 / 2}, 960, 48, 300),
    # RTX Blackwell whitepaper (FP32-accumulate tensor figures); product page 3,352 AI TOPS = sparse FP4
    "rtx-5090": ("blackwell", {"fp32": 104.8, "fp16": 209.5, "fp8": 419, "fp4": 3352 / 2, "int8": 838}, 1792, 32, 575),
    # GA102 whitepaper: FP16 tensor with FP32 accumulate
    "rtx-3090": ("ampere", {"fp32": 35.6, "tf32": 35.6, "fp16": 71, "int8": 284}, 936, 24, 350),
}  # fmt: skip

#: FP32 lanes per SM: GA100 (A100, A30) has 64, every other Ampere, Ada, Hopper and Blackwell SM 128.
GA100 = {"a100-pcie-80gb", "a100-pcie-40gb", "a100-sxm-40gb", "a30"}

#: Dense FP16 tensor FLOP per clock per SM a part of each chip family can run (FP32 accumulate):
#: GA100 2,048; GA102 1,024 (A10, A40) or 512 (GeForce and A10G, half-rate FP32 accumulate); AD102 1,024 (L40S,
#: RTX 6000 Ada) or 512 (L40, L20, GeForce); GB202 GeForce 512. Hopper: at most 4,096 (its datasheet tensor peaks
#: are at a lower clock than the FP32 boost clock the files carry, so only the ceiling holds).
TENSOR_PER_SM = {"a100-pcie-80gb": 2048, "a100-pcie-40gb": 2048, "a100-sxm-40gb": 2048, "a30": 2048, "a10": 1024,
                 "a40": 1024, "a10g": 512, "rtx-3090": 512, "l40": 512, "l20": 512, "rtx-6000-ada": 1024,
                 "rtx-5090": 512}  # fmt: skip

#: Devices whose figures are not from an NVIDIA datasheet (no public one): they must not claim to be.
SECONDARY = {"h800-sxm", "h20", "l20"}


@pytest.mark.parametrize("dev_id", sorted(EXPECTED))
def test_datasheet_figures(dev_id):
    arch, flops, bw, mem, power = EXPECTED[dev_id]
    d = get_device(dev_id)
    assert d.architecture == arch and d.kind == "gpu" and d.vendor == "NVIDIA"
    for dtype, tflops in flops.items():
        assert d.peak(dtype) == pytest.approx(tflops * 1e12, rel=1e-9), dtype
    assert d.memory_bandwidth == pytest.approx(bw * 1e9)
    assert d.memory_capacity == pytest.approx(mem * 1e9)
    assert d.power_peak == pytest.approx(power)
    assert 0 < d.power_idle < d.power_peak and d.l2_bytes > 0 and d.sm_count and d.tile[0] > 0
    # every figure says where it comes from
    for field, prov in d.provenance.items():
        assert prov, field
        assert d.sources.get(field, "").startswith("https://"), (dev_id, field)
    if dev_id in SECONDARY:
        assert d.provenance["peak_flops.fp16"] != "datasheet"


@pytest.mark.parametrize("dev_id", sorted(EXPECTED))
def test_fp32_peak_is_sms_lanes_clock(dev_id):
    d = get_device(dev_id)
    lanes = 64 if dev_id in GA100 else 128
    assert d.sm_count * lanes * 2 * d.clock == pytest.approx(d.peak("fp32"), rel=0.01)


@pytest.mark.parametrize("dev_id", sorted(EXPECTED))
def test_tensor_rate_per_sm_is_the_architectures(dev_id):
    d = get_device(dev_id)
    per_sm = d.peak("fp16") / (d.sm_count * d.clock)
    if d.architecture == "hopper":
        assert per_sm <= 4096 * 1.01
    else:
        assert per_sm == pytest.approx(TENSOR_PER_SM[dev_id], rel=0.01)


def test_sparse_figures_are_halved_and_say_so():
    # the datasheets that print only sparse figures: the files keep half and tag it derived
    halved = {"h100-pcie": ("fp16", "fp8", "int8", "tf32"), "h100-nvl": ("fp16", "fp8"), "gh200": ("fp16", "fp8"),
              "rtx-6000-ada": ("fp8",), "rtx-5090": ("fp4",)}  # fmt: skip
    for dev_id, fields in halved.items():
        d = get_device(dev_id)
        for f in fields:
            assert d.provenance[f"peak_flops.{f}"] == "derived", (dev_id, f)
            sparse = EXPECTED[dev_id][1][f] * 2
            assert f"peak_flops.{f}: dense = {sparse:g} sparse / 2" in d.notes, (dev_id, f)


@pytest.mark.parametrize("dev_id", sorted(EXPECTED))
def test_architecture_curves_price_a_gemm_above_the_roofline(dev_id):
    d = get_device(dev_id)
    kc = curves_for(d)
    assert kc is not None and kc.architecture == d.architecture
    priced = api.gemm(4096, 4096, 4096, d, "bf16", curves="auto").to_dict()
    ideal = api.gemm(4096, 4096, 4096, d, "bf16", curves="ideal").to_dict()
    assert priced["curves"] == d.architecture and not ideal["curves"]
    roof = max(2 * 4096**3 / d.peak("fp16"), 3 * 4096**2 * 2 / d.memory_bandwidth)
    # the curves are achieved fractions of the roof: never faster, and a big GEMM within 3x of it
    assert roof <= priced["seconds"] <= 3 * roof
    # the pure roofline pays only the tile quantisation of the last wave: 32 x 32 output tiles over the SMs
    tiles = (4096 // d.tile[0]) * (4096 // d.tile[1])
    wave = tiles / (-(-tiles // d.sm_count) * d.sm_count)
    assert ideal["compute_seconds"] == pytest.approx(2 * 4096**3 / d.peak("fp16") / wave, rel=1e-6)


@pytest.mark.parametrize("dev_id", ["h20", "a10g", "rtx-5090"])
def test_evaluate_runs_on_the_new_devices(capsys, dev_id):
    arch = "layers=4,d_model=512,heads=8,kv_heads=2,ffn=1536,vocab=32000"
    code, out, err = run_cli(capsys, "evaluate", "--device", dev_id, "--arch", arch, "--json")
    assert code == 0, err
    r = json.loads(out)
    assert r["device"] == dev_id and r["tpot_s"] > 0 and r["fits_in_memory"]


@pytest.mark.parametrize(
    "spec, link, gbs, node",
    [("h800-sxm:8", "NVLink 4 (H800: 400 GB/s)", 200, 8), ("h20:8", "NVLink 4", 450, 8),
     ("a100-sxm-40gb:8", "NVLink 3", 300, 8),
     ("h100-nvl:2", "NVLink 4 bridge", 300, 2), ("h100-pcie:2", "NVLink 4 bridge", 300, 2),
     ("a100-pcie-80gb:8", "PCIe Gen4 x16", 32, 8), ("a10:8", "PCIe Gen4 x16", 32, 8),
     ("a10g:8", "PCIe Gen4 x16", 32, 8), ("a30:8", "PCIe Gen4 x16", 32, 8), ("a40:8", "PCIe Gen4 x16", 32, 8),
     ("l40:8", "PCIe Gen4 x16", 32, 8),
     ("l20:8", "PCIe Gen4 x16", 32, 8), ("rtx-6000-ada:4", "PCIe Gen4 x16", 32, 4),
     ("rtx-5090:8", "PCIe Gen5 x16", 64, 8), ("rtx-3090:8", "PCIe Gen4 x16", 32, 8)],
)  # fmt: skip
def test_new_systems(spec, link, gbs, node):
    """Per-GPU, per-direction link bandwidth = half the bidirectional figure the sources print."""
    s = get_system(spec)
    assert s.link == link and s.link_bw == gbs * 1e9 and s.node_size == node and s.source.startswith("https://")


def test_h800_cut_nvlink_slows_tensor_parallel_prefill_by_at_most_the_bandwidth_ratio(capsys):
    """Same GH100, same model and layout: only the link differs (200 vs 450 GB/s each way, equal latencies), so the
    H800's all-reduce time is longer than the H100's by more than 1x and at most 450/200 (the latency part is equal)."""
    comm = {}
    for spec in ("h100-sxm:8", "h800-sxm:8"):
        code, out, err = run_cli(capsys, "evaluate", "--hf-config", "llama-3-70b", "--system", spec, "--layout", "tp=8",
                                 "--batch", "8", "--json")  # fmt: skip
        assert code == 0, err
        r = json.loads(out)
        comm[spec] = (r[0] if isinstance(r, list) else r)["comm_s_prefill"]
    ratio = comm["h800-sxm:8"] / comm["h100-sxm:8"]
    assert 1.5 < ratio <= 450 / 200 + 1e-9


#: Published torch fp16 matmul rates (TFLOP/s, square n x n x n), held out from every fit:
#: https://github.com/zzc0721/torch-performance-test-data (README table; the H20 row's size sweep is its issue #77).
PUBLISHED_MATMUL = {"h20": (10240, 142.09), "rtx-3090": (8192, 75.64), "rtx-5090": (8192, 237.63)}
#: The RTX 5090 runs the matmul at 237.6 TFLOP/s, above its 209.5 rated-boost FP32-accumulate roof (2.73 GHz against
#: the rated 2.41: GeForce cards sustain clocks above the rated boost): datasheet + Blackwell curves (fitted on
#: B200/GB200) price it 1.6x slow, outside the band. Kept as a strict xfail so the miss stays visible (and the
#: test says so if a refit fixes it).
FIVE090 = pytest.mark.xfail(strict=True, reason="GeForce sustains clocks above the rated boost the roof counts")


@pytest.mark.parametrize("dev_id", [pytest.param(i, marks=FIVE090) if i == "rtx-5090" else i for i in PUBLISHED_MATMUL])
def test_datasheet_plus_architecture_curves_price_a_published_matmul_within_the_held_out_band(dev_id):
    """Issue 27's claim on GPUs with no kernel data: the datasheet figures and the architecture's curves put a
    measured large GEMM's time inside the curves' held-out 80 % GEMM band (measured / predicted seconds)."""
    n, measured_tflops = PUBLISHED_MATMUL[dev_id]
    d = get_device(dev_id)
    lo, hi = curves_for(d).bands["gemm"]
    predicted_s = api.gemm(n, n, n, d, "fp16", curves="auto").to_dict()["seconds"]
    measured_s = 2 * n**3 / (measured_tflops * 1e12)
    assert lo <= measured_s / predicted_s <= hi
