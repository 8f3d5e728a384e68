"""Tracing the numpy path's own functions into straight-line scalar statements for the numba kernels.

Nothing in a kernel is a copy of numpy logic: the compiled cost model (``sympy.lambdify``'s CSE pairs),
:func:`.epilogue.fast_outputs` (decode-step sums, engine overhead, memory, energy), :func:`objectives.law_inputs`
and the law's own function are *called* on :class:`Traced` values, which record every operation, in Python's
evaluation order, as one statement ``t<k> = a <op> b`` on a :class:`Tape`. Run per candidate, those statements
perform the same IEEE operations in the same order as numpy does elementwise: the values are bit-identical, but
that ``exp``/``log``/``pow`` are libm's, which may differ from numpy's AVX-512 ones in the last bit. The
same operation on the same operands is recorded once. Anything but arithmetic, comparisons, ``np.where``,
``np.clip`` and the ufuncs of :data:`UFUNCS` raises :class:`Unsupported`, and ``auto`` stays on numpy.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

#: numpy ufunc -> the scalar code with numpy's semantics (maximum/minimum: NaN wins; sign(NaN) is NaN).
UFUNCS = {"maximum": "{0} if ({0} >= {1}) | ({0} != {0}) else {1}",
          "minimum": "{0} if ({0} <= {1}) | ({0} != {0}) else {1}",
          "sign": "1.0 if {0} > 0.0 else (-1.0 if {0} < 0.0 else (0.0 if {0} == 0.0 else {0}))",
          "bitwise_and": "{0} & {1}", **{f: f"np.{f}({{}})" for f in ("floor", "ceil")},
          **{f: f"math.{f}({{}})" for f in ("exp", "log", "sqrt", "expm1", "log1p")}}  # fmt: skip


class Unsupported(Exception):
    """A traced function did something the kernel cannot record (the message says what)."""


class Tape:
    """The statements recorded so far: ``(target, expression, names read)``, in execution order."""

    def __init__(self) -> None:
        self.stmts: list[tuple[str, str, tuple[str, ...]]] = []
        self._seen: dict[str, Traced] = {}

    def var(self, name: str) -> Traced:
        """An input of the kernel (a column, a scalar argument)."""
        return Traced(name, self)

    def emit(self, fmt: str, *operands: Any) -> Traced:
        """The value of ``fmt`` filled with the operands' code: a new statement, or the one already recorded."""
        expr = fmt.format(*(code(x) for x in operands))
        if expr not in self._seen:
            self._seen[expr] = Traced(f"t{len(self.stmts)}", self)
            reads = tuple(dict.fromkeys(x.code for x in operands if isinstance(x, Traced)))
            self.stmts.append((self._seen[expr].code, expr, reads))
        return self._seen[expr]


def code(x: Any) -> str:
    """The kernel code of a traced value or a number."""
    if isinstance(x, Traced):
        return x.code
    if isinstance(x, (bool, np.bool_)) or isinstance(x, np.ndarray) and x.dtype == bool and x.ndim == 0:
        return str(bool(x))
    if isinstance(x, (int, float, np.number)) or isinstance(x, np.ndarray) and x.ndim == 0:
        v = float(x)
        return repr(v) if math.isfinite(v) else "math.nan" if v != v else f"({'-' if v < 0 else ''}math.inf)"
    raise Unsupported(f"arithmetic with {type(x).__name__}")


def _op(fmt: str, swap: bool = False) -> Any:
    return lambda a, b: a.tape.emit(fmt, *((b, a) if swap else (a, b)))


def _refuse(what: str) -> Any:
    def refuse(self: Any) -> Any:
        raise Unsupported(what)

    return refuse


