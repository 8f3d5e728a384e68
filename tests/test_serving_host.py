"""Host and front-end seconds of datacenter serving (rooflaw.parallel.ServingHost): where they enter the in-flight
and static-batch models (by hand), the fit recovering known figures, the shipped figures equal to the fit of the
committed lines, and those lines equal to the benchmark's own pricing of sample rows."""

import csv
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

import rooflaw as rl
from rooflaw.errors import RooflawError

ROOT = Path(__file__).resolve().parents[1]
ARCH = "layers=4,d_model=1024,heads=16,kv_heads=4,ffn=2816,vocab=32000"
ENGINE = "tensorrt-llm"


def _bench(name: str):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def setup():
    return rl.load_architecture(ARCH), rl.get_system("h100-sxm:2"), rl.parallel.parse_layout("tp=2")


def test_one_request_pays_each_step_and_the_front_end_once(setup):
    """One request alone through a server: TTFT = its prefill step + the host's step seconds + the front end; every
    decode step adds the step seconds (one sequence); an offline (closed) run has no front end."""
    arch, sysm, lay = setup
    P, O = 500, 17
    host = rl.parallel.ServingHost(step_s=2e-4, layer_s=1e-5, seq_s=3e-5, request_s=3e-3, prompt_token_s=2e-6)
    h = 2e-4 + 4 * 1e-5 + 3e-5
    pre = rl.parallel.evaluate_layout(arch, sysm, lay, rl.Workload(1, P, 1), "bf16", ENGINE)["ttft_s"]
    dec = rl.parallel.evaluate_layout(arch, sysm, lay, rl.Workload(1, P, O), "bf16", ENGINE)["tpot_s"]
    served = rl.parallel.inflight(arch, sysm, lay, rl.Workload(1, P, O), "bf16", ENGINE, arrivals="clients", host=host)
    assert served["ttft_s"] == pytest.approx(pre + h + 3e-3 + P * 2e-6, rel=1e-9)
    assert served["tpot_s"] == pytest.approx(dec + h, rel=1e-9)
    offline = rl.parallel.inflight(arch, sysm, lay, rl.Workload(1, P, O), "bf16", ENGINE, host=host)
    assert offline["ttft_s"] == pytest.approx(pre + h, rel=1e-9)
    assert 1.0 / offline["tokens_per_s"] == pytest.approx((pre + h + (O - 1) * (dec + h)) / O, rel=1e-9)


def test_static_batch_adds_the_step_seconds_to_each_pass():
    out = {"ttft_s": 0.02, "latency_s": 0.5, "tpot_s": 0.01}
    host = rl.parallel.ServingHost(layer_s=1e-4, seq_s=1e-5, request_s=1.0)
    got = rl.parallel.static_batch(out, host, 80, 128, 64)
    assert got["ttft_s"] == pytest.approx(0.02 + 0.008 + 64e-5)  # one pass: 80 layers, 64 sequences; no front end
    assert got["latency_s"] == pytest.approx(0.5 + 128 * (0.008 + 64e-5))
    assert got["tpot_s"] == 0.01


def test_fit_recovers_known_figures_and_predicts_a_left_out_source():
    """Rows built from known figures (lines of random slopes, two sources): the fit returns them, and each source
    left out is predicted exactly from the other's fit."""
    rng = np.random.default_rng(3)
    n = 40
    true = rl.parallel.ServingHost(step_s=4e-4, layer_s=6e-5, seq_s=2e-5, request_s=8e-3, prompt_token_s=3e-6)
    y0 = rng.uniform(1e-3, 5e-2, n)
    ks = rng.uniform(0.5, 30.0, n)
    kq = ks * rng.uniform(1.0, 2000.0, n)  # sequences per step
    layers = rng.choice([32.0, 80.0, 126.0], n)
    kr = (rng.uniform(size=n) < 0.4).astype(float)
    prompts = rng.choice([128.0, 467.0, 2048.0, 5000.0], n)
    thr = rng.uniform(size=n) < 0.5
    group = tuple("ab"[i % 2] for i in range(n))
    rows = rl.parallel.HostRows(y0, ks, layers, kq, kr, prompts, y0, thr, group)
    meas = rows.predict(true)
    rows = rl.parallel.HostRows(y0, ks, layers, kq, kr, prompts, meas, thr, group)
    fit = rl.parallel.fit_host(rows)
    for key in ("step_s", "layer_s", "seq_s", "request_s", "prompt_token_s"):
        assert getattr(fit, key) == pytest.approx(getattr(true, key), rel=1e-3)
    loso, per = rl.parallel.leave_one_source_out(rows)
    assert set(per) == {"a", "b"}
    assert np.abs(rl.parallel.ratios(rows, loso) - 1).max() < 1e-3


def test_bad_figure_names_the_field():
    with pytest.raises(RooflawError, match="request_s"):
        rl.parallel.ServingHost(request_s=-1e-3)
    with pytest.raises(RooflawError, match="layer_s"):
        rl.parallel.ServingHost(layer_s=float("nan"))
    with pytest.raises(RooflawError, match="seq_s"):
        rl.parallel.ServingHost(seq_s="1e-5")


def test_shipped_figures_are_the_fit_of_the_committed_lines():
    fit = _bench("fit_datacenter_host")
    out = fit.report(fit.read_table())
    assert rl.parallel.serving_host(ENGINE) == rl.parallel.ServingHost(**out["fit"])
    assert rl.parallel.serving_host("vllm") == rl.parallel.ServingHost()  # no entry: nothing added


