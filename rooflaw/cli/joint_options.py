"""Options ``frontier`` and ``solve`` share for the joint space (precisions × batches) and Dask (``--scheduler``)."""

from __future__ import annotations

from typing import Any, Optional

from ..errors import bad

PRECISIONS_HELP = "Joint space: precisions to search with the architecture, e.g. bf16,fp8,nvfp4 (or w4a16kv8 …)."
BATCHES_HELP = "Joint space: batch sizes to search with the architecture, e.g. 1,8,64."
SCHEDULER_HELP = "Run the exhaustive scan on Dask: local:N (a LocalCluster of N processes) or tcp://host:8786."


def _items(text: str, name: str) -> list[str]:
    items = [t.strip() for t in text.split(",")]
    if not items or any(not t for t in items):
        raise bad(name, text, "expected a comma-separated list without empty items")
    return items


def joint_space(precisions: Optional[str], batches: Optional[str]) -> Any:
    """A :class:`~rooflaw.solver.discrete.joint.JointSpace` from ``--precisions`` / ``--batches`` (None: neither)."""
    if precisions is None and batches is None:
        return None
    from .. import api

    precs = _items(precisions, "precisions") if precisions is not None else []
    bs: list[int] = []
    for t in _items(batches, "batches") if batches is not None else []:
        if not t.isdigit() or int(t) <= 0:
            raise bad("batches", batches, f"{t!r} is not a positive integer")
        bs.append(int(t))
    return api.JointSpace(precisions=tuple(precs), batches=tuple(bs))


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
    return ", ".join(parts)
