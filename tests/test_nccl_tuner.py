"""NCCL's own tuner picks the protocol of NCCL's collectives (kernels/nccl_tuner.py): its published constants by
hand, the priced protocol following the pick (not the cheapest), and the pick against the measured tables' jumps."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rooflaw.constraints.kernels import CollectiveCurve
from rooflaw.constraints.kernels import collectives as K
from rooflaw.constraints.kernels import nccl_tuner as T

KERNELS = next((p for p in (Path(__file__).resolve().parents[2] / "shared" / "data" / "kernels",
                            Path("/work/shared/data/kernels")) if p.is_dir()), Path("/nonexistent"))  # fmt: skip


def test_tuner_times_by_hand():
    # A100 (NVLink 3, 300 GB/s: NCCL's bus 240 GB/s), all-reduce over 2 GPUs: 2 ring steps, algorithm bw = bus
    mb = 1 << 20
    ll, ll128, simple = T.tuner_us("nccl_allreduce", 2, mb, 300e9, "nvlink", "ampere")
    assert ll == pytest.approx(6.6 + 2 * 0.6 + mb / (1e3 * 87.7))  # LL capped at Ampere's 87.7 GB/s
    assert ll128 == pytest.approx(14.0 + 2 * 1.9 + mb / (1e3 * 0.92 * 240))
    assert simple == pytest.approx(8.4 + 2 * 3.4 + mb / (1e3 * 240))
    assert T.protocol("nccl_allreduce", 2, mb, 300e9, "nvlink", "ampere") == 2  # 19.57 us Simple < 19.76 us LL
    assert T.protocol("nccl_allreduce", 2, mb // 2, 300e9, "nvlink", "ampere") == 0  # 13.78 LL < 17.38 Simple
    # H100 (450 GB/s: bus 360), 8 GPUs: 14 steps, algorithm bw = bus x 8/14; LL128 wins at 4 MiB, Simple at 64 MiB
    s4 = 4 << 20
    want = (15.0 + s4 / (1e3 * 141 * 8 / 14), 40.6 + s4 / (1e3 * 331.2 * 8 / 14), 56.0 + s4 / (1e3 * 360 * 8 / 14))
    assert T.tuner_us("nccl_allreduce", 8, s4, 450e9, "nvlink", "hopper") == pytest.approx(want)
    assert T.protocol("nccl_allreduce", 8, s4, 450e9, "nvlink", "hopper") == 1
    assert T.protocol("nccl_allreduce", 8, 64 << 20, 450e9, "nvlink", "hopper") == 2
    # all-gather: n - 1 steps, algorithm bw = bus x n/(n-1); PCIe (bus 24 GB/s of 32) has no LL128
    ll, ll128, simple = T.tuner_us("allgather", 4, mb, 32e9, "pcie", "ada")
    assert ll == pytest.approx(6.6 + 3 * 1.0 + mb / (1e3 * 12 * 4 / 3)) and ll128 == np.inf
    assert simple == pytest.approx(8.4 + 3 * 5.7 + mb / (1e3 * 24 * 4 / 3))
    # offered protocols only (a curve without LL128 figures): the 4 MiB call above goes to LL or Simple
    assert T.protocol("nccl_allreduce", 8, s4, 450e9, "nvlink", "hopper", (True, False, True)) == 0


def test_ll_rate_by_hand():
    """NCCL's LL rate: half its share of the link (0.8 of NVLink, 0.75 of PCIe), capped per architecture."""
    assert T.ll_bandwidth(300e9, "nvlink", "ampere") == pytest.approx(87.7e9)  # cap < 0.5 x 0.8 x 300 = 120 GB/s
    assert T.ll_bandwidth(900e9, "nvlink", "blackwell") == pytest.approx(282e9)  # cap < 360 GB/s
    assert T.ll_bandwidth(32e9, "pcie", "ada") == pytest.approx(12e9)  # link-bound: 0.5 x 0.75 x 32 GB/s
    assert T.ll_bandwidth(32e9 / 16, "pcie", "ada") == pytest.approx(0.75e9)  # a contended rank's share (8 GPUs, c=2)
    assert T.ll_bandwidth(900e9, "nvlink", None) == pytest.approx(360e9)  # no architecture: no cap
    assert T.ll_bandwidth(900e9, "nvlink", "volta") == pytest.approx(87.7e9)  # unknown: the tuner module's Ampere row


