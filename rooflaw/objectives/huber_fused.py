"""The fitting objective of a sum of power laws as one vectorised numba loop over (starts × points), on 2 cores.

:class:`~.huber.LogHuberObjective` evaluates ``log f = logsumexp_i(c_i + theta @ Phi_i)`` and its Huber loss with
~20 numpy temporaries of shape (starts, points). This module generates, for a law's number of terms and
parameters, a numba kernel that computes the same quantities per (start, point) in registers: the terms ``u_i``,
their maximum, ``log f``, the residual's Huber value and the gradient contracted with ``Phi_i``. The loop runs over
starts innermost, so LLVM vectorises it (AVX2: 4 starts at a time); ``exp`` and ``log`` are therefore written out
here (:data:`MATH`: fdlibm's range reductions and polynomials, within about 1 ulp of libm) instead of calling libm
per value. Same formulas, different rounding, so values agree with numpy to ~1e-15 relative, not bit for bit
(``tests/test_huber_fused.py``); ``fastmath`` stays off.

The kernel releases the GIL; :func:`fused_fg` splits the starts over :data:`THREADS` Python threads (no numba
threading layer, so it is safe to call from any thread). numba is optional: :func:`usable` says whether this
path applies; the numpy objective is the fallback and the reference.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

#: Below this many (start × point) pairs per fit the numpy objective is used (no numba import, no compile).
MIN_PAIRS = 50_000
#: Threads the starts are split over (the machine's cores, at most 2).
THREADS = max(1, min(2, os.cpu_count() or 1))
#: Starts per thread below which a call runs on the calling thread only.
MIN_PER_THREAD = 64
_LOCK = threading.Lock()
_KERNELS: dict[tuple[int, int], Any] = {}
_POOL: list[ThreadPoolExecutor] = []

#: Branch-free exp (x <= 0 or NaN) and log (x >= 1 or NaN) that LLVM can vectorise; bit casts via intrinsics.
MATH = """
import numpy as np
from numba import njit, types
from numba.extending import intrinsic

_J = dict(cache=True, fastmath=False, nogil=True, error_model="numpy", inline="always")


@intrinsic
def _f2i(typingctx, x):
    def gen(context, builder, sig, args):
        return builder.bitcast(args[0], context.get_value_type(types.int64))
    return types.int64(types.float64), gen


@intrinsic
def _i2f(typingctx, i):
    def gen(context, builder, sig, args):
        return builder.bitcast(args[0], context.get_value_type(types.float64))
    return types.float64(types.int64), gen


@njit(**_J)
def _pow2(k):  # 2**k for integral k in [-1022, 1023], by building the exponent field
    return _i2f((_f2i(k + 4503599627371519.0) & 4095) << 52)  # 2**52 + 1023: k + 1023 in the low bits


@njit(**_J)
def _exp(x):  # exp(x) for x <= 0 (NaN stays NaN; below -745 gives 0), fdlibm's reduction and polynomial
    xc = x if not (x < -745.0) else -745.0
    k = np.floor(xc * 1.4426950408889634 + 0.5)
    hi = xc - k * 6.93147180369123816490e-01
    lo = k * 1.90821492927058770002e-10
    r = hi - lo
    t = r * r
    c = r - t * (1.66666666666666019037e-01 + t * (-2.77777777770155933842e-03 + t * (6.61375632143793436117e-05
        + t * (-1.65339022054652515390e-06 + t * 4.13813679705723846039e-08))))
    y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi)
    k1 = np.floor(k * 0.5)
    v = y * _pow2(k1) * _pow2(k - k1)
    v = v if not (x < -745.0) else 0.0
    return v if x == x else x


@njit(**_J)
def _log(x):  # log(x) for x >= 1 (NaN and inf pass through), fdlibm's e_log.c
    b = _f2i(x)
    m = _i2f((b & 4503599627370495) | 4607182418800017408)  # mantissa in [1, 2)
    e = _i2f((b >> 52) | 4841369599423283200) - 4503599627371519.0  # exponent as a double: 2**52 + 1023
    big = m > 1.4142135623730951
    m = m * 0.5 if big else m
    e = e + 1.0 if big else e
    f = m - 1.0
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    t1 = w * (3.999999999940941908e-01 + w * (2.222219843214978396e-01 + w * 1.531383769920937332e-01))
    t2 = z * (6.666666666666735130e-01 + w * (2.857142874366239149e-01 + w * (1.818357216161805012e-01
         + w * 1.479819860511658591e-01)))
    rr = t2 + t1
    hfsq = 0.5 * f * f
    v = e * 6.93147180369123816490e-01 - ((hfsq - (s * (hfsq + rr) + e * 1.90821492927058770002e-10)) - f)
    return v if x - x == 0.0 else x
