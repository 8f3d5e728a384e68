"""The roofline cost model against independent references: hand-computed paper formulas, per-step
sums, torch FLOP counts, exact KV-cache and MoE expert-coverage arithmetic."""

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from rooflaw import Architecture, Precision, Workload, decode_steps, evaluate, evaluate_columns, from_hf_config, gemm
from rooflaw.devices import get_device
from rooflaw.devices.device import Device
from rooflaw.errors import RooflawError

ORIN = get_device("jetson-agx-orin-64gb")
NO_CURVES = get_device("apple-m4-max")  # no NVIDIA architecture: no kernel curves, exact causal pairs
H100 = get_device("h100-sxm")


def _ops(rep, phase):
    return {o.name: o for o in rep.ops if o.phase == phase}


def test_paper_preset_matches_hand_computed_formulas():
    # l=12, d=2048, gqa=4, dense r=4 ... and an MoE with rho=1/8 for the memory term.
    a = Architecture(layers=12, d_model=2048, heads=16, kv_heads=4, ffn=1024, experts=16, top_k=2, vocab=32000)
    wl = Workload(1, 1024, 16)
    rep = evaluate(a, ORIN, wl, "fp16", preset="paper")
    l, d, gqa, r, rho, bw, bkv = 12, 2048, 4.0, 2 * 1024 / 2048, 2 / 16, 2.0, 2.0
    xi_F = 4 + 4 / gqa + 6 * r
    xi_W_dec = 2 + 2 / gqa + 3 * r
    xi_W_all = 2 + 2 / gqa + 3 * r / rho
    S_bar = 1024 + (16 + 1) / 2
    pi, beta = 42.5e12, 204.8e9
    T_pre = l * 1 * 1024 * d**2 * xi_F / pi
    T_dec = l * 16 / beta * (xi_W_dec * d**2 * bw + 2 * S_bar * d * bkv / gqa)
    M = l * xi_W_all * d**2 * bw
    assert rep.prefill_s == pytest.approx(T_pre, rel=1e-12)
    assert rep.decode_s == pytest.approx(T_dec, rel=1e-12)
    assert rep.memory_bytes == pytest.approx(M, rel=1e-12)
    assert xi_F == pytest.approx(2 * xi_W_dec)


def test_kv_cache_bytes_use_kv_heads_and_their_own_dtype():
    q = from_hf_config("qwen2.5-0.5b")
    wl = Workload(3, 1000, 40)
    rep = evaluate(q, ORIN, wl, "w4a16kv8")
    # 2 (K and V) · layers · kv_heads · head_dim · bytes · batch · tokens
    assert rep.kv_cache_bytes == 2 * 24 * 2 * 64 * 1 * 3 * 1040
    more_heads = q.replace(heads=28, head_dim=64)
    assert evaluate(more_heads, ORIN, wl, "w4a16kv8").kv_cache_bytes == rep.kv_cache_bytes


def test_decode_reads_top_k_experts_at_batch_one_and_the_expected_coverage_otherwise():
    a = Architecture(layers=4, d_model=1024, heads=8, kv_heads=2, ffn=512, experts=8, top_k=2, vocab=1000)
    d, f, E, K = 1024, 512, 8, 2
    for B in (1, 4):
        rep = evaluate(a, ORIN, Workload(B, 256, 1), "fp16")
        down = _ops(rep, "decode")["ffn_down"]
        touched = E * (1 - (1 - K / E) ** B)
        act = 2 * (B * K * f + B * K * d)
        assert down.bytes == pytest.approx(4 * (touched * f * d * 2 + act))
    assert touched == pytest.approx(8 * (1 - 0.75**4))
    pre = _ops(evaluate(a, ORIN, Workload(1, 256, 1)), "prefill")["ffn_down"]
    touched = E * (1 - (1 - K / E) ** 256)
    assert pre.bytes == pytest.approx(4 * (touched * f * d * 2 + 2 * (256 * K * f + 256 * K * d)))


@pytest.mark.parametrize("name", ["qwen2.5-0.5b", "olmoe-1b-7b", "llama-3.2-1b"])
@pytest.mark.parametrize("device", [ORIN, H100])
@pytest.mark.parametrize("batch", [1, 64])
def test_closed_form_decode_sum_equals_step_by_step(name, device, batch):
    a = from_hf_config(name)
    wl = Workload(batch, 333, 37)
    rep = evaluate(a, device, wl, "int8")
    steps = decode_steps(a, device, wl, "int8")
    assert len(steps) == 37 and steps[-1]["context"] == 333 + 37
    assert sum(s["seconds"] for s in steps) == pytest.approx(rep.decode_s, rel=1e-12)
    assert sum(s["flops"] for s in steps) == pytest.approx(rep.decode_flops, rel=1e-12)


