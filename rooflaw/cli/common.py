"""Helpers shared by the CLI sub-commands: JSON output, tables, device and architecture loading."""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Optional

from rich.console import Console
from rich.markup import escape as esc  # noqa: F401 - shared by the sub-commands
from rich.table import Table
from rich.text import Text

from ..errors import ExternalError, bad

#: The precision every command assumes unless told otherwise (the paper's FP16; bf16 has the same bytes and roof).
DEFAULT_PRECISION = "fp16"
#: The attention kernel every command assumes (the Workload default: fused, as every measured serving engine).
DEFAULT_ATTENTION = "fused"
#: ``--engine``'s help, the same on every command that prices with the full preset.
ENGINE_HELP = (
    "Engine profile of the full preset: tensorrt-llm, vllm, llama.cpp, gpt-fast, torch-eager or ideal "
    "(default: the device's)."
)

#: ``--clock``'s help, the same on ``devices calibrate`` and ``validate``.
CLOCK_HELP = "wall (latency, default) or cpu (thread CPU time: ignores time lost to co-tenants)."


def check_clock(clock: str) -> None:
    """Refuse a ``--clock`` other than wall or cpu (exit 2, naming the value)."""
    if clock not in ("wall", "cpu"):
        raise bad("clock", clock, "must be wall or cpu")


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


def json_text(obj: Any) -> str:
    """``obj`` as the indented JSON text :func:`print_json` writes (non-finite floats become null)."""
    return json.dumps(_clean(json.loads(json.dumps(obj, default=_default))), indent=2)


def print_json(obj: Any) -> None:
    """One JSON object on stdout (non-finite floats become null)."""
    sys.stdout.write(json_text(obj) + "\n")


_LEFT = ("name", "op", "phase", "bound", "id", "field", "provenance", "tied")


def table(title: str, columns: list[str], rows: list[list[Any]]) -> Table:
    """A rich table; the title and every cell are shown literally (names from files are not markup)."""
    # at least as wide as its title (up to 80 columns), so the title does not wrap over a narrow table
    t = Table(title=Text(title), title_justify="left", min_width=min(len(title), 80))
    for c in columns:
        t.add_column(c, justify="left" if c in _LEFT else "right")
    for r in rows:
        t.add_row(*[Text(str(x)) for x in r])
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
    align: Optional[int] = None,
    attention: str = DEFAULT_ATTENTION,
    allow_extrapolation: bool = False,
    engine: Optional[str] = None,
    confidence: Optional[float] = None,
    tpot_budget: Optional[str] = None,
    ttft_budget: Optional[str] = None,
) -> Any:
    """A :class:`~rooflaw.solver.Problem` from the options shared by ``solve``, ``frontier`` and ``search``."""
    from .. import api
    from ..api import Problem

    return Problem(
        law=ready_law(law, tokens),
        device=api.get_device(device),
        space=api.get_space(space),
        workload=api.Workload(batch, input_tokens, output_tokens, attention),
        precision=precision,
        latency_budget=None if latency_budget is None else api.parse_time(latency_budget, "latency-budget"),
        phase=phase,
        memory_budget=None if memory_budget is None else api.parse_bytes(memory_budget, "memory-budget"),
        energy_budget=None if energy_budget is None else api.parse_energy(energy_budget, "energy-budget"),
        tpot_budget=None if tpot_budget is None else api.parse_time(tpot_budget, "tpot-budget"),
        ttft_budget=None if ttft_budget is None else api.parse_time(ttft_budget, "ttft-budget"),
        preset=preset,
        tokens=check_tokens(tokens),
        align=align,
        allow_extrapolation=allow_extrapolation,
        engine=engine,
        confidence=confidence,
    )


def check_tokens(tokens: Optional[float]) -> Optional[float]:
    """``--tokens`` must be a positive, finite count (or absent)."""
    if tokens is not None and not (math.isfinite(tokens) and tokens > 0):
        raise bad("tokens", tokens, "must be a positive, finite number of training tokens")
    return tokens


def ready_law(name: str, tokens: Optional[float] = None) -> Any:
    """The law ``name`` (built-in or expression), refused when a parameter has no value (unfitted)
    or when it uses D and ``--tokens`` is missing."""
    from .. import api

    law = api.get_law(name)
    unfitted = [k for k, v in law.params.items() if not math.isfinite(v)]
    if unfitted:
        raise bad("law", law.name, f"parameters {', '.join(unfitted)} have no value; fit them first (rooflaw fit)")
    if "D" in law.variables and tokens is None:
        raise bad("tokens", None, f"law {law.name} uses D (training tokens): give --tokens")
    check_tokens(tokens)
    return law


#: File formats ``--plot`` accepts (what matplotlib writes without extra packages).
PLOT_SUFFIXES = (".png", ".pdf", ".svg", ".svgz", ".jpg", ".jpeg", ".eps", ".ps", ".tif", ".tiff", ".webp")


def check_output(path: Any, option: str, suffixes: Iterable[str] | None = None) -> Path:
    """Refuse (exit 2) an output path that cannot be written: a missing directory, a directory,
    an unknown file format. Call it before long work so a typo costs nothing."""
    p = Path(str(path))
    if suffixes is not None and p.suffix.lower() not in tuple(suffixes):
        raise bad(option, str(p), f"unknown format {p.suffix or '(none)'!r}; use one of {', '.join(suffixes)}")
    if not p.parent.is_dir():
        raise bad(option, str(p), f"directory {str(p.parent)!r} does not exist")
    if p.is_dir():
        raise bad(option, str(p), "is a directory; give a file name")
    return p


@contextlib.contextmanager
def atomic_output(path: Any, option: str, suffixes: Iterable[str] | None = None) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; when the block succeeds it replaces ``path`` in one
    ``os.replace``, so a failed write never truncates or destroys the previous file.

    A target that exists and is not a regular file (``/dev/stdout``, a FIFO) is written directly.
    A write that fails for reasons outside rooflaw (disk full, permissions) raises
    :class:`~rooflaw.errors.ExternalError` (exit 4) naming the option and path.
    """
    p = check_output(path, option, suffixes)

    def outside(e: OSError) -> ExternalError:
        return ExternalError(f"{option}={str(p)!r}: cannot write ({e.strerror or type(e).__name__})")

    if p.exists() and not p.is_file():
        try:
            yield p
        except OSError as e:
            raise outside(e) from None
        return
    try:
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=p.suffix)
        os.close(fd)
    except OSError as e:
        raise outside(e) from None
    try:
        yield Path(tmp)
        mode = p.stat().st_mode & 0o7777 if p.exists() else 0o666 & ~_umask()
        os.chmod(tmp, mode)
        os.replace(tmp, p)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise outside(e) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    old = os.umask(0o022)
    os.umask(old)
    return old
