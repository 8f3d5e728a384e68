"""Checks on numbers read from files (Hugging Face ``config.json``, architecture files): a value
where an integer goes must be a true integer -- never truncated (896.7), never a boolean, a string,
a list, NaN or an overflowed 1e400 -- and a count that has to be positive is refused when it is 0."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import bad

#: Largest integer accepted from a file (a 2**31 layer count or width is a typo, not a model).
MAX_INT = 2**31 - 1

#: config.json keys that hold counts: key -> smallest allowed value.
HF_INT_KEYS: dict[str, int] = {
    "hidden_size": 1,
    "num_attention_heads": 1,
    "num_hidden_layers": 1,
    "num_key_value_heads": 1,
    "vocab_size": 1,
    "head_dim": 1,
    "intermediate_size": 1,
    # 0 routed experts is how dense members of MoE-capable families say "dense" (Granite-4.0-H-Micro);
    # a family that needs experts is refused by Architecture (experts must be positive)
    "num_local_experts": 0,
    "num_experts": 0,
    "num_experts_per_tok": 1,
    "moe_intermediate_size": 1,
    "shared_expert_intermediate_size": 0,
    "decoder_sparse_step": 1,
    "sliding_window": 1,
    "sliding_window_pattern": 1,
    "kv_lora_rank": 1,
    "q_lora_rank": 1,
    "first_k_dense_replace": 0,
    "n_routed_experts": 1,
    "n_shared_experts": 0,
}


def hf_need(cfg: Mapping[str, Any], key: str, model_type: str) -> Any:
    """``cfg[key]`` of a Hugging Face config, or a one-line error naming the missing field."""
    if key not in cfg or cfg[key] is None:
        raise bad("config.json", key, f"missing field (model_type={model_type!r})")
    return cfg[key]


#: config.json keys that hold booleans.
HF_BOOL_KEYS = ("tie_word_embeddings", "attention_bias", "mlp_bias")


def check_int(field: str, value: Any, smallest: int = 1) -> int:
    """``value`` as an int if it is one exactly (an integral float is accepted); else a one-line error."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise bad(field, value, f"must be an integer ≥ {smallest}")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise bad(field, value, f"must be an integer ≥ {smallest} (not truncated)")
    v = int(value)
    if not smallest <= v <= MAX_INT:
        raise bad(field, value, f"must be an integer in [{smallest}, {MAX_INT}]")
    return v


def check_hf_numbers(cfg: Mapping[str, Any]) -> None:
    """Refuse a config.json whose counts or flags are not what they claim to be (None = absent)."""
    for key, smallest in HF_INT_KEYS.items():
        if cfg.get(key) is not None:
            check_int(f"config.json {key}", cfg[key], smallest)
    for key in HF_BOOL_KEYS:
        v = cfg.get(key)
        if v is not None and not isinstance(v, bool):
            raise bad(f"config.json {key}", v, "must be true or false")


def read_text(path: Path) -> str:
    """A file's text as UTF-8; a one-line error for bytes that are not."""
    from ..safe_io import read_text as safe_read_text

    return safe_read_text(path, "file")
