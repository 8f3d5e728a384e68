"""Energy of one request computed by hand: idle power × wall time + the dynamic power split between
compute-busy and memory-busy time (the ``full`` preset's documented model):

    E = P_idle · T_total + (P_peak − P_idle) · (w · Σ FLOPs/π_roof + (1 − w) · Σ bytes/β),  w = 0.5

with the busy times on the *raw* peaks (efficiency factors slow the clock, not the work), or, when a
device gives J/FLOP and J/byte, E = P_idle · T_total + e_F · FLOPs + e_B · bytes.

Model, precision and per-class FLOP/byte totals are the hand table of ``test_ref_hand_table.py``
(l=2, d=64, heads=4, kv_heads=2, ffn=128, vocab=100; B=2, S_in=8, S_out=1; w=fp32,a=fp8,kv=fp16,
so linear layers run on the fp32 roof, QKᵀ/·V on fp16, vector ops on fp32):
- prefill FLOPs: linear 262144+131072+131072+262144+1048576+524288+25600 = 2384896,
  attention 2·32768 = 65536, vector 10240+10240+18432+5120+20480+4096 = 68608; bytes 488992
  (sum of the table's byte column, the fp8 activations' quantise kernels' 12288 + 18432 included);
- decode step 1 (C = 9) FLOPs: linear 32768+16384+16384+32768+131072+65536+25600 = 320512,
  attention 2·2·256·9 = 9216, vector 1280+1280+2304+80·9+2560+512 = 8656; bytes 347168 (quantise 1536 + 2304).
"""

from __future__ import annotations

import dataclasses

import pytest

from rooflaw import Architecture, Device, Workload, evaluate

A = Architecture(layers=2, d_model=64, heads=4, kv_heads=2, ffn=128, vocab=100)
PREC = "w=fp32,a=fp8,kv=fp16"
WL = Workload(2, 8, 1, "unfused")
LIN = 2384896 + 320512
ATT = 65536 + 9216
VEC = 68608 + 8656
BYTES = 488992 + 347168  # = 836160


def test_memory_bound_device_energy_by_hand():
    # π_fp32 = 1e14, π_fp16 = 2e14, β = 1e12: every operator's intensity (≤ 7.5 FLOP/B) sits far
    # below the ridge (100), so each takes bytes/β and the wall time is Σ bytes/β.
    dev = Device("toy-mem", "toy", {"fp32": 1e14, "fp16": 2e14}, 1e12, 1e12, power_idle=10.0, power_peak=50.0)
    rep = evaluate(A, dev, WL, PREC, engine="device")
    assert rep.prefill_s == pytest.approx(488992e-12, rel=1e-12)
    assert rep.decode_s == pytest.approx(347168e-12, rel=1e-12)
    T = 836160e-12
    busy_c = LIN / 1e14 + ATT / 2e14 + VEC / 1e14  # = 2820048e-14 s
    assert busy_c == pytest.approx(2820048e-14, rel=1e-15)
    busy_m = 836160e-12
    # 10 W · 8.3616e-7 s + 40 W · (0.5 · 2.820048e-8 + 0.5 · 8.3616e-7) s = 8.3616e-6 + 1.72872096e-5 J
    assert rep.energy_j == pytest.approx(2.56488096e-5, rel=1e-12)
    assert rep.energy_j == pytest.approx(10 * T + 40 * (0.5 * busy_c + 0.5 * busy_m), rel=1e-12)


def test_compute_bound_device_energy_by_hand():
    # π = 1e9 for both roofs, β = 1e15: every operator with FLOPs is compute-bound; the embedding
    # and the fp8 quantise kernels (no FLOPs) still move their 5120 + 640 and 30720 + 3840 bytes at 1e15 B/s.
    dev = Device("toy-cmp", "toy", {"fp32": 1e9, "fp16": 1e9}, 1e15, 1e12, power_idle=10.0, power_peak=50.0)
    rep = evaluate(A, dev, WL, PREC, engine="device")
    T = (2519040 + 338384) * 1e-9 + (5760 + 34560) * 1e-15
    assert rep.total_s == pytest.approx(T, rel=1e-12)
    busy_c = (LIN + ATT + VEC) / 1e9  # 2857424e-9 s
    busy_m = BYTES / 1e15
    # 10 · 2.85742404032e-3 + 40 · (0.5 · 2.857424e-3 + 0.5 · 8.3616e-10)
    assert rep.energy_j == pytest.approx(0.0857227371264, rel=1e-11)
    assert rep.energy_j == pytest.approx(10 * T + 40 * (0.5 * busy_c + 0.5 * busy_m), rel=1e-12)


def test_efficiencies_stretch_idle_time_but_not_busy_time():
    dev = Device(
        "toy-eff", "toy", {"fp32": 1e14, "fp16": 2e14}, 1e12, 1e12,
        power_idle=10.0, power_peak=50.0, compute_efficiency=0.5, memory_efficiency=0.8,
    )  # fmt: skip
    rep = evaluate(A, dev, WL, PREC, engine="device")
    T = 836160e-12 / 0.8  # memory-bound at 80 % of the bandwidth (the ridge only moves to 62.5)
    assert rep.total_s == pytest.approx(T, rel=1e-12)
    # busy times on the raw roofs, as in the memory-bound case: 10 · 1.0452e-6 + 1.72872096e-5
    assert rep.energy_j == pytest.approx(1.0452e-5 + 1.72872096e-5, rel=1e-12)


def test_energy_per_flop_and_per_byte_replace_the_power_split():
    dev = Device(
        "toy-epf", "toy", {"fp32": 1e14, "fp16": 2e14}, 1e12, 1e12,
        power_idle=10.0, power_peak=50.0, energy_per_flop=1e-12, energy_per_byte=1e-10,
    )  # fmt: skip
    rep = evaluate(A, dev, WL, PREC, engine="device")
    # 10 W · 8.3616e-7 s + 1e-12 · 2857424 + 1e-10 · 836160 = 8.3616e-6 + 2.857424e-6 + 8.3616e-5
    assert rep.energy_j == pytest.approx(9.4835024e-5, rel=1e-12)
    no_power = dataclasses.replace(dev, power_idle=None, power_peak=None)
    e = evaluate(A, no_power, WL, PREC, engine="device").energy_j
    assert e == pytest.approx(2.857424e-6 + 8.3616e-5, rel=1e-12)
