"""Constraints: the roofline cost model (latency per phase, memory, energy) and precision formats."""

from ..devices.precision import FORMATS, Format, Precision
from .engines import ENGINE_NAMES, Applied, EngineProfile, applied, get_engine
from .evaluate import evaluate_columns
from .gemm import GemmCost, gemm
from .roofline import PRESETS, CostReport, OpCost, complete_columns, evaluate
from .steps import decode_steps
from .workload import Workload

__all__ = [
    "ENGINE_NAMES",
    "Applied",
    "EngineProfile",
    "applied",
    "get_engine",
    "FORMATS",
    "PRESETS",
    "CostReport",
    "Format",
    "GemmCost",
    "OpCost",
    "Precision",
    "Workload",
    "complete_columns",
    "decode_steps",
    "evaluate",
    "evaluate_columns",
    "gemm",
]
