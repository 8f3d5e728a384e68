"""Option groups several commands share, each declared once.

A group is a frozen dataclass whose fields carry their typer option (flag, default, help). :func:`with_options`
puts a group's options in place of a command parameter annotated with the group, and calls the command with the
group built from what was typed, so the commands that share a group (``solve``, ``frontier``, ``search`` and
``compare``; ``plot roofline`` and ``plot breakdown``) cannot drift apart. The options declared here as constants
are shared by commands whose option *types* differ from a group's: ``evaluate`` (``--device`` or ``--system``, a
``--batch`` sweep) takes its model, workload and cost-model options from them.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Optional, TypeVar, cast

import typer

from .common import DEFAULT_ATTENTION, DEFAULT_PRECISION, ENGINE_HELP, EXTRAPOLATION_HELP, build_problem
from .joint_options import (
    BATCHES_HELP,
    LAYOUTS_HELP,
    MIN_TPS_HELP,
    PRECISIONS_HELP,
    SCHEDULER_HELP,
    SYSTEM_HELP,
    TPOT_HELP,
    TTFT_HELP,
    joint_space,
)

F = TypeVar("F", bound=Callable[..., Any])

#: ``--device`` of the commands that need one (catalog) device.
DEVICE = typer.Option(..., "--device", help="Catalog id (see `rooflaw devices list`) or a device TOML file.")
#: ``--device`` of ``evaluate``, which takes it or ``--system``: the same option, not required.
DEVICE_OR_SYSTEM = typer.Option(None, "--device", help=DEVICE.help)
#: ``--precision`` of the commands that price one architecture (``evaluate``, ``plot``).
PRECISION = typer.Option(DEFAULT_PRECISION, help="fp16, bf16, int8, fp8, w4a16, w4a16kv8, nvfp4, ...")
#: The workload and cost-model options every command that prices a model has (``batch`` differs: a sweep on
#: ``evaluate``, one integer elsewhere).
INPUT_TOKENS = typer.Option(1024, help="Prompt tokens per sequence (S_in).")
OUTPUT_TOKENS = typer.Option(16, help="Generated tokens per sequence (S_out).")
ATTENTION = typer.Option(DEFAULT_ATTENTION, help="Attention kernel: fused (FlashAttention-style) or unfused.")
ENGINE = typer.Option(None, "--engine", help=ENGINE_HELP)
TILES = typer.Option(False, "--tiles/--no-tiles", help="Apply the GEMM tile/wave quantisation model.")
#: ``--tokens`` of the commands that take a loss law.
TOKENS = typer.Option(None, help="Training tokens D, for laws that use D.")
#: The architecture of ``compare`` and ``plot``: one of a Hugging Face config, a spec string or a file.
HF_CONFIG = typer.Option(None, "--hf-config", help="A Hugging Face config.json.")
ARCH = typer.Option(None, "--arch", help="Spec string, e.g. layers=24,d_model=896,heads=14,...")
ARCH_FILE = typer.Option(None, "--arch-file", help="TOML/JSON file of architecture fields.")
#: ``--json`` of solve, frontier, search and compare.
JSON = typer.Option(False, "--json", help="One JSON object, SI units.")
#: ``--n-jobs`` of the commands that evaluate a whole space on this machine.
N_JOBS = typer.Option(-1, "--n-jobs", help="Processes (-1: all cores).")
#: ``--scheduler`` of ``solve`` and ``frontier`` (the exhaustive scans; ``search`` has none).
SCHEDULER = typer.Option(None, "--scheduler", help=SCHEDULER_HELP)
CONFIDENCE_HELP = (
    "Meet the latency budget at this quantile of the phase's held-out error band "
    "(e.g. 0.9: 9 runs in 10 within budget); default: the prediction itself."
)


def option(default: Any, *decls: str, help: Optional[str] = None) -> Any:
    """A field of an option group carrying its typer option (``default`` an option declared already: that one).
    The field itself has no default: the command always passes it."""
    info = default if isinstance(default, typer.models.OptionInfo) else typer.Option(default, *decls, help=help)
    return dataclasses.field(metadata={"option": info})


@dataclasses.dataclass(frozen=True)
class ProblemOptions:
    """What defines the problem: device, law, space, workload, budgets and cost model."""

    device: str = option(DEVICE)
    law: str = option("paper-2602.10377", help="Loss law: a built-in name or an expression.")
    space: str = option("paper", help="Search space: a built-in name (paper, wide) or a TOML file.")
    phase: str = option("decode", help="Latency that counts: prefill, decode (all output tokens) or total.")
    precision: str = option(DEFAULT_PRECISION, help="fp16, bf16, int8, fp8, w4a16, w4a16kv8, ...")
    latency_budget: Optional[str] = option(None, "--latency-budget", help="e.g. 20ms (of --phase).")
    tpot_budget: Optional[str] = option(None, "--tpot-budget", help=TPOT_HELP)
    ttft_budget: Optional[str] = option(None, "--ttft-budget", help=TTFT_HELP)
    memory_budget: Optional[str] = option(None, "--memory-budget", help="e.g. 8GB (capacity always applies).")
    energy_budget: Optional[str] = option(None, "--energy-budget", help="e.g. 2J per request.")
    batch: int = option(1, help="Sequences per batch.")
    input_tokens: int = option(INPUT_TOKENS)
    output_tokens: int = option(OUTPUT_TOKENS)
    attention: str = option(ATTENTION)
    preset: str = option("full", help="Cost model: full or paper.")
    engine: Optional[str] = option(ENGINE)
    tokens: Optional[float] = option(TOKENS)
    allow_extrapolation: bool = option(False, "--allow-extrapolation", help=EXTRAPOLATION_HELP)
    confidence: Optional[float] = option(None, "--confidence", help=CONFIDENCE_HELP)

    def problem(self, align: Optional[int] = None) -> Any:
        """The :class:`~rooflaw.solver.Problem` of these options (``align``: d_model multiple; None: as declared)."""
        return build_problem(self.device, self.law, self.space, self.phase, self.precision, self.batch,
                             self.input_tokens, self.output_tokens, self.preset, self.tokens, self.latency_budget,
                             self.memory_budget, self.energy_budget, align, attention=self.attention,
                             allow_extrapolation=self.allow_extrapolation, engine=self.engine,
                             confidence=self.confidence, tpot_budget=self.tpot_budget,
                             ttft_budget=self.ttft_budget)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class JointOptions:
    """The joint space searched with the architecture: precisions, batches and layouts on a system."""

    precisions: Optional[str] = option(None, "--precisions", help=PRECISIONS_HELP)
    batches: Optional[str] = option(None, "--batches", help=BATCHES_HELP)
    system: Optional[str] = option(None, "--system", help=SYSTEM_HELP)
    layouts: Optional[str] = option(None, "--layouts", help=LAYOUTS_HELP)
    min_tokens_per_gpu: Optional[float] = option(None, "--min-tokens-per-gpu", help=MIN_TPS_HELP)

    def space(self) -> Any:
        """The :class:`~rooflaw.solver.discrete.joint.JointSpace` asked for (None: no joint option was given)."""
        return joint_space(self.precisions, self.batches, self.system, self.layouts, self.min_tokens_per_gpu)


def _parameters(group: type, more_help: Mapping[str, str], omit: frozenset[str]) -> list[inspect.Parameter]:
    """The keyword parameters typer reads for the fields of ``group`` (``more_help``: text added to a help; ``omit``:
    fields that are no option of this command)."""
    hints = typing.get_type_hints(group)
    out = []
    for f in dataclasses.fields(group):
        info = f.metadata["option"]
        if f.name in omit:
            continue
        if f.name in more_help:
            info = copy.copy(info)
            info.help = f"{info.help} {more_help[f.name]}"
        out.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=hints[f.name]))
    return out


def with_options(more_help: Optional[Mapping[str, str]] = None, omit: Iterable[str] = ()) -> Callable[[F], F]:
    """Decorate a command (under ``@app.command()``) whose parameters annotated with an option group (e.g.
    ``opts: ProblemOptions``) stand for that group's options, in that place of ``--help``; the command is called
    with the group built from them. ``more_help`` adds a command's note to a shared option's help; ``omit`` names
    fields the command does not offer (the group gets their default)."""
    more_help, omitted = dict(more_help or {}), frozenset(omit)

    def decorate(fn: F) -> F:
        sig = inspect.signature(fn, eval_str=True)
        groups: dict[str, type[Any]] = {
            p.name: p.annotation
            for p in sig.parameters.values()
            if isinstance(p.annotation, type) and dataclasses.is_dataclass(p.annotation)
        }
        params: list[inspect.Parameter] = []
        for p in sig.parameters.values():
            if p.name in groups:
                params += _parameters(p.annotation, more_help, omitted)
            else:
                params.append(p.replace(kind=p.KEYWORD_ONLY))
        names = [p.name for p in params]
        fields = {f.name: f for g in groups.values() for f in dataclasses.fields(g)}
        unknown = (set(more_help) - set(names)) | {n for n in omitted if fields.get(n) is None
                                                   or fields[n].metadata["option"].default is ...}  # fmt: skip
        clash = {n for n in names if names.count(n) > 1} | unknown
        if clash:
            raise TypeError(f"{fn.__name__}: options {sorted(clash)} clash, are unknown or cannot be left out")

        @functools.wraps(fn)
        def command(**kw: Any) -> Any:
            for name, group in groups.items():
                given = {f.name: kw.pop(f.name) if f.name not in omitted else f.metadata["option"].default
                         for f in dataclasses.fields(group)}  # fmt: skip
                kw[name] = group(**given)
            return fn(**kw)

        # inspect (and so typer) reads __signature__, which typeshed does not declare on functions
        command.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params} | {"return": sig.return_annotation}
        return cast(F, command)  # the usual decorator cast: wraps() keeps fn's call signature for callers

    return decorate
