"""Arithmetic expressions from user text, parsed with a whitelist -- never evaluated as Python.

User text (a ``--law`` string, a ``fit --map`` column expression) is normalised (NFKC, the same
normalisation Python applies to identifiers, so a full-width ``ｅｖａｌ`` is checked as ``eval``),
parsed with :func:`ast.parse` and accepted only if every node is a number, a name, ``+ - * / **``
(``^`` means ``**``), a unary sign or a call of a fixed function. The accepted tree is then built
*directly* into sympy objects (:func:`to_sympy`) or numpy arrays (:func:`to_numpy`); no Python code
from the text ever runs. Sizes are bounded so that a short text cannot hang or exhaust memory:
text length, node count, literal magnitude and numeric exponents (``10**10**10`` is refused at once).
"""

from __future__ import annotations

import ast
import math
import unicodedata
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import sympy

from ..errors import RooflawError

MAX_CHARS = 2000  #: longest accepted expression (characters)
MAX_NODES = 400  #: most syntax nodes in one expression
MAX_EXPONENT = 1024.0  #: largest |numeric exponent| of a power
MAX_LOG10 = 308.0  #: largest log10 |numeric constant| (a double's range)

#: name -> (sympy function, numpy function, smallest and largest number of arguments)
FUNCTIONS: dict[str, tuple[Any, Callable[..., Any], int, int]] = {
    "exp": (sympy.exp, np.exp, 1, 1),
    "log": (sympy.log, np.log, 1, 1),
    "ln": (sympy.log, np.log, 1, 1),
    "sqrt": (sympy.sqrt, np.sqrt, 1, 1),
    "tanh": (sympy.tanh, np.tanh, 1, 1),
    "min": (sympy.Min, np.minimum, 2, 16),
    "max": (sympy.Max, np.maximum, 2, 16),
    "Min": (sympy.Min, np.minimum, 2, 16),
    "Max": (sympy.Max, np.maximum, 2, 16),
}

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**"}
_UNARY = {ast.USub: "-", ast.UAdd: "+"}


class ExpressionError(RooflawError):
    """An expression that is not accepted (one line: which expression, what is wrong, what is allowed)."""


def _err(what: str, text: str, why: str) -> ExpressionError:
    shown = text if len(text) <= 80 else text[:77] + "..."
    return ExpressionError(f"{what} {shown!r}: {why}")


def normalise(text: Any, what: str = "expression") -> str:
    """``text`` NFKC-normalised and stripped; refuses non-strings, empty and over-long text."""
    if not isinstance(text, str):
        raise ExpressionError(f"{what}={text!r}: must be a string")
    norm = unicodedata.normalize("NFKC", text).strip()
    if not norm:
        raise ExpressionError(f"{what} is empty")
    if len(norm) > MAX_CHARS:
        raise ExpressionError(f"{what} is {len(norm)} characters long; at most {MAX_CHARS} are accepted")
    return norm


def parse(text: Any, what: str = "expression", functions: Mapping[str, Any] = FUNCTIONS) -> tuple[str, ast.expr]:
    """The normalised text and its checked syntax tree (raises :class:`ExpressionError`)."""
    norm = normalise(text, what)
    if "\x00" in norm:
        raise _err(what, norm, "contains a NUL character")
    norm = norm.replace("^", "**")  # ^ is the power, as in sympy's convert_xor (never Python's xor)
    try:
        tree = ast.parse(norm, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as e:
        msg = getattr(e, "msg", None) or str(e) or type(e).__name__
        raise _err(what, norm, f"does not parse ({msg})") from None
    for nodes, node in enumerate(ast.walk(tree), 1):
        if nodes > MAX_NODES:
            raise _err(what, norm, f"has more than {MAX_NODES} terms")
        _check_node(node, norm, what, functions)
    return norm, tree.body


def _check_node(node: ast.AST, text: str, what: str, functions: Mapping[str, Any]) -> None:
    allowed = "numbers, names, + - * / ** ^, unary -, and " + ", ".join(sorted(functions))
    if isinstance(node, (ast.Expression, ast.Load, *_BINOPS, *_UNARY)):
        return
    if isinstance(node, ast.BinOp):
        if type(node.op) not in _BINOPS:
            raise _err(what, text, f"operator {type(node.op).__name__} is not allowed; allowed: {allowed}")
        return
    if isinstance(node, ast.UnaryOp):
        if type(node.op) not in _UNARY:
            raise _err(what, text, f"operator {type(node.op).__name__} is not allowed; allowed: {allowed}")
        return
    if isinstance(node, ast.Constant):
        v = node.value
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise _err(what, text, f"literal {v!r} is not a real number; allowed: {allowed}")
        if not math.isfinite(v) or (v != 0 and math.log10(abs(v)) > MAX_LOG10):
            raise _err(what, text, f"number {v!r} is outside ±1e{MAX_LOG10:.0f}")
        return
    if isinstance(node, ast.Name):
        if not node.id.isidentifier() or node.id.startswith("_"):
            raise _err(what, text, f"name {node.id!r} is not allowed (names start with a letter)")
        return
    if isinstance(node, ast.Call):
        fn = node.func.id if isinstance(node.func, ast.Name) else None
        if fn is not None and fn.startswith("_"):
            raise _err(what, text, f"name {fn!r} is not allowed (names start with a letter)")
        if fn is None or fn not in functions:
            shown = fn if fn is not None else type(node.func).__name__
            raise _err(what, text, f"unknown function {shown!r}; allowed: {', '.join(sorted(functions))}")
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise _err(what, text, f"{fn}() takes positional arguments only")
        lo, hi = functions[fn][2], functions[fn][3]
        if not lo <= len(node.args) <= hi:
            n = f"{lo}" if lo == hi else f"{lo} to {hi}"
            raise _err(what, text, f"{fn}() takes {n} argument(s), got {len(node.args)}")
        return
    raise _err(what, text, f"{type(node).__name__} is not allowed; allowed: {allowed}")


def names(tree: ast.expr) -> list[tuple[str, bool]]:
    """Names in source order (first occurrence), each with whether it is called as a function."""
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Name)]
    found.sort(key=lambda n: (n.lineno, n.col_offset))
    return [(n.id, id(n) in called) for n in found]


