"""Helpers shared by the CLI sub-commands: JSON output, tables, device and architecture loading."""

from __future__ import annotations

import json
import math
import sys
from typing import Any, Optional

import numpy as np
from rich.console import Console
from rich.table import Table

console = Console()
err_console = Console(stderr=True)


def _default(o: Any) -> Any:
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


def table(title: str, columns: list[str], rows: list[list[Any]]) -> Table:
    t = Table(title=title, title_justify="left")
    for c in columns:
        t.add_column(c, justify="right" if c not in ("name", "op", "phase", "bound", "id", "field") else "left")
    for r in rows:
        t.add_row(*[str(x) for x in r])
    return t


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
    attention: str = "fused",
) -> Any:
    """A :class:`~rooflaw.solver.Problem` from the options shared by ``solve``, ``frontier`` and ``search``."""
    from .. import api
    from ..solver import Problem

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
    )
