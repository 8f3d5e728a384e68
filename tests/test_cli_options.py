"""The options `solve`, `frontier` and `search` share are declared once (cli/options.py): read back from the click
commands, they have the same flags, defaults, types and help on all three; each command keeps its flags. `compare`,
`plot` and `evaluate` take the same options where theirs have the same type."""

from __future__ import annotations

import dataclasses

import pytest
import typer
from typer.testing import CliRunner

from rooflaw.cli import app
from rooflaw.cli.options import JointOptions, ProblemOptions, with_options

COMMANDS = ("solve", "frontier", "search")
SHARED = [f.name for f in dataclasses.fields(ProblemOptions)] + [f.name for f in dataclasses.fields(JointOptions)]
#: Every flag of each command at f5289ed, before the options were shared (a rename or a lost option fails here);
#: --ttft-budget added since (issue 26: per-token budgets for every method).
FLAGS = {
    "solve": "--align --allow-extrapolation --attention --backend --batch --batches --device "
    "--energy-budget --engine "
    "--explain --input-tokens --json --latency-budget --law --layouts --memory-budget --method --min-tokens-per-gpu "
    "--output-tokens --phase --precision --precisions --preset --scheduler --seed --space --system --tokens "
    "--tpot-budget --trials --ttft-budget",
    "frontier": "--allow-extrapolation --attention --backend --batch --batches --device --energy-budget --engine "
    "--input-tokens --json --latency-budget --law --layouts --memory-budget --min-tokens-per-gpu --n-jobs "
    "--objectives --out --output-tokens --phase --plot --precision --precisions --preset --scheduler --space "
    "--system --tokens --tpot-budget --ttft-budget",
    "search": "--allow-extrapolation --attention --backend --batch --batches --device --energy-budget --engine "
    "--input-tokens --json --latency-budget --law --layouts --measure --memory-budget --min-tokens-per-gpu "
    "--n-trials --objectives --out --output-tokens --phase --precision --precisions --preset --reference "
    "--sampler --seed --space --storage --study-name --system --tokens --tpot-budget --ttft-budget --workers",
    "compare": "--allow-extrapolation --arch --arch-file --attention --batch --device --engine --hf-config "
    "--input-tokens --json --law --memory-budget --n-jobs --output-tokens --phase --precision --preset --space "
    "--tokens",
    "plot": "--arch --arch-file --attention --batch --device --engine --hf-config --input-tokens --no-tiles --out "
    "--output-tokens --precision --preset --tiles",
    "evaluate": "--arch --arch-file --attention --batch --csv --device --engine --hf-config --input-tokens --json "
    "--law --layout --max-batch --no-overlap --no-tiles --output-tokens --overlap --pareto-plot --plot --precision "
    "--preset --steps --steps-csv --system --tiles --tokens",
}
#: The speculative-decoding flags (issue 24), added to every command that prices or searches a model.
SPECULATIVE_FLAGS = {"evaluate": "--acceptance --disagg --draft --draft-tokens",
                     **dict.fromkeys(COMMANDS, "--acceptance --draft --draft-tokens --speculative")}  # fmt: skip
FLAGS |= {k: " ".join(sorted(FLAGS[k].split() + v.split())) for k, v in SPECULATIVE_FLAGS.items()}
#: --confidence (issue 27: meet the latency-type budgets at a quantile of the held-out error band).
FLAGS |= {k: " ".join(sorted([*FLAGS[k].split(), "--confidence"])) for k in COMMANDS}
#: --host-time (issue 27: the serving layouts add the fitted host and front-end seconds, serving_host.toml).
FLAGS["evaluate"] = " ".join(sorted([*FLAGS["evaluate"].split(), "--host-time"]))
#: Defaults of the shared options, as the commands had them at f5289ed.
DEFAULTS = {"device": None, "law": "paper-2602.10377", "space": "paper", "phase": "decode", "precision": "fp16",
            "latency_budget": None, "memory_budget": None, "energy_budget": None, "batch": 1, "input_tokens": 1024,
            "output_tokens": 16, "attention": "fused", "preset": "full", "engine": None, "tokens": None,
            "allow_extrapolation": False, "precisions": None, "batches": None, "system": None, "layouts": None,
            "min_tokens_per_gpu": None, "tpot_budget": None, "ttft_budget": None, "confidence": None}  # fmt: skip


