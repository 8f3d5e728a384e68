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


def _copy_tree(tmp_path, monkeypatch):
    import shutil
    from pathlib import Path

    from rooflaw import cache

    src = Path(cache.__file__).resolve().parent
    dst = tmp_path / "rooflaw"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.jsonl", "*.json", "*.toml"))
    monkeypatch.setattr(cache, "_ROOT", dst)
    return dst


@pytest.mark.parametrize(
    "edit", ["constraints/compile.py", "constraints/symbols.py", "constraints/operators.py", "arch/architecture.py",
             "solver/kkt.py", "objectives/law.py", "constraints/new_layer_kind.py"],
)  # fmt: skip
def test_an_edit_to_any_deriving_source_changes_every_key(tmp_path, monkeypatch, edit):
    from rooflaw import cache

    dst = _copy_tree(tmp_path, monkeypatch)
    before = {t: cache.source_key(t) for t in ("compile-full", "compile-paper", "theorems-x")}
    # the keys the real callers build (with their extra module arguments) move too
    from rooflaw.constraints import operators

    caller_before = cache.source_key("compile-full", operators)
    f = dst / edit
    f.write_text((f.read_text() if f.exists() else "") + "\n# an edit\n")
    after = {t: cache.source_key(t) for t in before}
    assert all(before[t] != after[t] for t in before), edit
    assert cache.source_key("compile-full", operators) != caller_before


def test_key_is_stable_and_ignores_files_outside_the_deriving_packages(tmp_path, monkeypatch):
    from rooflaw import cache

    dst = _copy_tree(tmp_path, monkeypatch)
    k = cache.source_key("compile-full")
    assert cache.source_key("compile-full") == k
    (dst / "cli" / "evaluate.py").write_text("# the CLI does not feed derivations\n")
    assert cache.source_key("compile-full") == k
    assert {p.parent.name for p in cache.source_files()} >= {"constraints", "arch", "solver", "objectives"}


def test_stale_entry_is_not_served_after_a_source_edit(tmp_path, monkeypatch):
    # end to end: derive and store under the real tree's key, then edit symbols.py in a copy -> miss, re-derive

    monkeypatch.setenv("ROOFLAW_CACHE_DIR", str(tmp_path / "cache"))
    comp.compile_preset.cache_clear()
    comp.compile_preset("paper")
    assert len(list((tmp_path / "cache").glob("compile-paper-*.pkl"))) == 1
    dst = _copy_tree(tmp_path, monkeypatch)
    (dst / "constraints" / "symbols.py").write_text((dst / "constraints" / "symbols.py").read_text() + "\n#\n")
    comp.compile_preset.cache_clear()
    called = []
    real = comp._compile_preset
    monkeypatch.setattr(comp, "_compile_preset", lambda p, *rest: called.append(p) or real(p, *rest))
    comp.compile_preset("paper")
    assert called == ["paper"]
    assert len(list((tmp_path / "cache").glob("compile-paper-*.pkl"))) == 2
    comp.compile_preset.cache_clear()


def test_a_process_whose_sources_changed_after_import_neither_stores_nor_serves(tmp_path, monkeypatch):
    # a process that imported rooflaw and then saw its deriving sources edited runs the old code under keys that
    # hash the new files: it must not write (nor read) entries; simulated by moving the import time before every
    # loaded module's mtime
    import rooflaw
    from rooflaw import cache

    monkeypatch.setenv("ROOFLAW_CACHE_DIR", str(tmp_path))
    key = cache.source_key("probe")
    assert cache.edited_since_import() == []
    cache.store(key, {"x": 1})
    assert cache.load(key) == {"x": 1}
    monkeypatch.setattr(rooflaw, "_IMPORTED_NS", 0)
    edited = cache.edited_since_import()
    assert "rooflaw.constraints.compile" in edited and "rooflaw.cli" not in edited
    assert cache.load(key) is None  # a valid entry is not served
    cache.store(cache.source_key("probe2"), {"y": 2})
    assert not list(tmp_path.glob("probe2-*.pkl"))  # nor is a new one written
