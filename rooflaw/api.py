"""The public API: everything the CLI, ``paper_repro`` and ``benchmarks`` use (re-exported by ``rooflaw``).

Names load on first use (module ``__getattr__``), so ``import rooflaw`` costs no numpy, sympy, pandas, scipy,
cvxpy, optuna, torch or matplotlib. The API takes what the CLI takes: device ids or files, unit strings
(``"20ms"``, ``"8GB"``, ``"5J"``) or SI numbers, architectures as objects, ``--arch`` spec strings, Hugging Face
``config.json`` files or model folders; and it has the CLI's defaults.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .errors import Infeasible, RooflawError, bad  # noqa: F401  (public names)

if TYPE_CHECKING:  # pragma: no cover - names for type checkers and IDEs
    from .constraints import CostReport, EngineProfile, Precision, Workload

#: module -> the public names it defines (imported on first access).
_MODULES: dict[str, str] = {
    "rooflaw.arch": "COLUMNS Architecture Space bundled_models from_file from_hf_config from_mapping from_spec "
    "get_space list_spaces load_architecture param_counts",
    "rooflaw.arch.layer_kinds": "LAYER_KINDS LayerKind register_layer_kind unregister_layer_kind",
    "rooflaw.constraints": "ENGINE_NAMES FORMATS PRESETS CostReport EngineProfile Precision Workload "
    "complete_columns decode_steps evaluate_columns gemm get_engine",
    "rooflaw.constraints.engines": "default_engine",
    "rooflaw.constraints.kernels": "FAMILIES GENERIC KernelCurves curves_for",
    "rooflaw.constraints.kernels.fit": "abs_errors band_tail catalog_text family_errors fit_curves fit_kernels "
    "kernel_gpus predict_tables with_provenance "
    "write_kernel_catalog",
    "rooflaw.constraints.kernels.tables": "read_kernel_tables",
    "rooflaw.constraints.scenario": "Scenario",
    "rooflaw.devices": "Device device_ids get_device list_devices load_device_file save_device_toml",
    # the function, from its module: the package attribute ``rooflaw.devices.calibrate`` is that module
    "rooflaw.devices.calibrate": "calibrate",
    "rooflaw.devices.calibrate_cuda": "calibrate_cuda cuda_available",
    "rooflaw.devices.system": "System get_system system_ids",
    "rooflaw.constraints.parallel": "Layout batch_sweep evaluate_layout layout_columns max_batch parse_batches "
    "parse_layout",
    "rooflaw.constraints.parallel.inflight": "TRTLLM_TOKEN_BUDGET inflight layout_step_cost max_throughput "
    "trtllm_bench_settings",
    "rooflaw.constraints.serving_host": "HostRows ServingHost fit_host host_toml leave_one_source_out ratios "
    "serving_host static_batch",
    "rooflaw.plots.serving": "plot_serving",
    "rooflaw.plots.joint": "plot_joint_frontier",
    "rooflaw.solver.explain_joint": "explain_joint explain_joint_text",
    "rooflaw.objectives": "LossLaw builtin_laws fit_law gemstones get_law law_inputs list_laws load_table parse_law "
    "plot_fit",
    "rooflaw.solver": "AdaptiveResult adaptive_search FRONTIER_COLUMNS METHODS SAMPLERS ClosedForm Constraint "
    "DerivedTheorems EnergyBudget "
    "FrontierResult LatencyBudget MemoryBudget Problem RelaxationResult Result SearchResult TPOTBudget TTFTBudget "
    "ThroughputFloor "
    "closed_form derive_theorems frontier "
    "hypervolume pareto_mask register_method round_solution search solve solve_exhaustive solve_gp solve_optuna",
    "rooflaw.solver.search.study": "infeasible_from_trials search_frontier",
    "rooflaw.solver.search.safety": "check_out_not_storage",
    "rooflaw.solver.search.joint_trials": "joint_result",
    "rooflaw.constraints.parallel.disagg": "balanced_split check_fits disagg_columns parse_disagg",
    "rooflaw.solver.discrete.joint": "JointFrontierResult JointSpace Option combination_problem joint_frontier "
    "solve_joint",
    "rooflaw.solver.discrete.layout_options": "layout_options parse_layouts",
    "rooflaw.objectives.precision_law": "bind_precision precision_aware precision_bits",
    "rooflaw.solver.jobs": "cpu_count resolve_jobs",
    "rooflaw.solver.compare": "compare",
    "rooflaw.solver.explain_discrete": "explain_discrete explain_text",
    "rooflaw.constraints.breakdown": "OP_COLUMNS op_rows throughput",
    "rooflaw.constraints.steps": "STEP_COLUMNS decode_step_table step_rows",
    "rooflaw.constraints.speculative": "MAX_DRAFT_TOKENS Draft SpeculativeReport check_alpha eagle_draft "
    "evaluate_speculative expected_tokens optimal_draft_tokens optimal_gamma_continuous parse_draft",
    "rooflaw.constraints.passes": "pass_table",
    "rooflaw.constraints.acceptance": "load_acceptance_rows",
    "rooflaw.solver.speculative": "DEFAULT_GAMMAS explain_speculative explain_speculative_text space_drafts "
    "speculative_options",
    "rooflaw.constraints.theory": "theory_expressions",
    "rooflaw.constraints.published": "load_cases",
    "rooflaw.constraints.fit_efficiency": "FIT_COMMAND FitResult achieved_table efficiency_errors engines_toml "
    "fit_efficiencies median_abs_error write_engine_catalog",
    "rooflaw.constraints.fit_held_out": "held_out_errors nested_held_out_errors",
    "rooflaw.plots": "check_figure_path plot_breakdown plot_frontier plot_report plot_roofline",
    "rooflaw.units": "parse_bytes parse_energy parse_time",
    "rooflaw.constraints.bands": "BAND_LEVEL band_applies band_coverage bands_dict bands_from_rows confidence_factor "
    "kernel_band phase_band problem_band value_band write_bands",
    "rooflaw.report": "REPORT_DETAILS plotly_js report_data write_report",
    "rooflaw.cache": "answer_key load_answer store_answer",
}
#: name -> module that defines it.
_LAZY: dict[str, str] = {name: mod for mod, names in _MODULES.items() for name in names.split()}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'rooflaw' has no attribute {name!r}")
    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


# ---- what the CLI accepts, as Python --------------------------------------------------------------------------
def _workload(workload: Any, overrides: Mapping[str, Any]) -> Workload:
    from .constraints import Workload

    if workload is None:
        base: dict[str, Any] = {}
    elif isinstance(workload, Workload):
        base = workload.to_dict()
    elif isinstance(workload, Mapping):
        base = dict(workload)
    else:
        raise bad("workload", workload, "expected a Workload or a mapping of its fields")
    base.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return Workload(**base)
    except TypeError as e:
        raise bad("workload", base, str(e)) from None


def evaluate(
    arch: Any,
    device: Any,
    workload: Any = None,
    precision: str | Precision = "fp16",  # = solver.problem.DEFAULT_PRECISION (a test pins it)
    preset: str = "full",
    tiles: bool = False,
    engine: str | EngineProfile | None = None,
    *,
    batch: int | None = None,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    attention: str | None = None,
) -> CostReport:
    """Latency per phase (s), memory (bytes), energy (J) and the per-operator breakdown of one architecture.

    ``arch``: anything :func:`load_architecture` takes; ``device``: a :class:`Device`, a catalog id or a device
    file; ``workload``: a :class:`Workload` or a mapping, with keyword overrides (``batch``, ``input_tokens``,
    ``output_tokens``, ``attention``); ``engine``: an engine profile or its name (``ideal``, ``tensorrt-llm``, ...;
    None: the device's fitted default). Defaults are the CLI's (batch 1, 1024 in, 16 out, fused attention, the ``full``
    preset, the default precision). ``.to_dict()`` gives the totals, ``.to_frame()`` the operators.
    Example (the pure roofline, ``engine="ideal"``: datasheet figures only)::

        >>> import rooflaw as rl
        >>> r = rl.evaluate("layers=4,d_model=512,heads=8,kv_heads=2,ffn=1536,vocab=32000", "jetson-agx-orin-64gb",
        ...                 engine="ideal", input_tokens=1024, output_tokens=16)
        >>> print(f"prefill {r.prefill_s * 1e3:.3f} ms, decode {r.decode_s * 1e3:.3f} ms")
        prefill 1.352 ms, decode 4.634 ms
        >>> print(f"memory {r.memory_bytes / 1e6:.1f} MB")
        memory 100.3 MB
        >>> r.params_total == 44_831_232 and r.weight_bytes == 2 * r.params_total  # fp16: 2 bytes a weight
        True
    """
    from .arch import load_architecture
    from .constraints import evaluate as _evaluate
    from .devices import get_device
    from .solver.problem import DEFAULT_PRECISION

    wl = _workload(workload, {"batch": batch, "input_tokens": input_tokens, "output_tokens": output_tokens,
                              "attention": attention})  # fmt: skip
    return _evaluate(
        load_architecture(arch), get_device(device), wl, precision or DEFAULT_PRECISION, preset, tiles, engine
    )


#: Names for :func:`clear_cache`: what each clears in this process.
_CACHES: dict[str, tuple[tuple[str, str], ...]] = {
    "cost-model": (
        ("rooflaw.constraints.compile", "compile_preset"),
        ("rooflaw.constraints.theory", "theory_expressions"),
    ),  # fmt: skip
    "closed-form": (("rooflaw.solver.relaxation.closed_form", "_DERIVATIONS"),),
    "theorems": (("rooflaw.solver.relaxation.kkt", "_theorems_cached"),),
    "gp": (("rooflaw.solver.relaxation.gp_full", "_COMPILED"),),
    "catalog": (("rooflaw.devices.catalog", "clear_cache"),),
    "laws": (("rooflaw.objectives.builtins", "_CACHE"),),
    "spaces": (("rooflaw.arch.space", "_CACHE"),),
}


def clear_cache(*what: str, disk: bool = False) -> list[str]:
    """Forget derived artefacts so the next call recomputes them; returns what was cleared.

    ``what``: any of ``cost-model`` (compiled evaluators), ``closed-form`` (compiled KKT regimes), ``theorems`` (the
    sympy-derived theorems), ``gp`` (compiled GPs),
    ``catalog`` (devices and plug-ins), ``laws``, ``spaces``; none means all. ``disk=True`` also deletes the
    on-disk cache (``$ROOFLAW_CACHE_DIR`` or ``~/.cache/rooflaw``). Modules not imported yet hold nothing to clear.
    """
    import sys

    names = what or tuple(_CACHES)
    for n in names:
        if n not in _CACHES:
            raise bad("what", n, f"must be one of {', '.join(_CACHES)}")
    done: list[str] = []
    for n in names:
        for mod, attr in _CACHES[n]:
            m = sys.modules.get(mod)
            obj = getattr(m, attr, None) if m is not None else None
            if obj is None:
                continue
            if hasattr(obj, "cache_clear"):
                obj.cache_clear()
            elif hasattr(obj, "clear"):
                obj.clear()
            elif callable(obj):
                obj()
            done.append(f"{mod}.{attr}")
    if disk:
        from .cache import cache_dir

        d = cache_dir()
        if d is not None and d.is_dir():
            for f in d.glob("*.pkl"):
                f.unlink(missing_ok=True)
            done.append(str(d))
    return done


__all__ = sorted([*_LAZY, "Infeasible", "RooflawError", "clear_cache", "evaluate"], key=str.lower)

# ---- how ``rooflaw`` groups these names ----------------------------------------------------------------------
#: The public API beside the top of ``rooflaw``: ``rooflaw.<group>`` -> the names it holds (each defined where
#: :data:`_MODULES` says). ``units``, ``plots`` and ``report`` are the packages that define theirs; the others are
#: namespaces over this module (:func:`group_attr`). The top of ``rooflaw`` (:data:`TOP`) keeps the rest: solving,
#: evaluating, and loading devices, architectures, spaces and laws.
GROUPS: dict[str, str] = {
    "units": "parse_bytes parse_energy parse_time",
    "plots": "check_figure_path plot_breakdown plot_frontier plot_joint_frontier plot_report plot_roofline "
    "plot_serving",
    "report": "REPORT_DETAILS plotly_js report_data write_report",
    "bands": "BAND_LEVEL band_applies band_coverage bands_dict bands_from_rows confidence_factor phase_band "
    "problem_band value_band write_bands",
    "speculative": "DEFAULT_GAMMAS MAX_DRAFT_TOKENS Draft SpeculativeReport check_alpha eagle_draft "
    "evaluate_speculative expected_tokens explain_speculative explain_speculative_text load_acceptance_rows "
    "optimal_draft_tokens optimal_gamma_continuous parse_draft space_drafts speculative_options",
    "parallel": "Layout Option balanced_split batch_sweep check_fits combination_problem cpu_count disagg_columns "
    "evaluate_layout inflight layout_columns layout_options layout_step_cost max_batch max_throughput parse_batches "
    "parse_disagg parse_layout parse_layouts resolve_jobs TRTLLM_TOKEN_BUDGET trtllm_bench_settings "
    "HostRows ServingHost fit_host host_toml leave_one_source_out ratios serving_host static_batch",
    "fitting": "FAMILIES GENERIC band_tail family_errors fit_curves "
    "KernelCurves calibrate calibrate_cuda cuda_available curves_for efficiency_errors fit_efficiencies "
    "fit_kernels gemstones held_out_errors kernel_gpus load_cases load_table median_abs_error nested_held_out_errors "
    "plot_fit "
    "FIT_COMMAND FitResult abs_errors achieved_table catalog_text engines_toml predict_tables read_kernel_tables "
    "with_provenance write_engine_catalog write_kernel_catalog",
    "explain": "DerivedTheorems OP_COLUMNS STEP_COLUMNS decode_step_table decode_steps derive_theorems "
    "explain_discrete explain_joint explain_joint_text explain_text op_rows pass_table step_rows theory_expressions "
    "throughput",
}
#: Names only the command line needs (spelled ``rooflaw.api.NAME``).
CLI_HELPERS = ("answer_key", "check_out_not_storage", "infeasible_from_trials", "joint_result", "load_answer",
               "store_answer")  # fmt: skip
#: name -> its group.
GROUP_OF: dict[str, str] = {name: group for group, names in GROUPS.items() for name in names.split()}
#: The top of ``rooflaw``: what is in no group and is no CLI helper.
TOP: tuple[str, ...] = tuple(n for n in __all__ if n not in GROUP_OF and n not in CLI_HELPERS)


def group_names(group: str) -> list[str]:
    """The names of ``rooflaw.<group>``, sorted."""
    return sorted(GROUPS[group].split(), key=str.lower)


def group_attr(group: str, name: str) -> Any:
    """``rooflaw.<group>.<name>`` (loaded on first use); AttributeError for a name not in the group."""
    if name not in GROUPS[group].split():
        raise AttributeError(f"module 'rooflaw.{group}' has no attribute {name!r}")
    return __getattr__(name)
