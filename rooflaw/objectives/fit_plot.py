"""Plots of a fit: predicted vs actual loss (the paper's Fig. 4)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .fit import FitResult


def plot_fit(result: FitResult, path: str | Path) -> Path:
    """Predicted vs actual loss, training and held-out points marked (the paper's Fig. 4)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    fig, ax = plt.subplots(figsize=(5, 5))
    tr = ~result.holdout_mask
    ax.scatter(result.y[tr], result.y_pred[tr], s=14, label=f"train (R²={result.r2:.3f})")
    if result.holdout_mask.any():
        ho = result.holdout_mask
        ax.scatter(result.y[ho], result.y_pred[ho], s=22, marker="^", label=f"held out (R²={result.r2_holdout:.3f})")
    lo = float(min(result.y.min(), result.y_pred.min()))
    hi = float(max(result.y.max(), result.y_pred.max()))
    ax.plot([lo, hi], [lo, hi], "k--", lw=1)
    ax.set_xlabel("actual loss")
    ax.set_ylabel("predicted loss")
    ax.set_title(result.law.name)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


__all__ = ["plot_fit"]
