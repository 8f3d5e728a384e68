"""The softmax's exponentials on faster SFUs (:mod:`rooflaw.constraints.kernels.sfu`): Blackwell Ultra's doubled
``MUFU.EX2`` rate saves half the exponentials' time and nothing else, against hand-computed times; every GPU the
curves are fitted on is priced exactly as before."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from rooflaw.constraints.kernels import KernelCurves, curves_for
from rooflaw.constraints.kernels import attention as KA
from rooflaw.devices.catalog import get_device, list_devices
from rooflaw.devices.device import Device
from rooflaw.devices.device_file import load_device_file
from rooflaw.errors import RooflawError

SMS, CLOCK = 64, 1.5e9
#: B = 1, S = 1024, 8 heads: 8 query tiles of 128 rows per head visit 1..8 key blocks of 128: 36 blocks a head
PAIRS = 8 * 36 * 128 * 128


def _dev(**kw) -> Device:
    base = dict(id="t", name="test gpu", peak_flops={"fp32": 1e13, "fp16": 1e15, "fp8": 2e15}, memory_bandwidth=2e13,
                memory_capacity=8e10, sm_count=SMS, clock=CLOCK, architecture="blackwell")  # fmt: skip
    base.update(kw)
    return Device(**base)


def _row() -> pd.DataFrame:
    return pd.DataFrame(dict(batch_size=[1], isl=[1024], num_heads=[8], num_key_value_heads=[8], head_dim=[128],
                             window_size=[0], attn_dtype=["bfloat16"], kv_cache_dtype=["bfloat16"],
                             framework=["trtllm"]))  # fmt: skip


def _curves(softmax: float) -> KernelCurves:
    # softmax in series with the MMAs (overlap 1): the time difference is the softmax's difference alone
    return KernelCurves(architecture="t", compute={"fp16": 0.5}, memory=0.8, kernel_s=0.0, attention=0.5,
                        attention_softmax=softmax, softmax_overlap=1.0)  # fmt: skip


@pytest.mark.parametrize("softmax", [20.0, 60.0])
def test_doubled_sfus_save_half_the_exponentials_time(softmax):
    # one exponential per pair at 16 per SM per clock takes PAIRS / (64 x 1.5 GHz x 16) = 0.384 us; at 32, half
    # of it: the softmax's other fp32 work (its time beyond the exponentials, 20 or 60 FLOP-eq a pair at 10 TFLOPS)
    # is unchanged
    t_exp = PAIRS / (SMS * CLOCK * 16)
    assert PAIRS * softmax / 1e13 > t_exp  # the fitted softmax holds the exponentials and more
    base = KA.predict_context(_row(), _dev(), _curves(softmax))[0] * 1e-3
    fast = KA.predict_context(_row(), _dev(ex2_per_clk_sm=32.0), _curves(softmax))[0] * 1e-3
    assert base - fast == pytest.approx(t_exp / 2, rel=1e-9)


def test_a_softmax_no_longer_than_its_exponentials_halves():
    # fitted at 1 FLOP-eq a pair (0.094 us at 10 TFLOPS, less than the 0.384 us of exponentials at 16 per SM-clock):
    # the exponentials are all of it, and doubling their rate halves it
    soft = PAIRS * 1.0 / 1e13
    base = KA.predict_context(_row(), _dev(), _curves(1.0))[0] * 1e-3
    fast = KA.predict_context(_row(), _dev(ex2_per_clk_sm=32.0), _curves(1.0))[0] * 1e-3
    assert base - fast == pytest.approx(soft / 2, rel=1e-9)


def test_sixteen_or_no_figure_prices_exactly_as_before():
    d = get_device("b200")
    c = curves_for(d)
    rows = pd.DataFrame(dict(batch_size=[1, 4, 16], isl=[128, 2048, 8192], num_heads=[32, 64, 8],
                             num_key_value_heads=[8, 8, 8], head_dim=[128, 128, 64], window_size=[0, 0, 0],
                             attn_dtype=["bfloat16", "fp8", "bfloat16"], kv_cache_dtype=["bfloat16", "fp8", "bfloat16"],
                             framework=["trtllm", "trtllm", "vllm"]))  # fmt: skip
    a = KA.predict_context(rows, d, c)
    b = KA.predict_context(rows, dataclasses.replace(d, ex2_per_clk_sm=16.0), c)
    assert np.all(np.isfinite(a)) and np.array_equal(a, b)


def test_blackwell_ultra_prefill_is_faster_by_at_most_half_its_exponentials():
    b300 = get_device("b300")
    c = curves_for(b300)
    rows = pd.DataFrame(dict(batch_size=[1, 8], isl=[16384, 4096], num_heads=[32, 32], num_key_value_heads=[8, 8],
                             head_dim=[128, 128], window_size=[0, 0], attn_dtype=["fp8", "bfloat16"],
                             kv_cache_dtype=["fp8", "bfloat16"], framework=["trtllm", "trtllm"]))  # fmt: skip
    fast = KA.predict_context(rows, b300, c) * 1e-3
    slow = KA.predict_context(rows, dataclasses.replace(b300, ex2_per_clk_sm=None), c) * 1e-3
    s = rows.isl.to_numpy(float)
    pairs = rows.batch_size * rows.num_heads * s * (s + 1) / 2  # causal pairs, at least the blocks' count
    half_exps = pairs.to_numpy(float) * 1.2 / (b300.sm_count * b300.clock * 16) / 2  # blocks add < 20 % pairs here
    assert np.all(fast < slow) and np.all(slow - fast <= half_exps)


def test_only_blackwell_ultra_carries_a_faster_sfu():
    odd = {d.id: d.ex2_per_clk_sm for d in list_devices(plugins=False) if d.ex2_per_clk_sm not in (None, 16)}
    assert odd == {"b300": 32.0, "gb300": 32.0}


def test_device_file_reads_the_figure_and_names_a_bad_one(tmp_path):
    text = ('schema = 1\nid = "x"\nname = "x"\nkind = "gpu"\narchitecture = "blackwell"\nfp16_tflops = 100\n'
            'fp32_tflops = 10\nbandwidth_gbs = 1000\nmemory_gb = 10\nsm_count = 10\n'
            'boost_clock_mhz = 1000\n')  # fmt: skip
    good = tmp_path / "good.toml"
    good.write_text(text + "sfu_ex2_per_clk_sm = 32\n")
    assert load_device_file(good).ex2_per_clk_sm == 32.0
    bad = tmp_path / "bad.toml"
    bad.write_text(text + "sfu_ex2_per_clk_sm = 0\n")
    with pytest.raises(RooflawError, match="sfu_ex2_per_clk_sm=0"):
        load_device_file(bad)
