"""The one assembly's routed-expert layer against the MoE kernel family (``kernels/moe.py``'s ``layer_seconds``).

A one-layer MoE model of the family's shape (T tokens in one prefill, E experts, top-K, hidden d, expert width i,
bf16, TensorRT-LLM: the family's reference engine) priced by :func:`rooflaw.evaluate`: its ``ffn_up``, ``ffn_act``
and ``ffn_down`` plus the family's five launches and ``moe_s`` against the family's own layer under uniform routing.
At ≥ 12k tokens the assembly priced these layers at 0.47-0.73 of the family before it carried the family's
grouped-GEMM rate at narrow experts (``moe_half_inter``), its ``moe`` fraction outside the tile model, and the
gather / scatter-reduce bytes; what is left is the family's L2 share, its Monte Carlo padded rows against the
assembly's closed form (:mod:`rooflaw.constraints.moe_padding`), and one blend over both GEMMs against one per GEMM
(≤ 6 % on these shapes).
"""

from __future__ import annotations

import pytest

import rooflaw as rl
from rooflaw.constraints.kernels import curves_for
from rooflaw.constraints.kernels import moe as M
from rooflaw.constraints.kernels.moe_blend import serial
from rooflaw.constraints.moe_padding import padding_value
from rooflaw.devices import get_device

OPS = ("ffn_up", "ffn_act", "ffn_down")


def _model(T, E, K, d, i):
    heads = d // 128
    return rl.Architecture(layers=1, d_model=d, heads=heads, kv_heads=heads, head_dim=128, ffn=i, experts=E, top_k=K,
                           vocab=256)  # fmt: skip


def _assembly(dev, T, E, K, d, i, tiles):
    rep = rl.evaluate(_model(T, E, K, d, i), dev, precision="bf16", engine="tensorrt-llm", tiles=tiles, batch=T,
                      input_tokens=1, output_tokens=1)  # fmt: skip
    kc = curves_for(dev)
    fixed = (M.KERNELS * kc.kernel_s + kc.moe_s) * M.cycle_scale(kc, dev)
    return sum(o.seconds for o in rep.ops if o.name in OPS and o.phase == "prefill") + fixed, rep


def _family(dev, T, E, K, d, i):
    rows, touched, padded, _ = M.expected_load(T, E, K, 1, "uniform")
    return float(M.layer_seconds(dev, curves_for(dev), "bfloat16", T, d, i, rows, touched, padded))


@pytest.mark.parametrize(
    ("dev_id", "shape"),
    [("h100-sxm", (16384, 256, 8, 4096, 128)), ("l40s", (12288, 128, 8, 4096, 768)),
     ("b200", (16384, 64, 8, 2048, 1408)), ("a100-sxm-80gb", (16384, 256, 8, 4096, 128))],
)  # fmt: skip
@pytest.mark.parametrize("tiles", [True, False])
def test_large_token_moe_layer_is_priced_as_the_family(dev_id, shape, tiles):
    dev = get_device(dev_id)
    asm, _ = _assembly(dev, *shape, tiles)
    assert 0.92 <= asm / _family(dev, *shape) <= 1.03


def test_ffn_act_moves_the_gather_and_scatter_reduce_bytes():
    """By hand: the activation reads 2·i and writes i per routed row; the gather reads the layer's input and writes
    each routed row's d, the scatter-reduce reads each routed row's d and writes the output: 2·(K + 1)·d per token."""
    T, E, K, d, i = 4096, 64, 8, 2048, 768
    _, rep = _assembly(get_device("h100-sxm"), T, E, K, d, i, False)
    act = next(o for o in rep.ops if o.name == "ffn_act" and o.phase == "prefill")
    assert act.bytes == T * (3 * K * i + 2 * (K + 1) * d) * 2
    dense = rl.evaluate(rl.Architecture(layers=1, d_model=d, heads=16, kv_heads=16, ffn=i, vocab=256), "h100-sxm",
                        precision="bf16", batch=T, input_tokens=1, output_tokens=1)  # fmt: skip
    assert next(o for o in dense.ops if o.name == "ffn_act" and o.phase == "prefill").bytes == T * 3 * i * 2


def test_narrow_experts_compute_at_the_family_rate():
    """By hand: ffn_up (gate and up) of a width-128 expert on Hopper computes at moe · 128/(128 + moe_half_inter) of
    the linear roof (the family's i/(i + h), bf16) on its rows padded to whole 128-row tiles (the closed form,
    within 1 % of the exact binomial expectation: test_assembly_moe_padding.py), streams at memory · moe_memory,
    and the two blend with q = moe_serial; at T = 16384 it is compute-bound."""
    dev = get_device("h100-sxm")
    kc = curves_for(dev)
    T, E, K, d, i = 16384, 256, 8, 4096, 128
    _, rep = _assembly(dev, T, E, K, d, i, False)
    up = next(o for o in rep.ops if o.name == "ffn_up" and o.phase == "prefill")
    assert up.flops == 2 * T * K * 2 * i * d
    peak = dev.roof("fp16")[1] * kc.compute["fp16"] * dev.compute_efficiency
    pad = padding_value(T, K, E)
    assert 1.1 < pad < 1.15  # 512 rows per expert, 4.5 tiles of 128 on average
    t_c = up.flops * pad / (peak * kc.moe * i / (i + kc.moe_half_inter))
    t_m = up.bytes / (dev.memory_bandwidth * dev.memory_efficiency * kc.memory * kc.moe_memory)
    q = serial(kc, dev)  # the device's q (kernels/moe_blend.py)
    assert kc.moe_half_inter > i and 0 < q <= 1  # the rate more than halves: the term this test is about
    assert up.seconds == pytest.approx((t_c ** (1 / q) + t_m ** (1 / q)) ** q, rel=1e-12)
    assert up.bound == "compute" and t_c > t_m


def test_a_shared_expert_computes_at_the_dense_rate():
    """By hand: with one shared expert of width 1024 next to top-8 routed experts of width 128, ffn_up's compute time
    is the routed FLOPs, padded to whole tiles, at the grouped rate (moe · i/(i + moe_half_inter)) plus the shared
    expert's at the roof (a dense GEMM: not padded per expert)."""
    dev = get_device("h100-sxm")
    kc = curves_for(dev)
    T, E, K, d, i, sh = 8192, 256, 8, 4096, 128, 1024
    arch = rl.Architecture(layers=1, d_model=d, heads=32, kv_heads=32, head_dim=128, ffn=i, experts=E, top_k=K,
                           shared_experts=1, shared_ffn=sh, vocab=256)  # fmt: skip
    rep = rl.evaluate(arch, dev, precision="bf16", engine="tensorrt-llm", batch=T, input_tokens=1, output_tokens=1)
    up = next(o for o in rep.ops if o.name == "ffn_up" and o.phase == "prefill")
    f_routed, f_shared = 2 * T * 2 * d * K * i, 2 * T * 2 * d * sh
    assert up.flops == f_routed + f_shared
    peak = dev.roof("fp16")[1] * kc.compute["fp16"] * dev.compute_efficiency
    t_c = f_routed * padding_value(T, K, E) / (peak * kc.moe * i / (i + kc.moe_half_inter)) + f_shared / peak
    t_m = up.bytes / (dev.memory_bandwidth * dev.memory_efficiency * kc.memory * kc.moe_memory)
    q = serial(kc, dev)  # the device's q (kernels/moe_blend.py)
    assert up.seconds == pytest.approx((t_c ** (1 / q) + t_m ** (1 / q)) ** q, rel=1e-12)
