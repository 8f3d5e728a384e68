"""The numba backend: numpy's values (tests/same_values.py) on random and real candidates; exact frontier."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from same_values import assert_same

from rooflaw import Infeasible, RooflawError, get_device
from rooflaw.arch import Space
from rooflaw.arch.load import bundled_models, from_hf_config
from rooflaw.constraints import Workload, backends, evaluate_columns
from rooflaw.constraints import backend_numba as bn
from rooflaw.solver import Problem, frontier, solve_exhaustive

needs_numba = pytest.mark.skipif(not backends.available(), reason="numba (the fast extra) is not installed")


def random_columns(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """Random architectures, dense and MoE, with every optional column varied (not only valid configs)."""
    heads = rng.choice([1, 2, 4, 8, 12, 16, 32, 64], n)
    experts = rng.choice([1, 1, 4, 8, 16, 64, 128], n)
    return {
        "layers": rng.integers(1, 96, n),
        "d_model": rng.integers(1, 80, n) * 64,
        "heads": heads,
        "kv_heads": np.maximum(1, heads // rng.choice([1, 2, 4, 8], n)),
        "head_dim": rng.choice([32, 64, 96, 128, 256], n),
        "ffn": rng.integers(1, 400, n) * 32,
        "experts": experts,
        "top_k": np.minimum(experts, rng.choice([1, 2, 4, 8], n)),
        "shared_experts": rng.choice([0, 0, 1, 2], n),
        "shared_ffn": rng.integers(1, 200, n) * 64,
        "vocab": rng.choice([32000, 50257, 151936], n),
        "tied": rng.integers(0, 2, n),
        "gated": rng.integers(0, 2, n),
        "qkv_bias": rng.integers(0, 2, n),
        "layernorm": rng.integers(0, 2, n),
        "qk_norm_size": rng.choice([0, 128, 256], n),
        "norms_per_layer": rng.choice([2, 4], n),
        "shared_gate": rng.integers(0, 2, n),
        "qk_norm_on": rng.integers(0, 2, n),
    }


def devices():
    h100 = get_device("h100-sxm")
    per_op = dataclasses.replace(h100, id="per-op", energy_per_flop=1.3e-12, energy_per_byte=6e-11)
    bare = dataclasses.replace(h100, id="bare", power_peak=None, power_idle=None, energy_per_flop=None,
                               energy_per_byte=None)  # fmt: skip
    return [get_device("jetson-orin-nano-8gb"), h100, per_op, bare]


def assert_identical(a: dict, b: dict) -> None:
    """Same columns and values (to libm's last bit against numpy's AVX-512 exp/log: tests/same_values.py)."""
    assert_same(a, b)


CASES = [
    (Workload(), "fp16"),
    (Workload(batch=8, input_tokens=512, output_tokens=64, attention="fused"), "w4a16kv8"),
    (Workload(batch=3, input_tokens=4096, output_tokens=1), "int8"),
]


@needs_numba
@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("dev", range(4))
@pytest.mark.parametrize("preset", ["full", "paper"])
def test_identical_on_random_candidates(preset, dev, case):
    cols = random_columns(np.random.default_rng(7), 20_000)
    w, prec = CASES[case]
    # None: the device's default (fitted) engine profile; torch-eager: kernels per routed expert touched
    for engine in ("device", None, "vllm", "torch-eager"):
        a = evaluate_columns(cols, devices()[dev], w, prec, preset, backend="numpy", engine=engine)
        b = evaluate_columns(cols, devices()[dev], w, prec, preset, backend="numba", engine=engine)
        assert_identical(a, b)


@needs_numba
def test_identical_with_nan_inf_and_in_space_order():
    """K/E = inf and 0/0 through the powers and the decode sums; rows in space order (the memo's last-value
    path), at random (its table) and both mixed."""
    from rooflaw.arch import get_space

    n = 6000
    rng = np.random.default_rng(11)
    space = get_space("wide")
    mixed = np.concatenate([np.arange(n // 2), rng.integers(0, space.size, n - n // 2), np.arange(3000)])
    tables = [random_columns(rng, n), space.columns_at(rng.integers(0, space.size, n), np.float64),
              space.columns_at(np.arange(n) * 37, np.float64), space.columns_at(mixed, np.float64)]  # fmt: skip
    tables[0]["experts"][:7] = 0.0
    for cols in tables:
        for dev, engine in ((devices()[0], None), (devices()[3], "device")):
            w = Workload(batch=4, input_tokens=700, output_tokens=33)
            with np.errstate(all="ignore"):
                a = evaluate_columns(cols, dev, w, backend="numpy", engine=engine)
            assert_identical(a, evaluate_columns(cols, dev, w, backend="numba", engine=engine))


@needs_numba
def test_identical_on_real_models_and_broadcast_columns():
    archs = [from_hf_config(m) for m in bundled_models()]
    rows = [a.columns() for a in archs]
    cols = {k: np.array([float(r[k]) for r in rows]) for k in rows[0]}
    for dev in devices():
        for out_tokens in (1, 16, 256):
            w = Workload(batch=4, input_tokens=2048, output_tokens=out_tokens)
            for engine in ("device", None):
                assert_identical(evaluate_columns(cols, dev, w, backend="numpy", engine=engine),
                                 evaluate_columns(cols, dev, w, backend="numba", engine=engine))  # fmt: skip
    # a space in enumeration order, with repeated rows and a -0.0 column
    from rooflaw.arch import get_space

    space = get_space("paper")
    cols = space.columns_at(np.arange(space.size), np.float64)
    cols["tied"] = np.array(cols["tied"])  # fixed columns are read-only broadcasts: vary copies of them
    cols["tied"][::3] = 1.0
    cols["qkv_bias"] = np.array(cols["qkv_bias"])
    cols["qkv_bias"][1::7] = -0.0
    for dev in devices()[:2]:
        assert_identical(
            evaluate_columns(cols, dev, backend="numpy", engine="device"),
            evaluate_columns(cols, dev, backend="numba", engine="device"),
        )
    # scalars broadcast against one varying column (stride-0 inputs)
    few = {"layers": np.arange(1, 50), "d_model": 2048, "heads": 16, "ffn": 8192, "experts": 8, "top_k": 2}
    dev = get_device("h100-sxm")
    assert_identical(
        evaluate_columns(few, dev, backend="numpy", engine="device"),
        evaluate_columns(few, dev, backend="numba", engine="device"),
    )


@needs_numba
def test_identical_on_mixed_layer_stacks():
    """Sliding-window, MLA, constant-state mixer and first-k-dense layers in one table (every layer kind)."""
    rng = np.random.default_rng(3)
    n = 5000
    cols = random_columns(rng, n)
    L = cols["layers"]
    mixer = rng.integers(0, 3, n) * (L // 4)
    mla = np.where(rng.random(n) < 0.3, L - mixer, 0)
    cols |= {
        "mixer_layers": mixer, "mla_layers": mla, "attn_layers": L - mixer - mla,
        "local_layers": (L - mixer - mla) // 2, "window": rng.choice([512, 4096], n),
        "q_lora_rank": rng.choice([0, 1536], n), "kv_lora_rank": rng.choice([256, 512], n),
        "rope_dim": 64, "v_head_dim": 128, "mixer_in": 2 * cols["d_model"], "mixer_inner": cols["d_model"],
        "mixer_state": rng.integers(1, 64, n) * 1024, "mixer_params": rng.integers(0, 1000, n),
        "mixer_flops": rng.integers(0, 100, n) * 1000, "dense_layers": np.minimum(L, rng.integers(0, 4, n)),
        "dense_ffn": rng.integers(1, 300, n) * 64, "router_bias": rng.integers(0, 2, n),
    }  # fmt: skip
    cols["ffn_layers"] = L - cols["dense_layers"]
    for dev in devices()[:3]:
        w = Workload(batch=2, input_tokens=8192, output_tokens=32)
        a = evaluate_columns(cols, dev, w, backend="numpy", engine="device")
        assert_identical(a, evaluate_columns(cols, dev, w, backend="numba", engine="device"))


def brute_front(prob: Problem, objectives: tuple[str, ...]) -> set[tuple]:
    """Feasible non-dominated rows by the definition (O(n²) comparisons on Problem.evaluate's numpy values)."""
    cols = {"loss": "loss", "latency": "latency_s", "memory": "memory_bytes", "energy": "energy_j"}
    df = prob.evaluate(prob.space.to_frame())
    f = df[df["feasible"]].reset_index(drop=True)
    x = f[[cols[o] for o in objectives]].to_numpy(dtype=float)
    keep = [not (np.all(x <= x[i], axis=1) & np.any(x < x[i], axis=1)).any() for i in range(len(x))]
    return rows(f[np.array(keep, dtype=bool)])


def rows(df) -> set[tuple]:
    k = ["layers", "d_model", "kv_heads", "head_dim", "ffn", "experts", "top_k", "vocab", "tied"]
    return set(map(tuple, df[k].astype(int).to_numpy().tolist()))


@needs_numba
@pytest.mark.parametrize("seed", range(4))
def test_frontier_exact_against_brute_force(seed, monkeypatch):
    from rooflaw.solver.discrete import exhaustive_fast as xf

    monkeypatch.setattr(xf, "PIECE", 1000)  # several calls, threads and resumed buffers on a small space
    monkeypatch.setattr(xf, "OUT_CAP", 8192 + 64)
    monkeypatch.setattr(xf, "NBINS", [2, 16, 8192, 1][seed])  # exact whatever the staircase resolution
    rng = np.random.default_rng(seed)
    space = Space(
        name="rnd",
        layers=sorted(rng.choice(np.arange(1, 48), size=8, replace=False).tolist()),
        d_model=sorted(rng.choice(np.arange(4, 40) * 64, size=6, replace=False).tolist()),
        head_dim=[64, 128],
        kv_heads=[1, 4, "heads"],
        moe=[(1, 1), (8, 1), (8, 2), (16, 4)],
        r_single=[0.5, 2.0, 4.0],
        tied=[False, True],
    )
    # the defaults (fitted engine profile with its per-pass overhead, the law's fitted domain) and the pure
    # device figures with extrapolation
    dev_id = ["jetson-orin-nano-8gb", "h100-sxm", "rtx-4090", "jetson-orin-nano-8gb"][seed]
    dev = get_device(dev_id) if seed % 2 == 0 else dataclasses.replace(get_device(dev_id), achieved={})
    budget = [{}, {"latency_budget": 0.02}, {"memory_budget": 2e9}, {"energy_budget": 5.0}][seed]

    def problem(extrapolate: bool, **extra) -> Problem:
        return Problem(law="paper-2602.10377", device=dev, space=space, allow_extrapolation=extrapolate, **budget,
                       **extra)  # fmt: skip

    # one scan kernel per law: a second query (other objectives, a budget, the domain off) compiles nothing
    prob = problem(seed % 2 == 1)
    extra = {"memory_budget": 3e9} if seed != 2 else {"energy_budget": 50.0}
    queries = [(prob, ("loss", "latency")), (prob, ("loss", "latency", "energy")),
               (problem(seed % 2 == 0, **extra), ("loss", "memory"))]  # fmt: skip
    for q, objectives in queries:
        a = frontier(q, objectives, n_jobs=2, cloud=0, backend="numba")
        if q is queries[0][0] and objectives == queries[0][1]:
            loaded = dict(bn._LOADED)
        assert loaded == bn._LOADED  # no new module, hence nothing compiled
        b = frontier(q, objectives, n_jobs=1, cloud=0, backend="numpy")
        assert rows(a.frontier) == brute_front(q, objectives)
        assert a.frontier.equals(b.frontier)
        assert (a.evaluated, a.feasible) == (b.evaluated, b.feasible) == (space.size, b.feasible)
        assert a.timings["backend"] == "numba"
    ra = solve_exhaustive(q, backend="numba")
    rb = solve_exhaustive(q, backend="numpy")
    assert ra.architecture == rb.architecture and ra.loss == rb.loss and ra.binding == rb.binding


@needs_numba
def test_prefilter_drops_points_and_infeasible_message_matches():
    dev = dataclasses.replace(get_device("jetson-orin-nano-8gb"), achieved={})
    prob = Problem(law="paper-2602.10377", device=dev, space="paper", allow_extrapolation=True)
    res = frontier(prob, ("loss", "latency"), cloud=0, backend="numba")
    assert res.timings["survivors"] < res.feasible / 5  # the staircase dropped most feasible points in-kernel
    tight = dataclasses.replace(prob, latency_budget=1e-6)
    msgs = []
    for backend in ("numba", "numpy"):
        with pytest.raises(Infeasible) as e:
            frontier(tight, ("loss", "latency"), cloud=0, backend=backend)
        msgs.append((str(e.value), e.value.binding, e.value.smallest))
    assert msgs[0] == msgs[1]


def test_backend_choice_and_missing_numba(monkeypatch):
    with pytest.raises(RooflawError, match="backend='gpu'"):
        backends.resolve("gpu", 10)
    assert backends.resolve("auto", 10) == "numpy"  # small tables stay on numpy
    monkeypatch.setattr(backends, "available", lambda: False)
    assert backends.resolve("auto", 10**9) == "numpy"
    with pytest.raises(RooflawError, match="numba is not installed"):
        evaluate_columns({"layers": 2, "d_model": 256, "heads": 4, "ffn": 512}, get_device("h100-sxm"),
                         backend="numba", engine="device")  # fmt: skip


def test_auto_says_once_why_it_runs_numpy(monkeypatch):
    """``auto`` on a table numba would take but cannot: one SlowPathWarning naming the reason, then silence."""
    monkeypatch.setattr(backends, "AUTO_MIN_ROWS", 1)
    monkeypatch.setattr(backends, "available", lambda: True)
    monkeypatch.setattr(backends, "_WARNED", set())
    cols, dev = {"layers": np.arange(1, 9), "d_model": 512, "heads": 8, "ffn": 2048}, get_device("h100-sxm")
    with pytest.warns(backends.SlowPathWarning, match=r"runs numpy .* because the numba kernel has no tile/wave"):
        a = evaluate_columns(cols, dev, tiles=True, engine="device")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        b = evaluate_columns(cols, dev, tiles=True, engine="device")  # the same reason: no second warning
    assert_identical(a, b)

    def unsupported(*a, **k):
        raise bn.Unsupported("function Heaviside")

    monkeypatch.setattr(bn, "kernels", unsupported)
    with pytest.warns(backends.SlowPathWarning, match="cannot express this cost model .function Heaviside"):
        assert_identical(evaluate_columns(cols, dev, engine="device", backend="auto"),
                         evaluate_columns(cols, dev, engine="device", backend="numpy"))  # fmt: skip


@needs_numba
def test_kernels_cached_on_disk_for_a_fresh_process(tmp_path):
    """A fresh process loads the kernel from numba's disk cache; with ROOFLAW_NUMBA_NATIVE=1 the second one links
    the stored object code without importing numba. Values equal numpy's either way."""
    from rooflaw import cache

    base = cache.cache_dir() or tmp_path  # the session's cache: usually compiled already by the tests above
    code = (
        "import sys, numpy as np, rooflaw; from rooflaw.constraints import evaluate_columns, backend_numba as bn;"
        "cols = {'layers': np.arange(1, 9), 'd_model': 512, 'heads': 8, 'ffn': 2048};"
        "dev = rooflaw.get_device('h100-sxm');"
        "a = evaluate_columns(cols, dev, backend='numba', engine='device');"
        "b = evaluate_columns(cols, dev, backend='numpy', engine='device');"
        "same = all(np.allclose(a[c], b[c], rtol=1e-12, atol=0.0, equal_nan=True) for c in a);"
        "print('numba' in sys.modules, type(bn.kernels('full').fn).__name__, same)"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("ROOFLAW_NO_CACHE", "ROOFLAW_NUMBA_NATIVE")}
    env |= {"ROOFLAW_CACHE_DIR": str(base), "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    seen = []
    for native in ("0", "1", "1"):
        run = subprocess.run([sys.executable, "-c", code], env=env | {"ROOFLAW_NUMBA_NATIVE": native},
                             capture_output=True, text=True, timeout=600)  # fmt: skip
        assert run.returncode == 0, run.stderr
        seen.append(run.stdout.split())
    assert seen[0] == ["True", "Native", "True"]  # numba's own cache (or a compile)
    assert seen[1][1:] == ["Native", "True"]  # compiled once more to keep the object code, unless already kept
    assert seen[2] == ["False", "Native", "True"]  # linked natively: numba never imported
    assert list((base / "numba").glob("rl_*.py")) and list(base.glob("native-*.pkl"))


@needs_numba
def test_native_entry_refuses_what_it_would_have_to_convert():
    """The C entry takes the kernel's arguments as they are: a wrong dtype, rank or layout is refused (a copy of
    an output would silently drop the results), never converted."""
    k = bn.kernels("full")
    assert type(k.fn).__name__ == "Native"
    n, x = 3, tuple(np.ones(1) for _ in k.per_row)
    s, w = np.zeros(len(k.per_row), dtype=np.int64), np.ones(len(k.scalars))
    for out, msg in ((np.empty((16, n), dtype=np.float32), "out: expected a f8 array"),
                     (np.empty((n, 16)).T, "out: expected a C-contiguous array"),
                     (np.empty(16 * n), "out: expected a f8 array of 2 dimension")):  # fmt: skip
        with pytest.raises(TypeError, match=msg):
            k.fn(x, s, w, out)
    with pytest.raises(TypeError, match="argument x: expected"):
        k.fn(x[:-1], s, w, np.empty((16, n)))
    out = np.full((16, n), -1.0)
    k.fn(x, s, w, out)  # well-formed: every output written in place
    assert not (out == -1.0).any()


def test_cached_evaluator_namespace_is_lambdifys():
    """A cached evaluator is rebuilt in lambdify's namespace restricted to the names it reads (skipping the
    ``from numpy import *`` that imports numpy.testing and f2py): the same objects as lambdify's own."""
    from rooflaw.constraints import compile as C

    full = C._namespace()
    for preset in ("full", "paper"):
        c = C.compile_preset(preset)
        for fn in (c.fast, c.parts, c.gemms):
            ns = C._globals_for(fn.__code__)
            assert ns is not None and all(ns[n] is full[n] for n in ns)
    assert (
        C._globals_for(compile("def _lambdifygenerated(x):\n    return no_such_function(x)", "<test>", "exec")) is None
    )
    assert (
        C._globals_for(compile("def _lambdifygenerated(x):\n    return max(x)", "<test>", "exec"))["max"] is full["max"]
    )


def test_tracer_records_the_numpy_path_operation_for_operation():
    """The statements the kernels are built from, run per element in plain Python, equal numpy's arrays bit for bit:
    ``sum_max_affine`` (where, clip, floor, ceil, comparisons, maximum) and a power with a traced exponent (numpy's
    x² fast path when it is 2); a branch on a traced value is refused with a reason. No numba needed."""
    import math

    from rooflaw.constraints.assembly import sum_max_affine
    from rooflaw.constraints.numba_trace import Tape, Unsupported, code

    rng = np.random.default_rng(5)
    n = 400
    a0, b0 = rng.normal(size=n), rng.normal(size=n)
    a1 = rng.normal(size=n)
    b1 = np.where(rng.random(n) < 0.3, a1, rng.normal(size=n))  # g1 == 0 for some rows: the all-or-none branch
    steps, x, e = rng.integers(1, 300, n).astype(float), rng.random(n), rng.choice([2.0, 0.5, 3.0], n)
    tape = Tape()
    names = ("a0", "a1", "b0", "b1", "n", "x", "e")
    traced = sum_max_affine(*(tape.var(v) for v in names[:5]))[0] + tape.var("x") ** tape.var("e")
    want = sum_max_affine(a0, a1, b0, b1, steps)[0] + x**e
    cols = (a0, a1, b0, b1, steps, x, e)
    for i in range(n):
        env = {"math": math, "np": np} | {k: float(v[i]) for k, v in zip(names, cols, strict=True)}
        for target, expr, _ in tape.stmts:
            env[target] = eval(expr, env)  # noqa: S307 - the tracer's own statements, not user text
        assert env[code(traced)] == want[i], i
    with pytest.raises(Unsupported, match="branch on a traced value"):
        bool(tape.var("x") > 1.0)
