"""Collectives (α–β) against hand formulas and a byte-counting simulation of the ring algorithm; systems catalog."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rooflaw.constraints.parallel import collectives as C
from rooflaw.devices.system import get_system, system_catalog
from rooflaw.errors import RooflawError


def ring_all_reduce_sim(data: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Run the ring all-reduce on n ranks' vectors; return the result, bytes each rank sent, and steps."""
    n, m = data.shape
    chunks = np.array_split(np.arange(m), n)
    buf = data.astype(float).copy()
    sent = np.zeros(n)
    steps = 0
    for s in range(n - 1):  # reduce-scatter
        new = buf.copy()
        for r in range(n):
            c = chunks[(r - s) % n]
            new[(r + 1) % n, c] += buf[r, c]
            sent[r] += c.size * buf.itemsize
        buf, steps = new, steps + 1
    for s in range(n - 1):  # all-gather
        new = buf.copy()
        for r in range(n):
            c = chunks[(r + 1 - s) % n]
            new[(r + 1) % n, c] = buf[r, c]
            sent[r] += c.size * buf.itemsize
        buf, steps = new, steps + 1
    return buf, sent, steps


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_ring_all_reduce_moves_2_n_minus_1_over_n(n):
    rng = np.random.default_rng(n)
    data = rng.integers(0, 100, size=(n, 96 * n)).astype(float)
    out, sent, steps = ring_all_reduce_sim(data)
    assert np.array_equal(out, np.broadcast_to(data.sum(0), out.shape))  # the simulation is a real all-reduce
    S = data[0].nbytes
    assert np.allclose(sent, 2 * (n - 1) / n * S)
    assert steps == 2 * (n - 1)
    bw, alpha = 100e9, 3e-6
    assert C.ring_all_reduce(S, n, bw, alpha) == pytest.approx(steps * alpha + sent[0] / bw, rel=1e-12)


def test_hand_formulas():
    S, n, bw, a = 64e6, 8, 450e9, 2e-6
    assert C.all_gather(S, n, bw, a) == pytest.approx(7 * a + 7 / 8 * S / bw)
    assert C.reduce_scatter(S, n, bw, a) == pytest.approx(7 * a + 7 / 8 * S / bw)
    assert C.all_to_all(S, n, bw, a) == pytest.approx(a + 7 / 8 * S / bw)  # all peers at once over the switch
    assert C.tree_all_reduce(S, n, bw, a) == pytest.approx(2 * 3 * a + 2 * S / bw)
    assert C.point_to_point(S, bw, a) == pytest.approx(a + S / bw)
    assert C.ring_all_reduce(S, 1, bw, a) == 0 and C.all_to_all(S, 1, bw, a) == 0
    # auto = the faster algorithm: tree for small messages (latency), ring for large (bandwidth)
    small, large = 1e3, 1e9
    assert C.flat_all_reduce(small, n, bw, a) == pytest.approx(C.tree_all_reduce(small, n, bw, a))
    assert C.flat_all_reduce(large, n, bw, a) == pytest.approx(C.ring_all_reduce(large, n, bw, a))
    sizes = np.array([small, large])
    assert np.allclose(
        C.flat_all_reduce(sizes, n, bw, a),
        np.minimum(C.tree_all_reduce(sizes, n, bw, a), C.ring_all_reduce(sizes, n, bw, a)),
    )


def test_hierarchical_all_reduce_across_nodes(monkeypatch):
    # the system file's alpha-beta arithmetic (what a system of GPUs without kernel curves gets); the fitted-curve
    # path is pinned by hand in test_kernel_collectives.py
    monkeypatch.setattr(C, "system_curves", lambda system: None)
    sys16 = get_system("h100-sxm:16")
    assert sys16.node_size == 8 and sys16.nodes == 2
    S = 256e6
    up, a_up, out, a_out = sys16.link_bw, sys16.link_latency, sys16.scale_out_bw, sys16.scale_out_latency
    hand = (
        (7 * a_up + 7 / 8 * S / up)
        + min(2 * a_out + S / 8 / out, 2 * a_out + 2 * S / 8 / out)
        + (7 * a_up + 7 / 8 * S / up)
    )
    assert C.all_reduce(S, 16, sys16, "auto") == pytest.approx(hand)
    # inside one node it is the flat collective on the NVLink figures
    assert C.all_reduce(S, 8, sys16, "ring") == pytest.approx(14 * a_up + 14 / 8 * S / up)
    # an all-to-all over 16 ranks: 7 peers over NVLink, 8 over the network, S/16 each
    assert C.all_to_all_sys(S, 16, sys16) == pytest.approx(a_up + 7 * S / 16 / up + a_out + 8 * S / 16 / out)


def test_catalog_systems_and_specs():
    cat = system_catalog()
    for sid in (
        "hgx-a100",
        "hgx-h100",
        "hgx-h200",
        "hgx-b200",
        "gb200-nvl72",
        "gb300-nvl72",
        "l4-pcie-8",
        "rtx4090-pcie-8",
        "jetson-orin-pair",
    ):
        assert sid in cat and cat[sid]["source"].startswith("https://")
        s = get_system(sid)
        assert s.count == cat[sid]["count"] and s.link_bw > 0
    h = get_system("h100-sxm:8")
    assert (h.count, h.node_size, h.link_bw) == (8, 8, 450e9)  # NVLink 4: 900 GB/s total = 450 each way
    assert get_system("a100-sxm-80gb:8").link_bw == 300e9 and get_system("b200:8").link_bw == 900e9
    assert get_system("gb200:72").node_size == 72
    j = get_system("jetson-agx-orin-64gb:2")
    assert j.node_size == 1 and j.scale_out_bw == 1.25e9 and j.spans_nodes(2)
    assert math.isclose(get_system("hgx-h100:4").count, 4)


def test_system_file(tmp_path):
    p = tmp_path / "box.toml"
    p.write_text(
        'device = "l4"\ncount = 4\nnode_size = 4\nlink_gbs = 32\nlink_latency_us = 10\n'
        "scale_out_gbs = 1.25\nscale_out_latency_us = 50\n"
    )
    s = get_system(str(p))
    assert (s.count, s.device.id, s.link_bw) == (4, "l4", 32e9)
    p.write_text(
        'device = "l4"\ncount = 4\nnode_size = 4\nlink_gbs = -1\nlink_latency_us = 10\n'
        "scale_out_gbs = 1\nscale_out_latency_us = 5\n"
    )
    with pytest.raises(RooflawError, match="link_gbs"):
        get_system(str(p))


@pytest.mark.parametrize(
    "spec, word",
    [("h100-sxm:0", "count"), ("h100-sxm:x", "count"), ("mi300x:8", "interconnect"), ("nope.toml", "no such file")],
)
def test_bad_systems(spec, word):
    with pytest.raises(RooflawError, match=word):
        get_system(spec)
