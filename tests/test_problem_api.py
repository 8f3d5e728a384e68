"""The typed Problem, its budget objects, the one Result, the method registry and the public API's shape."""

from __future__ import annotations

import ast
import dataclasses
import math
import subprocess
import sys
from pathlib import Path

import pytest

import rooflaw as rl
from rooflaw.solver import METHODS, register_method

ROOT = Path(__file__).resolve().parents[1]
DEV = "jetson-agx-orin-64gb"


# ---- Problem: constraint objects, keywords, units, validation ------------------------------------------------
def test_keywords_and_objects_build_the_same_problem():
    a = rl.Problem(device=DEV, latency_budget="20ms", phase="prefill", memory_budget="8GB", energy_budget="5J")
    b = rl.Problem(
        device=rl.get_device(DEV),
        constraints=[rl.LatencyBudget("prefill", 0.02), rl.MemoryBudget(8e9), rl.EnergyBudget(5.0)],
    )
    assert (
        a.budgets()
        == b.budgets()
        == {
            "memory": ("memory_bytes", 8e9),
            "latency": ("prefill_s", 0.02),
            "energy": ("energy_j", 5.0),
        }
    )
    assert a.constraints == b.constraints
    assert (b.latency_budget, b.phase, b.memory_budget, b.energy_budget) == (0.02, "prefill", 8e9, 5.0)
    assert a.latency_column == "prefill_s"


def test_units_match_si_and_capacity_is_the_tighter_bound():
    p = rl.Problem(device=DEV, memory_budget="2GiB")
    assert p.memory_budget == 2 * 2**30
    assert p.capacity == 2 * 2**30
    q = rl.Problem(device=DEV, memory_budget="1TB")  # looser than the device: the capacity binds
    assert q.capacity == rl.get_device(DEV).memory_capacity
    assert q.constraint_label("memory") == "capacity" and p.constraint_label("memory") == "memory"
    assert rl.Problem(device=DEV).phase == "decode"  # the CLI's default phase


def test_problem_is_frozen():
    p = rl.Problem(device=DEV, latency_budget=0.02)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.latency_budget = 1.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"workload": None}, "workload"),
        ({"device": "no-such-device"}, "device"),
        ({"device": 3}, "device"),
        ({"device": None}, "device"),
        ({"latency_budget": 0}, "latency_budget"),
        ({"latency_budget": -1e-3}, "latency_budget"),
        ({"latency_budget": float("nan")}, "latency_budget"),
        ({"memory_budget": float("inf")}, "memory_budget"),
        ({"energy_budget": True}, "energy_budget"),
        ({"latency_budget": "20 parsecs"}, "latency_budget"),
        ({"phase": "warmup"}, "phase"),
        ({"law": 3}, "law"),
        ({"space": "no-such-space"}, "space"),
        ({"precision": None}, "precision"),
        ({"preset": "nope"}, "preset"),
        ({"align": 0}, "align"),
        ({"tokens": float("nan")}, "tokens"),
        ({"constraints": [3]}, "constraints"),
        ({"constraints": [rl.MemoryBudget(1e9), rl.MemoryBudget(2e9)]}, "constraints"),
        ({"latency_budget": 0.02, "constraints": [rl.LatencyBudget("decode", 0.03)]}, "latency_budget"),
        ({"phase": "total", "constraints": [rl.LatencyBudget("decode", 0.03)]}, "phase"),
    ],
)
def test_bad_fields_raise_one_line_errors_naming_the_field(kwargs, field):
    kwargs = {"device": DEV, **kwargs}
    with pytest.raises(rl.RooflawError) as e:
        rl.Problem(**kwargs)
    msg = str(e.value)
    assert msg.startswith(f"{field}=") and "\n" not in msg


