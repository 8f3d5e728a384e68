"""Serving across devices: collectives (α–β), layouts (TP / EP with DP attention / chunked PP / DP / Helix),
the per-device shapes they imply, and serving metrics from the one assembly (see docs/parallel.md)."""

from __future__ import annotations

from .layout import Layout, parse_layout
from .serving import OUTPUTS, layout_columns
from .sweep import batch_sweep, evaluate_layout, mark_pareto, max_batch, parse_batches

__all__ = ["OUTPUTS", "Layout", "batch_sweep", "evaluate_layout", "layout_columns", "mark_pareto", "max_batch",
           "parse_batches", "parse_layout"]  # fmt: skip
