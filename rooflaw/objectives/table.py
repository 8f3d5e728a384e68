"""Reading a table of training runs (``fit``'s data): CSV, JSON lines, JSON or Parquet, by file suffix."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..errors import RooflawError
from ..safe_io import check_regular


def load_table(path: str | Path) -> pd.DataFrame:
    """CSV, JSON lines (``.jsonl``/``.ndjson``/``.json``) or Parquet, by file suffix."""
    path = Path(path)
    if not path.exists():
        raise RooflawError(f"data={str(path)!r}: no such file")
    check_regular(path, "data")  # a FIFO or a device is refused before pandas opens it
    suf = path.suffix.lower()
    try:
        if suf in (".csv", ".txt"):
            return pd.read_csv(path)
        if suf in (".jsonl", ".ndjson"):
            return pd.read_json(path, lines=True)
        if suf == ".json":
            try:
                return pd.read_json(path, lines=True)
            except ValueError:
                return pd.read_json(path)
        if suf in (".parquet", ".pq"):
            return pd.read_parquet(path)
    except ImportError as e:
        raise RooflawError(f"data={str(path)!r}: {e}") from None
    except Exception as e:  # noqa: BLE001 - parser errors of many kinds
        raise RooflawError(f"data={str(path)!r}: cannot read ({type(e).__name__}: {e})") from None
    raise RooflawError(f"data={str(path)!r}: unknown format {suf!r}; use .csv, .jsonl or .parquet")
