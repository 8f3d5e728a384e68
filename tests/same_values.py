"""Comparing the numba backend's outputs with numpy's.

The generated kernel does numpy's elementwise IEEE operations in numpy's order, but its ``exp``/``log``/``pow`` are
libm's, while numpy on a CPU with AVX-512 (x86-64-v4) runs its own vectorised ones, which may differ in the last bit
(a relative 2.2e-16). Elsewhere the two agree bit for bit. So values are compared to 1e-12 relative: exact for
integers, booleans, NaN and inf positions, and zero (a few ulp of several such steps, far below any physical figure).
"""

from __future__ import annotations

import numpy as np

RTOL = 1e-12  #: relative tolerance between the backends' float outputs


def same_array(a: np.ndarray, b: np.ndarray) -> bool:
    """``a`` and ``b`` hold the same values: equal dtypes and shapes, exact unless float, floats within ``RTOL``."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind != "f":
        return bool(np.array_equal(a, b))
    return bool(np.allclose(a, b, rtol=RTOL, atol=0.0, equal_nan=True) and np.array_equal(np.isinf(a), np.isinf(b)))


def assert_same(a: dict, b: dict) -> None:
    """Two backends' output dicts hold the same columns, in the same order, with :func:`same_array` values."""
    assert list(a) == list(b)
    for k in a:
        assert np.asarray(a[k]).dtype == np.asarray(b[k]).dtype, k
        if not same_array(a[k], b[k]):
            bad = np.flatnonzero(~np.isclose(a[k], b[k], rtol=RTOL, atol=0.0, equal_nan=True))[:5]
            raise AssertionError((k, bad, np.asarray(a[k])[bad], np.asarray(b[k])[bad]))
