"""Hostile and careless invocations of every command: the exit code of the contract (0 ok, 2 bad input,
3 nothing meets the budget, 4 a failure outside rooflaw), one line on stderr, no traceback, no output
file changed on failure, and no code from the input ever run (a marker file injected code would create)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cli_helpers import TINY_SPACE

from rooflaw.cli import main

DEV = "jetson-orin-nano-8gb"
ARCH = "layers=2,d_model=256,heads=4,kv_heads=1,ffn=512"
GOOD_HF = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4, "num_hidden_layers": 2,
           "num_key_value_heads": 1, "vocab_size": 1000, "intermediate_size": 512}  # fmt: skip
DEVICE = 'id = "hostile"\nfp16_tflops = 10\nfp32_tflops = 1\nbandwidth_gbs = 100\nmemory_gb = 8\n'
MEASURE = """
def boom(arch, workload):
    raise RuntimeError("the board is unplugged")

def text(arch, workload):
    return "fast"
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile")
    f = {"dir": str(d), "marker": str(d / "MARKER")}

    def w(name, text, mode="w"):
        p = d / name
        if mode == "wb":
            p.write_bytes(text)
        else:
            p.write_text(text)
        f[name] = str(p)

    w("tiny.toml", TINY_SPACE)
    big = "layers = {start = 1, stop = 100000}\nd_model = {start = 64, stop = 12800, step = 64}\ntied = [true, false]\n"
    big += (
        f"head_dim = [64]\nkv_heads = [1]\nmoe = [[1, 1]]\nr_single = [1, 2, 3, 4]\nvocab = {list(range(1000, 1100))}\n"
    )
    w("big.toml", big)
    w("huge_range.toml", TINY_SPACE.replace("layers = [4, 8]", "layers = {start = 1, stop = 1000000000000}"))
    w("r_huge.toml", TINY_SPACE.replace("r_single = [2]", "r_single = [1e30]"))
    w("layers_huge.toml", TINY_SPACE.replace("layers = [4, 8]", "layers = [1e30]"))
    w("bad_space.toml", "layers = [2\n")
    w("unknown_space.toml", TINY_SPACE + "colour = 3\n")
    w("dev.toml", DEVICE)
    w("dev_markup.toml", DEVICE.replace('id = "hostile"', 'id = "x[/]"\nname = "[link=http://evil]click[/link] [/]"'))
    w("dev_overflow.toml", DEVICE.replace("fp16_tflops = 10", "fp16_tflops = 1e300"))
    w("dev_idle.toml", DEVICE + "power_idle_w = 500\npower_peak_w = 100\n")
    w("dev_energy.toml", DEVICE + "energy_per_flop_pj = -1\n")
    w("dev_tile.toml", DEVICE + "tile = [0, 0]\n")
    w("dev_twice.toml", DEVICE + "fp8_tflops = 20\nfp8_tops = 30\n")
    w("dev_latin1.toml", DEVICE.replace("hostile", "h\xe9").encode("latin-1"), "wb")
    for name, change in {
        "hf_float.json": {"hidden_size": 256.7},
        "hf_layers.json": {"num_hidden_layers": 2.9},
        "hf_kv0.json": {"num_key_value_heads": 0},
        "hf_tie.json": {"tie_word_embeddings": "yes"},
        "hf_bool.json": {"num_hidden_layers": True},
        "hf_str.json": {"hidden_size": "256"},
        "hf_list.json": {"hidden_size": [256]},
        "hf_big.json": {"vocab_size": 10**30},
    }.items():
        w(name, json.dumps({**GOOD_HF, **change}))
    w("hf_good.json", json.dumps(GOOD_HF))
    w("hf_nan.json", json.dumps(GOOD_HF).replace('"hidden_size": 256', '"hidden_size": NaN'))
    w("hf_inf.json", json.dumps(GOOD_HF).replace('"hidden_size": 256', '"hidden_size": 1e400'))
    w("hf_latin1.json", json.dumps({**GOOD_HF, "_name_or_path": "caf\xe9"}, ensure_ascii=False).encode("latin-1"), "wb")
    w("hf_broken.json", '{"model_type": "llama",')
    w("hf_list_top.json", "[1, 2, 3]")
    w("arch_bad.json", json.dumps({"layers": "x", "d_model": 256, "heads": 4, "name": "[/]"}))
    w("runs.csv", "N,D,loss\n" + "".join(f"{n},{dd},{2 + 400 / n**0.3 + 400 / dd**0.3:.6f}\n"
                                         for n in (1e7, 3e7, 1e8, 3e8) for dd in (1e9, 1e10)))  # fmt: skip
    w("same.csv", "N,D,loss\n" + "1e9,1e10,3.0\n" * 5)
    w("latin1.csv", "N,D,loss\n1e9,1e10,3.0\ncaf\xe9,1,2\n".encode("latin-1"), "wb")
    w("measure.py", MEASURE)
    w("keep.csv", "precious\n")
    w("existing_file", "not a folder\n")
    os.mkdir(d / "a_dir")
    f["a_dir"] = str(d / "a_dir")
    return f


