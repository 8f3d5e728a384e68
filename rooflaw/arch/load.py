"""Build an ``Architecture`` from a CLI spec string, a TOML/JSON file or a Hugging Face ``config.json``."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import RooflawError, bad
from .architecture import Architecture
from .checks import check_hf_numbers, check_int, read_text

try:  # Python >= 3.11
    import tomllib
except ModuleNotFoundError:  # pragma: no cover
    import tomli as tomllib  # type: ignore[no-redef]

_FIELDS = {f.name: f for f in dataclasses.fields(Architecture)}
_BOOL = {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}


def _coerce(key: str, value: Any) -> Any:
    if key not in _FIELDS:
        raise bad("arch", key, f"unknown field; known: {', '.join(k for k in _FIELDS if k != 'name')}")
    kind = str(_FIELDS[key].type)
    if isinstance(value, str):
        text = value.strip()
        if "bool" in kind:
            if text.lower() not in _BOOL:
                raise bad(key, value, "must be true or false")
            return _BOOL[text.lower()]
        if "int" in kind:
            try:
                return int(text)
            except ValueError:
                raise bad(key, value, "must be an integer") from None
        return text
    if value is None and "None" in kind:
        return None
    if "bool" in kind and not isinstance(value, bool):
        raise bad(key, value, "must be true or false")
    if "int" in kind and "bool" not in kind:
        return check_int(key, value, 0)
    if "str" in kind and not isinstance(value, str):
        raise bad(key, value, "must be a string")
    return value


def from_mapping(fields: Mapping[str, Any], name: str = "") -> Architecture:
    """``Architecture`` from a mapping of field names (as in the spec string) to values."""
    kwargs = {k: _coerce(k, v) for k, v in fields.items()}
    if name and "name" not in kwargs:
        kwargs["name"] = name
    for required in ("layers", "d_model", "heads"):
        if required not in kwargs:
            raise bad("arch", required, "missing required field")
    return Architecture(**kwargs)


def from_spec(spec: str) -> Architecture:
    """Parse ``layers=24,d_model=896,heads=14,kv_heads=2,...`` (the CLI ``--arch`` string)."""
    if not isinstance(spec, str):
        raise bad("arch", spec, "must be a spec string such as layers=24,d_model=896,heads=14")
    fields: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        if "=" not in part:
            raise bad("arch", part, "expected key=value")
        k, v = (s.strip() for s in part.split("=", 1))
        if k in fields:
            raise bad("arch", k, "given twice")
        fields[k] = v
    if not fields:
        raise bad("arch", spec, "empty architecture spec")
    return from_mapping(fields)


def _read(path: str | Path) -> tuple[dict[str, Any], Path]:
    p = Path(path)
    if not p.is_file():
        hint = f"; bundled models: {', '.join(bundled_models())}" if p.suffix in ("", ".json") else ""
        raise bad("file", str(path), "no such file" + hint)
    text = read_text(p)
    try:
        data = tomllib.loads(text) if p.suffix.lower() == ".toml" else json.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as e:
        raise bad("file", str(path), f"does not parse ({str(e).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise bad("file", str(path), "must hold one object/table")
    return data, p


def from_file(path: str | Path) -> Architecture:
    """``Architecture`` from a TOML or JSON file of field names (a table ``[arch]`` is also accepted).

    A JSON file that looks like a Hugging Face ``config.json`` (has ``model_type``) is imported
    with :func:`from_hf_config`.
    """
    data, p = _read(path)
    if "model_type" in data or "architectures" in data:
        return from_hf_config(data, name=p.stem)
    data = data.get("arch", data)
    return from_mapping(data, name=p.stem)


# --------------------------------------------------------------------------------------------
# Hugging Face config.json
# --------------------------------------------------------------------------------------------

#: model_type -> (defaults for the import). Keys are Architecture fields.
_HF_FAMILIES: dict[str, dict[str, Any]] = {
    "llama": {"tied": False},
    "mistral": {"tied": False},
    "qwen2": {"qkv_bias": True, "tied": False},
    "qwen3": {"qk_norm": "head", "tied": False},
    "gemma": {"tied": True},
    "gemma2": {"tied": True, "norms_per_layer": 4},
    "gemma3_text": {"tied": True, "norms_per_layer": 4, "qk_norm": "head"},
    "mixtral": {"tied": False},
    "olmoe": {"tied": False, "qk_norm": "full"},
    "qwen2_moe": {"qkv_bias": True, "tied": False, "shared_gate": True},
    "qwen3_moe": {"qk_norm": "head", "tied": False},
    "phi3": {"tied": False},
}


def _need(cfg: Mapping[str, Any], key: str, model_type: str) -> Any:
    if key not in cfg or cfg[key] is None:
        raise bad("config.json", key, f"missing field (model_type={model_type!r})")
    return cfg[key]


MODELS_DIR = Path(__file__).with_name("models")


def bundled_models() -> list[str]:
    """Names of the Hugging Face configs shipped with rooflaw (written from the published config.json files)."""
    return sorted(p.stem for p in MODELS_DIR.glob("*.json"))


def from_hf_config(config: Mapping[str, Any] | str | Path, name: str = "") -> Architecture:
    """Import a Hugging Face ``config.json`` (dict or path).

    Supported ``model_type``: llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3_text, mixtral,
    olmoe, qwen2_moe, qwen3_moe, phi3. Counts follow the transformers implementations: Qwen2
    has q/k/v biases, Qwen3/Gemma3 per-head q/k RMSNorms, OLMoE full-width q/k norms, Gemma2/3 four
    norms per layer, Qwen-MoE a shared expert with a sigmoid gate.
    """
    if not isinstance(config, (Mapping, str, os.PathLike)):
        raise bad("config", config, "must be a config.json mapping, a path or a bundled model name")
    if not isinstance(config, Mapping):
        if not Path(config).exists() and str(config) in bundled_models():
            name = name or str(config)
            config = MODELS_DIR / f"{config}.json"
        config, p = _read(config)
        name = name or p.parent.name or p.stem
    cfg = dict(config)
    if "text_config" in cfg and "hidden_size" not in cfg:  # multimodal wrappers (e.g. Gemma 3)
        cfg = {**cfg["text_config"], "model_type": cfg["text_config"].get("model_type", cfg.get("model_type"))}
    mt = cfg.get("model_type")
    if mt is None:
        raise bad("config.json", "model_type", "missing field")
    if mt == "gemma3":
        mt = "gemma3_text"
    if mt not in _HF_FAMILIES:
        raise bad("model_type", mt, f"unsupported; supported: {', '.join(sorted(_HF_FAMILIES))}")
    check_hf_numbers(cfg)
    fam = dict(_HF_FAMILIES[mt])
    d = int(_need(cfg, "hidden_size", mt))
    heads = int(_need(cfg, "num_attention_heads", mt))
    fields: dict[str, Any] = {
        "layers": int(_need(cfg, "num_hidden_layers", mt)),
        "d_model": d,
        "heads": heads,
        "kv_heads": int(cfg.get("num_key_value_heads") or heads),
        "vocab": int(_need(cfg, "vocab_size", mt)),
        **fam,
    }
    if cfg.get("head_dim"):
        fields["head_dim"] = int(cfg["head_dim"])
    if "tie_word_embeddings" in cfg:
        fields["tied"] = bool(cfg["tie_word_embeddings"])
    if cfg.get("attention_bias") is not None and mt not in ("qwen2", "qwen2_moe"):
        fields["qkv_bias"] = bool(cfg["attention_bias"])
    if cfg.get("mlp_bias"):
        raise bad("mlp_bias", True, "FFN biases are not modelled")
    if mt in ("mixtral",):
        fields["ffn"] = int(_need(cfg, "intermediate_size", mt))
        fields["experts"] = int(_need(cfg, "num_local_experts", mt))
        fields["top_k"] = int(_need(cfg, "num_experts_per_tok", mt))
    elif mt == "olmoe":
        fields["ffn"] = int(_need(cfg, "intermediate_size", mt))
        fields["experts"] = int(_need(cfg, "num_experts", mt))
        fields["top_k"] = int(_need(cfg, "num_experts_per_tok", mt))
    elif mt in ("qwen2_moe", "qwen3_moe"):
        if int(cfg.get("decoder_sparse_step", 1)) != 1 or cfg.get("mlp_only_layers"):
            raise bad(
                "decoder_sparse_step", cfg.get("decoder_sparse_step"), "mixed dense/MoE layer stacks are not modelled"
            )
        fields["ffn"] = int(_need(cfg, "moe_intermediate_size", mt))
        fields["experts"] = int(_need(cfg, "num_experts", mt))
        fields["top_k"] = int(_need(cfg, "num_experts_per_tok", mt))
        shared = int(cfg.get("shared_expert_intermediate_size") or 0)
        if shared:
            fields["shared_experts"] = 1
            fields["shared_ffn"] = shared
        else:
            fields["shared_gate"] = False
    else:
        fields["ffn"] = int(_need(cfg, "intermediate_size", mt))
    try:
        return Architecture(**fields, name=name or str(cfg.get("_name_or_path", "")))
    except RooflawError as e:
        raise RooflawError(f"config.json ({mt}): {e}") from None
