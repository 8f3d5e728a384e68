"""Read measured kernel tables laid out like aiconfigurator's: ``DIR/GPU/<framework>-<version>/<table>.csv[.gz]``
(or ``<table>.txt``, aiconfigurator's own naming: the same CSV text).

:func:`read_tables` accepts the root (one folder per GPU), a single GPU folder, or a single
``<framework>-<version>`` folder, and returns every table found, in a stable order (GPU, folder, table). Each
row keeps its own columns plus ``table``, ``framework``, ``version`` (from the folder name, the framework
lower-cased: ``trtllm``, ``1.3.0rc20``), ``row`` (0-based index in its source table) and ``latency`` (ms, as
measured). A table's own ``framework``/``version`` columns (``TRTLLM``, ``vLLM``) are replaced by the folder's names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ...errors import RooflawError

#: ``<framework>-<version>`` folder names: ``trtllm-1.3.0rc20``, ``vllm-0.24.0``, ``nccl-2.29.2``.
_FOLDER = re.compile(r"^(?P<framework>[A-Za-z][A-Za-z0-9_.]*)-(?P<version>[0-9][A-Za-z0-9_.+]*)$")
_SUFFIXES = (".csv.gz", ".csv", ".txt")


@dataclass(frozen=True)
class Table:
    """One measured table: which GPU folder, framework and version it came from, and its rows."""

    gpu: str  #: the GPU folder's name (``h100_sxm``), or ``""`` when read from a framework folder alone
    framework: str
    version: str
    table: str  #: file name without suffix (``gemm_perf``)
    path: Path
    rows: pd.DataFrame


def _table_name(p: Path) -> str | None:
    return next((p.name[: -len(s)] for s in _SUFFIXES if p.name.endswith(s)), None)


def _fail(path: Path, why: str) -> RooflawError:
    return RooflawError(f"kernel tables {str(path)!r}: {why}")


def _read_csv(
    path: Path, gpu: str, framework: str, version: str, table: str, notes: list[str] | None = None
) -> Table | None:
    """One table. Strict (``notes`` None, as the fit reads): a file that is not a CSV with a numeric ``latency`` in
    every row raises. Lenient (``notes`` a list, as ``check-kernels`` copies every row it can): an unreadable file is
    skipped, rows without a numeric latency are kept with it empty, and each case is told in ``notes``."""
    if not path.is_file():
        raise _fail(path, "not a regular file")
    try:
        df = _parse(path, notes)
    except (OSError, EOFError, ValueError, UnicodeDecodeError, pd.errors.ParserError) as e:
        err = _fail(path, f"unreadable CSV ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})")
        if notes is None:
            raise err from None
        notes.append(f"{err}: skipped")
        return None
    df = _clean(df, path, notes)
    if "latency" not in df.columns:
        if notes is None:
            raise _fail(path, "no 'latency' column")
        notes.append(f"{_fail(path, 'no latency column')}: {len(df)} rows copied with the latency empty")
        lat = pd.Series(float("nan"), index=df.index)
    else:
        lat = pd.to_numeric(df["latency"], errors="coerce")
        if lat.isna().any():
            i = int(lat.isna().to_numpy().argmax())
            raw = df["latency"].iloc[i]
            why = f"row {i}: latency={'(empty)' if pd.isna(raw) else repr(str(raw))} is not a number"
            if notes is None:
                raise _fail(path, why)
            notes.append(f"{_fail(path, why)}: {int(lat.isna().sum())} such rows copied with the latency empty")
        bad_value = lat.notna() & ~((lat > 0) & (lat < float("inf")))  # a kernel takes a positive, finite time
        if bad_value.any():
            i = int(bad_value.to_numpy().argmax())
            why = f"row {i}: latency={float(lat.iloc[i])!r} is not a positive, finite time"
            if notes is None:
                raise _fail(path, why)
            notes.append(f"{_fail(path, why)}: {int(bad_value.sum())} such rows copied, not scored")
    df = df.drop(columns=[c for c in ("table", "framework", "version", "row") if c in df.columns])
    df.insert(0, "table", table)
    df.insert(1, "framework", framework)
    df.insert(2, "version", version)
    df.insert(3, "row", range(len(df)))
    df["latency"] = lat.astype(float).to_numpy()
    return Table(gpu, framework, version, table, path, df)


def _parse(path: Path, notes: list[str] | None) -> pd.DataFrame:
    """The CSV text of ``path``; lenient, a line with more fields than the header is skipped (and told)."""
    try:
        return pd.read_csv(path, compression="infer", skipinitialspace=True)
    except pd.errors.ParserError:
        if notes is None:
            raise
    bad: list[list[str]] = []
    df = pd.read_csv(path, compression="infer", skipinitialspace=True, engine="python",
                     on_bad_lines=lambda line: bad.append(line))  # fmt: skip
    notes.append(f"{_fail(path, f'{len(bad)} lines with more fields than the header')}: skipped")
    return df


def _clean(df: pd.DataFrame, path: Path, notes: list[str] | None) -> pd.DataFrame:
    """Drop repeated header lines (a row whose every cell is its column's name: tables concatenated with their
    headers), read a text column's blank cells as ``""`` (no name given), and make a column numeric where most of its
    cells are numbers (a few text cells in a shape column: strict raises naming the first, lenient leaves them empty,
    so those rows are not priced, and says so)."""
    if len(df.columns) and len(df):
        header = (df.astype(str).apply(lambda c: c.str.strip()) == [str(c).strip() for c in df.columns]).all(axis=1)
        if header.any():
            df = df[~header.to_numpy()].reset_index(drop=True)
            if notes is not None:
                notes.append(f"{_fail(path, f'{int(header.sum())} repeated header lines')}: dropped")
    for col in df.columns:
        if pd.api.types.is_numeric_dtype(df[col]) or col == "latency":
            continue
        if df[col].isna().all():
            continue
        num = pd.to_numeric(df[col], errors="coerce")
        bad = num.isna() & df[col].notna() & (df[col].astype(str).str.strip() != "")
        if not bad.any():
            if num.notna().any():
                df[col] = num  # numbers read as text (beside a dropped header line)
            continue
        if bad.sum() * 2 >= df[col].notna().sum():
            df[col] = df[col].fillna("")  # a text column: a blank cell is an empty name ("not told"), not NaN
            continue
        i = int(bad.to_numpy().argmax())
        why = f"row {i}: {col}={str(df[col].iloc[i])!r} is not a number"
        if notes is None:
            raise _fail(path, why)
        notes.append(f"{_fail(path, why)}: {int(bad.sum())} such rows kept with {col} empty (not priced)")
        df[col] = num
    return df


def _framework_folder(
    folder: Path, gpu: str, only: frozenset[str] | None = None, notes: list[str] | None = None
) -> list[Table]:
    m = _FOLDER.match(folder.name)
    if m is None:
        raise _fail(folder, "folder name is not <framework>-<version> (e.g. trtllm-1.3.0rc20)")
    out = []
    for p in sorted(folder.iterdir()):
        name = _table_name(p)
        if name is None or (only is not None and name not in only):
            continue
        t = _read_csv(p, gpu, m["framework"].lower(), m["version"], name, notes)
        if t is not None:
            out.append(t)
    return out


def _is_framework_folder(p: Path) -> bool:
    return p.is_dir() and _FOLDER.match(p.name) is not None and any(_table_name(c) for c in p.iterdir())


def _gpu_folder(folder: Path, only: frozenset[str] | None = None, notes: list[str] | None = None) -> list[Table]:
    out = []
    for sub in sorted(folder.iterdir()):
        if sub.is_dir() and _FOLDER.match(sub.name):
            out.extend(_framework_folder(sub, folder.name, only, notes))
    return out


def read_tables(path: str | Path, only: Iterable[str] | None = None, notes: list[str] | None = None) -> list[Table]:
    """Every measured table under ``path`` (root, GPU folder or framework folder) -- or those named in ``only``
    (``gemm_perf`` ...); raises if there is none. ``notes``: read leniently, telling there what was skipped or kept
    without a latency (see :func:`_read_csv`)."""
    root = Path(path)
    if not root.exists():
        raise _fail(root, "no such folder")
    if not root.is_dir():
        raise _fail(root, "not a folder")
    want = frozenset(only) if only is not None else None
    try:
        if _is_framework_folder(root):
            tables = _framework_folder(root, "", want, notes)
        elif any(c.is_dir() and _FOLDER.match(c.name) for c in root.iterdir()):
            tables = _gpu_folder(root, want, notes)
        else:
            tables = [t for c in sorted(root.iterdir()) if c.is_dir() for t in _gpu_folder(c, want, notes)]
    except PermissionError as e:
        raise _fail(Path(e.filename or root), "permission denied") from None
    if not tables:
        skipped = [n for n in notes or () if n.endswith(": skipped")]
        why = f"no readable table ({len(skipped)} skipped; first: {skipped[0]})" if skipped else ""
        raise _fail(root, why or "no <framework>-<version>/<table>.csv[.gz] (or .txt) tables found")
    return tables


#: the tables' size columns (counts, tokens, elements): a row with one of them negative has no shape to price
#: (``window_size`` is not one: engines write -1 for "no window")
SIZE_COLUMNS = ("m", "n", "k", "batch_size", "isl", "step", "num_heads", "num_key_value_heads", "head_dim",
                "beam_width", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size",
                "moe_ep_size", "tp_size", "num_gpus", "message_size")  # fmt: skip


def negative_sizes(rows: pd.DataFrame) -> pd.Series:
    """True for each row with a negative :data:`SIZE_COLUMNS` value (a size no kernel runs)."""
    neg = pd.Series(False, index=rows.index)
    for c in SIZE_COLUMNS:
        if c in rows and pd.api.types.is_numeric_dtype(rows[c]):
            neg |= rows[c] < 0
    return neg


def gpu_tables(path: str | Path, only: Iterable[str] | None = None) -> dict[str, list[Table]]:
    """:func:`read_tables` grouped by GPU folder name (a framework folder read alone: its parent's name)."""
    out: dict[str, list[Table]] = {}
    for t in read_tables(path, only):
        out.setdefault(t.gpu or t.path.parent.parent.name, []).append(t)
    return out


#: the public spelling (``rooflaw.fitting``)
read_kernel_tables = read_tables
