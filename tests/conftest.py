"""How ``make test`` spreads the suite over the CPU cores (pytest-xdist); plain ``pytest`` runs as before.

``make test`` runs ``pytest -n auto --dist loadfile --no-loadscope-reorder``: every test module runs whole on one
worker, so its module-scoped fixtures (a reduced ``paper_repro all``, a fitted table, a calibration) and the numba
kernels its tests compile are built once. Modules are handed out in the order set here: the costliest first
(longest-processing-time order), so that no long module starts last while the other core idles. Only the order
and the worker change, never what a test checks; without ``-n`` the collection order is untouched. Also: the
``no_moe_padding`` fixture.
"""

from __future__ import annotations

import os

import pytest

#: Seconds each module took (setup + call + teardown of its tests) in one ``make test`` run on 2 cores, cold numba
#: cache, on 2026-11-30 at f40f777, load average 1.2 rising to 4.7 (other jobs; the run got 67 % of the 2 cores, 470 s
#: CPU, 730 s wall, 1371 s summed over the modules):
#:   ROOFLAW_CACHE_DIR=$(mktemp -d) python -m pytest -q -n auto --dist loadfile --no-loadscope-reorder --durations=0
#: then the durations summed per module. Modules under 5 s are left out. Only the ranking matters; a module not
#: listed counts as 0 and keeps its collection order after these. test_gp_overlap.py came later: 30 s alone (load 4.5).
MODULE_COST_HINT = {
    "test_backend_numba.py": 242,
    "test_closed_form.py": 181,
    "test_paper_repro.py": 129,
    "test_truth_engine.py": 117,
    "test_joint_numba.py": 78,
    "test_report_browser.py": 55,  # chromium, four pages (measured alone, 2026-12-02, load ~8)
    "test_dask_backends.py": 33,
    "test_ref_kkt.py": 54,
    "test_search.py": 52,
    "test_gp_full.py": 50,
    "test_fit.py": 33,
    "test_gp_overlap.py": 30,
    "test_solver_monotone.py": 29,
    "test_devices.py": 28,
    "test_truth_validate.py": 28,
    "test_hostile_kill.py": 27,
    "test_decode_step_table.py": 23,
    "test_hostile_heartbeat.py": 23,
    "test_truth_eager_kernels.py": 21,
    "test_report.py": 20,
    "test_hostile_cli.py": 17,
    "test_rounding.py": 17,
    "test_hostile_hypothesis.py": 16,
    "test_plots.py": 14,
    "test_gp.py": 13,
    "test_ref_bytes_torch.py": 13,
    "test_pareto.py": 11,
    "test_hostile_audit.py": 10,
    "test_hostile_gp.py": 9,
    "test_cache.py": 9,
    "test_layer_kinds.py": 9,
    "test_hf_import_hybrid.py": 9,
    "test_truth_cuda_pure.py": 8,
    "test_ref_solvers.py": 8,
    "test_precision_law.py": 7,
    "test_joint.py": 6,
    "test_adaptive.py": 6,
    "test_problem_api.py": 5,
    "test_search_joint.py": 5,
    "test_cli_engine_option.py": 5,
}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist, costliest modules first (a stable sort: tests keep their order within a module)."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return
    items.sort(key=lambda item: -MODULE_COST_HINT.get(item.path.name, 0))


@pytest.fixture
def no_moe_padding(monkeypatch: pytest.MonkeyPatch) -> None:
    """The evaluator without the routed experts' rows padded to whole tiles (``rooflaw.constraints.moe_padding``:
    ``moe_pad`` 0), which the GP relaxation leaves out: for the tests that check the GP equal to the evaluator."""
    from rooflaw.constraints import assembly as A
    from rooflaw.constraints.compile import RATE_ARGS
    from rooflaw.constraints.moe_padding import MOE_PAD, MOE_PAD_DEC

    at, orig = {RATE_ARGS.index(MOE_PAD), RATE_ARGS.index(MOE_PAD_DEC)}, A.Rates.stream_args

    def stream_args(self: A.Rates, tiles: bool = False, gemv: tuple[bool, bool] = (False, False)) -> tuple[float, ...]:
        return tuple(0.0 if i in at else v for i, v in enumerate(orig(self, tiles, gemv)))

    monkeypatch.setattr(A.Rates, "stream_args", stream_args)
