"""The MoE family's large-expert DRAM re-read (``kernels/moe.py``: ``_reread_bytes``) in the one assembly
(``constraints/moe_reread.py``): against the family's layer, by hand, and the same in every backend.

The curves' ``moe_reread`` is pinned to :data:`SHARE` (a round share inside the fitted range, 0.12 on Hopper to 1.0
on Blackwell, no architecture's own fit), so these tests do not move with a refit of the catalog. Without the term
the assembly priced these layers at 0.37-0.82 of the family at the session-12 shares (B200 Mixtral-like at 16k tokens:
0.37; docs/kernels-moe-collectives.md). The GP relaxation leaves it out and stays a lower bound.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from fit_helpers import assert_flat_fit_matches
from same_values import assert_same

import rooflaw as rl
import rooflaw.constraints.kernels as KN
from rooflaw.constraints import Workload, evaluate_columns
from rooflaw.constraints import moe_reread as RR
from rooflaw.constraints.kernels import gemm as G
from rooflaw.constraints.kernels import moe as M
from rooflaw.devices import get_device

SHARE = 0.5
OPS = ("ffn_up", "ffn_act", "ffn_down")
_REAL = KN.curves_for


@pytest.fixture
def pin(monkeypatch):
    """``pin(share)``: every device's curves with ``moe_reread`` = share (what the assembly and the family read)."""

    def set_share(share):
        monkeypatch.setattr(KN, "curves_for", lambda dev: dataclasses.replace(_REAL(dev), moe_reread=share))

    return set_share


def _model(E, K, d, i):
    return rl.Architecture(layers=1, d_model=d, heads=d // 128, kv_heads=d // 128, head_dim=128, ffn=i, experts=E,
                           top_k=K, vocab=256)  # fmt: skip


def _prefill(dev, T, E, K, d, i, tiles=False):
    rep = rl.evaluate(_model(E, K, d, i), dev, precision="bf16", engine="tensorrt-llm", batch=T, input_tokens=1,
                      output_tokens=1, tiles=tiles)  # fmt: skip
    return {o.name: o for o in rep.ops if o.phase == "prefill"}


def _assembly(dev, T, E, K, d, i, tiles=False):
    kc = KN.curves_for(dev)
    ops = _prefill(dev, T, E, K, d, i, tiles)
    return sum(ops[n].seconds for n in OPS) + (M.KERNELS * kc.kernel_s + kc.moe_s) * M.cycle_scale(kc, dev)


def _family(dev, T, E, K, d, i):
    rows, touched, padded, _ = M.expected_load(T, E, K, 1, "uniform")
    return float(M.layer_seconds(dev, KN.curves_for(dev), "bfloat16", T, d, i, rows, touched, padded))


# (GPU, (T, E, K, d, i)): one expert's bf16 weights 2-7x the L2 at 4k-16k tokens
LARGE = [("h100-sxm", (4096, 8, 2, 4096, 14336)), ("h100-sxm", (16384, 64, 8, 4096, 8192)),
         ("b200", (16384, 8, 2, 4096, 14336)), ("l40s", (8192, 64, 8, 4096, 8192))]  # fmt: skip


@pytest.mark.parametrize(("dev_id", "shape"), LARGE)
@pytest.mark.parametrize("tiles", [False, True])
def test_large_experts_are_priced_as_the_family(pin, dev_id, shape, tiles):
    dev = get_device(dev_id)
    T, E, K, d, i = shape
    assert 2 <= 3 * d * i * 2 / dev.l2_bytes <= 8
    pin(SHARE)
    fam, asm = _family(dev, *shape), _assembly(dev, *shape, tiles)
    assert 0.95 <= asm / fam <= 1.03
    pin(0.0)  # the assembly without the re-read against the family with it: the gap this term closes
    without = _assembly(dev, *shape, tiles)
    pin(SHARE)
    assert without / fam < 0.9


