"""The torch-eager engine's kernel counts against the aten kernels a real eager decoder launches.

A ``TorchDispatchMode`` (``calibrate.eager_kernels``) counts every non-view aten kernel of one
forward pass of :mod:`rooflaw.devices.eager_decoder` (the decoder ``rooflaw validate`` times);
the per-layer count is the difference between two depths, so it is exact.
"""

import itertools
from types import SimpleNamespace

import numpy as np
import pytest

from rooflaw import Workload, evaluate
from rooflaw.api import from_mapping
from rooflaw.cli import main
from rooflaw.constraints import backends, evaluate_columns
from rooflaw.constraints.engines import (
    EAGER_EXPERT_KERNELS,
    EAGER_KERNELS_PER_EXPERT,
    EAGER_LAYER_KERNELS,
    EAGER_MOE_KERNELS,
    EAGER_PASS_KERNELS,
    EAGER_ROUTER_KERNELS,
    experts_touched,
    get_engine,
)
from rooflaw.devices.device import Device
from rooflaw.errors import RooflawError

torch = pytest.importorskip("torch")
from rooflaw import calibrate  # noqa: E402  (the function; rooflaw.devices.calibrate is its module)
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


def _count_moe_layer(tokens: int, experts: int, top_k: int) -> tuple[int, int]:
    """(aten kernels a one-layer MoE pass launches beyond the dense pass, distinct experts its router picked)."""
    spec = {"d_model": 32, "heads": 4, "kv_heads": 2, "head_dim": 8, "ffn": 48, "vocab": 64, "layers": 1}
    called: set[int] = set()
    arch = SimpleNamespace(**spec, experts=experts, top_k=top_k)
    model = build(arch, torch.float32)
    for e, ffn in enumerate(model.layers[0].ffn.experts):
        ffn.register_forward_pre_hook(lambda *_, e=e: called.add(e))
    caches = [(torch.zeros(1, 2, 40, 8), torch.zeros(1, 2, 40, 8))]
    ids = torch.randint(0, 64, (1, tokens), generator=torch.Generator().manual_seed(tokens))
    with torch.inference_mode():
        n = eager_kernels(model, lambda m: m(ids, caches, 0 if tokens > 1 else 8))
    return n - _count(1, tokens), len(called)


@pytest.mark.parametrize(("tokens", "experts", "top_k"), [(1, 4, 1), (1, 4, 2), (1, 8, 3), (6, 8, 2), (32, 8, 2)])
def test_moe_layer_kernels_per_distinct_routed_expert(tokens, experts, top_k):
    """A MoE layer launches 11 kernels per *distinct* expert its router picks in the pass, in place of the dense
    FFN's 5 (gate, up, SiLU, mul, down) plus 5 router kernels: top-k in a one-token decode step, up to all E in a
    prefill (32 tokens × top-2 of 8 touch all 8)."""
    extra, touched = _count_moe_layer(tokens, experts, top_k)
    assert extra == EAGER_KERNELS_PER_EXPERT * touched
    if tokens == 1:
        assert touched == top_k
    if tokens == 32:
        assert touched == experts
    eng = get_engine("torch-eager")
    assert (eng.kernels_per_expert, eng.moe_kernels) == (EAGER_KERNELS_PER_EXPERT, 0)
    # the fused-MoE engines the published data was fitted on launch no kernels per expert
    assert all(get_engine(e).kernels_per_expert == 0 for e in ("tensorrt-llm", "vllm", "llama.cpp", "gpt-fast"))


#: the aten kernel each counted entry of the router / per-expert tables is (views excluded)
_ROUTER_ATEN = {
    "gate_gemv": "linear",
    "softmax": "softmax",
    "topk": "topk",
    "zeros": "zeros_like",
    "unique": "_unique2",
}
_EXPERT_ATEN = {"mask": ["eq"], "nonzero": ["nonzero_numpy"], "gather_rows": ["index"], "ffn_up": ["linear"] * 2,
                "ffn_act": ["silu", "mul"], "ffn_down": ["linear"], "gather_weights": ["index"], "weight_mul": ["mul"],
                "index_add": ["index_add_"]}  # fmt: skip


