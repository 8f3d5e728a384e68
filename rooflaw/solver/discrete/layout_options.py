"""Layouts as the joint space's ``option`` dimension: ``solve`` / ``frontier`` pick the layout with the architecture.

Each layout on a system becomes an :class:`~rooflaw.solver.discrete.joint.Option` whose cost columns come from
:func:`rooflaw.constraints.parallel.option.layout_cost_columns` (the one assembly on the layout's sharded shapes,
plus α–β collectives): latency and memory are per device, ``valid`` says the layout divides the architecture and
meets the serving floors asked for (tokens/s per device, TPOT).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ...constraints.parallel.disagg import DISAGG_EXTRA, DisaggColumns, check_fits, parse_disagg, splits
from ...constraints.parallel.layout import parse_layout
from ...constraints.parallel.option import EXTRA, layout_cost_columns
from ...devices.system import System, get_system
from ...errors import bad
from .joint import Option


def layout_options(
    system: str | System,
    layouts: Iterable[str],
    overlap: bool = False,
    min_tokens_per_s_per_device: float | None = None,
    max_tpot_s: float | None = None,
) -> tuple[Option, ...]:
    """One :class:`Option` per layout string on ``system`` (``h100-sxm:8``, a system id or TOML file)."""
    sys_ = get_system(system)
    out = []
    for text in layouts:
        if text.startswith("disagg:"):  # a prefill pool and a decode pool (every split of the system)
            out += disagg_options(sys_, text[len("disagg:") :])
            continue
        lay = parse_layout(text)
        cols = layout_cost_columns(sys_, lay, overlap, min_tokens_per_s_per_device, max_tpot_s)
        out.append(Option(lay.describe(), cols, extra=EXTRA, meta={"system": sys_.id, "devices": lay.devices}))
    if not out:
        raise bad("layouts", "", "give at least one layout, e.g. tp=8;ep=8,dp_attn=8")
    names = [o.name for o in out]
    if len(set(names)) != len(names):
        raise bad("layouts", ";".join(names), "lists a layout twice")
    return tuple(out)


def disagg_options(system: System, text: str) -> list[Option]:
    """Joint-space options of ``prefill=LAYOUT[xN],decode=LAYOUT[xN]``: that split, or with no replica count on
    either pool every maximal split of the system (:func:`~rooflaw.constraints.parallel.disagg.splits`)."""
    t = str(text).strip()
    d = parse_disagg(t)
    given = re.search(r"x\d+(,decode=|$)", t) is not None
    cands = [d] if given else splits(system, d.prefill.layout, d.decode.layout)
    for c in cands:
        check_fits(c, system)
    return [Option(f"disagg {c.describe()}", DisaggColumns(system, c), extra=DISAGG_EXTRA,
                   meta={"system": system.id, "devices": c.devices}) for c in cands]  # fmt: skip


def parse_layouts(text: str) -> list[str]:
    """``tp=8;ep=8,dp_attn=8`` (layouts separated by ``;``, since a layout itself uses commas)."""
    items = [t.strip() for t in str(text).split(";")]
    if not items or any(not t for t in items):
        raise bad("layouts", text, "expected layouts separated by ';' (e.g. tp=8;ep=8,dp_attn=8), none empty")
    return items


__all__ = ["disagg_options", "layout_options", "parse_layouts"]
