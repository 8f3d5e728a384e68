"""Architectures: exact parameter counts of real models (published totals), parsing and validation."""

import json

import numpy as np
import pytest
import sympy as sp

from rooflaw.arch import Architecture, from_file, from_hf_config, from_spec, param_counts
from rooflaw.errors import RooflawError

# Published totals (Hugging Face model cards / safetensors metadata) and active counts.
PUBLISHED = {
    "qwen2.5-0.5b": (494_032_768, 494_032_768),
    "qwen2.5-1.5b": (1_543_714_304, 1_543_714_304),
    "llama-3.2-1b": (1_235_814_400, 1_235_814_400),
    "smollm2-360m": (361_821_120, 361_821_120),
    "qwen3-0.6b": (596_049_920, 596_049_920),
    "gemma-2b": (2_506_172_416, 2_506_172_416),
    "phi-3-mini": (3_821_079_552, 3_821_079_552),
    "mixtral-8x7b": (46_702_792_704, 12_879_925_248),
    "olmoe-1b-7b": (6_919_161_856, 1_282_017_280),
    "qwen1.5-moe-a2.7b": (14_315_784_192, 2_689_173_504),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_bundled_config_parameter_counts_are_exact(name):
    a = from_hf_config(name)
    assert (a.params_total, a.params_active) == PUBLISHED[name]


def test_issue_spec_string_qwen():
    a = from_spec(
        "layers=24,d_model=896,heads=14,kv_heads=2,head_dim=64,ffn=4864,vocab=151936,tied=true,"
        "experts=1,top_k=1,qkv_bias=true"
    )
    assert a.params_total == 494_032_768
    assert a.gqa == 7 and a.d_m == 128 and a.rho == 1
    assert a.r == pytest.approx(4864 / 896)


def test_llama_keyword_args():
    a = Architecture(layers=16, d_model=2048, heads=32, kv_heads=8, ffn=8192, vocab=128256, tied=True)
    assert a.params_total == 1_235_814_400
    assert a.head_dim == 64


def test_spec_round_trip_and_files(tmp_path):
    a = from_hf_config("olmoe-1b-7b")
    b = from_spec(a.spec())
    assert b == a
    (tmp_path / "a.json").write_text(json.dumps(a.to_dict()))
    assert from_file(tmp_path / "a.json") == a
    (tmp_path / "a.toml").write_text("\n".join(f"{k} = {json.dumps(v)}" for k, v in a.to_dict().items()))
    assert from_file(tmp_path / "a.toml") == a
    # a HF config passed as a file path is recognised by its model_type
    cfg = tmp_path / "config.json"
    cfg.write_text(
        json.dumps(
            {
                "model_type": "llama",
                "hidden_size": 2048,
                "num_hidden_layers": 16,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "intermediate_size": 8192,
                "vocab_size": 128256,
                "tie_word_embeddings": True,
            }
        )
    )
    assert from_file(cfg).params_total == 1_235_814_400


def test_moe_paper_variables():
    a = Architecture(layers=12, d_model=2048, heads=16, kv_heads=4, ffn=1024, experts=16, top_k=2)
    assert a.r == pytest.approx(1.0)
    assert a.rho == pytest.approx(0.125)
    assert a.gqa == 4


def test_param_counts_vectorised_and_symbolic_agree():
    archs = [from_hf_config(n) for n in PUBLISHED]
    cols = {k: np.array([a.columns()[k] for a in archs], dtype=float) for k in archs[0].columns()}
    tot = param_counts(cols)["total"]
    assert np.array_equal(tot, [a.params_total for a in archs])
    syms = {k: sp.Symbol(k, positive=True) for k in archs[0].columns()}
    expr = param_counts(syms)["total"]
    for a in archs[:3]:
        assert int(expr.subs({syms[k]: v for k, v in a.columns().items()})) == a.params_total


@pytest.mark.parametrize(
    "spec, field",
    [
        ("layers=2,d_model=100,heads=3", "heads"),
        ("layers=2,d_model=96,heads=6,kv_heads=4", "kv_heads"),
        ("layers=2,d_model=96,heads=6,experts=4,top_k=5", "top_k"),
        ("layers=0,d_model=96,heads=6", "layers"),
        ("layers=2,d_model=-96,heads=6", "d_model"),
        ("layers=2,d_model=96,heads=6,tied=maybe", "tied"),
        ("layers=2,d_model=96,heads=6,colour=red", "colour"),
        ("layers=2,heads=6", "d_model"),
    ],
)
def test_bad_specs_name_the_field(spec, field):
    with pytest.raises(RooflawError) as e:
        from_spec(spec)
    msg = str(e.value)
    assert field in msg and "\n" not in msg


def test_explicit_head_dim_need_not_divide():
    # Qwen3/Gemma set head_dim explicitly; heads·head_dim may differ from d_model.
    a = from_hf_config("qwen3-0.6b")
    assert a.heads * a.head_dim == 2048 != a.d_model


def test_hf_errors():
    with pytest.raises(RooflawError, match="model_type"):
        from_hf_config({"model_type": "gpt2", "hidden_size": 8})
    with pytest.raises(RooflawError, match="num_attention_heads"):
        from_hf_config(
            {
                "model_type": "llama",
                "hidden_size": 64,
                "num_hidden_layers": 2,
                "vocab_size": 10,
                "intermediate_size": 128,
            }
        )
    with pytest.raises(RooflawError, match="no such file"):
        from_hf_config("/nonexistent/config.json")
