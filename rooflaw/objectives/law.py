"""``LossLaw``: a sympy expression over law variables and named fitted parameters."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import sympy

from ..errors import RooflawError
from . import safe_expr
from .variables import VARIABLES, law_inputs, symbol

#: Functions a user expression may call (name -> sympy function).
FUNCTIONS: dict[str, Any] = {k: v[0] for k, v in safe_expr.FUNCTIONS.items()}


def param_symbol(name: str) -> sympy.Symbol:
    """The sympy symbol of a fitted parameter (real, sign free)."""
    return sympy.Symbol(name, real=True)


@dataclass(frozen=True, eq=False)
class LossLaw:
    """A loss law: ``expr`` over ``variables`` with fitted ``params`` (symbolic in ``expr``).

    ``evaluate`` is vectorised (a cached ``sympy.lambdify`` to numpy); ``bound_expr`` substitutes
    the parameter values for the symbolic solvers. ``domain`` maps a law variable (or one computable from an
    architecture, e.g. ``E`` experts) to the closed range it was fitted on; empty means unknown.
    """

    name: str
    expr: sympy.Expr
    params: dict[str, float]
    variables: tuple[str, ...]
    stderr: dict[str, float] | None = None
    source: str = ""
    validity: str = ""
    domain: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: for a law whose precision bits were set from a problem's precision: the law before (see precision_law)
    unbound: LossLaw | None = None

    def __post_init__(self) -> None:
        free = {s.name for s in self.expr.free_symbols}
        unknown = free - set(self.params) - set(self.variables)
        if unknown:
            raise RooflawError(f"law {self.name}: symbols without a value or variable: {', '.join(sorted(unknown))}")
        bad_vars = [v for v in self.variables if v not in VARIABLES]
        if bad_vars:
            raise RooflawError(f"law {self.name}: unknown variables {bad_vars}; known: {', '.join(VARIABLES)}")
        for k, (lo, hi) in self.domain.items():
            if k not in VARIABLES or not lo <= hi:
                raise RooflawError(f"law {self.name}: domain {k}=({lo}, {hi}) is not a range of a law variable")

    # ---- domain --------------------------------------------------------------------------------
    def in_domain(self, inputs: Mapping[str, Any]) -> np.ndarray:
        """True where every domain variable present in ``inputs`` lies in its fitted range (relative tolerance
        1e-9); variables absent from ``inputs`` are not judged."""
        out: np.ndarray = np.asarray(True)
        for k, (lo, hi) in self.domain.items():
            if k in inputs:
                out = out & self.within(np.asarray(inputs[k], dtype=float), lo, hi)
        return out

    @staticmethod
    def within(v: Any, lo: Any, hi: Any) -> Any:
        """``lo ≤ v ≤ hi`` with :meth:`in_domain`'s relative tolerance (numbers, arrays, the numba scan's tracer)."""
        return (v >= lo * (1 - 1e-9)) & (v <= hi * (1 + 1e-9))

    def outside(self, inputs: Mapping[str, Any]) -> list[str]:
        """For one point: each domain variable outside its fitted range, as ``"E = 64 (fitted 1–16)"``."""
        out = []
        for k, (lo, hi) in self.domain.items():
            if k in inputs:
                v = float(np.asarray(inputs[k], dtype=float).reshape(-1)[0])
                if not lo * (1 - 1e-9) <= v <= hi * (1 + 1e-9):
                    out.append(f"{k} = {v:.4g} (fitted {lo:.4g}–{hi:.4g})")
        return out

    # ---- symbolic ----------------------------------------------------------------------------
    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(self.params)

    def symbols(self) -> dict[str, sympy.Symbol]:
        """Variable symbols used by the law, by name."""
        return {v: symbol(v) for v in self.variables}

    def bound_expr(self) -> sympy.Expr:
        """The expression with the parameter values substituted (variables stay symbolic)."""
        return self._bound

    @cached_property
    def _bound(self) -> sympy.Expr:
        subs = {param_symbol(k): sympy.Float(v) for k, v in self.params.items()}
        return self.expr.xreplace(subs)

    def latex(self, bound: bool = False) -> str:
        return sympy.latex(self.bound_expr() if bound else self.expr)

    def text(self, bound: bool = False) -> str:
        return sympy.sstr(self.bound_expr() if bound else self.expr)

    def is_posynomial(self) -> bool:
        """True when the bound expression minus any constant is a posynomial in the variables."""
        e = sympy.expand(self.bound_expr())
        vs = {symbol(v) for v in self.variables}
        terms = e.args if isinstance(e, sympy.Add) else (e,)
        n_var_terms = 0
        for t in terms:
            if not (t.free_symbols & vs):
                if t.free_symbols:
                    return False
                continue
            coeff, rest = t.as_coeff_Mul()
            if not (coeff.is_number and coeff > 0):
                return False
            for base, ex in rest.as_powers_dict().items():
                if base not in vs or not ex.is_number or not ex.is_real:
                    return False
            n_var_terms += 1
        return n_var_terms > 0

    # ---- numeric -----------------------------------------------------------------------------
    @cached_property
    def _fn(self):
        from ..cache import lambdify_numpy  # sympy.lambdify, its source kept on disk for the next process

        return lambdify_numpy([symbol(v) for v in self.variables], self.bound_expr(), cse=True)

    def evaluate(self, inputs: Mapping[str, Any]) -> np.ndarray:
        """Loss for arrays of variables (``inputs``: name -> array, broadcast together)."""
        missing = [v for v in self.variables if v not in inputs]
        if missing:
            have = ", ".join(sorted(inputs)) or "none"
            raise RooflawError(f"law {self.name} needs {', '.join(missing)}; available: {have}")
        arrays = [np.asarray(inputs[v], dtype=float) for v in self.variables]
        shape = np.broadcast_shapes(*(a.shape for a in arrays)) if arrays else ()
        with np.errstate(all="ignore"):
            out = np.asarray(self._fn(*arrays))
        if np.iscomplexobj(out):  # never cast a complex loss to its real part: it is undefined there
            out = np.where(np.imag(out) == 0, np.real(out), np.nan)
        return np.broadcast_to(np.asarray(out, dtype=float), shape).copy()

    def perplexity(self, inputs: Mapping[str, Any]) -> np.ndarray:
        """``exp(loss)``."""
        return np.exp(self.evaluate(inputs))

    def loss(self, arch: Any, tokens: float | None = None) -> float:
        """Loss of one ``Architecture`` (``tokens`` feeds ``D`` when the law uses it)."""
        if "D" in self.variables and tokens is None:
            raise RooflawError(f"law {self.name} uses D (training tokens): give tokens")
        return float(self.evaluate(law_inputs(arch.columns(), tokens)))

    # ---- derived laws --------------------------------------------------------------------------
    def with_params(
        self,
        params: Mapping[str, float],
        stderr: Mapping[str, float] | None = None,
        name: str | None = None,
        source: str | None = None,
        domain: Mapping[str, tuple[float, float]] | None = None,
    ) -> LossLaw:
        missing = set(self.params) - set(params)
        if missing:
            raise RooflawError(f"law {self.name}: no value for {', '.join(sorted(missing))}")
        return LossLaw(
            name=self.name if name is None else name,
            expr=self.expr,
            params={k: float(params[k]) for k in self.params},
            variables=self.variables,
            stderr=None if stderr is None else {k: float(stderr[k]) for k in self.params},
            source=self.source if source is None else source,
            validity=self.validity,
            domain=dict(self.domain) if domain is None else {k: (float(a), float(b)) for k, (a, b) in domain.items()},
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "expression": self.text(),
            "latex": self.latex(),
            "bound_expression": self.text(bound=True),
            "variables": {v: VARIABLES[v] for v in self.variables},
            "params": dict(self.params),
            "stderr": None if self.stderr is None else dict(self.stderr),
            "source": self.source,
            "validity": self.validity,
            "domain": {k: list(v) for k, v in self.domain.items()},
            "posynomial": self.is_posynomial(),
        }


# ---- user expressions ----------------------------------------------------------------------------
def parse_law(
    text: str,
    name: str | None = None,
    params: Iterable[str] | None = None,
    variables: Iterable[str] | None = None,
    values: Mapping[str, float] | None = None,
) -> LossLaw:
    """A law from a user expression such as ``"E + A/N**alpha + B/D**beta"``.

    Symbols named like a law variable (:data:`VARIABLES`) are variables, all others are fitted
    parameters -- except a symbol that is a bare additive term (``E`` above): a loss linear in a
    count with unit slope makes no sense, so it is read as the irreducible-loss parameter.
    ``params`` / ``variables`` force the reading of given symbols. Parameter values default to NaN
    (unfitted) unless given in ``values``.
    """
    text, tree = safe_expr.parse(text, "law expression")
    found = safe_expr.names(tree)
    for nm, called in found:
        if not called and nm in FUNCTIONS:
            raise RooflawError(f"law expression {text!r}: {nm!r} is a function, not a symbol")
    expr = safe_expr.to_sympy(tree, text, lambda nm: sympy.Symbol(nm, real=True), "law expression")
    if not isinstance(expr, sympy.Expr):
        raise RooflawError(f"law expression {text!r} is not an expression")
    syms = {s.name: s for s in expr.free_symbols}
    if not syms:
        raise RooflawError(f"law expression {text!r} has no variables or parameters")
    forced_p = set(params or ())
    forced_v = set(variables or ())
    unknown_v = forced_v - set(VARIABLES)
    if unknown_v:
        raise RooflawError(f"variables {sorted(unknown_v)} are not law variables; known: {', '.join(VARIABLES)}")
    bare = {a.name for a in (expr.args if isinstance(expr, sympy.Add) else (expr,)) if isinstance(a, sympy.Symbol)}
    var_names: list[str] = []
    par_names: list[str] = []
    order = list(dict.fromkeys(nm for nm, _ in found if nm in syms))
    for nm in order:
        is_var = nm in forced_v or (nm in VARIABLES and nm not in forced_p and nm not in bare)
        (var_names if is_var else par_names).append(nm)
    if not var_names:
        raise RooflawError(f"law expression {text!r} uses no law variable; known: {', '.join(VARIABLES)}")
    expr = expr.xreplace({syms[v]: symbol(v) for v in var_names})
    if expr.has(sympy.I, sympy.zoo, sympy.nan):
        raise RooflawError(f"law expression {text!r} is complex-valued or undefined for positive variables")
    vals = dict(values or {})
    return LossLaw(
        name=name or text,
        expr=expr,
        params={p: float(vals.get(p, math.nan)) for p in par_names},
        variables=tuple(var_names),
        source="user expression",
        validity="as fitted",
    )
