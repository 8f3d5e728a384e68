"""The docstring examples of the ten main public functions run and print what they say (doctest).

Each example computes its figures from the catalog's datasheet figures (``engine="ideal"``: the pure roofline) or
exact counts, so a refit of the engine or kernel-curve tables does not move them."""

from __future__ import annotations

import doctest

import pytest

import rooflaw as rl

#: The ten main functions (one of them the Problem class) a newcomer meets first.
MAIN = ("solve", "Problem", "evaluate", "evaluate_columns", "frontier", "search", "compare", "get_device",
        "load_architecture", "get_law")  # fmt: skip


@pytest.mark.parametrize("name", MAIN)
def test_docstring_example_runs(name):
    obj = getattr(rl, name)
    finder = doctest.DocTestFinder(recurse=False)
    tests = [t for t in finder.find(obj, f"rooflaw.{name}", globs={}) if t.examples]
    assert tests, f"rooflaw.{name} has no docstring example"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for t in tests:
        runner.run(t)
    result = runner.summarize(verbose=False)
    assert result.attempted >= 2 and result.failed == 0, f"rooflaw.{name}: {result}"