def _ops_of_ffn(experts: int, top_k: int) -> dict[str, int]:
    """Aten kernels, by name, of one call of a layer's FFN module (MoE or dense) on one token."""
    from collections import Counter

    from torch.utils._python_dispatch import TorchDispatchMode

    spec = {"d_model": 32, "heads": 4, "kv_heads": 2, "head_dim": 8, "ffn": 48, "vocab": 64, "layers": 1}
    ffn = build(SimpleNamespace(**spec, experts=experts, top_k=top_k), torch.float32).layers[0].ffn
    seen: Counter = Counter()

    class ByName(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if not func.is_view:
                seen[func.overloadpacket.__name__] += 1
            return func(*args, **(kwargs or {}))

    x = torch.randn(1, 1, 32, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode(), ByName():
        ffn(x)
    return dict(seen)


def test_moe_router_and_per_expert_kernels_on_the_real_module():
    """One token through the real MoE FFN module with top-1, 2, 3 of 8: each aten kernel's count is a + b·k; the
    k-independent part a is the router's own kernels (gate GEMV, softmax, top-k, zeros, unique:
    ``EAGER_ROUTER_KERNELS``), the slope b the per-expert ones (``EAGER_EXPERT_KERNELS``), and the router minus the
    dense FFN module's kernels is the profile's ``moe_kernels``."""
    counts = {k: _ops_of_ffn(8, k) for k in (1, 2, 3)}
    names = set().union(*counts.values())
    slope = {n: counts[2].get(n, 0) - counts[1].get(n, 0) for n in names}
    assert all(counts[3].get(n, 0) - counts[2].get(n, 0) == slope[n] for n in names)  # linear in k
    fixed = {n: counts[1].get(n, 0) - slope[n] for n in names}
    want_router: dict[str, int] = {}
    for key, n in EAGER_ROUTER_KERNELS.items():
        want_router[_ROUTER_ATEN[key]] = want_router.get(_ROUTER_ATEN[key], 0) + n
    want_expert: dict[str, int] = {}
    for key, n in EAGER_EXPERT_KERNELS.items():
        assert len(_EXPERT_ATEN[key]) == n
        for op in _EXPERT_ATEN[key]:
            want_expert[op] = want_expert.get(op, 0) + 1
    assert {n: c for n, c in fixed.items() if c} == want_router
    assert {n: c for n, c in slope.items() if c} == want_expert
    dense = _ops_of_ffn(1, 1)
    assert dense == {"linear": 3, "silu": 1, "mul": 1}
    assert sum(dense.values()) == sum(EAGER_LAYER_KERNELS[k] for k in ("ffn_up", "ffn_act", "ffn_down"))
    assert sum(want_router.values()) - sum(dense.values()) == EAGER_MOE_KERNELS
    assert get_engine("torch-eager").moe_kernels == EAGER_MOE_KERNELS


def _distinct_by_enumeration(E: int, K: int, T: int) -> float:
    """Mean distinct experts over every way T tokens each pick K of E experts (all equally likely)."""
    subsets = list(itertools.combinations(range(E), K))
    total = sum(len(set().union(*pick)) for pick in itertools.product(subsets, repeat=T))
    return total / len(subsets) ** T


@pytest.mark.parametrize(("E", "K", "T"), [(4, 1, 3), (4, 2, 3), (5, 2, 4), (6, 3, 2), (8, 2, 1), (3, 3, 2)])
def test_experts_touched_against_exact_enumeration(E, K, T):
    assert experts_touched(float(E), float(K), float(T)) == pytest.approx(_distinct_by_enumeration(E, K, T), 1e-12)


def test_experts_touched_against_monte_carlo_of_the_router_draw():
    """Larger (E, K, T) than enumeration allows: 4000 draws of T tokens × a random K-subset of E each."""
    rng = np.random.default_rng(0)
    for E, K, T in [(16, 4, 6), (64, 8, 16), (8, 2, 128)]:
        picks = np.sort(rng.random((4000, T, E)).argsort(-1)[..., :K].reshape(4000, T * K), axis=-1)
        distinct = 1 + (np.diff(picks, axis=-1) != 0).sum(-1)
        want = experts_touched(E, K, float(T))
        assert abs(distinct.mean() - want) < 4 * distinct.std() / np.sqrt(len(distinct)) + 1e-9


@pytest.mark.parametrize("experts", [1, 8])
def test_torch_eager_charges_kernel_overhead_per_counted_kernel(experts):
    dev = Device(id="t", name="t", peak_flops={"fp32": 1e11}, memory_bandwidth=2e10, memory_capacity=1e10,
                 kind="cpu", kernel_overhead=1e-5, vector_rate=5e9)  # fmt: skip
    spec = {"layers": 3, "d_model": 256, "heads": 4, "ffn": 512, "vocab": 1024}
    if experts > 1:
        spec |= {"experts": experts, "top_k": 2}
    rep = evaluate(from_mapping(spec), dev, Workload(1, 16, 4), "fp32", engine="torch-eager")
    over = {o.phase: o.seconds for o in rep.ops if o.name == "engine_overhead"}
    # hand count per pass: 38 per MHA layer... (GQA-less spec: kv_heads = heads, but the profile charges the GQA
    # layer's 38) + 13 per pass; MoE: 11 per expert touched, all 16 prefill tokens × top-2 of 8: 8·(1 − (3/4)^16),
    # a one-token decode step: exactly 2
    touched_pre = 8 * (1 - 0.75**16) if experts > 1 else 0.0
    touched_dec = 2.0 if experts > 1 else 0.0
    assert over["prefill"] == pytest.approx(1e-5 * (3 * (38 + 11 * touched_pre) + 13))
    assert over["decode"] == pytest.approx(4 * 1e-5 * (3 * (38 + 11 * touched_dec) + 13))  # 4 decode steps


@pytest.mark.skipif(not backends.available(), reason="numba (the fast extra) is not installed")
def test_numba_identical_to_numpy_with_per_expert_kernels():
    """The per-phase expert term reaches the numba kernel through the traced engine_overhead, bit for bit
    (batch 2: numpy squares where libm pow may round differently)."""
    rng = np.random.default_rng(3)
    n = 4000
    experts = rng.choice([1, 4, 8, 16, 64, 128], n)
    cols = {"layers": rng.integers(1, 64, n), "d_model": rng.integers(1, 40, n) * 64, "heads": np.full(n, 8),
            "ffn": rng.integers(1, 200, n) * 32, "experts": experts,
            "top_k": np.minimum(experts, rng.choice([1, 2, 4, 8], n)), "vocab": np.full(n, 32000)}  # fmt: skip
    dev = Device(id="t", name="t", peak_flops={"fp32": 1e11, "fp16": 4e10}, memory_bandwidth=2e10,
                 memory_capacity=1e10, kind="cpu", kernel_overhead=1e-5, vector_rate=5e9)  # fmt: skip
    for w in (Workload(2, 64, 8), Workload(1, 7, 3), Workload(3, 1, 1)):
        a = evaluate_columns(cols, dev, w, "fp32", backend="numpy", engine="torch-eager")
        b = evaluate_columns(cols, dev, w, "fp32", backend="numba", engine="torch-eager")
        for k in a:
            assert np.array_equal(a[k], b[k], equal_nan=a[k].dtype != bool), k
        dense = evaluate_columns(cols, dev, w, "fp32", backend="numpy", engine="vllm")
        assert np.any(a["prefill_s"] != dense["prefill_s"])


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