def test_priced_protocol_is_the_tuners_pick_not_the_cheapest():
    c = CollectiveCurve(latency=5e-6, efficiency=0.3, hop=1e-6, latency_large=40e-6, efficiency_large=0.7,
                        latency_ll128=20e-6, efficiency_ll128=0.5)  # fmt: skip
    bw, mb = 300e9, 1 << 20
    ll = 5e-6 + 2e-6 + mb / (bw * 0.4 * 0.3)  # 2 GPUs: 1 x S moved, 2 steps; NCCL's LL: half its 0.8 of the link
    simple = 40e-6 + 2e-6 + mb / (bw * 0.7)
    assert ll < simple  # the curve's LL is cheaper at 1 MiB, but NCCL's tuner runs Simple there (A100, 2 GPUs)
    assert K.seconds("nccl_allreduce", 2, mb, bw, "nvlink", c, architecture="ampere") == pytest.approx(simple)
    ll128 = 20e-6 + 2e-6 + mb / (bw * 0.5)
    assert ll128 < ll  # no architecture: the cheapest of the three (LL128 here)
    assert K.seconds("nccl_allreduce", 2, mb, bw, "nvlink", c) == pytest.approx(ll128)
    # the LL128 protocol: its own latency and efficiency, the same hops (8 GPUs, 4 MiB on Hopper's NVLink 4)
    s4 = 4 << 20
    want = 20e-6 + 14e-6 + 1.75 * s4 / (450e9 * 0.5)
    assert K.seconds("nccl_allreduce", 8, s4, 450e9, "nvlink", c, architecture="hopper") == pytest.approx(want)
    # the custom all-reduce and the all-to-all are not NCCL-tuned: the cheapest, whatever the architecture
    for coll in ("allreduce", "alltoall"):
        assert K.seconds(coll, 2, mb, bw, "nvlink", c, architecture="ampere") == pytest.approx(
            K.seconds(coll, 2, mb, bw, "nvlink", c))  # fmt: skip


@pytest.mark.skipif(not (KERNELS / "a100_sxm").is_dir(), reason="shared/data/kernels not present")
def test_tuner_switch_is_where_the_measured_tables_jump():
    """NVLink GPUs, all-reduce over 2 GPUs: the first size the tuner sends to Simple is where the measured time
    jumps (x 1.4 or more over the size before, against x 1.5 at most between the LL sizes below it)."""
    arch = {"a100_sxm": ("ampere", 300e9), "h100_sxm": ("hopper", 450e9), "b200_sxm": ("blackwell", 900e9)}
    for gpu, (name, bw) in arch.items():
        d = pd.read_csv(next((KERNELS / gpu).glob("nccl-*/nccl_perf.csv.gz")))
        d = d[(d.op_name == "all_reduce") & (d.num_gpus == 2) & (d.nccl_dtype == "half")].sort_values("message_size")
        s, t = d.message_size.to_numpy() * 2.0, d.latency.to_numpy()
        pick = T.protocol("nccl_allreduce", 2, s, bw, "nvlink", name)
        first = int(np.argmax(pick == 2))
        assert first > 0 and (pick[:first] == 0).all() and (pick[first:] == 2).all(), gpu
        growth = t[1:] / t[:-1]
        assert growth[first - 1] >= 1.4, (gpu, s[first], growth[first - 1])
        assert growth[: first - 1].max() < 1.5, (gpu, growth[: first - 1])


def test_vllm_over_pcie_beyond_two_gpus_is_nccl():
    """vLLM disables its custom all-reduce on more than 2 PCIe-only GPUs: the curve's large protocol prices those
    calls even where the kernel's would be cheaper; at 2 GPUs, and over NVLink, the cheaper of the two."""
    c = CollectiveCurve(latency=5e-6, efficiency=0.4, hop=1e-6, latency_large=30e-6, efficiency_large=0.6)
    bw, s = 32e9, 512.0  # PCIe Gen4 x16; a small message the kernel would win
    large = lambda n: 30e-6 + 2 * (n - 1) / n * s / (bw * 0.6 * (2 / n) ** 2)  # noqa: E731  (c = 2 on PCIe)
    for n in (4, 8):
        kernel = 5e-6 + (n - 1) * 1e-6 + (n - 1) * s / (bw * 0.4 * (2 / n) ** 2)  # one-shot
        assert kernel < large(n)
        assert K.seconds("allreduce_vllm", n, s, bw, "pcie", c) == pytest.approx(large(n))
        ring = 5e-6 + 2 * (n - 1) * 1e-6 + 2 * (n - 1) / n * s / (0.375 * bw * 0.4 * (2 / n) ** 2)  # NCCL's LL
        assert K.seconds("allreduce", n, s, bw, "pcie", c) == pytest.approx(ring)  # TensorRT-LLM's: NCCL's
    assert K.seconds("allreduce_vllm", 2, s, bw, "pcie", c) == pytest.approx(5e-6 + 1e-6 + s / (bw * 0.4))
    assert K.seconds("allreduce_vllm", 8, s, 450e9, "nvlink", c) == pytest.approx(
        5e-6 + 7e-6 + 7 * s / (450e9 * 0.4))  # fmt: skip
