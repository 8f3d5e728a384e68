"""The kernel curves' catalog file: :class:`KernelCurves` as TOML tables (``kernel_curves.toml``), written
atomically."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np

from ...safe_io import write_text_atomic
from . import GENERIC, KernelCurves

#: where the measured kernels come from (the provenance every fitted curve carries)
SOURCE = "aiconfigurator (NVIDIA ai-dynamo/aiconfigurator), Apache-2.0"
COMMIT = "095f58a51c"


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        f = float(v)
        if not math.isfinite(f):
            return "nan"
        return repr(float(f"{f:.6g}"))
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def _toml_key(k: str) -> str:
    return k if k.replace("_", "").replace("-", "").isalnum() else _toml_value(k)


def curves_table(c: KernelCurves) -> str:
    """The ``[curves.<architecture>]`` TOML table of ``c``."""
    lines = [f"[curves.{_toml_key(c.architecture)}]"]
    from . import SCALARS

    for name in SCALARS:
        lines.append(f"{name} = {_toml_value(getattr(c, name))}")
    for name in (
        "compute",
        "launch",
        "rate",
        "quant_passes",
        "token_us",
        "engine_compute",
        "moe_compute",
        "moe_reread_lib",
        "split_share",
        "bands",
    ):
        d = getattr(c, name)
        if d:
            lines.append(f"{name} = {_toml_value({k: list(v) if isinstance(v, tuple) else v for k, v in d.items()})}")
    for k, cc in c.collectives.items():
        lines.append(f"collectives.{_toml_key(k)} = {_toml_value(dataclasses.asdict(cc))}")
    if c.provenance:
        lines.append(f"\n[curves.{_toml_key(c.architecture)}.provenance]")
        for k, v in c.provenance.items():
            lines.append(f"{_toml_key(k)} = {_toml_value(v)}")
    return "\n".join(lines) + "\n"


def catalog_text(curves: dict[str, KernelCurves], source: str = SOURCE, commit: str = COMMIT,
                 licence: str = "Apache-2.0") -> str:  # fmt: skip
    head = (
        "# Kernel curves per GPU architecture: achieved fractions of datasheet figures plus fixed latencies,\n"
        "# fitted to measured kernels (rooflaw devices fit-kernels). Residuals: median |predicted/measured - 1|;\n"
        "# bands: 10 % and 90 % quantiles of measured/predicted on held-out GPUs (leave one GPU out).\n"
        f"[meta]\nsource = {_toml_value(source)}\ncommit = {_toml_value(commit)}\nlicence = {_toml_value(licence)}\n\n"
    )
    order = sorted(curves, key=lambda a: (a == GENERIC, a))
    return head + "\n".join(curves_table(curves[a]) for a in order)


def write_catalog(text: str, path: str | Path | None = None) -> Path:
    from . import CATALOG, load_curves

    p = Path(path) if path else CATALOG
    write_text_atomic(p, text)
    load_curves.cache_clear()
    return p