def power_code(base: str, ex: str) -> str:
    """Kernel code of ``base ** ex`` for an exponent known at run time only: numpy's scalar-power fast paths (2, 1,
    0, 0.5, -1) checked at run time, libm ``pow``'s exact 0 for ``|base| < 1`` to the power inf, else ``pow``."""
    return (f"({base} * {base} if {ex} == 2.0 else ({base} if {ex} == 1.0 else (1.0 if {ex} == 0.0 else "
            f"(math.sqrt({base}) if {ex} == 0.5 else (1.0 / {base} if {ex} == -1.0 else ((0.0 if abs({base}) < 1.0 "
            f"else {base} ** {ex}) if {ex} == math.inf else {base} ** {ex}))))))")  # fmt: skip


#: The kernel modules' function for the assembly's roofline blend (:func:`.streams.blend_values`): the same
#: operations as that inline statement, with the ratio and the sum bound once (inline, the ratio's text was nested
#: ~50 times per blend and numba's compile of the ``wide`` scan kernel took 2.3x as long)
BLEND_SOURCE = f"""
@njit(cache=True, inline="always")
def _rl_blend(hi, lo, p, on):
    if (on == 0.0) or (p == math.inf) or not (hi > 0.0):
        return hi
    r = lo / hi
    s = 1.0 + {power_code("r", "p")}
    q = 1.0 / p
    return hi * {power_code("s", "q")}
"""


def power(base: Any, ex: Any) -> Traced:
    """``base ** ex`` as numpy computes an array to a scalar power: its fast paths for 2, 0.5, -1 and 1 (known
    here when the exponent is a number; checked at run time when it is traced, with libm ``pow``'s exact results
    for 0 and inf -- the assembly's blends run with those exponents where a kernel curve is off), else libm ``pow``."""
    tape = base.tape if isinstance(base, Traced) else ex.tape
    if isinstance(ex, Traced):
        return tape.emit(power_code("{0}", "{1}"), base, ex)
    fast = {2.0: "{0} * {0}", 0.5: "math.sqrt({0})", -1.0: "1.0 / {0}"}
    return base if float(ex) == 1.0 else tape.emit(fast.get(float(ex), "{0} ** {1}"), base, ex)


class Traced:
    """A value being recorded: its kernel variable and the tape its operations go to."""

    __slots__ = ("code", "tape")
    __traced__ = True  # for code that passes a tracer through instead of converting it to an array
    __add__, __radd__, __sub__, __rsub__ = _op("{} + {}"), _op("{} + {}", True), _op("{} - {}"), _op("{} - {}", True)
    __mul__, __rmul__ = _op("{} * {}"), _op("{} * {}", True)
    __truediv__, __rtruediv__ = _op("{} / {}"), _op("{} / {}", True)
    __gt__, __lt__, __ge__, __le__ = _op("{} > {}"), _op("{} < {}"), _op("{} >= {}"), _op("{} <= {}")
    __eq__, __ne__, __and__, __rand__ = _op("{} == {}"), _op("{} != {}"), _op("{} & {}"), _op("{} & {}", True)
    __pow__, __rpow__ = power, lambda a, b: power(b, a)
    __neg__, __pos__ = lambda a: a.tape.emit("-{}", a), lambda a: a
    __bool__, __float__ = _refuse("a branch on a traced value"), _refuse("a traced value converted to a number")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, code: str, tape: Tape):
        self.code, self.tape = code, tape

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kw: Any) -> Traced:
        if method != "__call__" or kw or ufunc.__name__ not in UFUNCS:
            raise Unsupported(f"numpy {ufunc.__name__} on a traced value")
        return self.tape.emit(UFUNCS[ufunc.__name__], *inputs)

    def __array_function__(self, func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
        if func is np.where and len(args) == 3 and not kwargs:
            return self.tape.emit("{1} if {0} else {2}", *args)
        if func is np.clip and len(args) == 3 and not kwargs:  # numpy: minimum(maximum(x, lo), hi)
            return np.minimum(np.maximum(args[0], args[1]), args[2])
        raise Unsupported(f"numpy {func.__name__} on a traced value")
