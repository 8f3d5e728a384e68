"""``rooflaw compare``: a model against the best architectures of a space at equal latency and at equal loss."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from .. import api
from ..units import fmt_bytes, fmt_count, fmt_time
from . import app
from .bands import fmt_banded, interval, problem_band
from .common import console, print_json, table
from .options import ARCH, ARCH_FILE, HF_CONFIG, JSON, N_JOBS, ProblemOptions, with_options


@app.command()
@with_options(omit=("latency_budget", "energy_budget", "confidence"))  # compared at the model's own latency
def compare(
    *,
    opts: ProblemOptions,
    hf_config: Optional[Path] = HF_CONFIG,
    arch: Optional[str] = ARCH,
    arch_file: Optional[Path] = ARCH_FILE,
    n_jobs: int = N_JOBS,
    as_json: bool = JSON,
) -> None:
    """Your model against the best of a space: lowest loss at its latency, fastest at its loss (paper Fig. 8a)."""
    from .evaluate import load_arch

    api.resolve_jobs(n_jobs, "n-jobs")
    a = load_arch(hf_config, arch, arch_file)
    prob = opts.problem()
    res = api.compare(a, prob, n_jobs=n_jobs)
    band = problem_band(prob)
    if as_json:
        lat = {k: res[k]["latency_s"] for k in ("model", "equal_latency", "equal_loss") if res.get(k)}
        bands = {**band, "latency_s": {k: interval(v, band) for k, v in lat.items()}} if band else {}
        print_json({**res, "bands": bands})
        return
    m = res["model"]
    console.print(
        f"{m['name'] or 'model'} against space {res['space']} ({res['feasible']:,} of {res['evaluated']:,} points "
        f"fit) — {prob.describe()}, {opts.phase} latency, engine {res['engine']}",
        markup=False,
    )
    rows = [_row("your model", m, band)]
    eq_lat, eq_loss = res["equal_latency"], res["equal_loss"]
    rows.append(_row("equal latency", eq_lat, band) if eq_lat else ["equal latency", *["—"] * 7])
    rows.append(_row("equal loss", eq_loss, band) if eq_loss else ["equal loss", *["—"] * 7])
    cols = ["", "l × d", "kv", "ffn", "E/K", "active", "loss", "latency"]
    console.print(table("the model and the best of the space", cols, rows))
    if eq_lat:
        console.print(f"at equal latency: loss {eq_lat['loss']:.4f} vs {m['loss']:.4f} ({eq_lat['loss_change']:+.4f})")
    else:
        console.print(
            f"no architecture of the space is as fast as the model (fastest {fmt_time(res['fastest_latency_s'])})"
        )
    if eq_loss:
        console.print(f"at equal loss: {fmt_time(eq_loss['latency_s'])} vs {fmt_time(m['latency_s'])} "
                      f"({eq_loss['speedup']:.2f}x faster)")  # fmt: skip
    else:
        console.print(f"no architecture of the space reaches the model's loss (lowest {res['lowest_loss']:.4f})")
    if m["outside_law_domain"]:
        console.print(f"warning: the model lies outside the domain law {res['law']} was fitted on "
                      f"({'; '.join(m['outside_law_domain'])}): its loss is extrapolated", markup=False)  # fmt: skip
    if not m["fits_in_memory"]:
        console.print(f"note: the model itself needs {fmt_bytes(m['memory_bytes'])}, more than the memory limit")


def _row(label: str, e: dict, band: dict) -> list[str]:
    return [label, f"{e['layers']} × {e['d_model']}", str(e["kv_heads"]), str(e["ffn"]), f"{e['experts']}/{e['top_k']}",
            fmt_count(e["params_active"]), f"{e['loss']:.4f}", fmt_banded(e["latency_s"], band)]  # fmt: skip
