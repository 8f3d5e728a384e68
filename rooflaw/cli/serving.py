"""``rooflaw evaluate --system/--layout/--batch sweep/--max-batch``: serving across devices (printing only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from .. import api
from ..errors import bad
from ..units import fmt_bytes, fmt_time
from .common import atomic_output, console, esc, print_json, table

HEADERS = ["batch", "TTFT", "TPOT", "mem/device", "comm prefill", "comm decode", "tok/s", "tok/s/user",
           "tok/s/device", "J/token", "fits", "Pareto"]  # fmt: skip


def resolve_system(device: Optional[str], system: Optional[str]) -> Any:
    if system is None:
        if device is None:
            raise bad("system", None, "give --system (e.g. h100-sxm:8) or --device")
        return api.get_system(f"{device}:1") if ":" not in device and "/" not in device else api.get_system(device)
    sys_ = api.get_system(system)
    if device is not None and api.get_device(device).id != sys_.device.id:
        raise bad("device", device, f"differs from the system's device {sys_.device.id}; give one of them")
    return sys_


def _inflight(arch, sys_, lay, batch, s_in, s_out, attention, precision, engine, overlap,
              host=None) -> Optional[dict]:  # fmt: skip
    """The steady state of ``batch`` requests in flight (:func:`rooflaw.parallel.inflight`; requests queued in the
    engine, ``host``'s seconds per step); None for one output token (no decode step)."""
    if s_out < 2:
        return None
    wl = api.Workload(batch, s_in, s_out, attention)
    budget = max(api.TRTLLM_TOKEN_BUDGET, batch)
    return api.inflight(arch, sys_, lay, wl, precision, engine, budget, overlap, host=host)


def serve(device, system, layout, arch, precision, batch, s_in, s_out, attention, engine, preset, tiles, overlap,
          want_max, pareto_plot: Optional[Path], as_json: bool, host_time: bool = False) -> None:  # fmt: skip
    """Evaluate ``arch`` on a system under a layout at each batch of the sweep and print or write the results.
    ``host_time``: the in-flight rows and the max throughput add the engine's fitted host seconds
    (:func:`rooflaw.parallel.serving_host`)."""
    if preset != "full":
        raise bad("preset", preset, "layouts use the full per-operator model (the paper presets have no shapes)")
    if tiles:
        raise bad("tiles", True, "the tile/wave model is not applied to sharded shapes; drop --tiles")
    if pareto_plot is not None:
        api.check_figure_path(pareto_plot, "pareto-plot")
    sys_ = resolve_system(device, system)
    lay = api.parse_layout(layout or "tp=1")
    host = None
    if host_time:
        name = engine or api.default_engine(sys_.device)
        host = api.serving_host(name)
        if host == api.ServingHost():
            raise bad("host-time", name, "this engine has no fitted host figures (serving_host.toml: tensorrt-llm)")
    batches = api.parse_batches(batch)
    wl = api.Workload(batches[0], s_in, s_out, attention)
    rows = api.batch_sweep(arch, sys_, lay, batches, wl, precision, engine, overlap)
    first = api.evaluate_layout(arch, sys_, lay, api.Workload(batches[0], s_in, s_out, attention), precision, engine,
                                overlap)  # fmt: skip
    out: dict[str, Any] = {k: v for k, v in first.items() if k != "stages"}
    out.update(architecture=arch.name or arch.spec(), system=sys_.to_dict(), precision=precision,
               workload={"input_tokens": s_in, "output_tokens": s_out, "attention": attention},
               engine=engine, sweep=rows, pareto_batches=[r["batch"] for r in rows if r["pareto"]],
               serving_host=host.__dict__ if host is not None else None)  # fmt: skip
    if "stages" in first:
        out["stages"] = first["stages"]
    for r in rows:  # continuous batching at `batch` requests in flight (chunked prefill inside the decode steps)
        r["inflight"] = _inflight(arch, sys_, lay, r["batch"], s_in, s_out, attention, precision, engine, overlap,
                                  host)  # fmt: skip
    if want_max:
        out["max_batch"] = api.max_batch(arch, sys_, lay, wl, precision)
        if out["max_batch"] and s_out >= 2:  # every request queued: in flight at the largest batch that fits
            out["max_throughput"] = api.max_throughput(arch, sys_, lay, wl, precision, engine, overlap=overlap,
                                                       host=host)  # fmt: skip
    banded = bool(api.problem_band(sys_.device, engine, "full", "decode"))
    for r in rows if banded else ():  # 80 % bands of each batch's times and throughputs (JSON)
        r["bands"] = api.bands_dict({k: r[k] for k in ("ttft_s", "tpot_s", "tokens_per_s", "tokens_per_s_per_user",
                                                       "tokens_per_s_per_device")})  # fmt: skip
    if pareto_plot is not None:
        with atomic_output(pareto_plot, "--pareto-plot") as tmp:
            api.plot_serving({lay.describe(): rows}, tmp, f"{arch.name or 'architecture'} on {sys_.describe()}, "
                             f"{lay.describe()}, {precision}, S_in={s_in}, S_out={s_out}")  # fmt: skip
    if as_json:
        print_json(out)
        return
    console.print(
        f"[bold]{esc(arch.name or 'architecture')}[/bold] on [bold]{esc(sys_.describe())}[/bold] — layout "
        f"{esc(lay.describe())} ({lay.devices} devices), {esc(precision)}, S_in={s_in}, S_out={s_out}"
    )
    body = [[r["batch"], fmt_time(r["ttft_s"]), fmt_time(r["tpot_s"]), fmt_bytes(r["memory_per_device_bytes"]),
             fmt_time(r["comm_s_prefill"]), fmt_time(r["comm_s_decode"]), f"{r['tokens_per_s']:.4g}",
             f"{r['tokens_per_s_per_user']:.4g}", f"{r['tokens_per_s_per_device']:.4g}",
             f"{r['joules_per_token']:.3g}" if r["joules_per_token"] == r["joules_per_token"] else "n/a",
             "yes" if r["fits"] else "NO", "*" if r["pareto"] else ""] for r in rows]  # fmt: skip
    console.print(table("serving (comm: summed over the phase; tok/s: generated tokens)", HEADERS, body))
    live = [[r["batch"], fmt_time(f["ttft_s"]), fmt_time(f["tpot_s"]), f"{f['tokens_per_s']:.4g}",
             f"{f['tokens_per_s_per_device']:.4g}"] for r in rows if (f := r["inflight"]) is not None]  # fmt: skip
    if live:
        console.print(table(f"in-flight batching: batch = requests in flight, prompts prefilled inside the decode "
                            f"steps (≤ {api.TRTLLM_TOKEN_BUDGET} tokens a step"
                            f"{'; + the fitted host seconds' if host is not None else ''})",
                            ["in flight", "TTFT", "TPOT", "tok/s", "tok/s/device"], live))  # fmt: skip
    if banded:
        pre, dec = (api.phase_band(p).band() for p in ("prefill", "decode"))
        console.print(
            f"[dim]80 % bands (held-out published rows): TTFT ×{pre[0]:.2f}–{pre[1]:.2f}, TPOT "
            f"×{dec[0]:.2f}–{dec[1]:.2f}, tok/s ×{1 / dec[1]:.2f}–{1 / dec[0]:.2f} (--json: per batch)[/dim]"
        )
    if "stages" in first:  # layers, GQA attention layers, then each layer kind's that replaces a base
        own = [k for k in api.LAYER_KINDS.values() if not k.in_base]
        st = [[i, s["layers"], s["attn_layers"], *(s[k.count] for k in own), fmt_time(s["decode_step_s"])]
              for i, s in enumerate(first["stages"])]  # fmt: skip
        console.print(table(f"pipeline stages at batch {batches[0]} (stage balance {first['stage_balance']:.1%})",
                            ["stage", "layers", "attention", *(k.label for k in own), "decode step"], st))  # fmt: skip
    if want_max:
        mb = out["max_batch"]
        console.print(f"largest batch that fits each device: {mb}" if mb else
                      "largest batch that fits: none (not even batch 1 fits one device's memory)")  # fmt: skip
        if "max_throughput" in out:
            m = out["max_throughput"]
            console.print(f"max throughput (all {mb} in flight): {m['tokens_per_s_per_device']:.4g} tok/s/device, "
                          f"TTFT {fmt_time(m['ttft_s'])}, TPOT {fmt_time(m['tpot_s'])}")  # fmt: skip
    for note in first["notes"]:
        console.print(f"[dim]note: {esc(note)}[/dim]")
    if pareto_plot is not None:
        console.print(f"wrote {pareto_plot}", markup=False)