EVAL = (
    "(ｅｖａｌ)(\"open('{marker}','w')\")",
    "__import__('os').system('touch {marker}')",
    "exec(\"open('{marker}','w')\")",
    "N.__class__.__init__.__globals__",
    "[1]*10**9",
    "lambda: open('{marker}','w')",
)

S = ["--space", "{tiny.toml}"]
CASES: list[tuple[str, list[str], int]] = [
    # ---- code from data (law strings, --map) --------------------------------------------------------------------
    *[(f"laws-show-inject-{i}", ["laws", "show", e], 2) for i, e in enumerate(EVAL)],
    ("solve-law-inject", ["solve", "--device", DEV, "--law", EVAL[0], *S], 2),
    ("frontier-law-inject", ["frontier", "--device", DEV, "--law", EVAL[0], *S], 2),
    ("search-law-inject", ["search", "--device", DEV, "--law", EVAL[1], *S, "--n-trials", "2"], 2),
    ("evaluate-law-inject", ["evaluate", "--device", DEV, "--arch", ARCH, "--law", EVAL[0]], 2),
    ("fit-law-inject", ["fit", "{runs.csv}", "--law", EVAL[0]], 2),
    (
        "fit-map-pandas",
        ["fit", "{runs.csv}", "--law", "E + A/N**a + B/D**b", "--map", "N=@pd.io.common.os.system('touch {marker}')"],
        2,
    ),  # fmt: skip
    (
        "fit-map-import",
        ["fit", "{runs.csv}", "--law", "E + A/N**a + B/D**b", "--map", "N=__import__('os').system('touch {marker}')"],
        2,
    ),  # fmt: skip
    ("fit-map-attr", ["fit", "{runs.csv}", "--law", "E + A/N**a + B/D**b", "--map", "N=N.__class__"], 2),
    ("fit-map-nocol", ["fit", "{runs.csv}", "--law", "E + A/N**a + B/D**b", "--map", "N=nosuch*2"], 2),
    ("law-power-tower", ["laws", "show", "10**10**10"], 2),
    ("law-big-exponent", ["laws", "show", "E + N**5000"], 2),
    ("law-complex", ["laws", "show", "sqrt(-N)"], 2),
    ("law-div-zero", ["laws", "show", "1/0 + N"], 2),
    ("law-deep", ["laws", "show", "(" * 400 + "N" + ")" * 400], 2),
    ("law-long", ["laws", "show", "N+" * 3000 + "N"], 2),
    ("law-empty", ["laws", "show", ""], 2),
    ("law-bool", ["laws", "show", "N + True"], 2),
    ("law-ok", ["laws", "show", "E + A/N**alpha"], 0),
    ("law-no-params-ok", ["evaluate", "--device", DEV, "--arch", ARCH, "--law", "2 + 400/N**0.3", "--json"], 0),
    ("law-perplexity-overflow", ["evaluate", "--device", DEV, "--arch", ARCH, "--law", "800 + 1/N**0.3", "--json"], 0),
    ("law-unfitted", ["solve", "--device", DEV, "--law", "E + A/N**a", *S, "--method", "exhaustive"], 2),
    # ---- output paths --------------------------------------------------------------------------------------
    ("out-dev-full", ["frontier", "--device", DEV, *S, "--out", "/dev/full"], 4),
    ("out-missing-dir", ["frontier", "--device", DEV, *S, "--out", "{dir}/missing/x.csv"], 2),
    ("out-is-dir", ["frontier", "--device", DEV, *S, "--out", "{a_dir}"], 2),
    ("out-proc", ["frontier", "--device", DEV, *S, "--out", "/proc/no-such-dir/x.csv"], 2),
    ("out-proc-file", ["frontier", "--device", DEV, *S, "--out", "/proc/version"], 4),
    ("plot-unknown-format", ["frontier", "--device", DEV, *S, "--plot", "{dir}/x.xyz"], 2),
    ("fit-plot-unknown-format", ["fit", "{runs.csv}", "--law", "E + A/N**a + B/D**b", "--plot", "{dir}/f.xyz"], 2),
    ("repro-out-file", ["repro", "fig4", "--out", "{existing_file}"], 2),
    ("calibrate-out-missing", ["devices", "calibrate", "--out", "{dir}/missing/d.toml"], 2),
    ("calibrate-out-format", ["devices", "calibrate", "--out", "{dir}/d.txt"], 2),
    ("search-memory-workers", ["search", "--device", DEV, *S, "--storage", "sqlite:///:memory:", "--workers", "2"], 2),
    (
        "search-out-is-storage",
        ["search", "--device", DEV, *S, "--storage", "sqlite:///{keep.csv}", "--out", "{keep.csv}"],
        2,
    ),  # fmt: skip
    # ---- devices -------------------------------------------------------------------------------------------
    ("dev-overflow", ["devices", "show", "{dev_overflow.toml}"], 2),
    ("dev-idle-above-peak", ["devices", "show", "{dev_idle.toml}"], 2),
    ("dev-negative-energy", ["devices", "show", "{dev_energy.toml}"], 2),
    ("dev-tile-zero", ["devices", "show", "{dev_tile.toml}"], 2),
    ("dev-format-twice", ["devices", "show", "{dev_twice.toml}"], 2),
    ("dev-latin1", ["devices", "show", "{dev_latin1.toml}"], 2),
    ("dev-markup-show", ["devices", "show", "{dev_markup.toml}"], 0),
    ("dev-markup-evaluate", ["evaluate", "--device", "{dev_markup.toml}", "--arch", ARCH], 0),
    ("dev-markup-solve", ["solve", "--device", "{dev_markup.toml}", *S, "--method", "exhaustive"], 0),
    ("dev-empty", ["evaluate", "--device", "", "--arch", ARCH], 2),
    ("dev-missing-file", ["evaluate", "--device", "{dir}/nope.toml", "--arch", ARCH], 2),
    ("dev-unknown", ["devices", "show", "no-such-chip"], 2),
    # ---- units, budgets, workload --------------------------------------------------------------------------
    ("bits-not-bytes", ["solve", "--device", DEV, *S, "--memory-budget", "8Gb"], 2),
    ("negative-latency", ["solve", "--device", DEV, *S, "--latency-budget", "-5ms"], 2),
    ("latency-text", ["solve", "--device", DEV, *S, "--latency-budget", "soon"], 2),
    ("latency-overflow", ["solve", "--device", DEV, *S, "--latency-budget", "1e400ms"], 2),
    ("energy-zero", ["solve", "--device", DEV, *S, "--energy-budget", "0J"], 2),
    ("tokens-negative", ["solve", "--device", DEV, *S, "--tokens", "-1"], 2),
    ("tokens-nan", ["solve", "--device", DEV, *S, "--tokens", "nan"], 2),
    ("tokens-zero", ["evaluate", "--device", DEV, "--arch", ARCH, "--law", "chinchilla-hoffmann", "--tokens", "0"], 2),
    ("batch-zero", ["solve", "--device", DEV, *S, "--batch", "0"], 2),
    ("batch-text", ["solve", "--device", DEV, *S, "--batch", "many"], 2),
    ("input-negative", ["evaluate", "--device", DEV, "--arch", ARCH, "--input-tokens", "-1"], 2),
    ("precision-unknown", ["solve", "--device", DEV, *S, "--precision", "fp3"], 2),
    ("method-unknown", ["solve", "--device", DEV, *S, "--method", "magic"], 2),
    ("phase-unknown", ["solve", "--device", DEV, *S, "--phase", "warmup"], 2),
    ("align-zero", ["solve", "--device", DEV, *S, "--align", "0"], 2),
    ("unknown-option", ["solve", "--device", DEV, "--latncy-budget", "2ms"], 2),
    ("n-jobs-huge", ["frontier", "--device", DEV, *S, "--n-jobs", "100000"], 2),
    ("objective-unknown", ["frontier", "--device", DEV, *S, "--objectives", "loss,beauty"], 2),
    ("gemm-zero", ["gemm", "--m", "0", "--n", "4", "--k", "4"], 2),
    ("unmeetable-solve", ["solve", "--device", DEV, *S, "--latency-budget", "1us", "--method", "exhaustive"], 3),
    ("unmeetable-search", ["search", "--device", DEV, *S, "--latency-budget", "1us", "--n-trials", "3"], 3),
    # ---- Hugging Face configs and architecture files ---------------------------------------------------------------
    *[
        (f"hf-{n[3:-5]}", ["evaluate", "--device", DEV, "--hf-config", f"{{{n}}}"], 2)
        for n in (
            "hf_float.json",
            "hf_layers.json",
            "hf_kv0.json",
            "hf_tie.json",
            "hf_bool.json",
            "hf_str.json",
            "hf_list.json",
            "hf_big.json",
            "hf_nan.json",
            "hf_inf.json",
            "hf_latin1.json",
            "hf_broken.json",
            "hf_list_top.json",
        )
    ],  # fmt: skip
    ("hf-good", ["evaluate", "--device", DEV, "--hf-config", "{hf_good.json}", "--json"], 0),
    ("arch-float", ["evaluate", "--device", DEV, "--arch", "layers=2.5,d_model=256,heads=4"], 2),
    ("arch-bool", ["evaluate", "--device", DEV, "--arch", "layers=true,d_model=256,heads=4"], 2),
    ("arch-empty", ["evaluate", "--device", DEV, "--arch", ""], 2),
    ("arch-twice", ["evaluate", "--device", DEV, "--arch", "layers=2,layers=3,d_model=256,heads=4"], 2),
    ("arch-file-string", ["evaluate", "--device", DEV, "--arch-file", "{arch_bad.json}"], 2),
    ("arch-two-sources", ["evaluate", "--device", DEV, "--arch", ARCH, "--hf-config", "{hf_good.json}"], 2),
    # ---- spaces --------------------------------------------------------------------------------------------
    ("space-range-1e12", ["frontier", "--device", DEV, "--space", "{huge_range.toml}"], 2),
    ("space-r-1e30", ["frontier", "--device", DEV, "--space", "{r_huge.toml}"], 2),
    ("space-layers-1e30", ["search", "--device", DEV, "--space", "{layers_huge.toml}"], 2),
    ("space-too-big-to-enumerate", ["frontier", "--device", DEV, "--space", "{big.toml}"], 2),
    ("space-bad-toml", ["solve", "--device", DEV, "--space", "{bad_space.toml}"], 2),
    ("space-unknown-key", ["solve", "--device", DEV, "--space", "{unknown_space.toml}"], 2),
    # ---- search --------------------------------------------------------------------------------------------
    ("measure-colon", ["search", "--device", DEV, *S, "--measure", ":"], 2),
    ("measure-no-module", ["search", "--device", DEV, *S, "--measure", "no_such_module_xyz:f"], 2),
    ("measure-raises", ["search", "--device", DEV, *S, "--measure", "{measure.py}:boom", "--n-trials", "2"], 4),
    ("measure-not-number", ["search", "--device", DEV, *S, "--measure", "{measure.py}:text", "--n-trials", "2"], 4),
    ("sampler-unknown", ["search", "--device", DEV, *S, "--sampler", "psychic"], 2),
    ("trials-zero", ["search", "--device", DEV, *S, "--n-trials", "0"], 2),
    # ---- fit -----------------------------------------------------------------------------------------------
    ("fit-degenerate", ["fit", "{same.csv}", "--law", "E + A/N**a + B/D**b"], 2),
    ("fit-latin1", ["fit", "{latin1.csv}", "--law", "E + A/N**a + B/D**b"], 2),
    ("fit-missing", ["fit", "{dir}/nope.csv", "--law", "E + A/N**a + B/D**b"], 2),
    ("fit-loss-column", ["fit", "{runs.csv}", "--law", "E + A/N**a + B/D**b", "--loss-column", "nope"], 2),
    ("laws-unknown", ["laws", "show", "no-such-law"], 2),
    ("repro-unknown-section", ["repro", "fig99", "--out", "{dir}/repro"], 2),
]