def test_bound_switches_mid_decode_are_summed_exactly():
    # a device whose ridge sits where attention flips bound within the decode window
    dev = Device("toy", "toy", {"fp32": 1e12, "fp16": 5.5e12}, memory_bandwidth=1e12, memory_capacity=1e12)
    a = Architecture(layers=2, d_model=512, heads=8, kv_heads=1, ffn=1024, vocab=100)
    wl = Workload(16, 10, 200)
    rep = evaluate(a, dev, wl)
    bounds = {o.bound for o in rep.ops if o.phase == "decode"}
    steps = decode_steps(a, dev, wl)
    assert sum(s["seconds"] for s in steps) == pytest.approx(rep.decode_s, rel=1e-12)
    assert any(b.startswith("mixed") for b in bounds), bounds


def test_bulk_path_equals_per_operator_path():
    rng = np.random.default_rng(1)
    n = 40
    heads = rng.choice([4, 8, 16], n)
    cols = pd.DataFrame(
        {
            "layers": rng.integers(1, 40, n),
            "d_model": heads * 64,
            "heads": heads,
            "kv_heads": heads // rng.choice([1, 2, 4], n),
            "head_dim": np.full(n, 64),
            "ffn": rng.integers(1, 40, n) * 128,
            "experts": rng.choice([1, 8, 16], n),
            "top_k": np.ones(n, int),
            "vocab": rng.integers(1000, 200000, n),
            "tied": rng.integers(0, 2, n),
            "qkv_bias": rng.integers(0, 2, n),
        }
    )
    for preset in ("full", "paper"):
        bulk = evaluate_columns(cols, ORIN, Workload(2, 512, 9), "w4a16kv8", preset)
        for i, row in cols.iterrows():
            a = Architecture(
                **{k: int(v) for k, v in row.items() if k not in ("tied", "qkv_bias")},
                tied=bool(row.tied),
                qkv_bias=bool(row.qkv_bias),
            )
            one = evaluate(a, ORIN, Workload(2, 512, 9), "w4a16kv8", preset)
            for key in ("prefill_s", "decode_s", "memory_bytes", "energy_j", "params_total"):
                assert bulk[key][i] == pytest.approx(getattr(one, key), rel=1e-9), (preset, key)
            assert one.params_total == a.params_total


def test_chunking_does_not_change_results():
    rng = np.random.default_rng(2)
    n = 1000
    cols = {
        "layers": rng.integers(2, 30, n),
        "d_model": np.full(n, 1024),
        "heads": np.full(n, 8),
        "ffn": rng.integers(1, 20, n) * 256,
    }
    a = evaluate_columns(cols, H100, chunk=1 << 15)
    b = evaluate_columns(cols, H100, chunk=97)
    for k in a:
        assert np.array_equal(a[k], b[k])


