"""The preset registry: each named cost model's operators, memory terms and how its phases are bounded.

:mod:`.assembly` places and sums the operators of a preset (and re-exports these names); ``full`` is the default,
``paper`` the paper's §5 / App. E theory formulas, ``paper-ops`` its App. D per-operator tables as written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sympy as sp

from . import operators as O
from .paper_ops import PAPER_OPS, PAPER_OPS_APPD, paper_kv_cache_bytes_expr, paper_weight_bytes_expr


@dataclass(frozen=True)
class Preset:
    """A named cost model: its operators and memory terms, and how each phase is bounded.

    ``theory``: prefill compute-bound, decode memory-bound, no efficiency factors in the paper sense and
    no launch overhead (the paper's §5 / App. E). ``memory``: the terms counted in ``memory_bytes``
    (``weights``, ``kv``, ``act``). ``kinds``: whether layer kinds (sliding window, MLA, mixers) are modelled.
    """

    name: str
    ops: tuple[O.Op, ...]
    weights: Callable[..., sp.Expr]
    kv_cache: Callable[..., sp.Expr]
    activations: Callable[..., sp.Expr]
    memory: tuple[str, ...] = ("weights", "kv", "act")
    theory: bool = False
    kinds: bool = True
    #: whether an engine profile's achieved efficiencies and overheads apply (not to the paper's own models)
    engine: bool = True


def _zero(*_: Any) -> sp.Expr:
    return sp.Integer(0)


#: What the paper's two models share: Eq. 41's weights and KV cache as memory, no activations, uniform stacks, no
#: engine profile.
_PAPER_MEMORY: dict[str, Any] = dict(
    weights=lambda cols=None: paper_weight_bytes_expr(),
    kv_cache=lambda S, kinds=frozenset(): paper_kv_cache_bytes_expr(S),
    activations=_zero,
    memory=("weights",),
    kinds=False,
    engine=False,
)

PRESETS: dict[str, Preset] = {
    "full": Preset("full", O.FULL_OPS, O.weight_bytes_expr, O.kv_cache_bytes_expr, O.activation_bytes_expr),
    "paper": Preset("paper", PAPER_OPS, theory=True, **_PAPER_MEMORY),
    # the paper's App. D per-operator roofline as written (Tables 8-15): max(FLOPs/π, bytes/β) per operator,
    # memory = Eq. 41 as in ``paper``; uniform stacks only (see :mod:`.paper_ops`)
    "paper-ops": Preset("paper-ops", PAPER_OPS_APPD, **_PAPER_MEMORY),
}


def register_preset(preset: Preset) -> None:
    """Add a preset (e.g. ``paper-ops``): one call, every backend sees it."""
    PRESETS[preset.name] = preset


def get_preset(name: str) -> Preset:
    from ..errors import bad

    if name not in PRESETS:
        raise bad("preset", name, f"must be one of {', '.join(PRESETS)}")
    return PRESETS[name]


__all__ = ["PRESETS", "Preset", "get_preset", "register_preset"]
