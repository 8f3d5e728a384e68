"""Build an ``Architecture`` from a CLI spec string, a TOML/JSON file or a Hugging Face ``config.json``."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .. import safe_io
from ..errors import RooflawError, bad
from .architecture import Architecture
from .checks import MAX_INT, check_hf_numbers, check_int, hf_need
from .layer_kinds import hf_types, kind_of_type, kinds

_FIELDS = {f.name: f for f in dataclasses.fields(Architecture)}
_BOOL = {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}


def _kind_fields() -> set[str]:
    """Fields of registered layer kinds that are not Architecture dataclass fields (they go to ``kind_fields``)."""
    return {f for k in kinds() for f in k.fields if f not in _FIELDS}


def _coerce(key: str, value: Any) -> Any:
    if key in _kind_fields():
        return check_int(key, value, 0) if not isinstance(value, str) else _coerce_int(key, value)
    if key not in _FIELDS or key == "kind_fields":
        known = [k for k in _FIELDS if k not in ("name", "kind_fields")] + sorted(_kind_fields())
        raise bad("arch", key, f"unknown field; known: {', '.join(known)}")
    kind = str(_FIELDS[key].type)
    if "tuple" in kind:  # layer_types: a list, or "local+local+global" in a spec string
        parts = value.split("+") if isinstance(value, str) else value
        if not isinstance(parts, (list, tuple)) or not all(isinstance(p, str) for p in parts):
            raise bad(key, value, "must be a list of layer kinds (or kinds joined by '+')")
        return tuple(p.strip() for p in parts)
    if isinstance(value, str):
        text = value.strip()
        if "bool" in kind:
            if text.lower() not in _BOOL:
                raise bad(key, value, "must be true or false")
            return _BOOL[text.lower()]
        if "int" in kind:
            return _coerce_int(key, text)
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


def _coerce_int(key: str, text: str) -> int:
    try:
        number = int(text.strip())
    except ValueError:
        raise bad(key, text, "must be an integer") from None
    return check_int(key, number, -MAX_INT)  # the same bound as files; Architecture checks the sign


def from_mapping(fields: Mapping[str, Any], name: str = "") -> Architecture:
    """``Architecture`` from a mapping of field names (as in the spec string) to values (a registered layer kind's
    own fields included)."""
    if not isinstance(fields, Mapping):
        raise bad("fields", fields, "must be a mapping of architecture field names to values")
    kwargs = {k: _coerce(k, v) for k, v in fields.items()}
    extra = _kind_fields()
    if extra & kwargs.keys():
        kwargs["kind_fields"] = {k: kwargs.pop(k) for k in list(kwargs) if k in extra}
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
    if not safe_io.exists(p):
        hint = f"; bundled models: {', '.join(bundled_models())}" if p.suffix in ("", ".json") else ""
        raise bad("file", str(path), "no such file" + hint)
    data = safe_io.load(p, "file", ".toml" if p.suffix.lower() == ".toml" else ".json")
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
        return from_hf_config(data, name=config_name(data, p))
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
    "deepseek_v2": {"tied": False},
    "deepseek_v3": {"tied": False},
    "lfm2": {"tied": True, "qk_norm": "head"},
    "granitemoehybrid": {"tied": True},
}


_need = hf_need


MODELS_DIR = Path(__file__).with_name("models")


def bundled_models() -> list[str]:
    """Names of the Hugging Face configs shipped with rooflaw (written from the published config.json files)."""
    return sorted(p.stem for p in MODELS_DIR.glob("*.json"))


def config_name(config: Mapping[str, Any], path: Path) -> str:
    """What to call a model read from ``path``: the config's ``_name_or_path`` (a hub id such as
    ``Qwen/Qwen2.5-0.5B`` as is, a local path by its last component), else the file's stem; a ``config.json``
    without one is called by its model class (``architectures[0]``, else ``model_type``), never by the folder
    it happens to sit in."""
    given = config.get("_name_or_path")
    if isinstance(given, str) and given.strip():
        given = given.strip().rstrip("/\\")
        local = given.startswith((".", "/", "~")) or "\\" in given or given.count("/") > 1
        return Path(given).name if local else given
    if path.stem != "config":
        return path.stem
    classes = config.get("architectures")
    if isinstance(classes, list) and classes and isinstance(classes[0], str) and classes[0].strip():
        return classes[0].strip()
    model_type = config.get("model_type")
    return model_type if isinstance(model_type, str) and model_type.strip() else path.stem


def from_hf_config(config: Mapping[str, Any] | str | Path, name: str = "") -> Architecture:
    """Import a Hugging Face ``config.json`` (dict or path).

    Supported ``model_type``: llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3_text, mixtral,
    olmoe, qwen2_moe, qwen3_moe, phi3, deepseek_v2, deepseek_v3, lfm2, granitemoehybrid. Counts follow the
    transformers implementations: Qwen2 has q/k/v biases, Qwen3/Gemma3 per-head q/k RMSNorms, OLMoE full-width
    q/k norms, Gemma2/3 four norms per layer and sliding-window layers (``layer_types`` or the alternating /
    ``sliding_window_pattern`` default), Qwen-MoE a shared expert with a sigmoid gate, DeepSeek-V2/V3 MLA with
    shared experts and ``first_k_dense_replace`` dense layers, LFM2 short-conv + attention layers, Granite-4.0-H
    Mamba2 + attention layers with a shared MLP (and MoE).
    """
    if not isinstance(config, (Mapping, str, os.PathLike)):
        raise bad("config", config, "must be a config.json mapping, a path or a bundled model name")
    if not isinstance(config, Mapping):
        if not safe_io.exists(config) and str(config) in bundled_models():
            name = name or str(config)
            config = MODELS_DIR / f"{config}.json"
        elif Path(config).is_dir():  # a Hugging Face model folder: its config.json
            config = Path(config) / "config.json"
        config, p = _read(config)
        name = name or config_name(config, p)
    cfg = dict(safe_io.check_depth(config, "config"))
    if "text_config" in cfg and "hidden_size" not in cfg:  # multimodal wrappers (e.g. Gemma 3)
        if not isinstance(cfg["text_config"], Mapping):
            raise bad("config.json text_config", cfg["text_config"], "must be an object of model fields")
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
    elif mt in _STACK_IMPORTERS:
        _STACK_IMPORTERS[mt](cfg, fields, mt)
    else:
        fields["ffn"] = int(_need(cfg, "intermediate_size", mt))
    if mt in ("gemma2", "gemma3_text"):
        fields["layer_types"] = _sliding_types(cfg, fields["layers"], 2 if mt == "gemma2" else 6)
    present = {kind_of_type(t) for t in fields.get("layer_types", ())}
    for kind in kinds():  # each layer kind the stack holds reads its own fields (a sliding window, MLA ranks)
        if kind in present and kind.hf_fields is not None:
            kind.hf_fields(cfg, fields, mt)
    extra = _kind_fields() & fields.keys()  # a kind registered from outside rooflaw keeps its fields apart
    if extra:
        fields["kind_fields"] = {k: fields.pop(k) for k in sorted(extra)}
    try:
        return Architecture(**fields, name=name or str(cfg.get("_name_or_path", "")))
    except RooflawError as e:
        raise RooflawError(f"config.json ({mt}): {e}") from None


# ---- layer stacks -------------------------------------------------------------------------------
def _sliding_types(cfg: Mapping[str, Any], layers: int, default_pattern: int) -> tuple[str, ...]:
    """Gemma 2/3 layer kinds: ``layer_types`` if given, else every ``sliding_window_pattern``-th layer global."""
    if cfg.get("layer_types"):
        return _kinds(cfg["layer_types"], layers)
    if cfg.get("sliding_window") is None:
        return ()
    pattern = int(cfg.get("sliding_window_pattern") or default_pattern)
    return tuple("local" if (i + 1) % pattern else "global" for i in range(layers))


def _kinds(types: Any, layers: int) -> tuple[str, ...]:
    if not isinstance(types, (list, tuple)) or len(types) != layers:
        raise bad("layer_types", types, f"must list one kind per layer ({layers})")
    out = []
    names = hf_types()
    for k in types:
        if k not in names:
            raise bad("layer_types", k, f"unsupported layer type; supported: {', '.join(names)}")
        out.append(names[k])
    return tuple(out)


def _deepseek(cfg: Mapping[str, Any], f: dict[str, Any], mt: str) -> None:
    """DeepSeek-V2/V3: MLA in every layer; the first ``first_k_dense_replace`` layers dense, the rest MoE with
    ``n_shared_experts`` shared experts of width moe_intermediate_size (V3's router score bias is a buffer, not a
    parameter, in transformers, so it is not counted)."""
    f["layer_types"] = ("mla",) * f["layers"]  # the MLA kind reads its own fields (layer_kinds)
    experts = int(cfg.get("n_routed_experts") or 0)
    first = int(cfg.get("first_k_dense_replace") or 0)
    if int(cfg.get("moe_layer_freq", 1)) != 1:
        raise bad("moe_layer_freq", cfg.get("moe_layer_freq"), "only 1 (every layer after the dense ones) is modelled")
    if experts <= 1:
        f["ffn"] = int(_need(cfg, "intermediate_size", mt))
        return
    f.update(experts=experts, top_k=int(_need(cfg, "num_experts_per_tok", mt)),
             ffn=int(_need(cfg, "moe_intermediate_size", mt)), first_dense=min(first, f["layers"]))  # fmt: skip
    if first:
        f["dense_ffn"] = int(_need(cfg, "intermediate_size", mt))
    shared = int(cfg.get("n_shared_experts") or 0)
    if shared:
        f.update(shared_experts=shared, shared_ffn=f["ffn"])


def _lfm2(cfg: Mapping[str, Any], f: dict[str, Any], mt: str) -> None:
    """LFM2: gated short-conv layers (in_proj d→3d, depthwise conv of conv_L_cache taps, out_proj) and GQA layers
    with per-head q/k norms, a SwiGLU FFN in every layer (width auto-adjusted as transformers does)."""
    d, layers = f["d_model"], f["layers"]
    if cfg.get("layer_types"):
        f["layer_types"] = _kinds(cfg["layer_types"], layers)
    else:
        full = cfg.get("full_attn_idxs")
        full = range(layers) if full is None else {int(i) for i in full}
        f["layer_types"] = tuple("global" if i in full else "conv" for i in range(layers))
    ff = int(_need(cfg, "intermediate_size", mt))
    if cfg.get("block_auto_adjust_ff_dim", True):
        ff = int(2 * ff / 3)
        if cfg.get("block_ffn_dim_multiplier") is not None:
            ff = int(float(cfg["block_ffn_dim_multiplier"]) * ff)
            mult = int(cfg.get("block_multiple_of", 256))
            ff = mult * ((ff + mult - 1) // mult)
    f["ffn"] = ff
    taps, bias = int(cfg.get("conv_L_cache", 3)), int(bool(cfg.get("conv_bias", False)))
    f.update(mixer_in=3 * d, mixer_inner=d, mixer_params=d * taps + bias * (3 * d + d + d),
             mixer_state=d * (taps - 1), mixer_flops=2 * d * taps + 2 * d)  # fmt: skip
    if "tie_embedding" in cfg and "tie_word_embeddings" not in cfg:
        f["tied"] = bool(cfg["tie_embedding"])


def _granite_hybrid(cfg: Mapping[str, Any], f: dict[str, Any], mt: str) -> None:
    """Granite-4.0-H: Mamba2 or GQA per layer (``layer_types`` / ``layers_block_type``), a SwiGLU shared MLP in every
    layer and, with ``num_local_experts`` > 0, a routed SwiGLU MoE beside it."""
    d, layers = f["d_model"], f["layers"]
    types = cfg.get("layer_types") or cfg.get("layers_block_type")
    f["layer_types"] = _kinds(_need({"layer_types": types}, "layer_types", mt), layers)
    experts = int(cfg.get("num_local_experts") or 0)
    shared_ffn = int(_need(cfg, "shared_intermediate_size", mt))
    if experts > 0:
        f.update(experts=experts, top_k=int(_need(cfg, "num_experts_per_tok", mt)),
                 ffn=int(_need(cfg, "intermediate_size", mt)), shared_experts=1, shared_ffn=shared_ffn)  # fmt: skip
    else:
        f["ffn"] = shared_ffn
    if cfg.get("position_embedding_type") not in (None, "rope", "nope"):
        raise bad("position_embedding_type", cfg.get("position_embedding_type"), "must be rope or nope")
    nh, hd = int(_need(cfg, "mamba_n_heads", mt)), int(_need(cfg, "mamba_d_head", mt))
    ds, ng, taps = (
        int(_need(cfg, "mamba_d_state", mt)),
        int(cfg.get("mamba_n_groups", 1)),
        int(cfg.get("mamba_d_conv", 4)),
    )
    inner = int(float(cfg.get("mamba_expand", 2)) * d)
    conv_dim = inner + 2 * ng * ds
    proj = inner + conv_dim + nh
    pbias, cbias = int(bool(cfg.get("mamba_proj_bias", False))), int(bool(cfg.get("mamba_conv_bias", True)))
    f.update(mixer_in=proj, mixer_inner=inner, mixer_state=nh * hd * ds + conv_dim * (taps - 1))
    # conv weights (+ bias), dt_bias, A_log, D, the gated norm, projection biases
    f["mixer_params"] = conv_dim * taps + cbias * conv_dim + 3 * nh + inner + pbias * (proj + d)
    # conv taps, then per state element ~5 FLOPs (decay, input outer product, readout), gating and norm
    f["mixer_flops"] = 2 * conv_dim * taps + 5 * nh * hd * ds + 6 * inner


_STACK_IMPORTERS = {
    "deepseek_v2": _deepseek,
    "deepseek_v3": _deepseek,
    "lfm2": _lfm2,
    "granitemoehybrid": _granite_hybrid,
}


def load_architecture(arch: Any) -> Architecture:
    """An :class:`Architecture` from what ``--arch``/``--arch-file``/``--hf-config`` take.

    ``arch`` is an :class:`Architecture`; a spec string (``"layers=24,d_model=896,heads=14,kv_heads=2,ffn=4864"``);
    a Hugging Face ``config.json`` path; a model folder holding ``config.json`` (e.g. a local Hugging Face cache
    snapshot); an architecture TOML/JSON file; a mapping of architecture fields; or a bundled model name
    (:func:`bundled_models`).

    Example::

        >>> import rooflaw as rl
        >>> a = rl.load_architecture("layers=4,d_model=512,heads=8,kv_heads=2,ffn=1536,vocab=32000")
        >>> a.layers, a.head_dim, a.params_total
        (4, 64, 44831232)
        >>> rl.load_architecture("qwen2.5-0.5b").layers  # a bundled Hugging Face config
        24
    """
    if isinstance(arch, Architecture):
        return arch
    if isinstance(arch, Mapping):
        return from_mapping(arch)
    if isinstance(arch, os.PathLike) or (isinstance(arch, str) and "=" not in arch):
        text = os.fspath(arch).strip()
        p = Path(text).expanduser()
        if p.is_dir():
            cfg = p / "config.json"
            if not cfg.is_file():
                raise bad("arch", text, "a folder without config.json (expected a Hugging Face model folder)")
            return from_hf_config(cfg, name=p.name)
        if p.is_file():
            return from_file(p)
        if text in bundled_models():
            return from_hf_config(text)
        raise bad("arch", text, "no such file or folder, and not a key=value spec or a bundled model name")
    if isinstance(arch, str):
        return from_spec(arch)
    raise bad("arch", arch, "expected an Architecture, a spec string, a config.json path or a model folder")
