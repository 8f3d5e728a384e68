"""Checks that need a CUDA GPU (skipped without one; ``scripts/device_check.sh`` runs them on the GPU machine).

The GPU's measured rates are compared with the catalog's datasheet figures for the same chip, and the eager decoder
``validate --cuda`` times is checked against rooflaw's own counts: FLOPs (``FlopCounterMode`` on the GPU) and the
host syncs of its MoE path (torch's CUDA sync debug mode).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():  # one skip for the module, not one per test
    pytest.skip("needs a CUDA GPU (scripts/device_check.sh runs these on one)", allow_module_level=True)

from rooflaw.api import Workload, evaluate, from_mapping, get_device  # noqa: E402
from rooflaw.devices import calibrate_cuda as cc  # noqa: E402
from rooflaw.devices.eager_decoder import build  # noqa: E402
from rooflaw.validate_cuda import count_syncs, syncs  # noqa: E402

#: substring of torch.cuda.get_device_name -> catalog id
CATALOG = (("H200", "h200-sxm"), ("H100", "h100-sxm"), ("A100", "a100-sxm-80gb"), ("B200", "b200"), ("L4", "l4"))


def _catalog():
    name = torch.cuda.get_device_name(0)
    for key, cid in CATALOG:
        if key in name:
            return get_device(cid)
    pytest.skip(f"{name}: no catalog device to compare with")


def test_bandwidths_between_half_and_all_of_the_catalog_peak() -> None:
    peak = _catalog().memory_bandwidth
    copy, read, _, _ = cc._bandwidth(10)
    gemv, _ = cc._gemv(10)
    for what, bw in (("copy", copy), ("read", read), ("decode GEMV", gemv)):
        assert 0.5 * peak <= bw <= peak, (what, bw / 1e9, peak / 1e9)


def test_gemm_rates_at_most_the_catalog_dense_peaks() -> None:
    cat = _catalog()
    bf16, _ = cc._gemm(torch.bfloat16, False, 10)
    fp16, _ = cc._gemm(torch.float16, False, 10)
    tf32, _ = cc._gemm(torch.float32, True, 5)
    for what, rate, peak in (("bf16", bf16, cat.peak("fp16")), ("fp16", fp16, cat.peak("fp16")),
                             ("tf32", tf32, cat.peak("tf32"))):  # fmt: skip
        assert 0.3 * peak <= rate <= peak, (what, rate / 1e12, peak / 1e12)


def test_rate_curve_and_launch_costs_are_physical() -> None:
    rates = cc._row_rates(5)
    R, h = cc.fit_rate_curve(cc.ROWS, rates)
    # measured rates at most the dense peak (the fitted R is an extrapolation past M = 4096: not checked)
    assert _catalog().peak("fp16") >= max(rates) and R > 0 and h > 0 and rates[-1] > 10 * rates[0]
    host, _, event, graph, sync = cc._launch_chain(3)
    assert 0.5e-6 < graph <= event and 1e-6 < host < 100e-6 and sync > 0
    per_kernel, _, kernels, on_device, _ = cc._probe(5, 3e12)
    assert 1e-6 < per_kernel < 100e-6 and kernels > 20
    # a decoder kernel replayed from a graph: at least the tiny chain's gap, less than the host's eager cost
    assert graph <= on_device < per_kernel


ARCHS = {
    "dense-gqa": {"layers": 2, "d_model": 512, "heads": 8, "kv_heads": 2, "ffn": 1408, "vocab": 32000},
    "moe": {"layers": 2, "d_model": 256, "heads": 4, "ffn": 512, "experts": 8, "top_k": 2, "vocab": 32000},
}
GEMM_OPS = ("q_proj", "k_proj", "v_proj", "o_proj", "attn_scores", "attn_values", "router", "ffn_up", "ffn_down",
            "lm_head")  # fmt: skip


def _setup(spec: dict, S: int):
    arch = from_mapping(spec, name="x")
    model = build(arch, torch.bfloat16, "cuda")
    shape = (1, arch.kv_heads, S + 2, arch.head_dim)
    caches = [(torch.zeros(shape, dtype=torch.bfloat16, device="cuda"),
               torch.zeros(shape, dtype=torch.bfloat16, device="cuda")) for _ in range(arch.layers)]  # fmt: skip
    return arch, model, caches, torch.randint(0, arch.vocab, (1, S), device="cuda")


@pytest.mark.parametrize("name", list(ARCHS))
def test_gpu_decoder_flops_equal_rooflaws_count(name: str) -> None:
    from torch.utils.flop_counter import FlopCounterMode

    S = 256
    arch, model, caches, ids = _setup(ARCHS[name], S)
    with torch.inference_mode():
        with FlopCounterMode(display=False) as fc:
            model(ids, caches, 0)
        pre = fc.get_total_flops()
        with FlopCounterMode(display=False) as fc:
            model(ids[:, :1], caches, S)
        dec = fc.get_total_flops()
    frame = evaluate(arch, "h200-sxm", Workload(1, S, 1), "bf16", engine="torch-eager").to_frame()
    for phase, counted in (("prefill", pre), ("decode", dec)):
        ops = frame[(frame.phase == phase) & frame.name.isin(GEMM_OPS)]
        by_op = dict(zip(ops.name, ops.flops, strict=True))
        assert counted == pytest.approx(float(ops.flops.sum()), rel=1e-9), (phase, by_op)


def test_moe_host_syncs_are_what_validate_reports() -> None:
    S = 64
    arch, model, caches, ids = _setup(ARCHS["moe"], S)
    with torch.inference_mode():
        model(ids, caches, 0)
        model(ids[:, :1], caches, S)  # warm
        torch.cuda.synchronize()
        dec = count_syncs(lambda: model(ids[:, :1], caches, S))
        dense = _setup(ARCHS["dense-gqa"], S)
        dense[1](dense[3][:, :1], dense[2], S)
        dense_dec = count_syncs(lambda: dense[1](dense[3][:, :1], dense[2], S))
    assert dense_dec == 0
    assert dec == syncs(arch, 1) == arch.layers * (2 + arch.top_k)


def _kernels(dev: str, layers: int, tokens: int, experts: int = 1, top_k: int = 1) -> int:
    from rooflaw.devices.calibrate_torch import eager_kernels

    arch = SimpleNamespace(layers=layers, d_model=256, heads=4, kv_heads=2, head_dim=64, ffn=512, experts=experts,
                           top_k=top_k, vocab=512)  # fmt: skip
    model = build(arch, torch.bfloat16, dev)
    kv = lambda: torch.zeros(1, 2, 40, 64, dtype=torch.bfloat16, device=dev)  # noqa: E731
    caches = [(kv(), kv()) for _ in range(layers)]
    ids = torch.arange(tokens, device=dev).view(1, tokens) * 7 % 512
    with torch.inference_mode():
        return eager_kernels(model, lambda m: m(ids, caches, 0 if tokens > 1 else 8))


@pytest.mark.parametrize("tokens", [1, 5])
def test_gpu_eager_kernel_counts_are_the_torch_eager_profiles(tokens: int) -> None:
    """What ``kernel_overhead`` multiplies on the GPU: the aten kernels per layer the torch-eager profile counts
    (derived on the CPU) are the ones the decoder launches on CUDA too, and 11 per routed expert touched."""
    from rooflaw.constraints.engines import EAGER_KERNELS_PER_EXPERT, EAGER_LAYER_KERNELS

    per_layer = _kernels("cuda", 3, tokens) - _kernels("cuda", 2, tokens)
    assert per_layer == sum(EAGER_LAYER_KERNELS.values()) == _kernels("cpu", 3, tokens) - _kernels("cpu", 2, tokens)
    moe = _kernels("cuda", 1, tokens, experts=8, top_k=1) - _kernels("cuda", 1, tokens)
    touched = 1 if tokens == 1 else None
    if touched is not None:
        assert moe == EAGER_KERNELS_PER_EXPERT * touched
    else:  # 5 tokens, top-1 of 8: between 1 and 5 distinct experts
        assert moe % EAGER_KERNELS_PER_EXPERT == 0 and 1 <= moe // EAGER_KERNELS_PER_EXPERT <= 5