# ------------------------------------------------------------------------------------------
# FLOPs of a real torch decoder layer, counted by torch.utils.flop_counter.FlopCounterMode
# ------------------------------------------------------------------------------------------
# (torch is imported inside the one test that needs it, so that only that test skips without it)
def _torch_layer(torch, a: Architecture):
    """A Llama/Mixtral-style decoder layer built from an Architecture (unfused attention)."""

    class _Layer(torch.nn.Module):
        def __init__(self, a: Architecture):
            super().__init__()
            nn = torch.nn
            self.a = a
            q, kv = a.heads * a.head_dim, a.kv_heads * a.head_dim
            self.q, self.k, self.v = (
                nn.Linear(a.d_model, q, False),
                nn.Linear(a.d_model, kv, False),
                nn.Linear(a.d_model, kv, False),
            )
            self.o = nn.Linear(q, a.d_model, False)
            self.router = nn.Linear(a.d_model, a.experts, False) if a.experts > 1 else None
            self.gate = nn.ModuleList(nn.Linear(a.d_model, a.ffn, False) for _ in range(a.experts))
            self.up = nn.ModuleList(nn.Linear(a.d_model, a.ffn, False) for _ in range(a.experts))
            self.down = nn.ModuleList(nn.Linear(a.ffn, a.d_model, False) for _ in range(a.experts))

        def forward(self, x, past: int = 0):
            a = self.a
            B, S, _ = x.shape
            q = self.q(x).view(B, S, a.heads, a.head_dim).transpose(1, 2)
            k = self.k(x).view(B, S, a.kv_heads, a.head_dim).transpose(1, 2)
            v = self.v(x).view(B, S, a.kv_heads, a.head_dim).transpose(1, 2)
            if past:
                k = torch.cat([torch.randn(B, a.kv_heads, past, a.head_dim), k], 2)
                v = torch.cat([torch.randn(B, a.kv_heads, past, a.head_dim), v], 2)
            rep = a.heads // a.kv_heads
            k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
            att = torch.softmax(q @ k.transpose(-1, -2), -1) @ v
            h = x + self.o(att.transpose(1, 2).reshape(B, S, -1))
            t = h.reshape(B * S, -1)
            out = torch.zeros_like(t)
            if self.router is None:
                idx = torch.zeros(B * S, 1, dtype=torch.long)
            else:
                idx = self.router(t).topk(a.top_k, -1).indices
            for e in range(a.experts):
                rows = (idx == e).any(-1).nonzero().flatten()
                if len(rows):
                    z = t[rows]
                    out[rows] += self.down[e](torch.nn.functional.silu(self.gate[e](z)) * self.up[e](z))
            return h + out.view(B, S, -1)

    return _Layer(a)


GEMM_OPS = ("q_proj", "k_proj", "v_proj", "o_proj", "attn_scores", "attn_values", "router", "ffn_up", "ffn_down")


@pytest.mark.parametrize(
    "arch",
    [
        Architecture(layers=1, d_model=256, heads=8, kv_heads=2, ffn=704, vocab=100),
        Architecture(layers=1, d_model=128, heads=4, kv_heads=4, head_dim=48, ffn=96, experts=8, top_k=2, vocab=100),
    ],
    ids=["dense-gqa", "moe"],
)
def test_analytic_flops_match_torch_flop_counter(arch):
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(0)
    layer = _torch_layer(torch, arch)
    B, S, past = 2, 37, 50
    for phase, x, wl in (
        ("prefill", torch.randn(B, S, arch.d_model), Workload(B, S, 1, "unfused")),
        ("decode", torch.randn(B, 1, arch.d_model), Workload(B, past, 1, "unfused")),
    ):
        with FlopCounterMode(display=False) as fc, torch.no_grad():
            layer(x, past=past if phase == "decode" else 0)
        ops = _ops(evaluate(arch, ORIN, wl), phase)
        # decode step 1 attends to past + 1 tokens: the layer above concatenates past + the new one
        analytic = sum(ops[n].flops for n in GEMM_OPS if n in ops)
        assert fc.get_total_flops() == pytest.approx(analytic, rel=1e-12), phase
        # a fused (FlashAttention-style) kernel executes only the causal pairs: S(S+1)/2 of the S² a prefill
        # block holds, all C keys of a decode query -- the torch count less the masked pairs' QKᵀ and ·V FLOPs; on a
        # GPU priced by kernel curves its 128 x 128 blocks are computed whole, so the one partial tile of 37 query
        # rows runs its whole 37 x 37 block and skips nothing
        for dev, masked in ((NO_CURVES, S * (S - 1) / 2), (ORIN, 0)):
            fused = _ops(evaluate(arch, dev, Workload(wl.batch, wl.input_tokens, 1, "fused")), phase)
            masked = masked if phase == "prefill" else 0
            want = fc.get_total_flops() - 2 * (2 * B * masked * arch.heads * arch.head_dim) * arch.layers
            assert sum(fused[n].flops for n in GEMM_OPS if n in fused) == pytest.approx(want, rel=1e-12), phase


# ------------------------------------------------------------------------------------------
# Precision formats and roofs
# ------------------------------------------------------------------------------------------
def test_precision_formats_include_scale_overheads():
    assert Precision.parse("int4").weights.bytes == 0.5 + 2 / 128
    assert Precision.parse("nvfp4").weights.bytes == 0.5625
    assert Precision.parse("mxfp4").weights.bytes == 0.53125
    p = Precision.parse("w4a16kv8")
    assert (p.weights.name, p.activations.name, p.kv.name) == ("int4", "fp16", "int8")
    assert p.linear_dtype == "fp16" and p.attention_dtype == "fp16"
    assert Precision.parse("w8a8").linear_dtype == "int8"
    assert Precision.parse("w=nvfp4,a=fp8,kv=fp8").linear_dtype == "fp8"
    for bad in ("fp12", "w3a16", "w=int4,x=fp8"):
        with pytest.raises(RooflawError, match="precision"):
            Precision.parse(bad)


