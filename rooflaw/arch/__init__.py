"""Architectures: shapes, exact parameter counts and importers. Spaces (numpy, pandas) load on first use."""

from __future__ import annotations

import importlib
from typing import Any

from .architecture import COLUMNS, STACK_COLUMNS, Architecture, param_counts
from .layer_kinds import LAYER_KINDS, LayerKind, register_layer_kind, unregister_layer_kind
from .load import bundled_models, from_file, from_hf_config, from_mapping, from_spec, load_architecture

_LAZY = {"Space": ".space", "get_space": ".space", "list_spaces": ".space"}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "bundled_models",
    "COLUMNS",
    "STACK_COLUMNS",
    "LAYER_KINDS",
    "LayerKind",
    "register_layer_kind",
    "unregister_layer_kind",
    "Architecture",
    "from_file",
    "from_hf_config",
    "from_mapping",
    "from_spec",
    "load_architecture",
    "param_counts",
    "Space",
    "get_space",
    "list_spaces",
]
