"""Results written into arrays the caller provides (``evaluate_columns(..., out=...)``), numpy style.

A loop over the chunks of a large table can pass the previous chunk's result back: its arrays are overwritten
instead of allocating (and the kernel zero-filling) ~136 bytes of fresh pages per candidate on every call. A result
of the numba backend is 16 rows of one float64 block plus ``fits_in_memory``; :func:`block_of` finds that block so
the kernel writes into it directly. Any other mapping of suitable arrays is filled by copying.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import bad

#: Keys of an ``evaluate_columns`` result, in the order the numba kernel writes its float64 rows.
FLOAT_KEYS = (
    "prefill_s", "decode_s", "ttft_s", "tpot_s", "total_s", "prefill_flops", "decode_flops", "prefill_bytes",
    "decode_bytes", "weight_bytes", "kv_cache_bytes", "activation_bytes", "memory_bytes", "energy_j",
    "params_total", "params_active",
)  # fmt: skip


def check(out: Any, n: int) -> Mapping[str, np.ndarray]:
    """``out`` if it holds a writable 1-D array of ``n`` rows for every result key (float64; ``fits_in_memory``
    bool), else a one-line error naming the key."""
    if not isinstance(out, Mapping):
        raise bad("out", type(out).__name__, "must be a result of evaluate_columns (a mapping of arrays) or None")
    for key in (*FLOAT_KEYS, "fits_in_memory"):
        a = out.get(key)
        dtype = np.bool_ if key == "fits_in_memory" else np.float64
        if a is None:
            raise bad("out", key, "missing: pass a result of evaluate_columns with the same number of rows")
        if not isinstance(a, np.ndarray) or a.shape != (n,) or a.dtype != dtype or not a.flags.writeable:
            got = f"{getattr(a, 'dtype', type(a).__name__)} {getattr(a, 'shape', '')}"
            raise bad(f"out[{key!r}]", got, f"must be a writable {np.dtype(dtype).name} array of {n} rows")
    return out


def block_of(out: Mapping[str, np.ndarray], n: int, inputs: Mapping[str, np.ndarray]) -> np.ndarray | None:
    """The C-contiguous (16, n) float64 block whose rows are ``out``'s float results in kernel order, or None (also
    when it may overlap an input column: the kernel would read values it has already overwritten)."""
    base = out["prefill_s"].base
    if isinstance(base, np.ndarray) and any(np.may_share_memory(base, c) for c in inputs.values()):
        return None
    if not (isinstance(base, np.ndarray) and base.shape == (len(FLOAT_KEYS), n) and base.dtype == np.float64):
        return None
    if not (base.flags.c_contiguous and base.flags.writeable):
        return None
    start = base.__array_interface__["data"][0]
    for j, key in enumerate(FLOAT_KEYS):
        a = out[key]
        if a.base is not base or a.strides != (8,) or a.__array_interface__["data"][0] != start + 8 * n * j:
            return None
    return base


def into(out: Mapping[str, np.ndarray] | None, res: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``res`` written into ``out`` (each array copied unless it already is that memory); ``res`` if no ``out``."""
    if out is None:
        return res
    for key, a in res.items():
        dst = out[key]
        if a.__array_interface__["data"][0] != dst.__array_interface__["data"][0]:
            np.copyto(dst, a)
    return {key: out[key] for key in res}
