"""rooflaw.cache.lambdify_numpy: a function rebuilt from the stored source equals sympy.lambdify's, point by point,
and a fresh process (here: a cleared in-memory state) rebuilds it without running the printer."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import sympy

from rooflaw import cache


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFLAW_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ROOFLAW_NO_CACHE", raising=False)


EXPRS = {
    "paper-like": lambda x, y: 500.0 * x**-0.97 * y**-0.17 + 0.031 * x**0.33 + 2.53,
    "functions": lambda x, y: sympy.log(x) + sympy.exp(-y) + sympy.Max(x, y) + sympy.sqrt(x) + sympy.pi,
    "piecewise": lambda x, y: sympy.Piecewise((x, x > 2), (y, True)),
}


@pytest.mark.parametrize("name", list(EXPRS))
def test_rebuilt_function_equals_lambdify(private_cache, monkeypatch, name):
    x, y = sympy.symbols("x y", positive=True)
    expr = EXPRS[name](x, y)
    reference = sympy.lambdify([x, y], expr, modules="numpy", cse=True)  # the independent reference
    first = cache.lambdify_numpy([x, y], expr)  # computed, source stored
    monkeypatch.setattr(sympy, "lambdify", lambda *a, **k: pytest.fail("the stored source was not used"))
    again = cache.lambdify_numpy([x, y], expr)
    assert again is not first and again.__source__ == inspect.getsource(first)
    rng = np.random.default_rng(0)
    a, b = rng.uniform(0.1, 5, 200), rng.uniform(0.1, 5, 200)
    np.testing.assert_array_equal(again(a, b), reference(a, b))


def test_another_expression_is_another_entry(private_cache):
    x, y = sympy.symbols("x y", positive=True)
    f = cache.lambdify_numpy([x, y], x + y)
    g = cache.lambdify_numpy([x, y], x * y)
    assert f(2.0, 3.0) == 5.0 and g(2.0, 3.0) == 6.0
