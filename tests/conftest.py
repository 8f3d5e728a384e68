"""How ``make test`` spreads the suite over the CPU cores (pytest-xdist); plain ``pytest`` runs as before.

``make test`` runs ``pytest -n auto --dist loadfile --no-loadscope-reorder``: every test module runs whole on one
worker, so its module-scoped fixtures (a reduced ``paper_repro all``, a fitted table, a calibration) and the numba
kernels its tests compile are built once. Modules are handed out in the order set here: the costliest first
(longest-processing-time order), so that no long module starts last while the other core idles. Only the order
and the worker change, never what a test checks; without ``-n`` the collection order is untouched.
"""

from __future__ import annotations

import os

import pytest

#: Seconds each costly module took in ``pytest -q --durations=80`` on 2 cores at load average ≈ 8 (sum of its
#: tests among the 80 slowest, cold numba cache; 1454 s in all). Only the ranking matters; a module not listed
#: counts as 0 and keeps its collection order after these.
MODULE_COST_HINT = {
    "test_backend_numba.py": 204,
    "test_search.py": 156,
    "test_closed_form.py": 154,
    "test_gp_full.py": 80,
    "test_backend_cli.py": 77,
    "test_fit.py": 74,
    "test_truth_engine.py": 70,
    "test_truth_validate.py": 61,
    "test_devices.py": 55,
    "test_rounding.py": 55,
    "test_hostile_kill.py": 40,
    "test_paper_repro.py": 38,
    "test_ref_kkt.py": 26,
    "test_truth_eager_kernels.py": 20,
    "test_decode_step_table.py": 20,
    "test_solver_monotone.py": 18,
    "test_cache.py": 15,
    "test_hostile_heartbeat.py": 14,
    "test_gp.py": 14,
    "test_joint.py": 13,
}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist, costliest modules first (a stable sort: tests keep their order within a module)."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return
    items.sort(key=lambda item: -MODULE_COST_HINT.get(item.path.name, 0))
