"""The assembly's memory stream classes and MoE/decode-attention kernel terms (constraints.streams), by hand.

Each op's seconds in the per-operator breakdown are recomputed from the op's shape, the device's datasheet figures
and the kernel curves' fitted fractions: the KV-cache reads of decode attention at ``attention_memory`` (ramped by
its CTAs per SM, plus its waves), a routed expert's grouped GEMM at ``memory · moe_memory`` blended with its compute
time (``moe_serial``), a dense FFN's weights at ``memory``; every backend gives the same numbers.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
from fit_helpers import assert_flat_fit_matches

from rooflaw.arch import Architecture
from rooflaw.constraints import Workload, evaluate_columns
from rooflaw.constraints import assembly as A
from rooflaw.constraints.curves_applied import curves_of
from rooflaw.constraints.engines import applied
from rooflaw.constraints.kernels import curves_for
from rooflaw.constraints.kernels.moe_blend import serial
from rooflaw.constraints.roofline import evaluate
from rooflaw.devices import get_device
from rooflaw.devices.precision import Precision

DEV = get_device("h100-sxm")
KC = curves_for(DEV)
ENGINE = "tensorrt-llm"  # a measured-table engine: the curves' figures apply with factor 1
BW = DEV.memory_bandwidth * DEV.memory_efficiency
#: the KV stream's fraction of the datasheet bandwidth: the fitted attention_memory, capped at 1 as every bandwidth
#: fraction is (Hopper's fits 1.005: its decode rows read at the datasheet rate)
KV_FRACTION = min(1.0, KC.attention_memory)


def _op(rep, name, phase):
    return next(o for o in rep.ops if o.name == name and o.phase == phase)


def test_decode_attention_reads_the_kv_cache_at_attention_memory():
    """attn_scores at decode step 1 of a 4096-token context, batch 2, 8 KV heads of 128, bf16: memory-bound; its time
    is its bytes at attention_memory × x/(x + decode_half_occupancy) of the bandwidth, x = max(2·8/SMs, decode_split)
    CTAs per SM (a split-KV kernel fills the SMs up to decode_split), plus one wave of CTAs."""
    arch = Architecture(layers=1, d_model=4096, heads=32, kv_heads=8, head_dim=128, ffn=1024, vocab=256)
    B, ctx = 2, 4096
    rep = evaluate(arch, DEV, Workload(B, ctx - 1, 1), "bf16", engine=ENGINE)
    op = _op(rep, "attn_scores", "decode")
    nbytes = B * 32 * 128 * 2 + B * ctx * 8 * 128 * 2  # the query, then K of the whole context
    assert op.bytes == nbytes
    streams = B * 8
    ramp = 1 + KC.decode_half_occupancy / max(streams / DEV.sm_count, KC.decode_split)
    mem_s = nbytes / (BW * KV_FRACTION) * ramp
    waves = math.ceil(streams / DEV.sm_count) * KC.decode_tile_s
    assert op.bound == "memory"
    assert op.seconds == pytest.approx(mem_s + waves, rel=1e-12)
    # attn_values reads V the same way, without a second kernel's waves (one fused kernel)
    val = _op(rep, "attn_values", "decode")
    assert val.seconds == pytest.approx(val.bytes / (BW * KV_FRACTION) * ramp)
    # prefill attention streams at the weights' rate (the kernel curves' prefill family): no KV class there
    assert KC.attention_memory != KC.memory


def test_mla_decode_reads_its_latent_cache_as_one_stream_per_sequence():
    """DeepSeek-V2-Lite (27 MLA layers) at batch 4: its decode attention reads the latent cache at attention_memory
    ramped by its CTAs per SM, 4 streams (one per sequence: MLA's cache is one head) split up to decode_split, and
    its scores kernel pays one wave per layer."""
    from rooflaw.arch import load_architecture

    a = load_architecture("deepseek-v2-lite")
    rep = evaluate(a, DEV, Workload(4, 2047, 1), "bf16", engine=ENGINE)
    ramp = 1 + KC.decode_half_occupancy / max(4 / DEV.sm_count, KC.decode_split)
    sc, val = _op(rep, "mla_scores", "decode"), _op(rep, "mla_values", "decode")
    assert sc.bound == "memory"
    waves = a.layers * math.ceil(4 / DEV.sm_count) * KC.decode_tile_s
    assert sc.seconds == pytest.approx(sc.bytes / (BW * KV_FRACTION) * ramp + waves, rel=1e-12)
    # the values take the latent tile the scores loaded: no second cache read (only the 4 x 16 x 512 outputs)
    assert val.bytes == pytest.approx(a.layers * 4 * 16 * 512 * 2, rel=1e-12)


def test_routed_experts_stream_at_moe_memory_and_blend_with_compute():
    """ffn_down of a one-layer MoE (64 experts, top-8, d 2048, width 768) at 16 tokens: bytes of the touched experts'
    weights and the activations at memory·moe_memory; time (t_c^(1/q) + t_m^(1/q))^q with q the device's, t_c at the
    grouped GEMMs' rate for a width of 768: × (1 + moe_half_inter/768) / moe (bf16: the MoE family's moe·i/(i + h)),
    on the padded rows: 2 rows per expert, at most 16, so each touched expert computes one 16-row tile."""
    d, E, K, ffn, T = 2048, 64, 8, 768, 16
    arch = Architecture(layers=1, d_model=d, heads=16, kv_heads=4, ffn=ffn, experts=E, top_k=K, vocab=256)
    rep = evaluate(arch, DEV, Workload(T, 1, 1), "bf16", engine=ENGINE)
    op = _op(rep, "ffn_down", "prefill")
    touched = E * (1 - (1 - K / E) ** T)
    nbytes = d * touched * ffn * 2 + T * K * ffn * 2 + T * K * d * 2
    flops = 2 * T * K * ffn * d
    assert op.bytes == pytest.approx(nbytes, rel=1e-12) and op.flops == flops
    r = A.rates(DEV, Precision.parse("bf16"), applied(DEV, ENGINE))
    pad = 16 * touched / (T * K)  # (the closed form's normal tail adds ~1e-10 of a tile per expert beyond)
    t_c = flops * pad * r.inv["linear"] * (1 + KC.moe_half_inter / ffn) / KC.moe
    t_m = nbytes / (BW * KC.memory * KC.moe_memory)
    q = serial(KC, DEV)  # the device's q (kernels/moe_blend.py; the curves' moe_serial where they set no h)
    want = max(t_c, t_m) if q == 0 else (t_c ** (1 / q) + t_m ** (1 / q)) ** q
    assert op.seconds == pytest.approx(want, rel=1e-9)
    # the same op of a dense model streams its weights at `memory`, the hard max
    dense = evaluate(Architecture(layers=1, d_model=d, heads=16, kv_heads=4, ffn=ffn, vocab=256), DEV,
                     Workload(T, 1, 1), "bf16", engine=ENGINE)  # fmt: skip
    dn = _op(dense, "ffn_down", "prefill")
    assert dn.seconds == pytest.approx(max(dn.flops * r.inv["linear"], dn.bytes / (BW * KC.memory)), rel=1e-12)


def test_moe_layers_add_moe_s_per_pass():
    """engine_overhead adds moe_s per MoE layer and pass (kernel curves), nothing for a dense model."""
    r = A.Rates({}, 1.0, {}, 1.0, 0.0, kernel_s=2e-6, per_layer=7, moe_s=1.5e-5)
    base = A.Rates({}, 1.0, {}, 1.0, 0.0, kernel_s=2e-6, per_layer=7)
    assert A.engine_overhead(r, 10, 1) - A.engine_overhead(base, 10, 1) == pytest.approx(1.5e-4, rel=1e-12)
    assert A.engine_overhead(r, 10, 0) == A.engine_overhead(base, 10, 0)
    assert A.rates(DEV, Precision.parse("bf16"), applied(DEV, ENGINE)).moe_s == KC.moe_s
    # moe_s is SM cycles at the curves' clock (as kernel_s): a part clocked 10 % faster takes 1/1.1 of it
    fast = dataclasses.replace(DEV, clock=DEV.clock * 1.1)
    assert A.rates(fast, Precision.parse("bf16"), applied(fast, ENGINE)).moe_s == pytest.approx(KC.moe_s / 1.1)
    # so are decode attention's prologue waves (the kernel family's decode_tile_s)
    assert A.rates(fast, Precision.parse("bf16"), applied(fast, ENGINE)).decode_tile_s == pytest.approx(
        KC.decode_tile_s / 1.1, rel=1e-12)  # fmt: skip


def test_without_curves_every_stream_is_the_one_bandwidth():
    """A device without kernel curves (no architecture): one bandwidth, the hard max, no decode terms."""
    import dataclasses

    dev = dataclasses.replace(DEV, architecture=None)
    r = A.rates(dev, Precision.parse("bf16"), applied(dev, ENGINE))
    assert r.inv_stream("kv") == r.inv_stream("experts") == r.inv_beta
    assert (
        r.moe_blend == math.inf
        and r.decode_tile_s == 0
        and r.decode_half_occupancy == 0
        and r.decode_split == 0
        and r.moe_s == 0
    )


def test_blend_is_the_p_norm_where_it_applies():
    """blend(hi, lo, p, on) = (hi^p + lo^p)^(1/p) where on and hi > 0 (brute force), else hi; p = inf: hi."""
    from rooflaw.constraints.streams import blend_values

    rng = np.random.default_rng(0)
    lo = rng.uniform(0, 1, 50)
    hi = lo + rng.uniform(0, 1, 50)
    on = (rng.uniform(size=50) > 0.5).astype(float)
    for p in (1.0, 1.3, 2.0, 3.7):
        got = blend_values(hi, lo, p, on)
        np.testing.assert_allclose(got, np.where(on > 0, (hi**p + lo**p) ** (1 / p), hi), rtol=1e-14)
    np.testing.assert_array_equal(blend_values(hi, lo, math.inf, 1.0), hi)
    assert blend_values(0.0, 0.0, 1.3, 1.0) == 0.0  # an op with no work


COLS = {"layers": [32, 24, 2, 48], "d_model": [4096, 2048, 512, 2048], "heads": [32, 16, 8, 32],
        "kv_heads": [8, 4, 8, 4], "ffn": [14336, 1024, 0, 768], "experts": [1, 64, 1, 128], "top_k": [1, 8, 1, 8],
        "vocab": [128256, 50000, 1000, 151936]}  # fmt: skip


@pytest.mark.parametrize(("dev_id", "engine"), [("h100-sxm", "tensorrt-llm"), ("h100-sxm", "vllm"),
                                               ("a100-sxm-80gb", "vllm")])  # fmt: skip
def test_numba_equals_numpy_with_stream_classes(dev_id, engine):
    """The numba kernel traces the numpy path's arithmetic: the same bits with every stream class and term on (Hopper's
    experts' blend is the sum, q = 1; Ampere's a true power, q ≈ 0.76), and the kernel reads the stream classes'
    rates as run-time scalars (traced, not mirrored)."""
    pytest.importorskip("numba")
    from rooflaw.constraints.backend_numba import kernels
    from rooflaw.constraints.roofline import complete_columns, stack_kinds

    wl, dev = Workload(8, 1024, 64), get_device(dev_id)
    assert 0 < curves_for(dev).moe_serial <= 1
    a = evaluate_columns(COLS, dev, wl, "bf16", engine=engine, backend="numpy")
    b = evaluate_columns(COLS, dev, wl, "bf16", engine=engine, backend="numba")
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    k = kernels("full", kinds=stack_kinds(complete_columns(COLS)))
    assert {"s_inv_beta_kv", "s_inv_beta_experts", "s_moe_blend", "s_decode_tile_s", "r_moe_s"} <= set(k.scalars)


DATA = Path("/work/shared/data/measured/published.csv")


@pytest.mark.skipif(not DATA.is_file(), reason="published.csv not present")
def test_fit_arrays_price_moe_and_decode_attention_as_the_assembly():
    """The efficiency fit's array evaluator, its per-case predictor and evaluate agree on MoE, decode and prefill cases
    of a device priced by kernel curves (stream classes, the experts' blend, moe_s, decode attention's ramp and waves,
    the fused prefill kernel's terms)."""
    from rooflaw.constraints import fit_efficiency as fe
    from rooflaw.constraints.published import load_cases

    cases, _ = load_cases(DATA)
    moe = [c for c in cases if c.arch.experts > 1 and curves_of(fe.case_device(c)) is not None][:6]
    # and MoE cases on curves whose grouped GEMMs slow down at narrow experts (moe_half_inter: Ampere's Orin)
    moe += [c for c in cases if c.arch.experts > 1 and getattr(curves_of(fe.case_device(c)), "moe_half_inter", 0) > 1]
    dec = [c for c in cases if c.phase == "decode" and c.arch.experts == 1 and curves_of(fe.case_device(c))][:4]
    # and dense prefills: a fused prefill kernel's blocks, tile efficiency, blend and waves (constraints/fused_prefill)
    pre = [c for c in cases if c.phase == "prefill" and c.arch.experts == 1 and curves_of(fe.case_device(c))][:4]
    pick = moe + dec + pre
    assert len(moe) >= 8 and dec and pre
    feats = [fe._features(c, fe.case_device(c)) for c in pick]
    assert all(f.pre_terms is not None and f.pre_terms[1] > 0 for f in feats[-len(pre) :])
    assert any(f.expert is not None and f.expert.any() for f in feats)
    assert all(f.dec_terms is not None and f.dec_terms[1] > 0 for c, f in zip(pick, feats, strict=True)
               if c.phase == "decode")  # fmt: skip

    def fixed_overheads(x, names):
        x[[i for i, k in enumerate(names) if k[2] in ("pass_s", "layer_s")]] = np.log(2e-5)

    assert_flat_fit_matches(pick, feats, seed=2, rel=lambda c: 0.02 if fe.padded(c) else 1e-9, adjust=fixed_overheads)