def test_budget_objects_validate_on_their_own():
    with pytest.raises(rl.RooflawError, match="^phase="):
        rl.LatencyBudget("warmup", 0.02)
    with pytest.raises(rl.RooflawError, match="^memory_budget="):
        rl.MemoryBudget(0)
    assert rl.LatencyBudget("decode", "250us").seconds == pytest.approx(250e-6)
    assert rl.EnergyBudget("2kJ").joules == 2000.0


# ---- one Result: attributes, mapping access, pandas ----------------------------------------------------------
def test_result_reads_like_a_mapping_and_converts_to_pandas():
    res = rl.solve(rl.Problem(device=DEV, latency_budget="20ms"), "exhaustive")
    assert res["loss"] == res.loss and res["perplexity"] == pytest.approx(math.exp(res.loss))
    assert set(dict(res)) >= {"method", "architecture", "loss", "latency_s", "slack", "binding"}
    with pytest.raises(KeyError):
        res["no_such_key"]
    row = res.to_frame().iloc[0]
    a = res.architecture
    assert (row["layers"], row["d_model"], row["experts"]) == (a.layers, a.d_model, a.experts)
    assert row["decode_s"] == res.latency_s["decode"] <= 0.02
    assert row["slack_latency"] == pytest.approx((0.02 - res.latency_s["decode"]) / 0.02)
    assert res.to_dict()["loss"] == res.loss


# ---- the method registry -------------------------------------------------------------------------------------
def test_registry_holds_the_built_in_methods_and_takes_new_ones():
    assert {"closed-form", "gp", "exhaustive", "optuna"} <= set(METHODS)
    seen = {}

    @register_method("test-echo")
    def _echo(problem, explain=False, **kw):
        seen.update(kw, explain=explain)
        return rl.solve(problem, "exhaustive")

    try:
        res = rl.solve(rl.Problem(device=DEV, latency_budget="20ms"), "test-echo", explain=True, answer=42)
        assert seen == {"answer": 42, "explain": True}
        assert res.method == "exhaustive"
        with pytest.raises(rl.RooflawError, match="already registered"):
            register_method("test-echo")(lambda problem, explain=False: None)
    finally:
        METHODS.pop("test-echo", None)
    with pytest.raises(rl.RooflawError, match="^method='nope'"):
        rl.solve(rl.Problem(device=DEV), "nope")


# ---- the public API ------------------------------------------------------------------------------------------
def test_all_is_the_public_api_and_every_name_resolves():
    for name in rl.__all__:
        assert getattr(rl, name) is not None, name
    for name in ("frontier", "search", "closed_form", "clear_cache", "LatencyBudget", "MemoryBudget", "EnergyBudget"):
        assert name in rl.__all__
    with pytest.raises(AttributeError):
        rl.no_such_name  # noqa: B018


def test_evaluate_takes_what_the_cli_takes(tmp_path):
    dev = rl.get_device(DEV)
    ref = rl.evaluate(rl.from_hf_config("qwen2.5-0.5b"), dev, rl.Workload(2, 512, 8), "fp16")
    # a model folder holding config.json (as a Hugging Face cache snapshot), the config.json, the bundled name
    folder = tmp_path / "snapshot"
    folder.mkdir()
    src = Path(rl.__file__).parent / "arch" / "models" / "qwen2.5-0.5b.json"
    (folder / "config.json").write_text(src.read_text())
    for arch in (folder, str(folder / "config.json"), "qwen2.5-0.5b"):
        rep = rl.evaluate(arch, DEV, batch=2, input_tokens=512, output_tokens=8)
        assert rep.values == ref.values and rep.arch.columns() == ref.arch.columns()
    spec = rl.evaluate("layers=2,d_model=256,heads=4,kv_heads=4,ffn=1024,vocab=1000", DEV)
    assert spec.arch.layers == 2
    ops = ref.to_frame()
    assert list(ops.columns) == ["name", "phase", "flops", "bytes", "seconds", "bound", "roof"]
    assert ops["seconds"].sum() == pytest.approx(ref.prefill_s + ref.decode_s, rel=0.2)
    with pytest.raises(rl.RooflawError, match="^arch="):
        rl.evaluate(str(tmp_path / "missing"), DEV)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(rl.RooflawError, match="without config.json"):
        rl.evaluate(empty, DEV)