# ---- sympy ------------------------------------------------------------------------------------------
def _bad_number(e: sympy.Expr) -> str | None:
    if e.has(sympy.zoo, sympy.nan, sympy.oo, -sympy.oo):
        return "is undefined or infinite (division by zero, log(0), ...)"
    if e.has(sympy.I):
        return "is complex-valued; a loss must be real"
    if e.is_Number and not e.is_zero and abs(float(sympy.log(abs(e), 10).evalf(5))) > MAX_LOG10:  # 0.0 != 0 in sympy
        return f"has a constant outside ±1e{MAX_LOG10:.0f}"
    return None


def _pow(base: sympy.Expr, ex: sympy.Expr, text: str, what: str) -> sympy.Expr:
    if ex.is_number:
        try:
            fe = float(ex)
        except TypeError:
            raise _err(what, text, "has a complex exponent") from None
        if abs(fe) > MAX_EXPONENT:
            raise _err(what, text, f"exponent {fe:g} is outside ±{MAX_EXPONENT:g}")
        if base.is_number and base != 0:
            try:
                mag = float(sympy.log(abs(base), 10).evalf(15)) * fe
            except TypeError:
                mag = 0.0
            if abs(mag) > MAX_LOG10:
                raise _err(what, text, f"a power evaluates to about 1e{mag:.0f}, outside ±1e{MAX_LOG10:.0f}")
    return sympy.Pow(base, ex)


def to_sympy(
    tree: ast.expr, text: str, make_symbol: Callable[[str], sympy.Symbol], what: str = "expression"
) -> sympy.Expr:
    """Build the checked ``tree`` into a sympy expression; names become ``make_symbol(name)``."""

    def build(node: ast.expr) -> sympy.Expr:
        if isinstance(node, ast.Constant):
            v = node.value
            out = sympy.Integer(v) if isinstance(v, int) else sympy.Float(repr(v))
        elif isinstance(node, ast.Name):
            out = make_symbol(node.id)
        elif isinstance(node, ast.UnaryOp):
            x = build(node.operand)
            out = -x if isinstance(node.op, ast.USub) else x
        elif isinstance(node, ast.BinOp):
            a, b = build(node.left), build(node.right)
            op = type(node.op)
            if op is ast.Add:
                out = a + b
            elif op is ast.Sub:
                out = a - b
            elif op is ast.Mult:
                out = a * b
            elif op is ast.Div:
                if b == 0:
                    raise _err(what, text, "divides by zero")
                out = a / b
            else:  # Pow
                out = _pow(a, b, text, what)
        elif isinstance(node, ast.Call):
            assert isinstance(node.func, ast.Name)  # check() admits calls of named functions only
            fn = FUNCTIONS[node.func.id][0]
            out = fn(*[build(a) for a in node.args])
        else:  # pragma: no cover - parse() admits nothing else
            raise _err(what, text, f"{type(node).__name__} is not allowed")
        why = _bad_number(out)
        if why:
            raise _err(what, text, why)
        return out

    try:
        return build(tree)
    except RecursionError:
        raise _err(what, text, "is nested too deeply") from None


# ---- numpy ------------------------------------------------------------------------------------------
def to_numpy(tree: ast.expr, text: str, columns: Mapping[str, np.ndarray], what: str = "expression") -> np.ndarray:
    """Evaluate the checked ``tree`` on float arrays ``columns`` (by name) with numpy."""

    def ev(node: ast.expr) -> np.ndarray:
        if isinstance(node, ast.Constant):
            assert isinstance(node.value, (int, float))  # check() lets only int and float literals through
            return np.asarray(float(node.value))
        if isinstance(node, ast.Name):
            if node.id not in columns:
                avail = ", ".join(map(str, columns))
                raise _err(what, text, f"no column {node.id!r}; available: {avail}")
            return np.asarray(columns[node.id], dtype=float)
        if isinstance(node, ast.UnaryOp):
            x = ev(node.operand)
            return -x if isinstance(node.op, ast.USub) else x
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            op = type(node.op)
            if op is ast.Add:
                return a + b
            if op is ast.Sub:
                return a - b
            if op is ast.Mult:
                return a * b
            if op is ast.Div:
                return a / b
            if b.ndim == 0 and abs(float(b)) > MAX_EXPONENT:
                raise _err(what, text, f"exponent {float(b):g} is outside ±{MAX_EXPONENT:g}")
            return np.power(a, b)
        if isinstance(node, ast.Call):
            assert isinstance(node.func, ast.Name)  # check() admits calls of named functions only
            fn = FUNCTIONS[node.func.id][1]
            args = [ev(a) for a in node.args]
            out = args[0]
            if len(args) == 1:
                return fn(out)
            for x in args[1:]:
                out = fn(out, x)
            return out
        raise _err(what, text, f"{type(node).__name__} is not allowed")  # pragma: no cover

    try:
        with np.errstate(all="ignore"):
            return np.asarray(ev(tree), dtype=float)
    except RecursionError:
        raise _err(what, text, "is nested too deeply") from None
