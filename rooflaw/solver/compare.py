"""A given model against the best architectures of a space on the same device and workload: at equal latency
(the lowest loss that meets the model's own latency) and at equal loss (the fastest architecture that reaches
the model's loss) -- the question of the paper's Fig. 8a, for any model."""

from __future__ import annotations

from typing import Any

from ..constraints import evaluate
from ..objectives import law_inputs
from .discrete.exhaustive import frontier

ARCH_COLS = ("layers", "d_model", "heads", "kv_heads", "head_dim", "ffn", "experts", "top_k")


def _entry(row: Any, phase_col: str) -> dict[str, Any]:
    out: dict[str, Any] = {k: int(row[k]) for k in ARCH_COLS}
    out.update(loss=float(row["loss"]), latency_s=float(row[phase_col]), memory_bytes=float(row["memory_bytes"]),
               energy_j=float(row["energy_j"]), params_total=float(row["params_total"]),
               params_active=float(row["params_active"]))  # fmt: skip
    return out


def compare(arch: Any, problem: Any, n_jobs: int | None = None) -> dict[str, Any]:
    """``arch`` against ``problem.space`` under ``problem``'s law, device, workload, precision, preset and memory
    limits (its latency, TPOT and TTFT budgets, if any, are ignored: the model's own latency is the budget). SI units.

    Returns ``engine`` (the engine profile that priced both sides), ``model`` (the model's loss, latency of
    ``problem.phase``, memory, …), ``equal_latency`` (lowest-loss
    architecture with latency ≤ the model's; None if none is that fast), ``equal_loss`` (fastest architecture with
    loss ≤ the model's; None if none is that good), the relative gains, and the space's size.

    Example: a 4-layer model against a 16-point space, on the pure roofline::

        >>> import rooflaw as rl
        >>> tiny = rl.Space.from_mapping({"layers": [4, 8], "d_model": [768, 1024], "head_dim": [128],
        ...                               "kv_heads": [1, 2], "moe": [[1, 1]], "r_single": [2, 4]}, name="tiny")
        >>> problem = rl.Problem(device="jetson-agx-orin-64gb", space=tiny, engine="ideal")
        >>> c = rl.compare(rl.load_architecture("layers=4,d_model=1024,heads=8,kv_heads=8,ffn=4096"), problem)
        >>> round(c["model"]["loss"], 3), c["model"]["layers"], c["equal_latency"]["layers"]
        (4.427, 4, 8)
        >>> print(f"as fast: loss {c['equal_latency']['loss']:.3f}; as good: {c['equal_loss']['speedup']:.2f}x faster")
        as fast: loss 3.829; as good: 1.64x faster
    """
    # the model's own latency is the budget: the latency-like budgets (phase latency, TPOT, TTFT) are dropped
    prob = problem.replace(latency_budget=None, tpot_budget=None, ttft_budget=None)
    rep = evaluate(arch, prob.scenario)
    cols = {k: [v] for k, v in arch.columns().items()}
    inputs = law_inputs(cols, tokens=prob.tokens)
    model_loss = float(prob.law.evaluate(inputs)[0])
    phase_col = prob.latency_column
    model: dict[str, Any] = {k: int(getattr(arch, k)) for k in ARCH_COLS}
    model.update(name=arch.name, loss=model_loss, latency_s=float(rep.values[phase_col]),
                 memory_bytes=float(rep.values["memory_bytes"]), energy_j=float(rep.values["energy_j"]),
                 params_total=float(rep.values["params_total"]), params_active=float(rep.values["params_active"]),
                 fits_in_memory=bool(rep.values["memory_bytes"] <= prob.capacity),
                 outside_law_domain=prob.law.outside(inputs))  # fmt: skip
    res = frontier(prob, ("loss", "latency"), n_jobs=n_jobs)
    f = res.frontier
    eq_lat = f[f["latency_s"] <= model["latency_s"]]
    eq_loss = f[f["loss"] <= model_loss]
    out: dict[str, Any] = {"model": model, "phase": prob.phase, "space": prob.space.name, "law": prob.law.name,
                           "device": prob.device.id, "engine": prob.engine, "evaluated": res.evaluated,
                           "feasible": res.feasible}  # fmt: skip
    if len(eq_lat):
        best = eq_lat.sort_values(["loss", "latency_s"]).iloc[0]
        e = _entry(best, "latency_s")
        e["loss_change"] = e["loss"] - model_loss
        out["equal_latency"] = e
    else:
        out["equal_latency"] = None
        out["fastest_latency_s"] = float(f["latency_s"].min()) if len(f) else None
    if len(eq_loss):
        best = eq_loss.sort_values(["latency_s", "loss"]).iloc[0]
        e = _entry(best, "latency_s")
        e["speedup"] = model["latency_s"] / e["latency_s"]
        out["equal_loss"] = e
    else:
        out["equal_loss"] = None
        out["lowest_loss"] = float(f["loss"].min()) if len(f) else None
    return out


__all__ = ["compare"]
