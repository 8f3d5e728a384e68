"""rooflaw's namespace: the top holds solving, evaluating and loading; every other public name sits in exactly one
group (``rooflaw.<group>``) and is the object ``rooflaw.api`` gives; the old flat spelling still works and warns."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import rooflaw as rl
from rooflaw import api

ROOT = Path(__file__).resolve().parents[1]


def test_every_public_name_has_one_home():
    homes: dict[str, list[str]] = {}
    for name in rl.__all__:
        homes.setdefault(name, []).append("top")
    for group, names in api.GROUPS.items():
        for name in names.split():
            homes.setdefault(name, []).append(group)
    for name in api.CLI_HELPERS:
        homes.setdefault(name, []).append("api")
    assert set(homes) == set(api.__all__)  # nothing lost, nothing invented
    assert {n: h for n, h in homes.items() if len(h) != 1} == {}
    for name in ("solve", "Problem", "evaluate", "frontier", "search", "get_device", "load_architecture"):
        assert name in rl.__all__, name


@pytest.mark.parametrize("group", sorted(api.GROUPS))
def test_each_group_module_holds_its_names(group):
    mod = importlib.import_module(f"rooflaw.{group}")
    assert getattr(rl, group) is mod
    for name in api.GROUPS[group].split():
        assert getattr(mod, name) is getattr(api, name), f"rooflaw.{group}.{name}"
    if group not in ("units", "plots", "report"):  # the namespaces over rooflaw.api: exactly their names
        assert sorted(mod.__all__) == sorted(api.GROUPS[group].split())
        with pytest.raises(AttributeError):
            mod.solve  # noqa: B018


def test_the_old_flat_spelling_forwards_with_a_warning():
    with pytest.warns(DeprecationWarning, match=r"rooflaw\.value_band is rooflaw\.bands\.value_band"):
        old = rl.value_band
    assert old is rl.bands.value_band
    with pytest.warns(DeprecationWarning, match=r"rooflaw\.api\.joint_result"):
        assert rl.joint_result is api.joint_result
    with pytest.raises(AttributeError):
        rl.no_such_name  # noqa: B018


def test_a_group_import_stays_light():
    """``from rooflaw.units import parse_time`` and ``import rooflaw.bands`` load none of the numerical libraries."""
    code = ("import sys; from rooflaw.units import parse_time; import rooflaw.bands, rooflaw.fitting; "
            "assert parse_time('20ms') == 0.02; "
            "print(sorted(m for m in ('numpy', 'sympy', 'pandas', 'scipy') if m in sys.modules))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"
