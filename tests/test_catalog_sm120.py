"""A device's kernel architecture apart from its product architecture (``kernel_architecture``), for sm_120 Blackwell
(GeForce RTX 5090, RTX PRO 6000 Server): product family ``blackwell`` (datasheet peaks, NCCL's compute-capability
tables), kernels of the ``ada`` family (warp-level ``mma.sync`` tensor cores, no ``tcgen05``; TensorRT-LLM's XQA
decode, not trtllm-gen). Sources: CUTLASS ``include/cute/arch/mma_sm120.hpp`` (sm_120's MMAs are
``mma.sync.aligned.kind::f8f6f4.m16n8k32``), TensorRT-LLM ``attentionOp.h`` (``mUseTllmGen = mSM >= 100 && mSM !=
120 && mSM != 121``) and ``kernels/xqa/mha.cu`` (built for sm_86/89/120/121), NCCL ``tuning.cc`` (``minCompCap >=
100``: the Blackwell LL cap). The catalog's two sm_120 files do not set the key (session 16 measured the switch
worse, docs/devices.md); a device file that does is priced as the sources say."""

from __future__ import annotations

import dataclasses
import textwrap

import pytest

from rooflaw.constraints.kernels import curves_for
from rooflaw.constraints.kernels.attention_decode import xqa_device
from rooflaw.constraints.kernels.warp_mma import warp_mma_share
from rooflaw.constraints.parallel import collectives as C
from rooflaw.devices import Device, get_device, list_devices, load_device_file, save_device_toml
from rooflaw.devices.system import get_system
from rooflaw.errors import RooflawError

#: the catalog's sm_120 parts (GB202) and the architecture of the kernels the sources say run there
SM120 = {"rtx-5090": "ada", "rtx-pro-6000-server": "ada"}
#: the catalog's tcgen05 Blackwell parts (sm_100/103/110): their own curves
TCGEN05 = ("b200", "b300", "gb200", "gb300", "jetson-agx-thor")


@pytest.mark.parametrize("dev_id", sorted(SM120))
def test_an_sm120_device_with_the_sources_kernel_architecture_is_priced_by_it(dev_id):
    d = dataclasses.replace(get_device(dev_id), kernel_architecture=SM120[dev_id])
    assert d.architecture == "blackwell" and d.curves_architecture == SM120[dev_id]
    assert curves_for(d).architecture == SM120[dev_id]
    assert xqa_device(d) and not xqa_device(get_device(dev_id))  # XQA decode there, not trtllm-gen
    assert warp_mma_share(d) == 1.0 == warp_mma_share(get_device(dev_id))  # its peaks are mma.sync's either way
    system = dataclasses.replace(get_system(f"{dev_id}:8"), device=d)
    assert C._arch(system) == "blackwell"  # NCCL indexes its tables by compute capability, not by the kernels


@pytest.mark.parametrize("dev_id", TCGEN05)
def test_tcgen05_blackwell_keeps_its_own_curves(dev_id):
    d = get_device(dev_id)
    assert d.kernel_architecture is None and d.curves_architecture == "blackwell" == curves_for(d).architecture
    assert not xqa_device(d) and warp_mma_share(d) < 1.0


def test_no_catalog_device_names_another_kernel_architecture_yet():
    """The measured choice of session 16 (docs/devices.md): the sm_120 files keep the Blackwell curves."""
    assert not [d.id for d in list_devices() if d.kernel_architecture]


def test_the_split_follows_the_tensor_rate_per_sm_and_clock():
    """What the sources say, from the datasheets alone: every sm_120 part's dense FP16 rate (FP32 accumulate) per SM
    and clock is an ``mma.sync`` one (at most Ada's 1,024 FLOP), every tcgen05 part's 4,096 or more."""
    per_sm = {i: (d := get_device(i)).peak("fp16") / (d.sm_count * d.clock) for i in (*SM120, *TCGEN05)}
    assert all(per_sm[i] <= 1024 * 1.06 for i in SM120), per_sm
    assert all(per_sm[i] >= 4096 for i in TCGEN05), per_sm


def _file(tmp_path, extra: str):
    p = tmp_path / "gb202.toml"
    p.write_text(textwrap.dedent(f"""\
        id = "my-gb202"
        kind = "gpu"
        architecture = "blackwell"
        {extra}
        fp16_tflops = 400
        fp32_tflops = 100
        bandwidth_gbs = 1500
        memory_gb = 48
        sm_count = 160
        boost_clock_mhz = 2400
        """))  # fmt: skip
    return p


def test_kernel_architecture_round_trips_through_a_device_file(tmp_path):
    d = load_device_file(_file(tmp_path, 'kernel_architecture = "ada"'))
    assert isinstance(d, Device) and (d.architecture, d.kernel_architecture) == ("blackwell", "ada")
    assert curves_for(d).architecture == "ada"
    back = load_device_file(save_device_toml(d, tmp_path / "out.toml"))
    assert isinstance(back, Device) and back.kernel_architecture == "ada" and back.architecture == "blackwell"
    plain = load_device_file(_file(tmp_path, ""))
    assert isinstance(plain, Device) and plain.kernel_architecture is None and plain.curves_architecture == "blackwell"
    save_device_toml(plain, tmp_path / "out2.toml")
    assert "kernel_architecture" not in (tmp_path / "out2.toml").read_text()


def test_a_bad_kernel_architecture_is_named(tmp_path):
    with pytest.raises(RooflawError, match=r"kernel_architecture='sm120'.*must be one of"):
        load_device_file(_file(tmp_path, 'kernel_architecture = "sm120"'))
    with pytest.raises(RooflawError, match=r"kernel_architecture.*needs an architecture"):
        Device(id="x", name="x", peak_flops={"fp16": 1e12}, memory_bandwidth=1e9, memory_capacity=1e9,
               kernel_architecture="ada")  # fmt: skip


def test_devices_show_says_which_kernel_curves_price_a_device(capsys, tmp_path):
    """`devices show` names the architecture and the measured GPUs its curves came from: the H200 has no kernel
    tables of its own and takes Hopper's, fitted on the H100's (the one Hopper folder of the kernel data); an sm_120
    device file that names `kernel_architecture = "ada"` says so and takes the L40S's; a device without an
    architecture has no curves."""
    from rooflaw.cli import main

    assert main(["devices", "show", "h200-sxm"]) == 0
    assert "architecture: hopper; kernel curves 'hopper', fitted on h100_sxm" in capsys.readouterr().out
    path = tmp_path / "pro.toml"
    save_device_toml(dataclasses.replace(get_device("rtx-pro-6000-server"), kernel_architecture="ada"), path)
    assert main(["devices", "show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "architecture: blackwell, kernels priced as ada; kernel curves 'ada', fitted on l40s" in out
    assert main(["devices", "show", "mi300x"]) == 0
    assert "architecture: none -- no kernel curves" in capsys.readouterr().out
