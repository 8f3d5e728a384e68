"""The architecture part of an Optuna trial: fixed per-dimension choices, no range depending on another."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def suggest_architecture(trial: Any, choices: Mapping[str, list[Any]]) -> dict[str, Any]:
    """A per-dimension choice (values of :meth:`Space.choices`) drawn by ``trial``: an ordinal index for layers,
    d_model, head_dim, kv_heads and r_single, a category for (experts, top_k), (vocab, tied) and the layer pattern;
    a dimension with one value is not a parameter."""
    out: dict[str, Any] = {}
    for dim in ("layers", "d_model", "head_dim", "kv_heads", "r_single"):
        vals = choices[dim]
        out[dim] = vals[trial.suggest_int(f"{dim}_i", 0, len(vals) - 1)] if len(vals) > 1 else vals[0]
    for dim in ("moe", "vocab_tied", "pattern"):
        vals = choices[dim]
        labels = ["x".join(str(x) for x in v) for v in vals]
        out[dim] = vals[labels.index(trial.suggest_categorical(dim, labels))] if len(vals) > 1 else vals[0]
    return out


__all__ = ["suggest_architecture"]
