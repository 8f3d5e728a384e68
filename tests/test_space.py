"""Discrete spaces: sizes, rules, enumeration, TOML loading, repair, errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from rooflaw import Architecture, RooflawError, evaluate_columns, get_device
from rooflaw.arch import COLUMNS, Space, get_space, list_spaces


def brute_force_points(space: Space) -> set[tuple]:
    pts = set()
    for layers, d, hd, kv, (e, k), r, v, t in itertools.product(
        space.layers, space.d_model, space.head_dim, space.kv_heads, space.moe, space.r_single, space.vocab, space.tied
    ):
        if d % hd or k > e:
            continue
        h = d // hd
        kvv = h if kv == "heads" else kv
        if h % kvv:
            continue
        ffn = max(space.ffn_align, round(r * d / space.ffn_align) * space.ffn_align)
        pts.add((layers, d, h, kvv, hd, ffn, e, k, v, int(t)))
    return pts


def test_builtins_listed():
    assert {"paper", "wide"} <= set(list_spaces())


def test_paper_space_matches_table5():
    s = get_space("paper")
    assert s.name == "paper"
    assert s.values("layers") == [4, 8, 12, 16, 20, 24, 28, 32]
    assert s.values("d_model") == [768, 1024, 1280, 1536, 1792, 2048, 2304, 2560, 3072]
    assert s.values("moe") == [(1, 1), (8, 1), (8, 2), (16, 1), (16, 2)]
    assert s.values("head_dim") == [128]
    assert s.vocab == [32000] and s.tied == [False]
    # kv_heads ∈ {1,2,4,8,heads} restricted to divisors of heads = d/128, duplicates (8 = heads) counted once
    assert s.size == 8 * 34 * 5 * 5 == 6800
    assert s.size == len(brute_force_points(s))
    b = s.bounds()
    assert b["l"] == (4, 32) and b["d"] == (768, 3072) and b["rho"] == (1 / 16, 1.0) and b["gqa"] == (1.0, 24.0)
    assert b["r"] == (0.5, 8.0)


def test_wide_space_is_large():
    assert get_space("wide").size >= 10**7


def test_enumeration_equals_brute_force():
    s = Space(
        name="t",
        layers=[2, 3],
        d_model=[192, 256, 320],
        head_dim=[64, 96],
        kv_heads=[1, 2, 3, "heads"],
        moe=[(1, 1), (4, 2), (2, 4)],
        r_single=[0.5, 1.0, 1.01, 2.7],
        vocab=[100, 200],
        tied=[False, True],
        ffn_align=32,
    )
    df = s.to_frame()
    got = set(
        map(
            tuple,
            df[["layers", "d_model", "heads", "kv_heads", "head_dim", "ffn", "experts", "top_k", "vocab", "tied"]]
            .to_numpy()
            .tolist(),
        )
    )
    assert got == brute_force_points(s)
    assert len(df) == s.size == len(got)  # no duplicates
    chunks = list(s.iter_chunks(chunk=7))
    assert sum(len(c["layers"]) for c in chunks) == s.size
    assert all(set(c) == set(COLUMNS) for c in chunks)
    cat = {k: np.concatenate([c[k] for c in chunks]) for k in COLUMNS}
    assert np.array_equal(cat["d_model"], df["d_model"].to_numpy())
    part = list(s.iter_chunks(chunk=5, start=3, stop=11))
    assert np.array_equal(np.concatenate([c["ffn"] for c in part]), df["ffn"].to_numpy()[3:11])


def test_chunks_feed_the_cost_model_and_contains():
    s = get_space("paper")
    cols = next(s.iter_chunks(chunk=1000))
    res = evaluate_columns(cols, get_device("h100-sxm"))
    assert np.all(res["decode_s"] > 0)
    row = {k: v[17] for k, v in cols.items()}
    arch = s.architecture(row)
    assert s.contains(arch)
    assert arch.params_total == pytest.approx(res["params_total"][17])
    assert not s.contains(arch.replace(layers=5))
    assert not s.contains(arch.replace(gated=False))
    assert not s.contains(Architecture(layers=4, d_model=768, heads=6, kv_heads=3, ffn=768))


def test_point_repairs_invalid_choices():
    s = get_space("paper")
    p = s.point({"layers": 8, "d_model": 768, "head_dim": 128, "kv_heads": 8, "moe": (8, 2), "r_single": 2.0})
    # heads = 6: kv 8 is invalid -> nearest valid divisor in log scale among {1, 2, 6}
    assert p["heads"] == 6 and p["kv_heads"] == 6
    q = s.point({"layers": 8, "d_model": 768, "head_dim": 128, "kv_heads": "heads", "moe": (8, 2), "r_single": 2.0})
    assert q["index"] == p["index"]
    cols = s.columns_at(np.array([p["index"]]))
    assert all(int(cols[k][0]) == p[k] for k in COLUMNS)


def test_toml_space(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text(
        "layers = {start = 2, stop = 6, step = 2}\nd_model = [256, 512]\nhead_dim = [64]\n"
        'kv_heads = [1, "heads"]\nmoe = [[1, 1], [4, 1]]\nr_single = [1, 4]\n'
    )
    s = get_space(str(f))
    assert s.name == "mine"
    assert s.size == 3 * 2 * 2 * 2 * 2


def test_bad_spaces(tmp_path):
    with pytest.raises(RooflawError, match="empty after its rules"):
        Space(name="x", layers=[2], d_model=[768], head_dim=[128], kv_heads=[4, 16], moe=[(1, 1)], r_single=[1])
    with pytest.raises(RooflawError, match="empty"):
        Space(name="x", layers=[2], d_model=[768], head_dim=[128], kv_heads=[1], moe=[(2, 4)], r_single=[1])
    with pytest.raises(RooflawError, match="no such built-in space"):
        get_space("nonexistent")
    f = tmp_path / "bad.toml"
    f.write_text("layers = [1]\nfoo = 3\n")
    with pytest.raises(RooflawError, match="unknown key"):
        get_space(str(f))
    f.write_text("layers = [")
    with pytest.raises(RooflawError, match="not valid TOML"):
        get_space(str(f))
    with pytest.raises(RooflawError, match="positive integer"):
        Space(name="x", layers=[0], d_model=[768], head_dim=[128], kv_heads=[1], moe=[(1, 1)], r_single=[1])


def test_fixed_columns_are_read_only_broadcasts_with_the_architectures_values():
    """Columns a space holds fixed come back as stride-0 read-only views (no memory per point; the numba row
    kernel reads them once), with the values each point's own Architecture gives."""
    s = Space(name="t", layers=[2, 3], d_model=[192, 256], head_dim=[64], kv_heads=[1, "heads"],
              moe=[(1, 1), (4, 2)], r_single=[1.0, 2.0], vocab=[100], tied=[False, True])  # fmt: skip
    idx = np.arange(s.size)
    for dtype in (np.int64, np.float64):
        cols = s.columns_at(idx, dtype)
        fixed = {k for k, v in cols.items() if v.strides == (0,)}
        assert {"vocab", "shared_experts", "layernorm", "qk_norm_size", "shared_gate", "qk_norm_on"} <= fixed
        assert {"layers", "d_model", "tied", "experts"}.isdisjoint(fixed)  # tied takes two values here
        for k in fixed:
            assert cols[k].dtype == dtype and len(cols[k]) == s.size and not cols[k].flags.writeable
            with pytest.raises(ValueError, match="read-only"):
                cols[k][0] = 1
        for i in (0, 5, s.size - 1):
            ref = s.architecture({k: int(v[i]) for k, v in cols.items()}).columns()
            assert {k: int(cols[k][i]) for k in COLUMNS} == {k: int(ref[k]) for k in COLUMNS}
    assert s.columns_at(np.arange(0), np.float64)["vocab"].shape == (0,)


