"""Hugging Face import of layer stacks: exact parameter counts against transformers' own model classes.

Reference: the model built by ``AutoModelForCausalLM.from_config`` on the meta device (no weights, no download),
summing ``p.numel()`` over its parameters. Configs are the published config.json values (tests/hf_configs.py).
"""

from __future__ import annotations

import json

import hf_configs as H
import pytest

from rooflaw.arch import bundled_models, from_hf_config

CASES = {
    "gemma-3-1b": (H.GEMMA3_1B, {"local": 22, "global": 4}),
    "gemma-2-2b": (H.GEMMA2_2B, {"local": 13, "global": 13}),
    "deepseek-v2-lite": (H.DEEPSEEK_V2_LITE, {"mla": 27}),
    "deepseek-v3": (H.DEEPSEEK_V3, {"mla": 61}),
    "lfm2-350m": (H.LFM2_350M, {"conv": 10, "global": 6}),
    "lfm2-1.2b": (H.LFM2_1_2B, {"conv": 10, "global": 6}),
    "granite-4.0-h-tiny": (H.GRANITE_4_H_TINY, {"ssm": 36, "global": 4}),
    "granite-4.0-h-micro": (H.GRANITE_4_H_MICRO, {"ssm": 36, "global": 4}),
}


def _meta_count(cfg: dict) -> int:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    conf = transformers.AutoConfig.for_model(**cfg)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(conf)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", sorted(CASES))
def test_parameter_count_equals_transformers(name):
    cfg, kinds = CASES[name]
    arch = from_hf_config(cfg, name=name)
    assert arch.params_total == _meta_count(cfg)
    for kind, n in kinds.items():
        assert arch.count(kind) == n, kind


def test_gemma3_pattern_and_window():
    a = from_hf_config(H.GEMMA3_1B)
    assert a.window == 512
    assert [i for i, k in enumerate(a.layer_types) if k == "global"] == [5, 11, 17, 23]
    # an explicit layer_types list (newer configs) wins over the pattern
    types = ["full_attention"] * 26
    assert from_hf_config({**H.GEMMA3_1B, "layer_types": types}).count("global") == 26


def test_deepseek_dense_layers_and_shared_experts():
    a = from_hf_config(H.DEEPSEEK_V2_LITE)
    assert (a.first_dense, a.dense_ffn, a.experts, a.top_k) == (1, 10944, 64, 6)
    assert (a.shared_experts, a.shared_ffn, a.kv_lora_rank, a.rope_dim, a.q_lora_rank) == (2, 1408, 512, 64, 0)
    # active: the dense layer, 26 MoE layers with 6 routed + 2 shared experts, MLA, embeddings and head.
    d, f = 2048, 1408
    mla = d * 16 * 192 + d * 576 + 512 + 512 * 16 * (128 + 128) + 16 * 128 * d
    active = 27 * (mla + 2 * d) + 3 * d * 10944 + 26 * (8 * 3 * d * f + 64 * d) + 2 * 102400 * d + d
    assert a.params_active == active


@pytest.mark.parametrize("name", ["gemma-3-1b", "deepseek-v2-lite", "lfm2-350m"])
def test_bundled_configs(name, tmp_path):
    assert name in bundled_models()
    cfg = CASES[name][0]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert from_hf_config(name) == from_hf_config(path)


def test_unknown_layer_type_is_refused():
    from rooflaw.errors import RooflawError

    with pytest.raises(RooflawError, match="layer_types"):
        from_hf_config({**H.LFM2_350M, "layer_types": ["conv"] * 15 + ["mystery"]})
