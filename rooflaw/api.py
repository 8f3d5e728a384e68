"""The names the CLI, ``paper_repro`` and ``benchmarks`` use (re-exported by ``rooflaw``)."""

from __future__ import annotations

from .arch import (
    COLUMNS,
    Architecture,
    Space,
    bundled_models,
    from_file,
    from_hf_config,
    from_mapping,
    from_spec,
    get_space,
    list_spaces,
    param_counts,
)
from .constraints import (
    FORMATS,
    PRESETS,
    CostReport,
    Precision,
    Workload,
    complete_columns,
    decode_steps,
    evaluate,
    evaluate_columns,
    gemm,
)
from .constraints.breakdown import OP_COLUMNS, op_rows, throughput
from .devices import Device, calibrate, device_ids, get_device, list_devices, load_device_file, save_device_toml
from .errors import Infeasible, RooflawError
from .objectives import LossLaw, fit_law, gemstones, get_law, law_inputs, list_laws
from .plots import check_path as check_figure_path
from .plots import plot_breakdown, plot_frontier, plot_report, plot_roofline
from .solver import Problem, Result, solve
from .solver.compare import compare
from .solver.explain_discrete import explain_discrete, explain_text
from .units import parse_bytes, parse_energy, parse_time

__all__ = [
    "Problem",
    "Result",
    "solve",
    "COLUMNS",
    "FORMATS",
    "PRESETS",
    "Architecture",
    "CostReport",
    "Device",
    "Infeasible",
    "LossLaw",
    "Precision",
    "RooflawError",
    "Space",
    "Workload",
    "bundled_models",
    "calibrate",
    "complete_columns",
    "decode_steps",
    "device_ids",
    "evaluate",
    "evaluate_columns",
    "fit_law",
    "from_file",
    "from_hf_config",
    "from_mapping",
    "from_spec",
    "gemstones",
    "gemm",
    "get_device",
    "get_law",
    "get_space",
    "law_inputs",
    "list_devices",
    "list_laws",
    "list_spaces",
    "load_device_file",
    "param_counts",
    "parse_bytes",
    "parse_energy",
    "parse_time",
    "save_device_toml",
]

# figures and per-operator tables (rooflaw.plots, rooflaw.constraints.breakdown)
__all__ += ["OP_COLUMNS", "check_figure_path", "op_rows", "plot_breakdown", "plot_frontier", "plot_report"]
__all__ += ["plot_roofline", "throughput"]
__all__ += ["compare", "explain_discrete", "explain_text"]