def test_missing_roof_falls_back_to_the_next_wider_one():
    assert ORIN.roof("fp8") == ("fp16", 42.5e12)
    assert ORIN.roof("int8") == ("int8", 85e12)


def test_int8_speedup_is_sublinear_because_vector_ops_stay_fp32():
    a = Architecture(layers=16, d_model=2048, heads=16, kv_heads=4, ffn=2048, experts=8, top_k=1, vocab=32000)
    fp16 = evaluate(a, ORIN, precision="fp16")
    int8 = evaluate(a, ORIN, precision="int8")
    for key in ("prefill_s", "decode_s", "total_s"):
        ratio = getattr(fp16, key) / getattr(int8, key)
        assert 1.0 < ratio < 2.0, (key, ratio)


def test_energy_between_idle_and_peak_power():
    a = from_hf_config("qwen2.5-0.5b")
    rep = evaluate(a, ORIN)
    assert ORIN.power_idle * rep.total_s < rep.energy_j <= ORIN.power_peak * rep.total_s


def test_memory_fits_flag():
    big = from_hf_config("mixtral-8x7b")
    assert not evaluate(big, dataclasses.replace(ORIN, memory_capacity=32e9)).fits_in_memory
    assert evaluate(big, H100, precision="fp8").fits_in_memory


# ------------------------------------------------------------------------------------------
# GEMM: the seed documents' sample numbers are wrong (they omit the C write)
# ------------------------------------------------------------------------------------------
def test_gemm_arithmetic_intensity_counts_the_output_write():
    g1 = gemm(2048, 8192, 512, H100, "fp32")
    g2 = gemm(2048, 8192, 8192, H100, "fp32")
    assert g1.arithmetic_intensity == pytest.approx(195.05, abs=0.005)
    assert g2.arithmetic_intensity == pytest.approx(682.67, abs=0.005)
    # NVIDIA's guide: 8192x128x8192 fp16 -> 124.1 FLOP/B
    assert gemm(8192, 128, 8192, H100, "fp16").arithmetic_intensity == pytest.approx(124.1, abs=0.05)


def test_tile_and_wave_quantisation_example_from_nvidia_guide():
    a100 = Device("a100", "A100", {"fp32": 19.5e12, "fp16": 312e12}, 2.039e12, 80e9, sm_count=108, tile=(256, 128))
    full = gemm(2304, 1536, 4096, a100, "fp16")
    assert full.tile_efficiency == 1.0 and full.wave_efficiency == 1.0
    one_more = gemm(2304, 1537, 4096, a100, "fp16")
    assert one_more.wave_efficiency == pytest.approx(117 / 216)
    assert one_more.seconds > 1.8 * full.seconds
    assert gemm(
        257, 256, 4096, Device("x", "x", {"fp16": 1e12}, 1e12, 1e9, tile=(128, 128)), "fp16"
    ).tile_efficiency == pytest.approx(257 * 256 / (3 * 128 * 2 * 128))


def test_bad_inputs():
    a = from_hf_config("qwen2.5-0.5b")
    with pytest.raises(RooflawError, match="preset"):
        evaluate(a, ORIN, preset="exact")
    with pytest.raises(RooflawError, match="batch"):
        Workload(0, 10, 10)
    with pytest.raises(RooflawError, match="output_tokens"):
        Workload(1, 10, -1)
    with pytest.raises(RooflawError, match="m=0"):
        gemm(0, 1, 1, H100)
    assert math.isfinite(evaluate(a, ORIN).total_s)