"""


def available() -> bool:
    """Whether numba is importable (the ``fast`` extra)."""
    return importlib.util.find_spec("numba") is not None


def usable(linear: bool, starts: int, points: int, weights: np.ndarray | None) -> bool:
    """Whether the fused kernel takes a fit: a sum of power laws, (n,) or no weights, enough work."""
    return linear and starts * points >= MIN_PAIRS and (weights is None or np.ndim(weights) == 1) and available()


def source(terms: int, p: int) -> str:
    """The kernel ``fg(th, phi, c0, logy, delta, w, f, g)`` for ``terms`` terms and ``p`` parameters: ``th`` and
    ``g`` are (p, S), ``phi`` (terms, p, n), ``c0`` (terms, n), ``w`` (n,) (all ones for no weights)."""
    T = range(terms)
    dot = lambda t: " + ".join([f"c0[{t}, j]", *(f"th[{k}, s] * phi[{t}, {k}, j]" for k in range(p))])  # noqa: E731
    mx = "u0"
    for t in range(1, terms):  # numpy's maximum.reduce: NaN wins
        mx = f"_mx({mx}, u{t})"
    body = [f"u{t} = {dot(t)}" for t in T] + [f"m = {mx}"]
    if terms == 1:
        body += ["lp = u0", "tot = 1.0", "e0 = 1.0"]
    else:
        body += [f"e{t} = _exp(u{t} - m)" for t in T]
        body += ["tot = " + " + ".join(f"e{t}" for t in T), "lp = m + _log(tot)"]
    body += [
        "r = ly - lp",
        "a = abs(r)",
        "h = 0.5 * r * r if a <= delta else delta * (a - hd)",
        "psi = -delta if r < -delta else (delta if r > delta else r)",
        "f[s] += wj * h",
        "d = -(wj * psi) / tot",
    ]
    body += [f"g[{k}, s] += " + " + ".join(f"(d * e{t}) * phi[{t}, {k}, j]" for t in T) for k in range(p)]
    ind = "\n".join("            " + ln for ln in body)
    return f"""# Generated by rooflaw.objectives.huber_fused ({terms} terms, {p} parameters). Do not edit.
{MATH}

@njit(**_J)
def _mx(a, b):
    return a if (a >= b) | (a != a) else b


@njit(cache=True, fastmath=False, nogil=True, error_model="numpy")
def fg(th, phi, c0, logy, delta, w, f, g):
    S = th.shape[1]
    n = logy.shape[0]
    hd = 0.5 * delta
    f[:] = 0.0
    g[:, :] = 0.0
    for j in range(n):
        ly = logy[j]
        wj = w[j]
        for s in range(S):
{ind}
"""


def _kernel(terms: int, p: int) -> Any:
    k = _KERNELS.get((terms, p))
    if k is not None:
        return k
    import llvmlite.binding as llb
    import numba

    from .. import cache

    src = source(terms, p)
    key = hashlib.sha256(f"{src}|numba {numba.__version__}|numpy {np.__version__}|{sys.version}".encode())
    name = f"rooflaw_fit_{key.hexdigest()[:20]}"
    with _LOCK:
        if (terms, p) in _KERNELS:
            return _KERNELS[(terms, p)]
        # the loop reads and writes ~10 arrays: let LLVM's vectoriser emit the run-time overlap checks it needs
        # (an LLVM option of this process)
        llb.set_option("rooflaw", "-runtime-memory-check-threshold=4096")
        llb.set_option("rooflaw", "-vectorize-memory-check-threshold=8192")
        mod = cache.load_generated(name, src)
        _KERNELS[(terms, p)] = mod.fg
    return mod.fg


def fused_fg(
    theta: np.ndarray, phi: np.ndarray, c0: np.ndarray, logy: np.ndarray, delta: float, weights: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """Objective ``(S,)`` and gradient ``(S, p)`` at ``theta`` ``(S, p)``: ``phi`` (terms, p, n), ``c0`` (terms,
    n), ``logy`` (n,), ``weights`` (n,) or None."""
    terms, p, n = phi.shape
    fg = _kernel(terms, p)
    th = np.ascontiguousarray(np.asarray(theta, dtype=np.float64).T)
    S = th.shape[1]
    w = np.ones(n) if weights is None else np.ascontiguousarray(weights, dtype=np.float64)
    f, g = np.empty(S), np.empty((p, S))
    nt = min(THREADS, S // MIN_PER_THREAD)
    if nt <= 1:
        fg(th, phi, c0, logy, delta, w, f, g)
    else:
        if not _POOL:
            _POOL.append(ThreadPoolExecutor(THREADS, thread_name_prefix="rooflaw-fit"))
        cut = np.linspace(0, S, nt + 1).astype(int)
        th_parts = [np.ascontiguousarray(th[:, a:b]) for a, b in zip(cut[:-1], cut[1:], strict=True)]
        g_parts = [np.empty((p, b - a)) for a, b in zip(cut[:-1], cut[1:], strict=True)]
        jobs = [
            _POOL[0].submit(fg, t, phi, c0, logy, delta, w, f[a:b], gp)
            for t, gp, a, b in zip(th_parts, g_parts, cut[:-1], cut[1:], strict=True)
        ]
        for job in jobs:
            job.result()
        g = np.concatenate(g_parts, axis=1)
    g = g.T.copy()
    bad = ~np.isfinite(f) | ~np.isfinite(g).all(axis=1)
    f[bad] = np.inf
    g[bad] = 0.0
    return f, g
