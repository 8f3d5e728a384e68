"""Per-device shapes of a layout: the architecture columns each device runs, and which layouts divide.

One replica's devices run three shapes (column tables the one assembly then prices, :mod:`.serving`):

- ``attn``: the token mixers, norms, router, embedding and LM head -- heads split ``tp_attn`` ways
  (KV heads too, down to one whole KV head per device: beyond ``tp_attn = kv_heads`` the KV cache is
  replicated), the vocabulary split ``tp_attn`` ways (vocab-parallel embedding and LM head), a mixer-slot
  layer kind's ``split`` columns (conv/SSM widths and state) ``tp_attn`` ways; batch = the device's own sequences.
- ``ctx`` (Helix only, prefill): the context-dependent attention (QKᵀ, softmax, ·V) of the whole prompt against
  a 1/kvp slice of the keys, written as heads/(tp_attn·kvp) over the full context (the same FLOPs). In decode
  Helix runs the attention shape at a 1/kvp context instead (:mod:`.serving`).
- ``ffn``: the FFN of the stage's tokens -- every expert's columns split ``tp_ffn`` ways, experts/ep of
  them per device (top_k/ep per token on average: uniform routing, per-expert M = tokens·top_k/experts),
  an FFN-slot layer kind's ``split`` columns (first-k dense FFNs) over the whole group; batch = the group's
  tokens × the load-imbalance factor (:mod:`.serving` prices the busiest EP rank's routed rows, :mod:`.routing`).

Each operator says which shape it runs on (``Op.shard``). Pipeline stages hold ceil(layers/pp) layers (the busiest
stage; each kind's count in proportion, or the actual per-stage counts of a layer pattern, :func:`pattern_stages`).
The layer kinds are read from :data:`rooflaw.arch.layer_kinds.LAYER_KINDS`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...arch.layer_kinds import count_columns, kinds, per_layer_counts
from ...errors import bad
from .. import operators as O
from .layout import Layout


def group_of(name: str) -> str:
    """The shape (``attn``, ``ctx``, ``ffn``) the placed part ``name`` runs on: its op's ``shard``; an unknown
    name raises."""
    return O.op_named(name).shard


@dataclass(frozen=True)
class Degrees:
    """Per-row split factors of one layout over a table (arrays)."""

    tp_attn: int
    tp_ffn: np.ndarray
    ep: np.ndarray
    kvp: int
    attn_dp: int
    moe: np.ndarray


def degrees(cols: Mapping[str, np.ndarray], lay: Layout) -> Degrees:
    moe = np.asarray(cols["experts"]) > 1
    if lay.helix:  # FFN over all N devices: EP for MoE, TP for dense
        ep = np.where(moe, lay.helix, 1)
        tpf = np.where(moe, 1, lay.helix)
    else:
        ep = np.full(moe.shape, lay.ep)
        tpf = np.full(moe.shape, lay.tp)
    return Degrees(lay.tp_attn, tpf, ep, lay.kvp, lay.attn_dp, moe)


def problems(cols: Mapping[str, np.ndarray], lay: Layout) -> list[tuple[np.ndarray, str]]:
    """(rows that fail, reason) for every divisibility rule of ``lay``."""
    g = degrees(cols, lay)
    h, kv, L = cols["heads"], cols["kv_heads"], cols["layers"]
    out = [
        (h % g.tp_attn != 0, f"attention TP {g.tp_attn} does not divide heads"),
        ((g.tp_attn > kv) & (g.tp_attn % kv != 0), f"attention TP {g.tp_attn} is not a multiple of kv_heads"),
        ((g.tp_attn <= kv) & (kv % g.tp_attn != 0), f"attention TP {g.tp_attn} does not divide kv_heads"),
        (cols["ffn"] % g.tp_ffn != 0, "FFN TP does not divide ffn"),
        ((g.ep > 1) & ~g.moe, f"ep={lay.ep or lay.helix} needs an MoE model (experts > 1)"),
        ((g.ep > 1) & (cols["experts"] % g.ep != 0), "ep does not divide experts"),
        (lay.pp > L, f"pp={lay.pp} exceeds layers"),
    ]
    if lay.helix:
        out.append((g.tp_attn > kv, f"Helix attention TP = tpep/kvp = {g.tp_attn} exceeds kv_heads"))
    return out


def check(cols: Mapping[str, np.ndarray], lay: Layout, system_count: int) -> np.ndarray:
    """Rows ``lay`` divides (raises when the layout needs more devices than the system has)."""
    if lay.devices > system_count:
        raise bad("layout", lay.describe(), f"needs {lay.devices} devices; the system has {system_count}")
    ok = np.ones(np.shape(cols["layers"]), dtype=bool)
    for fail, _ in problems(cols, lay):
        ok &= ~np.asarray(fail, dtype=bool)
    return ok


def first_problem(cols: Mapping[str, np.ndarray], lay: Layout) -> str | None:
    for fail, why in problems(cols, lay):
        if np.any(fail):
            return why
    return None


def busiest_stage(cols: Mapping[str, np.ndarray], pp: int) -> dict[str, np.ndarray]:
    """Layer counts of the busiest stage of a table: ceil(layers/pp) layers, each kind in proportion."""
    L = np.asarray(cols["layers"], dtype=float)
    frac = np.ceil(L / pp) / L
    return {k: cols[k] * frac for k in count_columns()}


def pattern_stages(arch: Any, pp: int) -> list[dict[str, int]]:
    """Layer counts (:func:`~rooflaw.arch.layer_kinds.count_columns`) of each contiguous stage of ``arch``'s
    actual layer pattern (the first layers/pp mod pp stages get one layer more)."""
    types = list(arch.layer_types) or ["global"] * arch.layers
    firsts = {k.first: arch.value(k.first) for k in kinds() if k.first}
    rows = per_layer_counts(types, firsts)
    L = len(rows)
    sizes = [L // pp + (i < L % pp) for i in range(pp)]
    out, start = [], 0
    for n in sizes:
        out.append({c: sum(r[c] for r in rows[start : start + n]) for c in count_columns()})
        start += n
    return out


def stage_balance(cols: Mapping[str, np.ndarray], pp: int) -> np.ndarray:
    """Mean stage / busiest stage (1 when pp divides the layers evenly)."""
    L = np.asarray(cols["layers"], dtype=float)
    return (L / pp) / np.ceil(L / pp)


def shapes(cols: Mapping[str, np.ndarray], lay: Layout, stage: Mapping[str, np.ndarray] | None = None) -> dict:
    """The ``attn``, ``ctx`` and ``ffn`` column tables of one device (``stage``: the stage's layer counts)."""
    g = degrees(cols, lay)
    base = dict(cols)
    if stage is not None:
        base.update({k: np.asarray(stage[k], dtype=float) for k in count_columns()})
    ta = float(g.tp_attn)
    kv_dev = np.maximum(cols["kv_heads"] / ta, 1.0)
    attn = dict(base, heads=cols["heads"] / ta, kv_heads=kv_dev, vocab=cols["vocab"] / ta)
    ffn = dict(
        base, ffn=cols["ffn"] / g.tp_ffn, shared_ffn=cols["shared_ffn"] / g.tp_ffn,
        experts=cols["experts"] / g.ep, top_k=cols["top_k"] / g.ep,
    )  # fmt: skip
    for kind in kinds():  # each kind's split columns: over attention TP (mixer slot), the whole group (FFN slot)
        shape, ways = (attn, ta) if kind.slot == "mixer" else (ffn, lay.group)
        for k in kind.split:
            shape[k] = cols[k] / ways
    ctx = dict(attn, heads=attn["heads"] / g.kvp, kv_heads=kv_dev / g.kvp)
    return {"attn": attn, "ctx": ctx, "ffn": ffn}


def batches(batch: int, lay: Layout, micro: int = 1) -> tuple[int, int]:
    """(sequences per device in attention, tokens' sequences per device in the FFN) for ``batch`` sequences per
    replica split into ``micro`` pipeline micro-batches."""
    b = math.ceil(batch / micro)
    ba = math.ceil(b / lay.attn_dp)
    bf = math.ceil(b * lay.imbalance) if (lay.ep > 1 or lay.helix) else b
    return ba, bf


def kv_replication(cols: Mapping[str, np.ndarray], lay: Layout) -> np.ndarray:
    """How many devices hold each KV head (1: none replicated; a kind whose cache attention TP never splits --
    MLA's latent -- tp_attn)."""
    ta = lay.tp_attn
    rep = np.maximum(ta / cols["kv_heads"], 1.0)
    for k in kinds():
        if k.cache_replicated:
            rep = np.where(cols.get(k.count, 0) > 0, float(ta), rep)
    return rep


__all__ = ["batches", "check", "degrees", "first_problem", "group_of", "kv_replication",
           "pattern_stages", "problems", "shapes", "stage_balance", "busiest_stage"]  # fmt: skip