def test_reread_bytes_by_hand(pin):
    """ffn_up re-reads its gate and up matrices, ffn_down its down matrix, once per token tile beyond each touched
    expert's first (E_cov·(T·K/E_cov/128 − 1/2)), times the share missing the L2 (1 − 1/(1 + (expert/L2)^4))."""
    dev = get_device("h100-sxm")
    T, E, K, d, i = 8192, 8, 2, 4096, 14336
    pin(0.0)
    base = _prefill(dev, T, E, K, d, i)
    pin(SHARE)
    ops = _prefill(dev, T, E, K, d, i)
    cov = E * (1 - (1 - K / E) ** T)
    miss = 1 - 1 / (1 + (3 * d * i * 2 / dev.l2_bytes) ** 4)
    per_matrix = SHARE * cov * (T * K / cov / 128 - 0.5) * d * i * 2 * miss
    assert ops["ffn_up"].bytes - base["ffn_up"].bytes == pytest.approx(2 * per_matrix, rel=1e-9)
    assert ops["ffn_down"].bytes - base["ffn_down"].bytes == pytest.approx(per_matrix, rel=1e-9)
    assert ops["ffn_act"].bytes == base["ffn_act"].bytes
    assert ops["ffn_up"].seconds > base["ffn_up"].seconds


def test_constants_are_the_familys():
    assert RR.TILE == M.TILE_MAX and RR.L2_STEEPNESS == G.L2_STEEPNESS and M.L2_SHARE == 1.0
    # the assembly's operand bytes per linear roof (moe_half_inter's width scale) are the family's where it has them
    from rooflaw.constraints import assembly as A

    assert {k: A.ACT_BYTES[k] for k in M.ACT_BYTES} == M.ACT_BYTES


def test_small_experts_and_few_rows_reread_nothing_to_speak_of(pin):
    """An expert well inside the L2 (Qwen3-30B-A3B-like: 0.19 of H100's) misses it by (0.19)^4: < 0.2 % of the layer;
    a decode batch of 64 tokens routes 16 rows per expert, one tile: no re-read at all."""
    dev = get_device("h100-sxm")
    small = (16384, 128, 8, 2048, 768)
    pin(0.0)
    base_small, base_dec = _assembly(dev, *small), _prefill(dev, 64, 8, 2, 4096, 14336)
    pin(1.0)
    assert _assembly(dev, *small) == pytest.approx(base_small, rel=2e-3)
    dec = _prefill(dev, 64, 8, 2, 4096, 14336)
    assert all(dec[n].seconds == base_dec[n].seconds for n in OPS)


COLS = {"layers": [4, 2], "d_model": [4096, 2048], "heads": [32, 16], "kv_heads": [8, 4], "ffn": [14336, 768],
        "experts": [8, 128], "top_k": [2, 8], "vocab": [32000, 151936]}  # fmt: skip


def test_numba_and_passes_carry_the_reread(pin):
    """The traced numba kernel gives the numpy path's bits with the re-read on (and it moves the prefill), and a
    multi-token pass over an empty cache re-reads as the prefill of as many tokens does."""
    pytest.importorskip("numba")
    from rooflaw.constraints.backend_numba import kernels
    from rooflaw.constraints.passes import pass_table
    from rooflaw.constraints.roofline import complete_columns, stack_kinds

    dev, wl = get_device("b200"), Workload(8, 2048, 4)
    pin(0.0)
    off = evaluate_columns(COLS, dev, wl, "bf16", engine="tensorrt-llm", backend="numpy")
    pin(SHARE)
    a = evaluate_columns(COLS, dev, wl, "bf16", engine="tensorrt-llm", backend="numpy")
    b = evaluate_columns(COLS, dev, wl, "bf16", engine="tensorrt-llm", backend="numba")
    assert_same(a, b)
    assert a["prefill_s"][0] > 1.2 * off["prefill_s"][0]  # Mixtral-like: 2.7x B200's L2 per expert
    cols = complete_columns({k: np.array(v, dtype=float) for k, v in COLS.items()})
    assert {"s_moe_reread", "s_inv_l2"} <= set(kernels("full", kinds=stack_kinds(cols)).scalars)  # run-time scalars
    arch = _model(8, 2, 4096, 14336)
    ops = pass_table(arch, dev, 1, 8192, [0.0], "bf16", engine="tensorrt-llm", per_op=True)["ops"]
    want = _prefill(dev, 8192, 8, 2, 4096, 14336)
    for n in ("ffn_up", "ffn_down"):
        assert ops[n][1][0] == pytest.approx(want[n].bytes, rel=1e-12)


