"""What the collectives move: the residual stream (16-bit) whatever the GEMMs' input format; only the EP
dispatch carries the quantised activations."""

import pytest

import rooflaw as rl
from rooflaw.constraints.parallel.serving import stream_bytes

DENSE = "layers=4,d_model=1024,heads=16,kv_heads=4,ffn=2816,vocab=32000"
MOE = "layers=4,d_model=1024,heads=16,kv_heads=4,ffn=1024,experts=8,top_k=2,vocab=32000"


def _comm(arch: str, layout: str, precision: str) -> float:
    sysm = rl.get_system("h100-sxm:4")
    out = rl.parallel.evaluate_layout(rl.load_architecture(arch), sysm, layout, rl.Workload(8, 512, 4), precision,
                                      "ideal")  # fmt: skip
    return out["comm_s_prefill"]


def test_stream_bytes_by_hand():
    assert [stream_bytes(b) for b in (0.5 + 1 / 16, 1.0, 2.0, 4.0)] == [2.0, 2.0, 2.0, 4.0]


def test_tp_all_reduce_moves_16_bit_for_fp8_and_fp4_activations():
    bf16 = _comm(DENSE, "tp=4", "bf16")
    assert bf16 > 0
    assert _comm(DENSE, "tp=4", "fp8") == pytest.approx(bf16, rel=1e-12)
    assert _comm(DENSE, "tp=4", "wnvfp4anvfp4kvfp8") == pytest.approx(bf16, rel=1e-12)
    assert _comm(DENSE, "tp=4", "fp32") > bf16


def test_ep_dispatch_is_quantised_and_combine_is_not():
    bf16, fp8 = _comm(MOE, "ep=4", "bf16"), _comm(MOE, "ep=4", "fp8")
    assert 0.5 * bf16 < fp8 < bf16  # the dispatch halves, the combine stays
