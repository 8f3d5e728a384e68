"""Fitting rooflaw's achieved-performance figures to measurements: the public entry points.

Two fits feed the one cost assembly: the **kernel curves** per GPU architecture, fitted to measured kernel tables
(``rooflaw devices fit-kernels`` / ``check-kernels``), and the **engine level** on top of them, fitted to published
end-to-end runs (``rooflaw devices fit-efficiency``). The CLI and scripts reach both through this module only.

>>> from rooflaw.fitting import KernelCurves, abs_errors
>>> float(abs_errors([1.1], [1.0])[0]) == abs(1.1 / 1.0 - 1)
True
"""

from __future__ import annotations

from .constraints.fit_efficiency import (
    FIT_COMMAND,
    FitResult,
    achieved_table,
    engines_toml,
    median_abs_error,
)
from .constraints.fit_efficiency import errors as efficiency_errors
from .constraints.fit_efficiency import fit as fit_efficiency
from .constraints.fit_efficiency import held_out as efficiency_held_out
from .constraints.fit_efficiency import write_catalog as write_engine_catalog
from .constraints.kernels import KernelCurves, curves_for
from .constraints.kernels.fit import (
    abs_errors,
    catalog_text,
    fit_kernels,
    kernel_gpus,
    predict_tables,
    with_provenance,
)
from .constraints.kernels.fit import write_catalog as write_kernel_catalog
from .constraints.kernels.tables import read_tables as read_kernel_tables
from .constraints.published import load_cases

__all__ = [
    "FIT_COMMAND",
    "FitResult",
    "KernelCurves",
    "abs_errors",
    "achieved_table",
    "catalog_text",
    "curves_for",
    "efficiency_errors",
    "efficiency_held_out",
    "engines_toml",
    "fit_efficiency",
    "fit_kernels",
    "kernel_gpus",
    "load_cases",
    "median_abs_error",
    "predict_tables",
    "read_kernel_tables",
    "with_provenance",
    "write_engine_catalog",
    "write_kernel_catalog",
]
