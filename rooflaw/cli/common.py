"""Helpers shared by the CLI sub-commands: JSON output, tables, device and architecture loading."""

from __future__ import annotations

import json
import math
import sys
from typing import Any, Optional

from rich.console import Console
from rich.table import Table

#: The precision every command assumes unless told otherwise (the paper's FP16; bf16 has the same bytes and roof).
DEFAULT_PRECISION = "fp16"

console = Console()
err_console = Console(stderr=True)


def _default(o: Any) -> Any:
    import numpy as np  # only reached for objects json cannot write itself

    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (np.bool_,)):
        return bool(o)
    if hasattr(o, "to_dict"):
        return o.to_dict()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _clean(o: Any) -> Any:
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if isinstance(o, dict):
        return {k: _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    return o


def print_json(obj: Any) -> None:
    """One JSON object on stdout (non-finite floats become null)."""
    text = json.dumps(_clean(json.loads(json.dumps(obj, default=_default))), indent=2)
    sys.stdout.write(text + "\n")


_LEFT = ("name", "op", "phase", "bound", "id", "field", "provenance", "tied")


def table(title: str, columns: list[str], rows: list[list[Any]]) -> Table:
    # at least as wide as its title (up to 80 columns), so the title does not wrap over a narrow table
    t = Table(title=title, title_justify="left", min_width=min(len(title), 80))
    for c in columns:
        t.add_column(c, justify="left" if c in _LEFT else "right")
    for r in rows:
        t.add_row(*[str(x) for x in r])
    return t


#: Help of every ``--allow-extrapolation`` option.
EXTRAPOLATION_HELP = "Also consider architectures outside the domain the law was fitted on."


#: Architecture columns of result tables: (header, column or None for E/K, formatter).
_ARCH_FIELDS = (
    ("l", "layers"), ("d", "d_model"), ("heads", "heads"), ("kv", "kv_heads"), ("hd", "head_dim"),
    ("ffn", "ffn"), ("E/K", None), ("tied", "tied"), ("vocab", "vocab"),
)  # fmt: skip


def _arch_cell(row: Any, col: str | None) -> str:
    if col is None:
        return f"{int(row['experts'])}/{int(row['top_k'])}"
    if col == "tied":
        return "yes" if bool(row[col]) else "no"
    return str(int(row[col]))


def arch_table(title: str, df: Any, values: list[tuple[str, Any]], limit: int) -> tuple[Table, str]:
    """A table of the first ``limit`` rows of ``df`` (architectures + ``values``: (header, row -> text)).

    Only the architecture columns that differ between the shown rows are columns, so rows that look alike are
    told apart (e.g. tied against untied embeddings) and the table stays narrow; the others are returned as one
    line ("same in every row: ..."). The title says when rows were left out.
    """
    shown = df.head(limit)
    recs = shown.to_dict("records")
    fields = [(h, c) for h, c in _ARCH_FIELDS if c is None or c in shown.columns]
    varying, same = [], []
    for h, c in fields:
        cells = [_arch_cell(r, c) for r in recs]
        if len(set(cells)) > 1:
            varying.append((h, c))
        elif cells:
            same.append(f"{h} {cells[0]}")
    more = f" (first {len(shown)} of {len(df)}; --out FILE for all)" if len(df) > len(shown) else f" ({len(df)})"
    rows = [[_arch_cell(r, c) for _, c in varying] + [f(r) for _, f in values] for r in recs]
    from rich import box

    t = table(title + more, [h for h, _ in varying] + [h for h, _ in values], rows)
    t.box, t.pad_edge = box.SIMPLE_HEAD, False  # no vertical rules: fits 80 columns with every field shown
    return t, ("same in every row: " + ", ".join(same)) if same else ""


def build_problem(
    device: str,
    law: str,
    space: str,
    phase: str,
    precision: str,
    batch: int,
    input_tokens: int,
    output_tokens: int,
    preset: str,
    tokens: Optional[float],
    latency_budget: Optional[str],
    memory_budget: Optional[str],
    energy_budget: Optional[str],
    align: int = 128,
    attention: str = "unfused",
    allow_extrapolation: bool = False,
) -> Any:
    """A :class:`~rooflaw.solver.Problem` from the options shared by ``solve``, ``frontier`` and ``search``."""
    from .. import api
    from ..api import Problem

    return Problem(
        law=api.get_law(law),
        device=api.get_device(device),
        space=api.get_space(space),
        workload=api.Workload(batch, input_tokens, output_tokens, attention),
        precision=precision,
        latency_budget=None if latency_budget is None else api.parse_time(latency_budget, "latency-budget"),
        phase=phase,
        memory_budget=None if memory_budget is None else api.parse_bytes(memory_budget, "memory-budget"),
        energy_budget=None if energy_budget is None else api.parse_energy(energy_budget, "energy-budget"),
        preset=preset,
        tokens=tokens,
        align=align,
        allow_extrapolation=allow_extrapolation,
    )
