"""``evaluate_columns``: a table of candidates evaluated in a :class:`~.scenario.Scenario` -- on one chip by the
roofline backends (:func:`.roofline.evaluate_columns`), under a layout by :func:`.parallel.serving.layout_columns`
(which prices each shard on one chip). This module sits above both, so neither imports the other's caller."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..devices.device import Device
from . import roofline
from .engines import EngineProfile
from .parallel.serving import layout_columns
from .precision import Precision
from .scenario import Scenario
from .workload import Workload


def evaluate_columns(
    columns: Mapping[str, Any],
    scenario: Scenario | Device,
    workload: Workload | None = None,
    precision: str | Precision = "fp16",
    preset: str = "full",
    tiles: bool = False,
    chunk: int = roofline.CHUNK,
    engine: str | EngineProfile | None = None,
    backend: str = "auto",
) -> dict[str, np.ndarray]:
    """Evaluate a table of candidates (dict of equal-length arrays or a DataFrame) in ``scenario``.

    ``scenario``: a :class:`Scenario`, or a :class:`Device` with the loose ``workload``, ``precision``, ``preset``
    and ``engine`` (``Scenario.of``). One chip: the columns of :func:`.roofline.evaluate_columns` (prefill_s,
    decode_s, ttft_s, tpot_s, total_s, FLOPs, bytes, memory, energy, parameter counts; ``tiles``, ``chunk``
    and ``backend`` as there). A scenario with a layout (its device a System): the serving columns of
    :func:`.parallel.serving.layout_columns`.
    Example: two depths at once, on the pure roofline::

        >>> import numpy as np
        >>> import rooflaw as rl
        >>> cols = {"layers": np.array([4, 8]), "d_model": 512, "heads": 8, "kv_heads": 2, "ffn": 1536}
        >>> out = rl.evaluate_columns(cols, rl.get_device("jetson-agx-orin-64gb"), engine="ideal")
        >>> np.round(out["decode_s"] * 1e3, 3)
        array([4.634, 6.698])
        >>> out["params_total"].tolist()
        [44831232.0, 56893952.0]
    """
    sc = Scenario.coerce(scenario, workload, precision, preset, engine)
    if sc.layout is not None:
        return layout_columns(columns, sc)
    return roofline.evaluate_columns(columns, sc, tiles=tiles, chunk=chunk, backend=backend)


__all__ = ["evaluate_columns"]