def test_fused_attention_removes_exactly_the_score_matrix_traffic():
    a = from_hf_config("qwen2.5-0.5b")
    unf = evaluate(a, ORIN, Workload(2, 512, 4, "unfused"))
    fus = evaluate(a, ORIN, Workload(2, 512, 4, "fused"))
    # stored by QKᵀ, read+written by softmax, read by scores·V: 4 passes of B·heads·S_q·C·b_a per layer
    pre = 4 * 2 * 14 * 512 * 512 * 2 * 24
    dec = sum(4 * 2 * 14 * 1 * (512 + t) * 2 * 24 for t in range(1, 5))
    assert unf.prefill_bytes - fus.prefill_bytes == pytest.approx(pre)
    assert unf.decode_bytes - fus.decode_bytes == pytest.approx(dec)
    # the fused kernel skips the masked pairs per sequence: QKᵀ and ·V (2·2·heads·head_dim FLOPs per pair) plus
    # softmax (5·heads per pair), per layer and sequence; decode masks nothing. Under kernel curves (Orin: ampere) its
    # 4 query tiles of 128 rows visit whole 128-key blocks, tile i (i + 1) of them: 128·128·(1 + 2 + 3 + 4) = 163,840
    # of the 512² pairs, so it skips 98,304, not the 512·511/2 = 130,816 causal ones (exact without curves)
    for dev, masked in ((ORIN, 512 * 512 - 128 * 128 * 10), (NO_CURVES, 512 * 511 / 2)):
        unf = evaluate(a, dev, Workload(2, 512, 4, "unfused"))
        fus = evaluate(a, dev, Workload(2, 512, 4, "fused"))
        assert unf.prefill_flops - fus.prefill_flops == pytest.approx(2 * masked * 24 * 14 * (4 * 64 + 5))
        assert unf.decode_flops == fus.decode_flops


def test_vector_ops_keep_16_bit_traffic_under_int8():
    a = from_hf_config("llama-3.2-1b")
    fp16 = _ops(evaluate(a, ORIN, precision="fp16"), "prefill")
    int8 = _ops(evaluate(a, ORIN, precision="int8"), "prefill")
    for name in ("softmax", "attn_norm", "ffn_act"):
        assert int8[name].bytes == fp16[name].bytes, name
    assert int8["ffn_up"].bytes == pytest.approx(fp16["ffn_up"].bytes / 2)


def test_decode_gemms_use_narrow_tiles():
    from rooflaw.constraints.gemm import tile_efficiency, tile_rows

    assert tile_rows(1, 256) == 8 and tile_rows(24, 256) == 32 and tile_rows(4096, 256) == 256
    te, _ = tile_efficiency(1, 4096, 1, H100)
    assert te == pytest.approx(1 / 8)
    a = from_hf_config("llama-3.2-1b")
    plain, tiled = evaluate(a, H100), evaluate(a, H100, tiles=True)
    # batch-1 decode stays memory-bound with the tile model on an H100
    assert tiled.decode_s == pytest.approx(plain.decode_s, rel=0.05)


def test_kernel_overhead_adds_one_launch_per_operator_and_pass():
    # engine "device": the device file's own kernel_overhead per operator launch (no engine kernel count)
    a = from_hf_config("olmoe-1b-7b")
    wl = Workload(1, 128, 8)
    dev = dataclasses.replace(ORIN, kernel_overhead=10e-6)
    base, slow = evaluate(a, ORIN, wl, engine="device"), evaluate(a, dev, wl, engine="device")
    kernels = 14 * 16 + 3  # 14 operators per layer (router included: MoE) + embed, final norm, LM head
    assert slow.prefill_s - base.prefill_s == pytest.approx(10e-6 * kernels)
    assert slow.decode_s - base.decode_s == pytest.approx(10e-6 * kernels * 8)
    bulk = evaluate_columns({k: [v] for k, v in a.columns().items()}, dev, wl, engine="device")
    assert bulk["total_s"][0] == pytest.approx(slow.total_s)
    dense = from_hf_config("qwen2.5-0.5b")  # no router kernel
    d0, d1 = evaluate(dense, ORIN, wl, engine="device"), evaluate(dense, dev, wl, engine="device")
    assert d1.prefill_s - d0.prefill_s == pytest.approx(10e-6 * (13 * 24 + 3))


def test_bulk_path_counts_no_router_launch_for_dense_models():
    dense = from_hf_config("qwen2.5-0.5b")
    dev = dataclasses.replace(ORIN, kernel_overhead=10e-6)
    wl = Workload(1, 128, 8)
    bulk = evaluate_columns({k: [v] for k, v in dense.columns().items()}, dev, wl, engine="device")
    assert bulk["total_s"][0] == pytest.approx(evaluate(dense, dev, wl, engine="device").total_s, rel=1e-12)
    base = evaluate_columns({k: [v] for k, v in dense.columns().items()}, ORIN, wl, engine="device")
    assert bulk["prefill_s"][0] - base["prefill_s"][0] == pytest.approx(10e-6 * (13 * 24 + 3))
