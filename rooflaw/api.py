"""The names the CLI, ``paper_repro`` and ``benchmarks`` use (re-exported by ``rooflaw``)."""

from __future__ import annotations

from .arch import COLUMNS, Architecture, from_file, from_hf_config, from_mapping, from_spec, param_counts
from .arch import Space, get_space, list_spaces
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
from .devices import Device, get_device, list_devices
from .errors import Infeasible, RooflawError
from .units import parse_bytes, parse_energy, parse_time

try:  # filled in by the objectives package
    from .objectives import LossLaw, fit_law, get_law, law_inputs, list_laws
except ImportError:  # pragma: no cover - during bootstrap only
    pass

__all__ = [
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
    "complete_columns",
    "decode_steps",
    "evaluate",
    "evaluate_columns",
    "fit_law",
    "from_file",
    "from_hf_config",
    "from_mapping",
    "from_spec",
    "gemm",
    "get_device",
    "get_law",
    "get_space",
    "law_inputs",
    "list_devices",
    "list_laws",
    "list_spaces",
    "param_counts",
    "parse_bytes",
    "parse_energy",
    "parse_time",
]
