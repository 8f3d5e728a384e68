"""Every decode step of one architecture as a table, computed in one vectorised pass.

Step t = 1..S_out is a one-step decode at context S_in + t (its KV cache holds S_in + t − 1 earlier tokens),
exactly what evaluating ``Workload(B, S_in + t − 1, 1)`` one step at a time gives -- but every step is a row
of one candidate table, so 10⁶ steps cost one compiled call per chunk instead of 10⁶ Python-level evaluations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..arch.architecture import Architecture
from ..devices.device import Device
from ..devices.precision import Precision
from .engines import EngineProfile
from .scenario import Scenario
from .workload import Workload

#: Rows (steps) per compiled call: bounds the temporary arrays (~ a few hundred per row) whatever S_out is.
STEP_CHUNK = 1 << 15
#: Columns of :func:`decode_step_table`, in order (SI units; ``context`` is S_in + t).
STEP_COLUMNS = ("step", "context", "seconds", "flops", "bytes")


@dataclass(frozen=True)
class _StepWorkload:
    """A workload whose prompt length is an array (one entry per decode step), one generated token each."""

    batch: int
    input_tokens: np.ndarray
    attention: str
    output_tokens: int = 1


def decode_step_table(
    arch: Architecture,
    scenario: Scenario | Device,
    workload: Workload | None = None,
    precision: str | Precision = "fp16",
    preset: str = "full",
    tiles: bool = False,
    engine: str | EngineProfile | None = None,
    chunk: int = STEP_CHUNK,
) -> dict[str, np.ndarray]:
    """Per decode step t = 1..S_out: ``step``, ``context`` (S_in + t), ``seconds``, ``flops``, ``bytes``.

    ``scenario``: a :class:`Scenario` (or a device with the loose workload, precision, preset and engine).
    Arrays of length S_out (int64 for step/context, float64 otherwise), equal to evaluating each step as its
    own one-step decode (a test checks it against that loop); memory is bounded by ``chunk`` steps at a time.
    """
    from .roofline import complete_columns, evaluate_chunk

    sc = Scenario.coerce(scenario, workload, precision, preset, engine)
    workload = sc.workload
    base = complete_columns({k: np.array([float(v)]) for k, v in arch.columns().items()})
    n = workload.output_tokens
    step = np.arange(1, n + 1, dtype=np.int64)
    out = {"seconds": np.empty(n), "flops": np.empty(n), "bytes": np.empty(n)}
    for s in range(0, n, chunk):
        m = min(chunk, n - s)
        cols = {k: np.broadcast_to(v, (m,)) for k, v in base.items()}
        s_in = (workload.input_tokens + step[s : s + m] - 1).astype(np.float64)
        wl = _StepWorkload(workload.batch, s_in, workload.attention)
        res = evaluate_chunk(cols, sc.with_workload(wl), tiles, per_op=True)
        out["seconds"][s : s + m] = res["decode_s"]
        out["flops"][s : s + m] = res["decode_flops"]
        out["bytes"][s : s + m] = res["decode_bytes"]
    return {"step": step, "context": workload.input_tokens + step, **out}


def decode_steps(
    arch: Architecture,
    scenario: Scenario | Device,
    workload: Workload | None = None,
    precision: str | Precision = "fp16",
    preset: str = "full",
    tiles: bool = False,
    engine: str | EngineProfile | None = None,
) -> list[dict[str, float]]:
    """Latency of every decode step t = 1..S_out (context S_in + t), one dict per step.

    Each step is a one-step decode at its own context, independently of the closed-form sum
    :func:`~rooflaw.constraints.roofline.evaluate` uses -- the two agree exactly (a test checks it). All steps are
    evaluated in one vectorised pass (:func:`decode_step_table`, which returns the same as arrays).
    """
    return step_rows(
        decode_step_table(arch, Scenario.coerce(scenario, workload, precision, preset, engine), tiles=tiles)
    )


def step_rows(table: dict[str, Any]) -> list[dict[str, Any]]:
    """The table as one dict per step (``step``/``context`` as ints, the rest as floats)."""
    cols = [table[k].tolist() for k in STEP_COLUMNS]
    return [dict(zip(STEP_COLUMNS, row, strict=True)) for row in zip(*cols, strict=True)]


__all__ = ["STEP_COLUMNS", "decode_step_table", "decode_steps", "step_rows"]