def _options(name: str, sub: str | None = None) -> dict[str, dict]:
    cmd = typer.main.get_command(app).commands[name]
    cmd = cmd.commands[sub] if sub else cmd
    return {p.name: {"opts": p.opts + p.secondary_opts, "default": p.default, "help": p.help,
                     "type": p.type_descriptor.annotation, "required": p.required, "flag": p.is_flag}
            for p in cmd.params}  # fmt: skip


def test_shared_options_are_the_same_on_solve_frontier_and_search():
    opts = {c: _options(c) for c in COMMANDS}
    for c in COMMANDS:
        assert sorted(o for v in opts[c].values() for o in v["opts"]) == FLAGS[c].split(), c
    for name in SHARED:
        ref = opts["frontier"][name]
        assert ref["default"] == DEFAULTS[name], name
        assert ref["required"] == (name == "device"), name
        for c in ("solve", "search"):
            got = dict(opts[c][name])
            if c == "solve" and name in ("precisions", "batches"):  # solve's note: which methods take them
                assert got["help"] == ref["help"] + " --method exhaustive or optuna."
                got["help"] = ref["help"]
            assert got == ref, (c, name)
    # the options only some of them have are declared once too
    assert opts["solve"]["scheduler"] == opts["frontier"]["scheduler"] and "scheduler" not in opts["search"]
    assert opts["solve"]["as_json"] == opts["frontier"]["as_json"] == opts["search"]["as_json"]


def test_compare_shares_the_problem_options_but_the_latency_and_energy_budgets():
    got, ref = _options("compare"), _options("frontier")
    assert sorted(o for v in got.values() for o in v["opts"]) == FLAGS["compare"].split()
    for f in dataclasses.fields(ProblemOptions):
        if f.name in ("latency_budget", "tpot_budget", "ttft_budget", "energy_budget", "confidence"):  # its own latency
            assert f.name not in got
        else:
            assert got[f.name] == ref[f.name], f.name
    assert got["n_jobs"] == ref["n_jobs"] and got["as_json"] == ref["as_json"]


#: ``evaluate``'s options at f40f777 (default, help) where no other command has the same option.
EVALUATE_OWN = {
    "batch": ("1", "Sequences per batch; with --system a sweep: 1,8,64 or 1:256 (powers of 2)."),
    "preset": ("full", "Cost model: full (per-operator roofline) or paper (App. E)."),
    "steps": (False, "Also list every decode step (context, time, FLOPs, bytes)."),
    "steps_csv": (None, "Write every decode step as CSV (SI units; implies --steps)."),
    "law": (None, "Add the predicted loss of this law (name or expression)."),
    "plot": (None, "Write the roofline + time breakdown (.png or .svg)."),
    "csv": (None, "Write the per-operator table as CSV (SI units)."),
    "system": (None, "Devices + interconnect: h100-sxm:8, a systems-catalog id (hgx-h100) or a TOML file."),
    "layout": (None, "tp=8 | ep=8,dp_attn=8 | pp=4,tp=2 | helix=kvp4,tpep8 (needs --system; default tp=1)."),
    "overlap": (False, "Hide communication behind compute."),
    "max_batch": (False, "Report the largest batch whose memory fits a device."),
    "host_time": (False, "Serving: add the engine's fitted host and front-end seconds to the in-flight rows."),
    "pareto_plot": (None, "Write tokens/s per device vs per user over the --batch sweep (.png/.svg)."),
    "draft": (None, "Draft model for speculative decoding: a bundled id, config.json, spec, or eagle[:N] heads."),
    "draft_tokens": (4, "Draft tokens per verification step (γ), 1..64."),
    "acceptance": (None, "Per-token acceptance α in [0, 1), or 'fitted' (the published-rates law); needs --draft."),
    "disagg": (None, "Disaggregated serving on --system: prefill=tp=2x2,decode=tp=8 (xN: replicas; none: best)."),
}


