"""Options ``frontier`` and ``solve`` share for the joint space (precisions × batches) and Dask (``--scheduler``)."""

from __future__ import annotations

from typing import Any, Optional

from ..errors import bad

PRECISIONS_HELP = "Joint space: precisions to search with the architecture, e.g. bf16,fp8,nvfp4 (or w4a16kv8 …)."
BATCHES_HELP = "Joint space: batch sizes to search with the architecture, e.g. 1,8,64."
SCHEDULER_HELP = "Run the exhaustive scan on Dask: local:N (a LocalCluster of N processes) or tcp://host:8786."
SYSTEM_HELP = "Joint space: the system the --layouts run on, e.g. h100-sxm:8 (its device must be --device)."
LAYOUTS_HELP = "Joint space: layouts to pick with the architecture, ';'-separated, e.g. 'tp=8;ep=8,dp_attn=8'."
MIN_TPS_HELP = "With --layouts: keep only points with at least this many generated tokens/s per device."
TPOT_HELP = ("Time per output token (decode time / output tokens) at most this, e.g. 20ms; the closed form and GP "
             "take it as a decode budget x output tokens.")  # fmt: skip
TTFT_HELP = "Time to the first token (the prefill, engine pass included) at most this, e.g. 200ms."


def _items(text: str, name: str) -> list[str]:
    items = [t.strip() for t in text.split(",")]
    if not items or any(not t for t in items):
        raise bad(name, text, "expected a comma-separated list without empty items")
    return items


def joint_space(
    precisions: Optional[str],
    batches: Optional[str],
    system: Optional[str] = None,
    layouts: Optional[str] = None,
    min_tokens_per_gpu: Optional[float] = None,
) -> Any:
    """A :class:`~rooflaw.solver.discrete.joint.JointSpace` from ``--precisions`` / ``--batches`` and the layout
    options ``--system`` / ``--layouts`` / ``--min-tokens-per-gpu`` (None: none of them). ``--tpot-budget`` is a
    constraint of the problem, for every path."""
    options = _layouts(system, layouts, min_tokens_per_gpu)
    if precisions is None and batches is None and options is None:
        return None
    from .. import api

    precs = _items(precisions, "precisions") if precisions is not None else []
    bs: list[int] = []
    for t in _items(batches, "batches") if batches is not None else []:
        if not t.isdigit() or int(t) <= 0:
            raise bad("batches", batches, f"{t!r} is not a positive integer")
        bs.append(int(t))
    if options is None:
        return api.JointSpace(precisions=tuple(precs), batches=tuple(bs))
    return api.JointSpace(precisions=tuple(precs), batches=tuple(bs), options=options)


def _layouts(system: Optional[str], layouts: Optional[str], min_tps: Optional[float]) -> Any:
    """The layout options (or None when no layout option was given)."""
    if layouts is None:
        for flag, v in (("system", system), ("min-tokens-per-gpu", min_tps)):
            if v is not None:
                raise bad(flag, v, "needs --layouts (the layouts to pick from)")
        return None
    if system is None:
        raise bad("layouts", layouts, "needs --system (the devices and interconnect they run on)")
    from .. import api

    return api.layout_options(system, api.parse_layouts(layouts), min_tokens_per_s_per_device=min_tps)


def wants_joint(joint: Any, scheduler: Optional[str], objectives: str = "") -> bool:
    """Whether the joint path runs: a joint space, a Dask scheduler or the throughput objective was asked for."""
    return joint is not None or scheduler is not None or "throughput" in objectives


def describe_joint(prob: Any, joint: Any) -> str:
    """One line like ``Problem.describe`` naming the precisions and batches crossed instead of the base ones."""
    from .. import api

    js = joint if joint is not None else api.JointSpace()
    precs = ",".join(p.name for p in js.precisions) or prob.precision.name
    bs = ",".join(map(str, js.batches)) or str(prob.workload.batch)
    parts = [f"law {(prob.law.unbound or prob.law).name}", f"device {prob.device.id}", f"precisions {precs}",
             f"batches {bs}", *(c.describe() for c in prob.constraints)]  # fmt: skip
    if len(js.options) > 1 or js.options[0].columns is not None:
        parts.insert(4, f"layouts {';'.join(o.name for o in js.options)} on {js.options[0].meta.get('system', '?')}")
    return ", ".join(parts)
