"""The fitted acceptance law α(draft, target) from published speculative-decoding runs (``acceptance.csv``).

Form, chosen before fitting: ``logit α = a + b·ln(N_target / N_draft)`` (N: total parameters) -- two parameters, the
pair's size ratio as the only input. Fitted by least squares in logit space on every row of ``acceptance.csv``
(each row cites its source; llama.cpp's ``accept`` -- accepted / drafted tokens with early-stopped drafts -- stands
in for α, a stated bias). Its leave-one-out error (:func:`leave_one_out`) is reported with it: the published rates
depend on the task (code is accepted far more often than prose) and the sampling as much as on the sizes, so the law
is a prior, not a prediction -- give a measured ``--acceptance`` when you have one. Domain: the size ratios of the
rows; a pair outside it is refused unless ``extrapolate``.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import bad

DATA = Path(__file__).with_name("acceptance.csv")


@dataclass(frozen=True)
class Row:
    id: str
    draft: str
    target: str
    params_draft: float  # billions
    params_target: float
    alpha: float
    measure: str
    gamma: int | None
    speedup: float | None
    device: str
    sampling: str
    domain: str
    source: str

    @property
    def log_ratio(self) -> float:
        """ln(N_target / N_draft)."""
        return math.log(self.params_target / self.params_draft)


def load_acceptance_rows(path: Path | str = DATA) -> list[Row]:
    """The rows of ``acceptance.csv`` (lines starting with ``#`` are comments)."""
    with open(path, newline="") as f:
        lines = [ln for ln in f if not ln.startswith("#")]
    out = []
    for r in csv.DictReader(lines):
        out.append(Row(
            r["id"], r["draft"], r["target"], float(r["params_draft"]), float(r["params_target"]), float(r["alpha"]),
            r["measure"], int(r["gamma"]) if r["gamma"] else None, float(r["speedup"]) if r["speedup"] else None,
            r["device"], r["sampling"], r["domain"], r["source"],
        ))  # fmt: skip
    return out


def _logit(p: Any) -> Any:
    return np.log(p / (1.0 - p))


def _fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    A = np.column_stack([np.ones_like(x), x])
    (a, b), *_ = np.linalg.lstsq(A, _logit(y), rcond=None)
    return float(a), float(b)


@dataclass(frozen=True)
class AcceptanceLaw:
    """``logit α = a + b·ln(N_target/N_draft)``, fitted on ``n`` rows whose ln-ratios span ``domain``."""

    a: float
    b: float
    n: int
    domain: tuple[float, float]
    loo_median_abs_error: float
    loo_max_abs_error: float
    source: str = "rooflaw/constraints/acceptance.csv"

    def alpha(self, params_draft: float, params_target: float, extrapolate: bool = False) -> float:
        """α for a pair of total parameter counts (any unit, the same for both)."""
        if not (params_draft > 0 and params_target > 0):
            raise bad("draft", params_draft, "the fitted acceptance needs positive parameter counts")
        x = math.log(params_target / params_draft)
        lo, hi = self.domain
        if not extrapolate and not lo <= x <= hi:
            raise bad("acceptance", "fitted", f"target/draft size ratio {math.exp(x):.3g} lies outside the fitted "
                      f"domain [{math.exp(lo):.3g}, {math.exp(hi):.3g}]; give --acceptance A")  # fmt: skip
        return 1.0 / (1.0 + math.exp(-(self.a + self.b * x)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "form": "logit(alpha) = a + b*ln(N_target/N_draft)",
            "a": self.a,
            "b": self.b,
            "rows": self.n,
            "ratio_domain": [math.exp(self.domain[0]), math.exp(self.domain[1])],
            "loo_median_abs_error": self.loo_median_abs_error,
            "loo_max_abs_error": self.loo_max_abs_error,
            "source": self.source,
        }


def leave_one_out(rows: list[Row]) -> np.ndarray:
    """|α predicted − α published| of each row by the law fitted on the other rows."""
    x = np.array([r.log_ratio for r in rows])
    y = np.array([r.alpha for r in rows])
    err = np.empty(len(rows))
    for i in range(len(rows)):
        keep = np.arange(len(rows)) != i
        a, b = _fit(x[keep], y[keep])
        err[i] = abs(1.0 / (1.0 + math.exp(-(a + b * x[i]))) - y[i])
    return err


@cache
def fitted_law(path: str = str(DATA)) -> AcceptanceLaw:
    """The law fitted on every row of ``path`` (cached)."""
    rows = load_acceptance_rows(path)
    x = np.array([r.log_ratio for r in rows])
    a, b = _fit(x, np.array([r.alpha for r in rows]))
    loo = leave_one_out(rows)
    return AcceptanceLaw(a, b, len(rows), (float(x.min()), float(x.max())), float(np.median(loo)), float(loo.max()))


def fitted_acceptance(draft: Any, target: Any, extrapolate: bool = False) -> float:
    """α of a :class:`~.speculative.Draft` for ``target`` by the fitted law (total parameters of both)."""
    from ..arch.architecture import param_counts

    if getattr(draft, "shares_head", False):
        raise bad("acceptance", "fitted", "the fitted law covers separate draft models, not eagle heads; "
                  "give --acceptance A")  # fmt: skip
    nd = param_counts(draft.arch.columns())["total"]
    nt = param_counts(target.columns())["total"]
    return fitted_law().alpha(float(nd), float(nt), extrapolate)


__all__ = ["AcceptanceLaw", "Row", "fitted_acceptance", "fitted_law", "leave_one_out", "load_acceptance_rows"]
