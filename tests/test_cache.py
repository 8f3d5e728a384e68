"""The on-disk cache of generated evaluator code and derivations never changes a result."""

import numpy as np
import pytest

from rooflaw import evaluate_columns, get_device
from rooflaw.constraints import compile as comp


@pytest.mark.parametrize("preset", ["full", "paper"])
def test_cached_evaluator_equals_a_fresh_compile(tmp_path, monkeypatch, preset):
    monkeypatch.setenv("ROOFLAW_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(3)
    n = 500
    heads = rng.choice([4, 8, 16], n)
    cols = {
        "layers": rng.integers(1, 40, n),
        "d_model": heads * 128,
        "heads": heads,
        "head_dim": np.full(n, 128),
        "kv_heads": heads // rng.choice([1, 2, 4], n),
        "ffn": rng.integers(1, 40, n) * 128,
        "experts": rng.choice([1, 8, 16], n),
        "top_k": rng.choice([1, 2], n),
        "vocab": np.full(n, 32000),
    }
    cols["top_k"] = np.minimum(cols["top_k"], cols["experts"])
    dev = get_device("jetson-agx-orin-64gb")
    comp.compile_preset.cache_clear()
    fresh = evaluate_columns(cols, dev, preset=preset)  # derives and stores
    assert list(tmp_path.glob(f"compile-{preset}-*.pkl"))
    comp.compile_preset.cache_clear()
    monkeypatch.setattr(comp, "_compile_preset", lambda *a: pytest.fail("should load from the disk cache"))
    cached = evaluate_columns(cols, dev, preset=preset)
    for k in fresh:
        assert np.array_equal(fresh[k], cached[k]), k
    comp.compile_preset.cache_clear()


def test_broken_cache_entry_is_recomputed(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFLAW_CACHE_DIR", str(tmp_path))
    comp.compile_preset.cache_clear()
    comp.compile_preset("paper")
    for f in tmp_path.glob("compile-paper-*.pkl"):
        f.write_bytes(b"not a pickle")
    comp.compile_preset.cache_clear()
    assert comp.compile_preset("paper").names == ("attn_proj", "ffn", "kv_cache")
    comp.compile_preset.cache_clear()