def test_uniform_stack_counts_are_the_layers_column_itself():
    """complete_columns skips subtracting a broadcast +0.0 (x − 0.0 is x bit for bit) and stack_kinds skips comparing
    a column with itself: no copies or passes for a uniform stack, the same columns and kinds as the arithmetic."""
    from rooflaw.constraints.roofline import complete_columns, stack_kinds

    cols = get_space("paper").columns_at(np.arange(50), np.float64)
    cols["layers"] = np.array(cols["layers"])
    cols["layers"][3] = -0.0  # the subtraction of +0.0 keeps −0.0: the shortcut must too
    full = complete_columns(cols)
    for k in ("attn_layers", "ffn_layers"):
        assert np.shares_memory(full[k], full["layers"])
        ref = cols["layers"] - 0.0 - 0.0
        assert ref.tobytes() == np.ascontiguousarray(full[k]).tobytes()
    assert stack_kinds(full) == frozenset()
    # a −0.0 or non-zero count of another kind is subtracted as written
    for mla, expect in ((-0.0, frozenset()), (1.0, frozenset({"mla"}))):
        full = complete_columns({**cols, "mla_layers": np.full(50, mla)})
        assert not np.shares_memory(full["attn_layers"], full["layers"])
        assert np.array_equal(full["attn_layers"], cols["layers"] - mla - 0.0)
        assert stack_kinds(full) == expect
    two = complete_columns({**cols, "ffn_layers": cols["layers"] - (np.arange(50) % 2)})
    assert stack_kinds(two) == frozenset({"stack"})


@pytest.mark.parametrize("align", [0, -64, 2**31, 10**20, True, 64.0])
def test_ffn_align_outside_a_positive_int32_is_a_one_line_error(align):
    """Hypothesis found ``ffn_align = 99999999999999999999`` raising numpy's OverflowError in the FFN rounding."""
    with pytest.raises(RooflawError, match=r"^ffn_align=.*must be a positive integer ≤ 2147483647"):
        Space(name="s", layers=[2], d_model=[256], head_dim=[64], kv_heads=[1], moe=[(1, 1)], r_single=[2.0],
              ffn_align=align)  # fmt: skip