DATA = Path("/work/shared/data/measured/published.csv")


@pytest.mark.skipif(not DATA.is_file(), reason="published.csv not present")
def test_the_efficiency_fit_prices_the_reread_as_the_assembly(pin):
    """The fit's flat arrays and its per-case predictor carry the re-read bytes as evaluate does (the published MoE
    cases on GPUs priced by kernel curves whose op bytes it moves)."""
    from rooflaw.constraints import fit_efficiency as fe
    from rooflaw.constraints.curves_applied import curves_of
    from rooflaw.constraints.published import load_cases

    cases, _ = load_cases(DATA)
    moe = [c for c in cases if c.arch.experts > 1 and not fe.padded(c) and curves_of(fe.case_device(c)) is not None]
    pin(0.0)
    off = [fe._features(c, fe.case_device(c)) for c in moe[:12]]
    pin(1.0)
    on = [fe._features(c, fe.case_device(c)) for c in moe[:12]]
    moved = [i for i, (f, o) in enumerate(zip(on, off, strict=True)) if np.any(f.pre[1] > o.pre[1])]
    assert len(moved) >= 2
    pick, feats = [moe[i] for i in moved[:4]], [on[i] for i in moved[:4]]
    assert_flat_fit_matches(pick, feats, seed=3)


def test_the_gp_relaxation_stays_a_lower_bound_with_the_reread(no_moe_padding):
    """The GP leaves the re-read out (a max): its prefill of the MoE points is the evaluator's without it, at most the
    evaluator's with it, and below it where an expert outgrows Orin's 4 MB L2 at 1024 prompt tokens."""
    from rooflaw.solver import Problem
    from rooflaw.solver.relaxation.gp_full import build_branch

    orin = dataclasses.replace(get_device("jetson-agx-orin-64gb"), achieved={}, sm_count=None)
    assert KN.curves_for(orin).moe_reread > 0  # the shipped Ampere share: the term is on here
    p = Problem("paper-2602.10377", orin, workload=Workload(1, 1024, 8), precision="fp16", latency_budget=0.05)
    cols = p.space.columns_at(np.random.default_rng(0).choice(p.space.size, 120, replace=False))
    ref = evaluate_columns(cols, orin, p.workload, p.precision, "full")
    off = evaluate_columns(cols, dataclasses.replace(orin, l2_bytes=None), p.workload, p.precision, "full")
    c = {k: np.asarray(v, dtype=float) for k, v in cols.items()}
    x = {"l": c["layers"], "d": c["d_model"], "r": c["top_k"] * c["ffn"] / c["d_model"],
         "rho": c["top_k"] / c["experts"], "gqa": c["heads"] / c["kv_heads"]}  # fmt: skip
    below = 0
    for k in np.unique(c["top_k"]):
        m = (c["moe"] == 1) & (c["top_k"] == k)
        if not m.any():
            continue
        v = build_branch(p, "t", float(k), 1, {}).values({a: b[m] for a, b in x.items()})["prefill_s"]
        np.testing.assert_allclose(v, off["prefill_s"][m], rtol=1e-9)
        assert np.all(v <= ref["prefill_s"][m] * (1 + 1e-12))
        below += int(np.sum(v < ref["prefill_s"][m] * (1 - 1e-6)))
    assert below > 0
