"""Source for the numba kernels from plain Python arithmetic: the engine's per-pass overhead and the law's domain.

:func:`assembly.engine_overhead` is ordinary arithmetic on :class:`assembly.Rates` fields and two columns. The
numpy backend calls it on arrays; here it is called once on *tracers* that record every operation in Python's
own evaluation order, so the printed scalar expression performs the same IEEE operations in the same order as
numpy does elementwise (bit-identical), and a change to that function reaches the kernel without a copy of its
formula. Anything but arithmetic (a comparison, a branch on a value, a numpy function) raises
:class:`~.numba_printer.Unsupported` and the caller stays on numpy.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, cast

from .numba_printer import Unsupported

#: numpy functions a traced value may go through -> the scalar helper with numpy's semantics (NaN included).
_UFUNCS = {"floor": "np.floor", "ceil": "np.ceil", "maximum": "_mx", "minimum": "_mn"}


class Traced:
    """A scalar expression being recorded: arithmetic, comparisons and a few numpy functions (``np.where``,
    ``np.clip`` and :data:`_UFUNCS`) on it return the printed expression."""

    __slots__ = ("code",)
    __traced__ = True  # for code that passes a tracer through instead of converting it (objectives.law_inputs)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kw: Any) -> Traced:
        if method != "__call__" or kw or ufunc.__name__ not in _UFUNCS:
            raise Unsupported(f"numpy {ufunc.__name__} on a traced value")
        return Traced(f"{_UFUNCS[ufunc.__name__]}({', '.join(code(x) for x in inputs)})")

    def __array_function__(self, func: Any, types: Any, args: tuple, kwargs: dict) -> Traced:
        import numpy as np

        if func is np.where and len(args) == 3 and not kwargs:
            return Traced(f"({code(args[1])} if {code(args[0])} else {code(args[2])})")
        if func is np.clip and len(args) == 3 and not kwargs:  # numpy: minimum(maximum(x, lo), hi)
            return Traced(f"_mn(_mx({code(args[0])}, {code(args[1])}), {code(args[2])})")
        raise Unsupported(f"numpy {func.__name__} on a traced value")

    def _cmp(self, op: str, other: Any) -> Traced:
        return Traced(f"({self.code} {op} {code(other)})")

    def __gt__(self, o: Any) -> Traced:
        return self._cmp(">", o)

    def __lt__(self, o: Any) -> Traced:
        return self._cmp("<", o)

    def __ne__(self, o: Any) -> Traced:  # type: ignore[override]
        return self._cmp("!=", o)

    def __init__(self, code: str):
        self.code = code

    def _op(self, op: str, other: Any, rev: bool = False) -> Traced:
        o = code(other)
        return Traced(f"({o} {op} {self.code})" if rev else f"({self.code} {op} {o})")

    def __add__(self, o: Any) -> Traced:
        return self._op("+", o)

    def __radd__(self, o: Any) -> Traced:
        return self._op("+", o, True)

    def __sub__(self, o: Any) -> Traced:
        return self._op("-", o)

    def __rsub__(self, o: Any) -> Traced:
        return self._op("-", o, True)

    def __mul__(self, o: Any) -> Traced:
        return self._op("*", o)

    def __rmul__(self, o: Any) -> Traced:
        return self._op("*", o, True)

    def __truediv__(self, o: Any) -> Traced:
        return self._op("/", o)

    def __rtruediv__(self, o: Any) -> Traced:
        return self._op("/", o, True)

    def __pow__(self, o: Any) -> Traced:
        return Traced(_power(self.code, code(o)))

    def __rpow__(self, o: Any) -> Traced:
        return Traced(_power(code(o), self.code))

    def __neg__(self) -> Traced:
        return Traced(f"(-{self.code})")

    def __pos__(self) -> Traced:
        return self

    def __bool__(self) -> bool:
        raise Unsupported("a branch on a traced value")

    def __float__(self) -> float:
        raise Unsupported("a traced value converted to a number")


def _power(base: str, ex: str) -> str:
    """``base ** ex`` as numpy computes an array to a runtime scalar power: its fast path squares for an exponent
    of 2 (the other fast paths, 1, 0.5 and -1, give libm pow's result or never occur for a token count)."""
    return f"(({base}) * ({base}) if ({ex}) == 2.0 else ({base}) ** ({ex}))"


def code(x: Any) -> str:
    """The printed expression of a traced value or a number."""
    if isinstance(x, Traced):
        return x.code
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        v = float(x)
        return repr(v) if math.isfinite(v) else "math.nan" if v != v else f"({'-' if v < 0 else ''}math.inf)"
    raise Unsupported(f"traced arithmetic with {type(x).__name__}")


class _RatesProxy:
    """Stands in for a :class:`assembly.Rates`: each numeric field read becomes the kernel scalar ``r_<field>``."""

    def __init__(self, numeric: frozenset[str]):
        self._numeric = numeric
        self.used: list[str] = []

    def __getattr__(self, name: str) -> Traced:
        if name.startswith("_") or name not in self._numeric:
            raise Unsupported(f"Rates.{name} is not a number the kernel can take")
        if name not in self.used:
            self.used.append(name)
        return Traced(f"r_{name}")


def _numeric_fields() -> frozenset[str]:
    from . import assembly as A

    return frozenset(f.name for f in dataclasses.fields(A.Rates) if f.type in ("float", float))


def trace_engine_overhead(
    layers: str = "c_layers", moe: str = "c_moe", experts: str = "c_experts", top_k: str = "c_top_k",
    tokens: str = "c_B",
) -> tuple[str, tuple[str, ...]]:  # fmt: skip
    """(scalar expression of :func:`assembly.engine_overhead` over ``r_<field>`` and the column names, with the
    experts touched by ``tokens`` tokens (:func:`engines.experts_touched`), the Rates fields it reads, in order)."""
    from . import assembly as A
    from .engines import experts_touched

    proxy = _RatesProxy(_numeric_fields())
    try:
        touched = experts_touched(Traced(experts), Traced(top_k), Traced(tokens))
        out = A.engine_overhead(cast(Any, proxy), Traced(layers), Traced(moe), touched)
    except (TypeError, AttributeError) as e:  # an operation the tracer does not record
        raise Unsupported(f"engine_overhead: {e}") from None
    return code(out), tuple(proxy.used)


def sum_max_affine_source() -> str:
    """The numba helper ``_sma(a0, a1, b0, b1, n)``: :func:`assembly.sum_max_affine`'s sum, traced."""
    from .assembly import sum_max_affine

    total = sum_max_affine(*(Traced(a) for a in ("a0", "a1", "b0", "b1", "n")))[0]
    return f"@njit(**_JI)\ndef _sma(a0, a1, b0, b1, n):\n    return {code(total)}\n"


def energy_source(total: str, flops: dict[str, str], nbytes: str) -> str:
    """The expression of :func:`assembly.energy` over kernel variables, traced with the coefficients as the
    scalars ``p_idle``, ``p_ef_<class>``, ``p_ebyte``, and with none (``p_emode`` 0: a device without power
    figures)."""
    from . import assembly as A

    args = (Traced(f"({total})"), {c: Traced(f"({f})") for c, f in flops.items()}, Traced(f"({nbytes})"))
    idle, per_byte, per_flop = cast(Any, Traced("p_idle")), cast(Any, Traced("p_ebyte")), cast(Any, {})
    per_flop.update({c: Traced(f"p_ef_{c}") for c in flops})
    coef = A.EnergyCoefficients(idle, per_flop, per_byte)
    return f"{code(A.energy(coef, *args))} if p_emode != 0.0 else {code(A.energy(None, *args))}"


def rate_values(rates: Any, fields: tuple[str, ...]) -> dict[str, float]:
    """``r_<field>`` -> value for the kernel's scalar arguments."""
    return {f"r_{f}": float(getattr(rates, f)) for f in fields}


def domain_source(domain: tuple[str, ...], inputs: dict[str, str]) -> list[str]:
    """Statements setting ``dom`` (True inside the law's fitted domain) the way :meth:`LossLaw.in_domain` judges,
    ``dlo[j] ≤ v ≤ dhi[j]`` for each variable ``domain[j]``, with the bounds (tolerance included) given at run time
    and a NaN ``dlo[j]`` meaning the variable is not judged (extrapolation allowed, or no token count)."""
    lines, terms = [], []
    for j, var in enumerate(domain):
        if var not in inputs:
            raise Unsupported(f"domain variable {var}")
        lines.append(f"dv{j} = {inputs[var]}")
        terms.append(f"(dlo[{j}] != dlo[{j}] or (dv{j} >= dlo[{j}] and dv{j} <= dhi[{j}]))")
    lines.append("dom = " + (" and ".join(terms) if terms else "True"))
    return lines
