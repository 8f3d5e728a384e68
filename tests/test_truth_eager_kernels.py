"""The torch-eager engine's kernel counts against the aten kernels a real eager decoder launches.

A ``TorchDispatchMode`` (``calibrate.eager_kernels``) counts every non-view aten kernel of one
forward pass of :mod:`rooflaw.devices.eager_decoder` (the decoder ``rooflaw validate`` times);
the per-layer count is the difference between two depths, so it is exact.
"""

from types import SimpleNamespace

import pytest

from rooflaw import Workload, evaluate
from rooflaw.api import from_mapping
from rooflaw.cli import main
from rooflaw.constraints.engines import (
    EAGER_KERNELS_PER_EXPERT,
    EAGER_LAYER_KERNELS,
    EAGER_PASS_KERNELS,
    get_engine,
)
from rooflaw.devices.device import Device
from rooflaw.errors import RooflawError

torch = pytest.importorskip("torch")
from rooflaw import calibrate  # noqa: E402  (the function: importing the submodule would shadow it)
from rooflaw.devices.calibrate_torch import eager_kernels  # noqa: E402
from rooflaw.devices.eager_decoder import build  # noqa: E402


def _count(layers: int, tokens: int, **kw) -> int:
    spec = {"d_model": 32, "heads": 4, "kv_heads": 2, "head_dim": 8, "ffn": 48, "experts": 1, "top_k": 1, "vocab": 64}
    arch = SimpleNamespace(**(spec | kw | {"layers": layers}))
    model = build(arch, torch.float32)
    caches = [(torch.zeros(1, arch.kv_heads, 40, 8), torch.zeros(1, arch.kv_heads, 40, 8)) for _ in range(layers)]
    ids = torch.randint(0, arch.vocab, (1, tokens), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        return eager_kernels(model, lambda m: m(ids, caches, 0 if tokens > 1 else 8))


@pytest.mark.parametrize("tokens", [1, 5])
def test_dense_layer_kernels_match_the_operator_table(tokens):
    per_layer = _count(3, tokens) - _count(2, tokens)
    assert per_layer == sum(EAGER_LAYER_KERNELS.values()) == get_engine("torch-eager").kernels_per_layer
    # MHA has no repeat_interleave of K and V
    mha = _count(3, tokens, kv_heads=4) - _count(2, tokens, kv_heads=4)
    assert mha == per_layer - EAGER_LAYER_KERNELS["kv_repeat"]
    # per pass: the rest of a one-layer fp32 pass (casts to the model's own dtype launch nothing)
    assert _count(1, tokens) - per_layer == sum(EAGER_PASS_KERNELS.values())


def test_moe_layer_kernels_per_routed_expert():
    """A one-token decode step of a top-k MoE layer launches 11 kernels per expert it picks, in place of the
    dense FFN's 5 (gate, up, SiLU, mul, down) plus 5 router kernels; the profile charges top-2."""
    dense = _count(3, 1) - _count(2, 1)
    for k in (1, 2, 3):
        moe = _count(3, 1, experts=4, top_k=k) - _count(2, 1, experts=4, top_k=k)
        assert moe - dense == EAGER_KERNELS_PER_EXPERT * k
    assert get_engine("torch-eager").moe_kernels == EAGER_KERNELS_PER_EXPERT * 2


@pytest.mark.parametrize("experts", [1, 8])
def test_torch_eager_charges_kernel_overhead_per_counted_kernel(experts):
    dev = Device(id="t", name="t", peak_flops={"fp32": 1e11}, memory_bandwidth=2e10, memory_capacity=1e10,
                 kind="cpu", kernel_overhead=1e-5, vector_rate=5e9)  # fmt: skip
    spec = {"layers": 3, "d_model": 256, "heads": 4, "ffn": 512, "vocab": 1024}
    if experts > 1:
        spec |= {"experts": experts, "top_k": 2}
    rep = evaluate(from_mapping(spec), dev, Workload(1, 16, 4), "fp32", engine="torch-eager")
    over = {o.phase: o.seconds for o in rep.ops if o.name == "engine_overhead"}
    kernels = 3 * (38 + (22 if experts > 1 else 0)) + 13  # per forward pass
    assert over["prefill"] == pytest.approx(1e-5 * kernels)
    assert over["decode"] == pytest.approx(4 * 1e-5 * kernels)  # summed over the 4 decode steps


def test_calibrate_records_threads_and_restores_torch():
    before = torch.get_num_threads()
    d = calibrate(seconds=0.3, threads=1)
    assert torch.get_num_threads() == before
    assert "threads=1" in d.notes and "1 torch threads" in d.name
    assert d.kernel_overhead > 0 and d.provenance["kernel_overhead"] == "measured"
    # bf16 roof is the bf16 F.linear rate, not the fp32 one
    assert d.peak("fp16") != d.peak("fp32")
    with pytest.raises(RooflawError, match="threads"):
        calibrate(seconds=0.3, threads=0)


def test_validate_rejects_bad_threads(capsys):
    assert main(["validate", "--threads", "0", "--quick", "--json"]) == 2