def test_clear_cache_names_what_it_clears():
    rl.get_law("chinchilla-hoffmann")
    assert "rooflaw.objectives.builtins._CACHE" in rl.clear_cache("laws")
    with pytest.raises(rl.RooflawError, match="^what="):
        rl.clear_cache("everything")


# ---- structure: lazy imports, no rich in the core, one-way imports, module size ------------------------------
HEAVY = ("numpy", "sympy", "pandas", "scipy", "cvxpy", "optuna", "torch", "matplotlib")


def _loaded_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}; import sys; print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    return set(out.stdout.split())


def test_import_and_cli_startup_load_no_heavy_library():
    assert _loaded_after("import rooflaw") == set()
    assert _loaded_after("from rooflaw.cli import app") == set()


def _imports(path: Path) -> list[str]:
    """Absolute module names imported anywhere in ``path`` (module level and inside functions)."""
    pkg = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    if path.name == "__init__.py":
        pkg += ".__init__"
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = pkg.split(".")[: -node.level] if node.level else []
            mod = ".".join([*base, node.module] if node.module else base)
            out += [mod] + [f"{mod}.{a.name}" for a in node.names]
    return out


def test_core_never_imports_rich_and_repro_benchmarks_use_only_rooflaw():
    for f in (ROOT / "rooflaw").rglob("*.py"):
        if "cli" not in f.relative_to(ROOT).parts:
            assert not [m for m in _imports(f) if m.split(".")[0] == "rich"], f
    # bench_fast times three private implementations (the numpy scan, the hand-written Pareto code, the fit
    # objective's numpy/fused switch) against the public paths; its module docstring says so. Only those modules,
    # only there.
    private_ok = {("bench_fast.py", "rooflaw.solver.discrete"), ("bench_fast.py", "rooflaw.objectives")}
    for folder in ("paper_repro", "benchmarks"):
        for f in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    assert not [a.name for a in node.names if a.name.startswith("rooflaw.")], f
                elif isinstance(node, ast.ImportFrom) and (f.name, node.module) in private_ok:
                    assert {a.name for a in node.names} <= {"exhaustive", "pareto", "huber_fused"}, f
                elif isinstance(node, ast.ImportFrom) and not node.level and node.module.split(".")[0] == "rooflaw":
                    if node.module == "rooflaw":  # the top, or a group module by name
                        public = set(rl.__all__) | set(rl.api.GROUPS)
                    else:  # from rooflaw.bands import value_band: a group of the public API
                        group = node.module.removeprefix("rooflaw.")
                        assert group in rl.api.GROUPS, f"{f}: from {node.module} import ..."
                        public = set(rl.api.GROUPS[group].split())
                    assert {a.name for a in node.names} <= public, f"{f}: imports a non-public name"


def test_solver_imports_have_no_cycle():
    files = {".".join(f.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): f
             for f in (ROOT / "rooflaw" / "solver").rglob("*.py")}  # fmt: skip
    graph = {m: {i for i in _imports(f) if i in files and i != m and files[i].name != "__init__.py"}
             for m, f in files.items()}  # fmt: skip
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for n in graph[m]:
            assert state.get(n) != 1, "import cycle: " + " -> ".join([*path, m, n])
            if n not in state:
                visit(n, [*path, m])
        state[m] = 2

    for m in graph:
        if m not in state:
            visit(m, [])


def test_no_module_over_500_lines():
    big = {
        str(f.relative_to(ROOT)): n
        for f in (ROOT / "rooflaw").rglob("*.py")
        if (n := len(f.read_text(encoding="utf-8").splitlines())) > 500
    }
    assert not big, big
