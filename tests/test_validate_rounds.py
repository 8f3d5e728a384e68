"""`validate` and `calibrate` sample in rounds: the figures come from the best sample of every timer, and every
round samples each config and the calibration once, in a shuffled order.

The figures are checked against a machine whose timers follow known physical curves (a GEMM rate curve in M,
a GEMV bandwidth curve in K in fp32 and bf16, a per-kernel overhead): the session must recover them from the
synthetic best times. The rounds are checked with recording stand-ins for the benches and the session.
"""

import math

import pytest

from rooflaw import validate as v
from rooflaw.devices import calibrate_session as cs
from rooflaw.devices import calibrate_torch as ct


def _session_with_bests(R=7e10, h=25.0, beta=1.8e10, k32=700.0, beta16=9e9, k16=90.0, ovh=1.1e-5, kernels=38.0):
    """A Session (no setup) whose best times are those of a machine with the given figures."""
    s = object.__new__(cs.Session)
    s.capacity, s.threads, s.n = 1e10, 1, 1024
    s.src = type("A", (), {"nbytes": 256e6})()
    s.va = type("A", (), {"size": 1 << 17})()
    s.torch = cs._TorchSetup(weights={}, probe=(None, None, None, None), kernels=kernels)
    N, K = ct.PROBE_N, ct.PROBE_K

    def gemm_t(rows):  # one weight: 2·rows·N·K FLOPs at R·M/(M + h)
        return 2.0 * rows * N * K / (R * rows / (rows + h))

    def gemv_t(k, b, bw, kh):  # one token, N×k weights of b bytes, bytes/s ∝ k/(k + k½) with bw at K = 1024
        return b * N * k / (bw * (k / (k + kh)) / (K / (K + kh)))

    lo, hi = ct.PROBE_DEPTHS
    layer = ovh * kernels + ct.PROBE_LAYER_BYTES / beta
    s.best = {
        "gemm": 2.0 * 1024**3 / 1e11, "copy": 2 * 256e6 / 3e10, "sum": 256e6 / 2e10, "vector": 8.0 * (1 << 17) / 5e9,
        ("float32", K, 128): gemm_t(128), ("float32", K, 16): gemm_t(16), ("float32", K, 32): gemm_t(32),
        ("float32", K, 1): gemv_t(K, 4, beta, k32), ("float32", K // 2, 1): gemv_t(K // 2, 4, beta, k32),
        ("bfloat16", K, 1): gemv_t(K, 2, beta16, k16), ("bfloat16", K // 2, 1): gemv_t(K // 2, 2, beta16, k16),
        ("bfloat16", K, 128): 2.0 * 128 * N * K / 1e10,
        "probe_lo": 1e-3 + lo * layer, "probe_hi": 1e-3 + hi * layer,
    }  # fmt: skip
    return s


def test_session_figures_recover_the_machine(monkeypatch):
    monkeypatch.setattr(cs.Session, "_threads_used", lambda self: 1)
    m = _session_with_bests().measurements("cpu")
    R, h = 7e10, 25.0
    assert m.torch_gemm_flops == pytest.approx(R * 128 / (128 + h), rel=1e-12)
    assert m.gemm_half_rows == pytest.approx(h, rel=1e-9)
    assert m.gemv_bandwidth == pytest.approx(1.8e10, rel=1e-12) and m.gemv_half_k == pytest.approx(700.0, rel=1e-9)
    assert m.gemv16_bandwidth == pytest.approx(9e9, rel=1e-12) and m.gemv16_half_k == pytest.approx(90.0, rel=1e-9)
    assert m.gemm16_flops == pytest.approx(1e10, rel=1e-12)
    assert m.op_overhead == pytest.approx(1.1e-5, rel=1e-9)
    assert m.gemm_flops == pytest.approx(1e11) and m.memory_bandwidth == pytest.approx(3e10)
    assert m.vector_flops == pytest.approx(5e9) and m.clock == "cpu"


def test_a_sample_keeps_only_improvements():
    s = object.__new__(cs.Session)
    s.best, s.wall = {}, {}
    calls = []
    s._sample("t", lambda: calls.append(1), 0.0)  # at least one call after the sizing warm-up
    first = s.best["t"]
    assert len(calls) == 2 and first > 0 and "t" in s.wall
    s._keep("t", first * 10)
    assert s.best["t"] == first
    s._keep("t", first / 10)
    assert s.best["t"] == first / 10


class _Recorder:
    def __init__(self, log, name):
        self.log, self.name = log, name

    def sample(self, seconds=None):
        self.log.append((self.name, seconds))


@pytest.mark.parametrize("quick", [True, False])
def test_rounds_sample_each_config_and_the_calibration_once_per_round_in_shuffled_orders(quick, monkeypatch):
    mode = "quick" if quick else "full"
    lo, hi, _, cal = v.ROUNDS[mode]
    monkeypatch.setitem(v.ROUNDS, mode, (lo, hi, 0.0, cal))  # no time budget: exactly the minimum rounds
    log: list = []
    benches = {n: _Recorder(log, n) for n in ("a", "b", "c", "d")}
    rounds = v._rounds(benches, _Recorder(log, "calibration"), mode, lambda step, frac: None)
    assert rounds == lo and len(log) == 5 * lo
    per_round = [log[5 * r : 5 * r + 5] for r in range(lo)]
    for items in per_round:
        assert sorted(n for n, _ in items) == ["a", "b", "c", "calibration", "d"]
        assert all(sec == pytest.approx(cal / lo) for n, sec in items if n == "calibration")
    assert len({tuple(n for n, _ in items) for items in per_round}) > 1  # the order changes between rounds
    # seeded: the same orders again
    log2: list = []
    v._rounds({n: _Recorder(log2, n) for n in "abcd"}, _Recorder(log2, "calibration"), mode, lambda s, f: None)
    assert [n for n, _ in log2] == [n for n, _ in log]


def test_rounds_continue_while_the_budget_lasts_up_to_the_maximum(monkeypatch):
    monkeypatch.setitem(v.ROUNDS, "quick", (2, 4, math.inf, 1.0))
    log: list = []
    assert v._rounds({"a": _Recorder(log, "a")}, None, "quick", lambda s, f: None) == 4
    assert [n for n, _ in log] == ["a"] * 4


def test_best_and_median_of_the_samples():
    t = v._timing([(3.0, 2.0), (1.0, 0.9), (2.0, 1.5)], n=2)
    assert (t.best_s, t.median_s, t.cpu_s) == (0.5, 1.0, 0.45)
    assert t.spread == pytest.approx(1.0)
