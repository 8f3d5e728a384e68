"""The MoE kernel family: routing counts by hand (balanced) and against the operators' coverage (uniform), the
power-law expected loads against a brute-force simulation of the tables' generator, the layer time by hand, and
a fit recovering a known ``moe`` fraction from synthetic rows."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
import sympy as sp
from scipy.optimize import least_squares

import rooflaw as R
from rooflaw.constraints import operators as O
from rooflaw.constraints.kernels import FAMILIES, KernelCurves
from rooflaw.constraints.kernels import moe as KM
from rooflaw.constraints.symbols import ARCH, T

CURVES = KernelCurves("hopper", {"fp16": 0.8, "fp8": 0.6}, memory=0.85, kernel_s=4e-6, moe=0.5)


def test_balanced_routing_by_hand():
    # 64 tokens x top-8 over 256 experts: 512 rows, 2 per expert, all touched; tile 16 rows -> 256 x 16 padded
    assert KM.expected_load(64, 256, 8, 1, "balanced") == (512.0, 256.0, 4096.0, 2.0)
    # ep = 8: rank 0 holds experts 0..31: 64 rows, 32 touched, 2 rows each (tile 16)
    assert KM.expected_load(64, 256, 8, 8, "balanced") == (64.0, 32.0, 512.0, 2.0)
    # one token: 8 distinct experts, one row each, one 16-row tile each
    assert KM.expected_load(1, 256, 8, 1, "balanced") == (8.0, 8.0, 128.0, 1.0)
    # Mixtral-like: 8 experts top-2, 1000 tokens: 250 rows each; tile 128 -> 256 padded rows each
    assert KM.expected_load(1000, 8, 2, 1, "balanced") == (2000.0, 8.0, 2048.0, 250.0)


def test_uniform_coverage_is_the_operators_expression():
    rows, touched, _, _ = KM.expected_load(48, 128, 8, 1, "uniform")
    want = float(O.EXPERTS_TOUCHED.subs({ARCH["experts"]: 128, ARCH["top_k"]: 8, T: 48}))
    assert want == pytest.approx(128 * (1 - (1 - 8 / 128) ** 48))
    assert KM.uniform_touched(48, 128, 8) == pytest.approx(want)
    assert touched == pytest.approx(want, rel=0.02)  # 64 seeded draws
    assert rows == pytest.approx(48 * 8, rel=0.02)
    assert isinstance(O.EXPERTS_TOUCHED, sp.Expr)


def brute_power_law(T: int, E: int, K: int, ep: int, alpha: float, draws: int, seed: int, random_ties: bool = False):
    """The tables' generator written out plainly: per-expert weights by inverse CDF, rows by rounding with the
    remainder fixed one at a time on the largest experts (equal loads in index order, or in a random order: the
    generator's sort is not stable), the token x expert assignment built row by row, the heaviest group of ep;
    its rows, touched experts and largest expert load, averaged over draws."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(draws):
        lo, hi = (1.0, 0.8 * T) if T * K > E else (0.01, 2.0)
        w = []
        for _e in range(E):
            u = rng.random()
            w.append(((hi ** (1 - alpha) - lo ** (1 - alpha)) * u + lo ** (1 - alpha)) ** (1 / (1 - alpha)))
        total = sum(w)
        n = [round(x / total * T * K) for x in w]
        delta = T * K - sum(n)
        tie = rng.permutation(E) if random_ties else range(E)
        order = sorted(range(E), key=lambda e: (-n[e], tie[e]))
        for i in range(abs(delta)):
            n[order[i % E]] += 1 if delta > 0 else -1
        n = [max(v, 0) for v in n]
        assign = [e for e in order for _ in range(n[e])]  # experts by load, each repeated by its rows
        counts = [0] * E
        for e in assign:
            counts[e] += 1
        size = E // ep
        groups = [counts[g * size : (g + 1) * size] for g in range(ep)]
        heavy = max(groups, key=sum)
        out.append((sum(heavy), sum(1 for v in heavy if v > 0), max(heavy)))
    return np.mean(out, axis=0)


@pytest.mark.parametrize("T, E, K, ep, alpha", [(512, 128, 8, 1, 1.2), (256, 256, 8, 8, 1.01), (16, 256, 8, 1, 1.2)])
def test_power_law_expected_loads_match_brute_force(T, E, K, ep, alpha):
    rows, touched, padded, max_load = KM.expected_load(T, E, K, ep, f"power_law_{alpha}")
    b_rows, b_touched, b_max = brute_power_law(T, E, K, ep, alpha, draws=300, seed=1)
    assert rows == pytest.approx(b_rows, rel=0.06)
    assert touched == pytest.approx(b_touched, rel=0.06)
    assert max_load == pytest.approx(b_max, rel=0.12)  # the max of a heavy-tailed law: the noisiest figure
    assert padded >= rows
    if ep == 1:
        assert rows == T * K  # every row lands in the one group


def test_skew_loads_the_heaviest_expert():
    bal = KM.expected_load(2048, 128, 8, 1, "balanced")
    skew = KM.expected_load(2048, 128, 8, 1, "power_law_1.01")
    assert bal[3] == 128 and skew[3] > 4 * bal[3]


def test_layer_time_by_hand():
    h100 = R.get_device("h100-sxm")
    T_, d, inter, tp = 64, 7168, 2048, 2
    rows, touched, padded, _ = KM.expected_load(T_, 256, 8, 1, "balanced")
    i_loc = inter / tp
    flops = 2 * padded * 3 * d * i_loc
    weights = touched * 3 * d * i_loc * 1.0  # fp8 weights
    # bf16 activations: the GEMMs' own (GEMM1 reads d, writes 2i; GEMM2 reads i, writes d) inside the roofline; the
    # element-wise kernels' (gather writes d, activation reads 2i and writes i, the reduction reads d per row; the
    # layer's input and output, 2·T·d) after it
    gemm_io = rows * (2 * d + 3 * i_loc) * 2
    elementwise = (rows * (d + 3 * i_loc) + (2 * T_ + rows) * d) * 2
    bw = 3.35e12 * 0.85
    want = max(flops / (1979e12 * 0.6 * 0.5), (weights + gemm_io) / bw) + elementwise / bw + 5 * 4e-6
    got = KM.layer_seconds(h100, CURVES, "fp8", T_, d, inter, rows, touched, padded, tp)
    assert got == pytest.approx(want, rel=1e-12)
    # the same rows through the table predictor (ms)
    table = pd.DataFrame({"num_tokens": [T_], "hidden_size": [d], "inter_size": [inter], "topk": [8],
                          "num_experts": [256], "moe_tp_size": [tp], "moe_ep_size": [1], "distribution": ["balanced"],
                          "moe_dtype": ["fp8"], "kernel_source": ["moe_torch_flow_cutlass"]})  # fmt: skip
    assert KM.predict(table, h100, CURVES)[0] == pytest.approx(want * 1e3, rel=1e-12)
    table.loc[0, "moe_dtype"] = "int2_made_up"
    assert np.isnan(KM.predict(table, h100, CURVES)[0])


def test_fit_recovers_a_known_moe_fraction():
    rng = np.random.default_rng(3)
    n = 60
    table = pd.DataFrame({"num_tokens": rng.choice([256, 1024, 4096, 16384], n), "hidden_size": 4096,
                          "inter_size": rng.choice([1536, 2048], n), "topk": 8, "num_experts": 128,
                          "moe_tp_size": 1, "moe_ep_size": rng.choice([1, 4], n), "distribution": "power_law_1.2",
                          "moe_dtype": "bfloat16", "kernel_source": "moe_torch_flow"})  # fmt: skip
    dev = R.get_device("b200")
    true = KernelCurves("blackwell", {"fp16": 0.7}, 0.8, 5e-6, moe=0.37)
    meas = KM.predict(table, dev, true) * np.exp(rng.normal(0, 0.02, n))
    table["latency"] = meas

    def res(p):
        c = KernelCurves("blackwell", {"fp16": 0.7}, 0.8, 5e-6, moe=float(np.exp(p[0])))
        return np.log(KM.predict(table, dev, c) / meas)

    got = math.exp(least_squares(res, [math.log(0.7)]).x[0])
    assert got == pytest.approx(0.37, rel=0.03)


def test_bad_routing_inputs():
    with pytest.raises(R.RooflawError, match="distribution"):
        KM.expected_load(8, 64, 2, 1, "zipf")
    with pytest.raises(R.RooflawError, match="moe_ep_size"):
        KM.expected_load(8, 64, 2, 3, "balanced")
    assert FAMILIES["moe"].params == KM.FIGURES
    assert KM.FIGURES == ("moe", "moe_memory", "moe_s", "moe_serial_gbps", "moe_half_inter", "moe_slot", "moe_reread")
    assert FAMILIES["moe"].tables == ("moe_perf",)


def test_blend_and_layer_figures_by_hand():
    """The blend: the max at q = 0, the sum at q = 1, the 2-norm at q = 1/2; the layer's streaming rate scaled by
    moe_memory and its fixed cost raised by moe_s."""
    assert KM.blend(3.0, 4.0, 0.0) == 4.0
    assert KM.blend(3.0, 4.0, 1.0) == pytest.approx(7.0)
    assert KM.blend(3.0, 4.0, 0.5) == pytest.approx(5.0)
    assert KM.blend(1e-3, 1e-3, 0.01) == pytest.approx(1e-3 * 2**0.01)  # no overflow at a small q
    h100 = R.get_device("h100-sxm")
    c = KernelCurves("hopper", {"fp16": 0.8, "fp8": 0.6}, memory=0.85, kernel_s=4e-6, moe=0.5, moe_memory=0.9,
                     moe_s=12e-6, moe_serial=0.5)  # fmt: skip
    T_, d, inter = 8, 4096, 1536  # 8 tokens x top-8 of 128 experts, balanced: 64 experts, one row each
    rows, touched, padded, _ = KM.expected_load(T_, 128, 8, 1, "balanced")
    assert (rows, touched, padded) == (64.0, 64.0, 1024.0)
    t_c = 2 * 1024 * 3 * d * inter / (989.5e12 * 0.8 * 0.5)
    bw = 3.35e12 * 0.85 * 0.9
    t_m = (64 * 3 * d * inter * 2 + 64 * (2 * d + 3 * inter) * 2) / bw  # weights and the GEMMs' own activations
    elementwise = (64 * (d + 3 * inter) + (2 * 8 + 64) * d) * 2 / bw
    want = math.hypot(t_c, t_m) + elementwise + 5 * 4e-6 + 12e-6
    assert KM.layer_seconds(h100, c, "bfloat16", T_, d, inter, rows, touched, padded) == pytest.approx(want)


def test_fit_recovers_known_moe_figures():
    """Synthetic rows from known (moe, moe_memory, moe_s, moe_serial), 2 % noise, both regimes (1 to 16k tokens):
    least squares on log(pred/meas) finds all four."""
    rng = np.random.default_rng(5)
    n = 120
    table = pd.DataFrame({"num_tokens": rng.choice([1, 4, 16, 64, 256, 1024, 4096, 16384], n), "hidden_size": 4096,
                          "inter_size": rng.choice([768, 1536], n), "topk": 8, "num_experts": 128,
                          "moe_tp_size": rng.choice([1, 4], n), "moe_ep_size": rng.choice([1, 8], n),
                          "distribution": "balanced", "moe_dtype": "bfloat16",
                          "kernel_source": "moe_torch_flow"})  # fmt: skip
    dev = R.get_device("h100-sxm")
    base = dict(architecture="hopper", compute={"fp16": 0.8}, memory=0.8, kernel_s=3e-6)
    true = (0.6, 0.9, 20e-6, 0.7)
    cv = lambda x: KernelCurves(**base, moe=x[0], moe_memory=x[1], moe_s=x[2], moe_serial=x[3])  # noqa: E731
    terms = KM.prepare(table)
    meas = KM.evaluate(terms, dev, cv(true)) * np.exp(rng.normal(0, 0.02, n))
    fit = least_squares(lambda x: np.log(KM.evaluate(terms, dev, cv(x)) / meas), [0.7, 1.0, 10e-6, 0.5],
                        bounds=([0.01, 0.05, 0, 0], [1.5, 2, 1e-3, 1]), x_scale=[1, 1, 1e-5, 0.1])  # fmt: skip
    assert fit.x == pytest.approx(true, rel=0.1)


@pytest.mark.parametrize("name, routed", [("mixtral-8x7b", True), ("llama-3.1-8b", False)])
def test_assembly_routed_expert_gemms_take_the_moe_fraction(monkeypatch, name, routed):
    """With kernel curves and the tile model, a routed-expert layer's FFN GEMMs run at ``moe`` of the linear rate:
    a compute-bound prefill (4,096 tokens, ~1,024 rows per Mixtral expert) takes 1/0.4 = 2.5x as long at moe = 0.4
    as at moe = 1, every other operator unchanged; a dense model's FFN is not a grouped GEMM and keeps its rate."""
    from rooflaw import Workload, evaluate, from_hf_config, get_device
    from rooflaw.constraints import curves_applied as CA

    a, dev = from_hf_config(name), get_device("h100-sxm")
    secs = {}
    for moe in (1.0, 0.4):
        kc = KernelCurves("hopper", {"fp16": 0.7}, memory=0.8, kernel_s=4e-6, half_rows=20.0, moe=moe)
        monkeypatch.setattr(CA, "curves_of", lambda d, kc=kc: kc if d.architecture else None)
        rep = evaluate(a, dev, Workload(1, 4096, 1), "bf16", engine="tensorrt-llm", tiles=True)
        secs[moe] = {o.name: o.seconds for o in rep.ops if o.phase == "prefill"}
        assert rep.applied.moe == moe
    for op, t in secs[1.0].items():
        want = 2.5 if routed and op in ("ffn_up", "ffn_down") else 1.0
        assert secs[0.4][op] == pytest.approx(want * t, rel=1e-9), op


def test_vllm_rows_move_every_routed_rows_activations():
    """The same EP-8 shape under TensorRT-LLM and vLLM: vLLM's layer moves the activations of all T·K = 512 routed
    rows, TensorRT-LLM's those of the 64 on its GPU; memory-bound, so the times differ by those bytes at the
    streaming rate, by hand: each of the 448 other GPUs' rows is neither gathered nor multiplied, its zero GEMM
    outputs written (2i + d), activated (read 2i, write i) and reduced (read d)."""
    h100 = R.get_device("h100-sxm")
    T_, d, inter = 64, 7168, 2048
    table = pd.DataFrame({"num_tokens": [T_] * 2, "hidden_size": d, "inter_size": inter, "topk": 8,
                          "num_experts": 256, "moe_tp_size": 1, "moe_ep_size": 8, "distribution": "balanced",
                          "moe_dtype": "fp8", "kernel_source": "moe", "framework": ["TRTLLM", "VLLM"]})  # fmt: skip
    terms = KM.prepare(table)
    assert list(terms.rows) == [64.0, 64.0] and list(terms.act_rows) == [64.0, 512.0]
    got = KM.predict(table, h100, CURVES) * 1e-3
    per_row = (2 * d + 5 * inter) * 2  # zero GEMM1 and GEMM2 outputs, activation, reduction (bf16)
    assert got[1] - got[0] == pytest.approx((512 - 64) * per_row / (3.35e12 * 0.85), rel=1e-9)
    weights = 32 * 3 * d * inter  # memory-bound: the 32 touched experts' fp8 weights dominate either way
    assert got[0] > weights / (3.35e12 * 0.85)


def _rows(**kw) -> pd.DataFrame:
    """One ``moe_perf`` row per value of the list-valued keyword (the others broadcast)."""
    base = {"num_tokens": 64, "hidden_size": 4096, "inter_size": 1536, "topk": 8, "num_experts": 128,
            "moe_tp_size": 1, "moe_ep_size": 1, "distribution": "balanced", "moe_dtype": "bfloat16",
            "kernel_source": "moe_torch_flow_cutlass", "framework": "trtllm"}  # fmt: skip
    base.update(kw)
    return pd.DataFrame(base, index=range(max(len(v) for v in kw.values() if isinstance(v, list))))


def test_vllm_rows_of_a_nongated_model_shape_are_priced_nongated():
    """vLLM's tables do not name a non-gated kernel: a row of a Nemotron-H shape (ReLU² experts, two matrices) is
    priced as TensorRT-LLM's ``..._nongated`` row of that shape is, and a gated shape keeps three matrices."""
    shape = dict(hidden_size=2688, inter_size=1856, num_experts=128, topk=6)
    assert (2688, 1856, 128, 6) in KM.NONGATED_SHAPES
    t = KM.prepare(_rows(**shape, framework=["trtllm", "vllm", "vllm"],
                         kernel_source=["moe_torch_flow_nongated", "vllm_unquantizedfusedmoe_triton_tritonexperts",
                                        "vllm_unquantizedfusedmoe_triton_tritonexperts"]))  # fmt: skip
    assert list(t.gated) == [False, False, False]
    gated = KM.prepare(_rows(framework=["vllm"], kernel_source=["vllm_unquantizedfusedmoe_triton_tritonexperts"]))
    assert list(gated.gated) == [True]
    # two matrices: at one token (memory-bound) the weight stream is 2/3 of a gated layer's, by hand
    h100 = R.get_device("h100-sxm")
    one = dict(T=1, d=2688, inter=1856, rows=6.0, touched=6.0, padded=96.0)
    w2 = KM.layer_seconds(h100, CURVES, "bfloat16", *one.values(), gated=False) - 5 * 4e-6
    w3 = KM.layer_seconds(h100, CURVES, "bfloat16", *one.values(), gated=True) - 5 * 4e-6
    acts = lambda m: (6 * (4 * 2688 + 2 * (m - 1) * 1856 + 2 * 1856) + 2 * 2688) * 2  # noqa: E731
    assert w2 == pytest.approx((6 * 2 * 2688 * 1856 * 2 + acts(2)) / (3.35e12 * 0.85), rel=1e-9)
    assert w3 == pytest.approx((6 * 3 * 2688 * 1856 * 2 + acts(3)) / (3.35e12 * 0.85), rel=1e-9)


def test_flashinfer_and_oai_triton_kernels_move_only_their_own_rows():
    """vLLM's Triton and Marlin fused MoE move all T·K rows at EP 8; the kernels it hands the layer to that route
    inside (FlashInfer, OpenAI Triton MXFP4) move the rows of their own experts only, as TensorRT-LLM does, but for
    FlashInfer's block-FP8 TensorRT-LLM-gen kernels, which move them all."""
    sources = [
        "vllm_unquantizedfusedmoe_triton_tritonexperts",
        "vllm_fused_moe",
        "vllm_unquantizedfusedmoe_flashinfer_trtllm_trtllmbf16experts",
        "vllm_compressedtensorswna16marlinmoe_marlin_marlinexperts",
        "vllm_gptossmxfp4moe_triton_oaitritonmxfp4expertsmonolithic",
        "moe_torch_flow_cutlass",
        "vllm_fp8moe_flashinfer_trtllm_trtllmfp8expertsmonolithic",  # block-FP8 TRT-LLM-gen: all rows
        "vllm_modeloptfp8moe_flashinfer_trtllm_trtllmfp8expertsmonolithic",  # per-tensor FP8: its own
    ]
    fws = ["vllm"] * 5 + ["trtllm", "vllm", "vllm"]
    t = KM.prepare(_rows(moe_ep_size=8, framework=fws, kernel_source=sources))
    assert list(t.rows) == [64.0] * 8  # balanced, EP 8: 512 routed rows, 64 on rank 0
    assert list(t.act_rows) == [512.0, 512.0, 64.0, 512.0, 64.0, 64.0, 512.0, 64.0]


def test_power_law_ties_spread_a_tiny_batch_over_the_expert_groups():
    """One token, top-22 of 512 experts: every expert's share rounds to 0 rows and the 22 rows go to the first 22
    experts of an unstable sort -- spread at random, not all in expert group 0. Against the brute-force generator
    with random tie order: the heaviest of 16 groups gets the max of a 22-ball, 16-bin occupancy, far below 22."""
    rows, touched, _, max_load = KM.expected_load(1, 512, 22, 16, "power_law_1.01")
    b_rows, b_touched, b_max = brute_power_law(1, 512, 22, 16, 1.01, draws=300, seed=2, random_ties=True)
    assert rows == pytest.approx(b_rows, rel=0.08) and touched == pytest.approx(b_touched, rel=0.08)
    assert max_load == 1.0 == b_max
    # exact check of the spread: 22 distinct experts drawn from 512 (16 groups of 32), the largest group count
    rng = np.random.default_rng(0)
    mc = np.mean([np.bincount(rng.choice(512, 22, replace=False) // 32, minlength=16).max() for _ in range(4000)])
    assert rows == pytest.approx(mc, rel=0.08) and rows < 6


@pytest.mark.parametrize("T, E, K, ep", [(4, 256, 8, 1), (8, 256, 8, 1), (2, 128, 8, 4), (32, 128, 1, 8)])
def test_power_law_tiny_batch_puts_each_pair_on_its_own_expert(T, E, K, ep):
    """T·K ≤ E/SPREAD routed pairs: as many experts as pairs, drawn at random (the tables' layers cost as much as
    the balanced ones there); under EP the heaviest group holds the max of a T·K-ball, ep-bin draw without
    replacement, checked against a plain Monte Carlo of that draw. One pair past the bound, the rounded law is back
    (fewer experts than pairs)."""
    rows, touched, padded, max_load = KM.expected_load(T, E, K, ep, "power_law_1.2")
    assert T * K * KM.SPREAD <= E and max_load == 1.0 and rows == touched
    rng = np.random.default_rng(3)
    size = E // ep
    mc = np.mean([np.bincount(rng.choice(E, T * K, replace=False) // size, minlength=ep).max() for _ in range(4000)])
    assert rows == pytest.approx(mc, rel=0.06)
    if ep == 1:
        assert rows == T * K and padded == T * K * KM.TILE_MIN
    T2 = E // (K * KM.SPREAD) + 1
    rows2, touched2, _, max2 = KM.expected_load(T2, E, K, 1, "power_law_1.2")
    assert rows2 == T2 * K and touched2 < rows2


def test_narrow_experts_and_routed_slots_by_hand():
    """``moe_half_inter`` scales the compute rate by i/(i + h) (i = inter/tp); ``moe_slot`` adds that share of the
    other GPUs' routed slots' d-wide bf16 outputs to the streamed bytes; an engine's ``rate`` divides the roofline
    part only; with the L2 figures a small weight set streams at the L2 rate; all by hand."""
    h100 = R.get_device("h100-sxm")
    T_, d, inter = 4096, 2048, 512  # 4096 tokens x top-8 of 16 experts: 2048 rows each, compute-bound
    big = dict(T=T_, d=d, inter=inter, rows=32768.0, touched=16.0, padded=32768.0)
    hard = KernelCurves("hopper", {"fp16": 0.8}, memory=0.85, kernel_s=4e-6, moe=0.5)  # q = 0: the max
    t_c = 2 * 32768 * 3 * d * inter / (989.5e12 * 0.8 * 0.5)
    t_m = (16 * 3 * d * inter * 2 + 32768 * (2 * d + 3 * inter) * 2) / (3.35e12 * 0.85)
    t_e = (32768 * (d + 3 * inter) + (2 * T_ + 32768) * d) * 2 / (3.35e12 * 0.85)  # the element-wise kernels
    assert t_m < t_c
    assert KM.layer_seconds(h100, hard, "bfloat16", *big.values()) == pytest.approx(t_c + t_e + 5 * 4e-6, rel=1e-9)
    narrow = KernelCurves("hopper", {"fp16": 0.8}, memory=0.85, kernel_s=4e-6, moe=0.5, moe_half_inter=512.0)
    got = KM.layer_seconds(h100, narrow, "bfloat16", *big.values())
    assert got == pytest.approx(2 * t_c + t_e + 5 * 4e-6, rel=1e-9)  # i = h: half the rate
    # fp8: a main-loop step covers 128 fp8 values of K, so the same width i = 512 is half as deep: i/(i + 2·512)
    c8 = dataclasses.replace(narrow, compute={"fp16": 0.8, "fp8": 0.8})
    fp8 = KM.layer_seconds(h100, c8, "fp8", *big.values()) - 5 * 4e-6 - t_e
    assert fp8 == pytest.approx(t_c * 989.5 / 1979 * 3, rel=1e-9)
    # an engine's compute rate on top: 0.5 doubles the compute-bound time
    assert KM.layer_seconds(h100, hard, "bfloat16", *big.values(), engine_compute=0.5) == pytest.approx(
        2 * t_c + t_e + 5 * 4e-6, rel=1e-9)  # fmt: skip
    assert KM.layer_seconds(h100, narrow, "bfloat16", *big.values(), rate=2.0) == pytest.approx(
        (2 * t_c + t_e) / 2 + 5 * 4e-6, rel=1e-9)  # fmt: skip
    # the fixed times are SM cycles at the curves' clock: a part clocked 10 % faster spends 1/1.1 of them
    clocked = dataclasses.replace(hard, clock_mhz=1980.0, moe_s=1e-5)
    fast = dataclasses.replace(h100, clock=h100.clock * 1.1)
    assert h100.clock == 1980e6
    fixed = KM.layer_seconds(h100, clocked, "bfloat16", *big.values()) - t_c - t_e
    assert fixed == pytest.approx(5 * 4e-6 + 1e-5, rel=1e-6)
    faster = KM.layer_seconds(fast, clocked, "bfloat16", *big.values()) - t_c - t_e
    assert faster == pytest.approx(fixed / 1.1, rel=1e-6)
    # EP 8, memory-bound: 8 tokens x top-8 of 128 experts, rank 0 holds 16 experts and 8 of the 64 routed rows
    small = dict(T=8, d=d, inter=inter, rows=8.0, touched=8.0, padded=128.0)
    slot = KernelCurves("hopper", {"fp16": 0.8}, memory=0.85, kernel_s=4e-6, moe=0.5, moe_slot=0.25)
    extra = KM.layer_seconds(h100, slot, "bfloat16", *small.values(), topk=8) - KM.layer_seconds(
        h100, hard, "bfloat16", *small.values(), topk=8)  # fmt: skip
    assert extra == pytest.approx(0.25 * (64 - 8) * d * 2 / (3.35e12 * 0.85), rel=1e-9)
    l40s = R.get_device("l40s")  # 96 MB L2, 142 SMs
    l2 = KernelCurves("ada", {"fp16": 0.6}, memory=0.8, kernel_s=0.0, moe=0.5, l2_sm_gbps=12.0)
    one = dict(T=1, d=d, inter=inter, rows=8.0, touched=8.0, padded=128.0)
    byts = 8 * 3 * d * inter * 2 + (8 * (4 * d + 4 * inter + 2 * inter) + 2 * d) * 2  # 50 MB: about half the L2
    # (memory-bound at q = 0: the GEMMs' bytes and the element-wise kernels' add up, all at the same per-byte time)
    bw, l2bw = 864e9 * 0.8, 142 * 12e9
    hit = 1 / (1 + (byts / 96e6 / KM.L2_SHARE) ** 4)
    assert KM.L2_SHARE == 1.0 and 0.9 < hit < 1
    want = byts * (hit / l2bw + (1 - hit) / bw)
    assert KM.layer_seconds(l40s, l2, "bfloat16", *one.values()) == pytest.approx(want, rel=1e-9)
    assert want < byts / bw
    assert KM.layer_seconds(l40s, dataclasses.replace(l2, l2_sm_gbps=0.0), "bfloat16", *one.values()) == pytest.approx(
        byts / bw, rel=1e-9
    )  # no L2 figure: DRAM


def test_fit_declares_per_engine_figures_and_keeps_them_out_of_generic():
    """A table's rows name the figures they determine: the scalar MoE figures, ``moe_compute`` for the reference
    engine's non-bf16 keys (with bf16 present), a ``rate`` per other engine and dtype, a ``moe_reread_lib`` per other
    engine and kernel library; the pooled ``generic`` fit drops the per-architecture kernel figures."""
    from rooflaw.constraints.kernels import fit as KF

    rows = _rows(framework=["trtllm", "trtllm", "trtllm", "vllm", "vllm"],
                 moe_dtype=["bfloat16", "fp8", "fp8_block", "fp8", "nvfp4"])  # fmt: skip
    got = KM.used_params(rows)
    engine = (
        "rate.vllm/moe_fp8",
        "rate.vllm/moe_nvfp4",
        "engine_compute.vllm/moe_fp8",
        "engine_compute.vllm/moe_nvfp4",
        "launch.vllm/moe_fp8",
        "launch.vllm/moe_nvfp4",
        "moe_reread_lib.vllm",  # one per engine and kernel library (the table names none here)
    )
    assert got == KM.FIGURES + ("moe_compute.fp8", "moe_compute.fp8_block") + engine
    assert KM.used_params(_rows(framework=["trtllm"], moe_dtype=["fp8"])) == KM.FIGURES  # no bf16: no reference
    assert [n for n in got if KF.pooled(n)] == list(KM.FIGURES)
    assert (
        KF.pooled("rate.vllm/context_attention") and KF.pooled("compute.fp8") and KF.pooled("engine_compute.vllm/fp8")
    )


def test_a_kernel_librarys_fixed_time_replaces_moe_s_by_hand():
    """``launch["vllm/moe_<dtype>/<library>"]`` is that library's fixed seconds beyond the five launches, in place of
    ``moe_s`` (SM cycles at ``clock_mhz``, as ``moe_s``); a library the curves do not name, and TensorRT-LLM, take
    ``moe_s``. One-token layers, so the difference is the fixed time alone: checked against the time by hand."""
    b200 = R.get_device("b200")
    sources = ["vllm_fp8moe_flashinfer_trtllm_x", "vllm_fp8moe_flashinfer_cutlass_x", "moe_torch_flow"]
    rows = _rows(num_tokens=[1] * 3, framework=["vllm", "vllm", "trtllm"], kernel_source=sources)
    c = dataclasses.replace(CURVES, moe_s=20e-6, launch={"vllm/moe_bfloat16/trtllm": 5e-6}, clock_mhz=1000.0)
    got = KM.evaluate(KM.prepare(rows), b200, c)
    z = 1000.0 / (b200.clock / 1e6)
    assert got[1] == pytest.approx(got[2], rel=1e-12)  # unnamed library: moe_s, as the reference engine
    assert got[1] - got[0] == pytest.approx((20e-6 - 5e-6) * z, rel=1e-9)
    assert KM.engine_rates(c, "vllm", "bfloat16", "trtllm") == (1.0, 1.0, 5e-6)


def test_engine_figures_price_the_engines_rows():
    """Through ``prepare``/``evaluate``: a vLLM row takes ``rate`` and ``engine_compute`` of its
    ``"vllm/moe_<dtype>"`` key, a TensorRT-LLM row of the same shape neither -- each equal to ``layer_seconds``."""
    h100 = R.get_device("h100-sxm")
    sources = ["moe_torch_flow_cutlass", "vllm_fp8moe_flashinfer_cutlass_flashinferexperts"]
    rows = _rows(num_tokens=[4096, 4096], framework=["trtllm", "vllm"], moe_dtype="fp8", kernel_source=sources)
    c = dataclasses.replace(CURVES, rate={"vllm/moe_fp8": 0.5}, engine_compute={"vllm/moe_fp8": 0.8})
    t = KM.prepare(rows)
    got = KM.evaluate(t, h100, c)
    args = (h100, c, "fp8", 4096, 4096, 1536, t.rows[0], t.touched[0], t.padded[0])
    assert got[0] == pytest.approx(KM.layer_seconds(*args, topk=8), rel=1e-12)
    assert got[1] == pytest.approx(KM.layer_seconds(*args, rate=0.5, topk=8, engine_compute=0.8), rel=1e-12)
    assert got[1] > got[0] * 1.5


def test_new_moe_figures_round_trip_through_the_catalog(tmp_path):
    """The catalog writer and reader keep the MoE figures this family adds (scalars, ``moe_compute``, and the
    ``"<framework>/moe_<dtype>"`` keys of ``rate`` and ``engine_compute``)."""
    from rooflaw.constraints.kernels import curves_from_dict, load_curves
    from rooflaw.constraints.kernels import fit as KF

    c = dataclasses.replace(CURVES, moe_half_inter=267.0, moe_slot=0.14, moe_reread=0.3,
                            moe_compute={"fp8_block": 0.67}, rate={"vllm/moe_fp8": 0.21},
                            engine_compute={"vllm/moe_fp8": 2.7})  # fmt: skip
    p = tmp_path / "k.toml"
    p.write_text(KF.catalog_text({"hopper": c}))
    back = load_curves(str(p))["hopper"]
    assert (back.moe_half_inter, back.moe_slot, back.moe_compute) == (267.0, 0.14, {"fp8_block": 0.67})
    assert back.moe_reread == 0.3
    assert back.rate == {"vllm/moe_fp8": 0.21} and back.engine_compute == {"vllm/moe_fp8": 2.7}
    assert curves_from_dict("hopper", {"compute": {}, "memory": 0.8, "kernel_s": 0.0}).moe_compute == {}


def test_an_engines_kernel_library_takes_its_own_rates():
    """vLLM runs one ``moe_dtype`` on more than one kernel library (B200 bf16: FlashInfer's CUTLASS or its
    TensorRT-LLM-gen kernels): each row takes ``rate``/``engine_compute`` of its ``"vllm/moe_<dtype>/<library>"``
    key, else the dtype's key (curves fitted before libraries were keyed), else 1; the fit declares one key per
    library seen, none of them pooled into ``generic``."""
    from rooflaw.constraints.kernels import fit as KF

    b200 = R.get_device("b200")
    sources = ["vllm_unquantizedfusedmoe_flashinfer_cutlass_flashinferexperts",
               "vllm_unquantizedfusedmoe_flashinfer_trtllm_trtllmbf16experts",
               "vllm_compressedtensorswna16marlinmoe_marlin_marlinexperts", "vllm_fused_moe"]  # fmt: skip
    assert [KM.kernel_path(s) for s in sources] == ["cutlass", "trtllm", "marlin", ""]
    assert KM.kernel_path("vllm_gptossmxfp4moe_triton_oaitritonmxfp4expertsmonolithic") == "oaitriton"
    rows = _rows(num_tokens=[2048] * 4, framework="vllm", kernel_source=sources)
    rate = {"vllm/moe_bfloat16/cutlass": 0.5, "vllm/moe_bfloat16": 0.9}
    engine = {"vllm/moe_bfloat16/cutlass": 0.7, "vllm/moe_bfloat16/trtllm": 1.2}
    c = dataclasses.replace(CURVES, rate=rate, engine_compute=engine)
    t = KM.prepare(rows)
    got = KM.evaluate(t, b200, c)
    one = lambda k, rate, ec: KM.layer_seconds(  # noqa: E731
        b200, c, "bfloat16", 2048, 4096, 1536, t.rows[k], t.touched[k], t.padded[k], act_rows=t.act_rows[k],
        rate=rate, topk=8, engine_compute=ec, fused=k == 1)  # fmt: skip
    # cutlass: its own key; trtllm: its own (rate absent there: 1; four launches, moe_fused); marlin and the unnamed
    # kernel: the dtype's key
    from rooflaw.constraints.kernels.warp_mma import warp_share

    # Marlin: its compute at the warp-level mma.sync share (warp_mma)
    want = [one(0, 0.5, 0.7), one(1, 1.0, 1.2), one(2, 0.9, warp_share(b200, "marlin")), one(3, 0.9, 1.0)]
    assert got == pytest.approx(want, rel=1e-12)
    assert got[0] > 1.5 * got[1]
    assert KM.engine_rates(c, "trtllm", "bfloat16", "cutlass") == (1.0, 1.0, c.moe_s)  # the reference engine's
    used = KM.used_params(rows)
    assert [n for n in used if n.startswith("rate.")] == [
        "rate.vllm/moe_bfloat16",
        "rate.vllm/moe_bfloat16/cutlass",
        "rate.vllm/moe_bfloat16/marlin",
        "rate.vllm/moe_bfloat16/trtllm",
    ]
    assert not any(KF.pooled(n) for n in used if "/moe_" in n)


def test_vllm_0_14_fused_moe_runs_a_nongated_shape_gated():
    """vLLM 0.14's ``fused_moe`` (:data:`KM.GATED_KERNELS`) runs every expert with three matrices: a Nemotron-H row
    of it is priced gated, vLLM 0.24's Triton kernel's row of the same shape non-gated."""
    shape = dict(hidden_size=2688, inter_size=1856, num_experts=128, topk=6)
    sources = ["vllm_fused_moe", "vllm_unquantizedfusedmoe_triton_tritonexperts"]
    t = KM.prepare(_rows(**shape, framework=["vllm", "vllm"], kernel_source=sources))
    assert list(t.gated) == [True, False]


def test_expert_weights_reread_per_token_tile_when_they_miss_l2():
    """``moe_reread``: an expert whose weights do not fit in L2 streams them from DRAM again for each token tile
    beyond its first (``moe_reread`` of them, times the L2-missed share); by hand, and nothing when the expert fits."""
    h100 = R.get_device("h100-sxm")  # 50 MB L2
    # 8 experts x 4096 rows (tile 128: 32 tiles each), d = 4096, inter 14336: 352 MB of bf16 weights an expert
    T_, d, inter = 16384, 4096, 14336
    big = dict(T=T_, d=d, inter=inter, rows=32768.0, touched=8.0, padded=32768.0)
    hard = KernelCurves("hopper", {"fp16": 0.8}, memory=0.85, kernel_s=0.0, moe=0.5)  # q = 0: the max
    rr = dataclasses.replace(hard, moe_reread=1.0)
    expert = 3 * d * inter * 2
    miss = 1 - 1 / (1 + (expert / 50e6) ** 4)
    assert miss > 0.999
    t_c = 2 * 32768 * 3 * d * inter / (989.5e12 * 0.8 * 0.5)
    t_m = (8 * expert + 32768 * (2 * d + 3 * inter) * 2) / (3.35e12 * 0.85)
    t_e = (32768 * (d + 3 * inter) + (2 * T_ + 32768) * d) * 2 / (3.35e12 * 0.85)
    t_r = (32 - 1) * 8 * expert * miss / (3.35e12 * 0.85)
    assert t_m < t_c < t_m + t_r  # the re-reads make this compute-bound layer memory-bound
    assert KM.layer_seconds(h100, hard, "bfloat16", *big.values()) == pytest.approx(t_c + t_e, rel=1e-9)
    assert KM.layer_seconds(h100, rr, "bfloat16", *big.values()) == pytest.approx(t_m + t_r + t_e, rel=1e-9)
    # a 1 MB expert (inter 64) fits the L2: its re-reads are (1 + 50^4)^-1 of the above per byte, about nothing
    small = dict(big, inter=64)
    a, b = (KM.layer_seconds(h100, c, "bfloat16", *small.values()) for c in (hard, rr))
    assert b - a == pytest.approx(31 * 8 * 3 * d * 64 * 2 / (1 + (3 * d * 64 * 2 / 50e6) ** -4) / (
        3.35e12 * 0.85), rel=1e-6)  # fmt: skip
    assert b / a - 1 < 1e-6
    # one tile an expert (the mean rows ≤ the tile height): no re-read
    one = dict(big, rows=8.0 * 100, padded=8.0 * 128)
    assert KM.layer_seconds(h100, rr, "bfloat16", *one.values()) == KM.layer_seconds(
        h100, hard, "bfloat16", *one.values())  # fmt: skip


def test_a_kernel_librarys_own_reread_share_prices_its_rows():
    """``moe_reread_lib["<framework>/<library>"]`` replaces ``moe_reread`` for that library's rows (TensorRT-LLM and
    a library the curves do not name keep ``moe_reread``): the predictor equals ``layer_seconds`` at that share."""
    h100 = R.get_device("h100-sxm")
    c = dataclasses.replace(CURVES, moe_reread=0.2, moe_reread_lib={"vllm/triton": 0.9})
    sources = ["moe_torch_flow", "vllm_unquantizedfusedmoe_triton_tritonexperts", "vllm_x"]
    rows = _rows(num_tokens=[16384] * 3, hidden_size=4096, inter_size=14336, num_experts=8, topk=2,
                 framework=["trtllm", "vllm", "vllm"], kernel_source=sources)  # fmt: skip
    libs = zip(rows.framework, rows.kernel_source, strict=True)
    assert [KM.reread_share(c, f, KM.kernel_path(s)) for f, s in libs] == [0.2, 0.9, 0.2]
    t = KM.prepare(rows)
    got = KM.predict(rows, h100, c)
    for j, share in enumerate((0.2, 0.9, 0.2)):
        want = KM.layer_seconds(h100, c, "bfloat16", t.T[j], t.d[j], t.inter[j], t.rows[j], t.touched[j], t.padded[j],
                                act_rows=t.act_rows[j], topk=t.topk[j], reread=share)  # fmt: skip
        assert got[j] == pytest.approx(want * 1e3, rel=1e-12)
    assert got[1] > got[2]  # the re-reads weigh: 16,384 x 2 rows on 8 experts of 352 MB, 32 tiles each
