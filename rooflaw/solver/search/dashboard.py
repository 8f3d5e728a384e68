"""What Optuna Dashboard shows of a rooflaw study: its objectives by name and, on every trial, the architecture
and its figures as user attributes (``optuna-dashboard journal:///study.log``, docs/solver.md)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

#: Each objective's name in the dashboard ({phase}: the latency that counts); SI units as in ``--json``.
METRIC_NAMES = {"loss": "loss", "latency": "{phase} latency (s)", "memory": "memory (bytes)", "energy": "energy (J)",
                "throughput": "throughput (tokens/s)"}  # fmt: skip
#: Figures of a trial written as user attributes, when the row has them (SI units).
FIGURES = ("loss", "latency_s", "memory_bytes", "energy_j", "feasible", "precision", "batch", "option")


def metric_names(objectives: Sequence[str], phase: str) -> list[str]:
    """The dashboard's names of ``objectives`` (e.g. ``["loss", "decode latency (s)"]``)."""
    return [METRIC_NAMES[o].format(phase=phase) for o in objectives]


def name_objectives(study: Any, objectives: Sequence[str], phase: str) -> None:
    """Set the study's metric names (once: a resumed study that has them is not written again)."""
    import warnings

    from optuna.exceptions import ExperimentalWarning

    names = metric_names(objectives, phase)
    if study.metric_names != names:
        with warnings.catch_warnings():  # experimental since Optuna 3.2, unchanged since
            warnings.simplefilter("ignore", ExperimentalWarning)
            study.set_metric_names(names)


def architecture_text(row: Mapping[str, Any]) -> str:
    """``l=8 d=768 heads=6 kv=1 hd=128 ffn=384 E/K=8/1`` (+ ``vocab=…`` and ``tied``) from a trial's row."""

    def i(k: str) -> str:
        v = row.get(k, math.nan)
        return str(int(v)) if isinstance(v, (int, float)) and math.isfinite(v) else "?"

    text = (f"l={i('layers')} d={i('d_model')} heads={i('heads')} kv={i('kv_heads')} hd={i('head_dim')} "
            f"ffn={i('ffn')} E/K={i('experts')}/{i('top_k')}")  # fmt: skip
    if "vocab" in row:
        text += f" vocab={i('vocab')}" + (" tied" if row.get("tied") else "")
    return text


def set_trial_attrs(trial: Any, row: Mapping[str, Any]) -> None:
    """Write the trial's architecture and figures as user attributes (non-finite numbers as None)."""
    trial.set_user_attr("architecture", architecture_text(row))
    for k in FIGURES:
        if k in row:
            v = row[k]
            if isinstance(v, float) and not math.isfinite(v):
                v = None
            trial.set_user_attr(k, v.item() if hasattr(v, "item") else v)


__all__ = ["METRIC_NAMES", "architecture_text", "metric_names", "name_objectives", "set_trial_attrs"]
