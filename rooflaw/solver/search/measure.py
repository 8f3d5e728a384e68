"""Measured objectives: a callable ``f(arch, workload) -> seconds`` that replaces the analytic latency.

Given as a callable, ``module:function`` (importable, or in the working directory), ``path/to/file.py:function``,
or the name of an entry point of group ``rooflaw.measure``.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import Any

from ...errors import ExternalError, bad


def load_measure(measure: Any) -> Callable[..., float] | None:
    """A measuring callable from a callable, ``module:function`` (module importable or in the working directory),
    ``path/to/file.py:function``, or the name of an entry point of group ``rooflaw.measure``."""
    if measure is None or callable(measure):
        return measure
    text = str(measure)
    if ":" in text:
        mod, _, fn = text.rpartition(":")
        if not mod.strip() or not fn.strip() or not all(p.isidentifier() for p in fn.split(".")):
            raise bad("measure", text, "give module:function, path/to/file.py:function or an entry point name")
        try:
            obj: Any = _import(mod)
            for part in fn.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError, ValueError) as e:
            why = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise bad("measure", text, f"cannot import: {why}") from None
        except Exception as e:  # noqa: BLE001 - the user's module raised while importing
            raise ExternalError(f"measure={text!r}: importing it raised {type(e).__name__}: {e}") from None
        if not callable(obj):
            raise bad("measure", text, "is not callable")
        return obj
    from importlib.metadata import entry_points

    for ep in entry_points(group="rooflaw.measure"):
        if ep.name == text:
            return ep.load()
    raise bad("measure", text, "give module:function or the name of a rooflaw.measure entry point")


def _import(mod: str) -> Any:
    """Import ``mod`` (a dotted name, resolved from the working directory too, or a ``.py`` file path)."""
    import sys

    if mod.endswith(".py"):
        from importlib import util

        spec = util.spec_from_file_location(os.path.splitext(os.path.basename(mod))[0], mod)
        if spec is None or spec.loader is None or not os.path.isfile(mod):
            raise ImportError(f"no such file {mod}")
        module = util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    try:
        return importlib.import_module(mod)
    except ImportError:
        if os.getcwd() in sys.path:
            raise
        sys.path.insert(0, os.getcwd())
        return importlib.import_module(mod)


__all__ = ["load_measure"]