@pytest.mark.parametrize("row_id", ["DC002", "DC082", "DC141"])  # offline, online TPOT, static first token
def test_committed_lines_are_the_benchmarks_pricing(row_id):
    """The fit's input table (benchmarks/data/datacenter_host_rows.csv) equals the benchmark's pricing today;
    after a kernel or engine refit, rerun ``python benchmarks/fit_datacenter_host.py --write``."""
    fit = _bench("fit_datacenter_host")
    with open(ROOT / "benchmarks" / "data" / "datacenter.csv", newline="") as f:
        row = next(r for r in csv.DictReader(f) if r["row_id"] == row_id)
    want = next(t for t in fit.read_table() if t["row_id"] == row_id)
    got = fit.line(row)
    for key in ("y0", "k_step", "k_seq", "k_request", "prompt_tokens", "measured", "layers"):
        stale = f"{row_id} {key}: the lines are stale; rerun python benchmarks/fit_datacenter_host.py --write"
        assert float(want[key]) == pytest.approx(float(got[key]), rel=1e-6, abs=1e-12), stale


def test_a_mixed_step_pays_for_its_decoders_and_its_prompts(setup):
    """A step of c prompt tokens (⌈c / prompt⌉ prompts) beside n decoders adds step_s + layer_s·layers +
    seq_s·(n + ⌈c / prompt⌉) to the same step without host time."""
    arch, sysm, lay = setup
    P, O = 300, 40
    host = rl.parallel.ServingHost(step_s=1e-4, layer_s=2e-5, seq_s=5e-6)
    bare = rl.parallel.layout_step_cost(arch, sysm, lay, "bf16", ENGINE, P, O)
    timed = rl.parallel.layout_step_cost(arch, sysm, lay, "bf16", ENGINE, P, O, host=host)
    for c, n, seqs in ((0, 7, 7), (300, 7, 8), (700, 12, 15), (50, 0, 1)):
        assert timed(c, n) - bare(c, n) == pytest.approx(1e-4 + 4 * 2e-5 + seqs * 5e-6, rel=1e-9)
    assert timed(0, 0) == 0.0


def test_steady_state_with_host_time_matches_the_step_by_step_simulation(setup):
    """The host's seconds ride every step, so the steady state still equals a brute-force run of the schedule
    with the same (host-timed) steps; past the engine's slots the front end still adds once."""
    from rooflaw.constraints.serving import Schedule, simulate

    arch, sysm, lay = setup
    C, P, O, T = 4, 300, 20, 256
    host = rl.parallel.ServingHost(step_s=1e-4, layer_s=2e-5, seq_s=5e-6, request_s=2e-3, prompt_token_s=1e-6)
    out = rl.parallel.inflight(arch, sysm, lay, rl.Workload(C, P, O), "bf16", ENGINE, token_budget=T, host=host)
    step = rl.parallel.layout_step_cost(arch, sysm, lay, "bf16", ENGINE, P, O, host=host)
    brute = simulate(Schedule(C, P, O, T), step, n_requests=30 * C, warmup=10 * C)
    assert 1.0 / out["tokens_per_s"] == pytest.approx(brute, rel=0.02)
    wl = rl.Workload(8, P, O)
    held = rl.parallel.inflight(arch, sysm, lay, wl, "bf16", ENGINE, T, arrivals="clients", max_seqs=4, host=host)
    inner = rl.parallel.inflight(arch, sysm, lay, rl.Workload(4, P, O), "bf16", ENGINE, T, host=host)
    front = 2e-3 + P * 1e-6
    assert held["ttft_s"] == pytest.approx(inner["ttft_s"] + inner["latency_s"] * (8 - 4) / 4 + front, rel=1e-9)


def test_cli_host_time_adds_the_shipped_figures_to_the_inflight_rows(capsys):
    from cli_helpers import run_cli

    args = ("evaluate", "--arch", ARCH, "--system", "h100-sxm:2", "--layout", "tp=2", "--batch", "1,4",
            "--input-tokens", "500", "--output-tokens", "17", "--engine", ENGINE, "--json")  # fmt: skip
    code, out, _ = run_cli(capsys, *args, "--host-time")
    assert code == 0
    d = json.loads(out)
    host = rl.parallel.serving_host(ENGINE)
    assert d["serving_host"] == host.__dict__
    arch, sysm = rl.load_architecture(ARCH), rl.get_system("h100-sxm:2")
    for row in d["sweep"]:
        wl = rl.Workload(row["batch"], 500, 17)
        ref = rl.parallel.inflight(arch, sysm, "tp=2", wl, "bf16", ENGINE, max(8192, row["batch"]), host=host)
        bare = rl.parallel.inflight(arch, sysm, "tp=2", wl, "bf16", ENGINE, max(8192, row["batch"]))
        assert row["inflight"]["tpot_s"] == pytest.approx(ref["tpot_s"], rel=1e-12)
        assert row["inflight"]["tpot_s"] > bare["tpot_s"]
    code, _, err = run_cli(capsys, "evaluate", "--arch", ARCH, "--device", "h100-sxm", "--host-time")
    assert code == 2 and "host-time" in err and "Traceback" not in err
    code, _, err = run_cli(capsys, *args[:-2], "vllm", "--host-time")  # no fitted figures: said, not silently zero
    assert code == 2 and "no fitted host figures" in err and "Traceback" not in err
