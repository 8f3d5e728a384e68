"""Pricing measured tables with the families' predictors: strictly (the fit: bad input raises, named) or leniently
(``check-kernels`` on tables it has never seen: what a family cannot price is left empty and told)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator

import numpy as np

from ...devices.device import Device
from ...errors import bad
from . import KernelCurves, family_of_table
from .tables import Table, negative_sizes

#: what a family's predictor raises on a value it does not handle (a NaN size, text in a number column)
_ROW_ERRORS = (ValueError, TypeError, IndexError, ZeroDivisionError, OverflowError)


def _column(e: KeyError) -> str:
    """The missing column(s) a ``KeyError`` names (pandas writes ``"['a', 'b'] not in index"``)."""
    m = re.fullmatch(r"\[(.*)\] not in index", str(e.args[0]) if e.args else "")
    return m[1].replace("'", "") if m else str(e.args[0] if e.args else e)


@contextlib.contextmanager
def strict(where: str) -> Iterator[None]:
    """Turn a family's failure on the rows of ``where`` (a missing column, a value it cannot read) into bad input
    (exit 2), naming ``where`` and the column or value."""
    try:
        yield
    except KeyError as e:
        raise bad(where, _column(e), "column missing from the table") from None
    except _ROW_ERRORS as e:
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise bad(where, why, "a value its family cannot price (a blank or non-number cell?)") from None


def predict_tables(
    tables: Iterable[Table], device: Device, curves: KernelCurves | None, notes: list[str] | None = None
) -> list[np.ndarray]:
    """Predicted ms of every row of each table (NaN where no family models it or there are no curves). Strict
    (``notes`` None, as the fit prices): a table without a column its family reads raises, naming it. Lenient
    (``notes`` a list, as ``check-kernels`` prices tables it has never seen): that table is left unpriced, rows its
    family cannot price (a value it fails on) are found by halving and left unpriced, and ``notes`` says so."""
    out = []
    for t in tables:
        fam = family_of_table(t.table)
        if fam is None or curves is None:
            out.append(np.full(len(t.rows), np.nan))
            continue
        where = f"{t.table} ({t.framework}-{t.version})"
        if notes is None:
            with strict(where):
                out.append(_predict(fam, t.rows, device, curves))
            continue
        try:
            out.append(_predict(fam, t.rows, device, curves))
        except KeyError as e:  # a table without a column its family reads
            notes.append(f"{where}: column {_column(e)!r} missing: its {len(t.rows)} rows not priced")
            out.append(np.full(len(t.rows), np.nan))
        except _ROW_ERRORS as e:
            pred = _predict_rows(fam, t.rows, device, curves)
            why = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            notes.append(f"{where}: {int(np.isnan(pred).sum())} rows its family cannot price ({why}): not priced")
            out.append(pred)
    return out


def _predict(fam, rows, device: Device, curves: KernelCurves) -> np.ndarray:
    """ms of each row; NaN where a size is negative or the family's answer is no time (<= 0 or infinite)."""
    with np.errstate(all="ignore"):
        p = np.asarray(fam.predict(rows, device, curves), dtype=np.float64)
        return np.where((p > 0) & np.isfinite(p) & ~negative_sizes(rows).to_numpy(), p, np.nan)


def _predict_rows(fam, rows, device: Device, curves: KernelCurves, budget: int = 256) -> np.ndarray:
    """``_predict`` of ``rows``, halving any block it raises on down to single rows (NaN), in at most ``budget``
    calls (the blocks still failing then: NaN)."""
    out = np.full(len(rows), np.nan)
    todo = [(0, len(rows))]
    calls = 0
    while todo:
        lo, hi = todo.pop()
        if calls >= budget:
            continue
        calls += 1
        try:
            out[lo:hi] = _predict(fam, rows.iloc[lo:hi], device, curves)
        except (KeyError, *_ROW_ERRORS):
            if hi - lo > 1:
                mid = (lo + hi) // 2
                todo += [(mid, hi), (lo, mid)]
    return out