def _fill(arg: str, files: dict[str, str]) -> str:
    for k, v in files.items():
        arg = arg.replace("{" + k + "}", v)
    return arg


def _snapshot(d: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in Path(d).iterdir() if p.is_file()}


def test_at_least_80_hostile_invocations():
    assert len(CASES) >= 80
    assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize(("name", "argv", "code"), CASES, ids=[c[0] for c in CASES])
def test_hostile(name, argv, code, files, capsys):
    args = [_fill(a, files) for a in argv]
    before = _snapshot(files["dir"])
    rc = main(args)
    out, err = capsys.readouterr()
    assert rc == code, f"{name}: exit {rc}, expected {code}; stderr: {err.strip()[:300]}"
    assert "Traceback" not in out + err
    assert not os.path.exists(files["marker"]), "code from the input ran"
    if code:
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("rooflaw:"), err
        after = _snapshot(files["dir"])
        assert {k: v for k, v in after.items() if k in before} == before, "a file changed on failure"
    elif "--json" in args:
        obj = json.loads(out)
        assert "NaN" not in out and "Infinity" not in out
        if name == "law-perplexity-overflow":
            assert obj["perplexity"] is None and obj["loss"] > 709


def test_failed_write_keeps_the_previous_file(files, capsys, monkeypatch):
    """A write that fails midway (here: the plotting raises) leaves the previous file intact and no temp file."""
    target = Path(files["dir"]) / "front.csv"
    target.write_text("previous\n")
    import pandas as pd

    def broken(self, path, *a, **k):
        Path(path).write_text("half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_csv", broken)
    rc = main(["frontier", "--device", DEV, "--space", files["tiny.toml"], "--out", str(target)])
    err = capsys.readouterr().err
    assert rc == 4 and "No space left" in err
    assert target.read_text() == "previous\n"
    assert not [p for p in Path(files["dir"]).iterdir() if p.name.startswith(".front.csv")]


def test_resumed_study_with_another_definition_is_refused(files, capsys, tmp_path):
    db = f"sqlite:///{tmp_path / 's.db'}"
    base = ["search", "--space", files["tiny.toml"], "--storage", db, "--study-name", "s", "--n-trials", "3",
            "--sampler", "random", "--json"]  # fmt: skip
    assert main([*base, "--device", DEV]) == 0
    capsys.readouterr()
    for change in (["--device", "h100-sxm"], ["--device", DEV, "--latency-budget", "1us"],
                   ["--device", DEV, "--precision", "int8"], ["--device", DEV, "--batch", "4"],
                   ["--device", DEV, "--law", "chinchilla-hoffmann", "--tokens", "1e10"]):  # fmt: skip
        assert main([*base, *change]) == 2, change
        err = capsys.readouterr().err
        assert "exists with" in err and len(err.strip().splitlines()) == 1
    assert main([*base, "--device", DEV, "--n-trials", "4"]) == 0  # the same definition resumes