def test_evaluate_shares_every_option_whose_type_it_shares():
    """``evaluate`` keeps its flags and defaults; the options it has in common with ``frontier`` (workload, engine,
    tokens), ``compare`` (the architecture, --json) and ``plot`` (precision with nvfp4, --tiles) are the same
    options; --device only differs in being optional (--system replaces it) and --batch in being a sweep string."""
    ev = _options("evaluate")
    assert sorted(o for v in ev.values() for o in v["opts"]) == FLAGS["evaluate"].split()
    refs = {
        "frontier": ("input_tokens", "output_tokens", "attention", "engine", "tokens"),
        "compare": ("hf_config", "arch", "arch_file", "as_json"),
        ("plot", "roofline"): ("precision", "tiles", "engine", "input_tokens", "output_tokens", "attention"),
    }
    shared = set()
    for cmd, names in refs.items():
        ref = _options(*cmd) if isinstance(cmd, tuple) else _options(cmd)
        for n in names:
            assert ev[n] == ref[n], (cmd, n)
            shared.add(n)
    assert ev["precision"]["default"] == DEFAULTS["precision"] and "nvfp4" in ev["precision"]["help"]
    device, fr = dict(ev["device"]), _options("frontier")
    assert device.pop("default") is None and device.pop("required") is False
    assert device == {k: v for k, v in fr["device"].items() if k not in ("default", "required")}
    assert ev["batch"]["type"] is str and fr["batch"]["type"] is int
    for n, (default, help_) in EVALUATE_OWN.items():  # its own options are unchanged
        assert (ev[n]["default"], ev[n]["help"]) == (default, help_), n
    assert set(ev) == shared | set(EVALUATE_OWN) | {"device"}


@dataclasses.dataclass(frozen=True)
class _Pair:
    a: int = dataclasses.field(metadata={"option": typer.Option(1, "--a", help="A.")})
    b: str = dataclasses.field(metadata={"option": typer.Option("x", "--b", help="B.")})


def test_with_options_hands_the_command_its_groups():
    seen = {}
    toy = typer.Typer(add_completion=False)

    @toy.command()
    @with_options(more_help={"b": "More."})
    def cmd(*, first: int = typer.Option(0, "--first"), pair: _Pair, last: bool = typer.Option(False, "--last")):
        seen.update(first=first, pair=pair, last=last)

    res = CliRunner().invoke(toy, ["--b", "y", "--first", "3", "--last"])
    assert res.exit_code == 0, res.output
    assert seen == {"first": 3, "pair": _Pair(a=1, b="y"), "last": True}
    params = typer.main.get_command(toy).params
    assert [p.name for p in params] == ["first", "a", "b", "last"]  # the group's options stand in its place
    assert [p.help for p in params if p.name == "b"] == ["B. More."]
    res = CliRunner().invoke(toy, ["--a", "x"])
    assert res.exit_code == 2 and "--a" in res.output  # typed as the field: click refuses a non-integer

    left = typer.Typer(add_completion=False)

    @left.command()
    @with_options(omit=("a",))
    def without_a(*, pair: _Pair):
        seen.update(pair=pair)

    assert [p.name for p in typer.main.get_command(left).params] == ["b"]
    assert CliRunner().invoke(left, ["--b", "z"]).exit_code == 0 and seen["pair"] == _Pair(a=1, b="z")
    assert CliRunner().invoke(left, ["--a", "2"]).exit_code == 2  # no such option


def test_with_options_refuses_a_clash_or_an_unknown_note():
    def clash(*, a: int = 0, pair: _Pair):
        pass

    def unknown(*, pair: _Pair):
        pass

    with pytest.raises(TypeError, match="'a'"):
        with_options()(clash)
    with pytest.raises(TypeError, match="'c'"):
        with_options(more_help={"c": "?"})(unknown)
    with pytest.raises(TypeError, match="'c'"):
        with_options(omit=("c",))(unknown)


def test_plot_roofline_and_breakdown_share_their_options():
    cmds = typer.main.get_command(app).commands["plot"].commands
    opts = [{p.name: (p.opts, p.secondary_opts, p.default, p.help, p.required) for p in cmds[c].params}
            for c in ("roofline", "breakdown")]  # fmt: skip
    assert opts[0] == opts[1]
    assert sorted(o for v in opts[0].values() for o in v[0] + v[1]) == FLAGS["plot"].split()
