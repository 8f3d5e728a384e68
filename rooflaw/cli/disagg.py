"""``rooflaw evaluate --system S --disagg prefill=LAYOUT[xN],decode=LAYOUT[xN]``: disaggregated serving."""

from __future__ import annotations

import re
from typing import Any, Optional

import typer

from .. import api
from ..errors import bad
from ..units import fmt_bytes, fmt_time
from .common import console, esc, print_json, table

DISAGG = typer.Option(
    None, "--disagg", help="Disaggregated serving on --system: prefill=tp=2x2,decode=tp=8 (xN: replicas; none: best)."
)
BOUND = ("prefill pool", "decode pool", "KV link")


def serve_disagg(device: Optional[str], system: Optional[str], arch: Any, precision: str, batch: str, s_in: int,
                 s_out: int, attention: str, engine: Optional[str], preset: str, tiles: bool, overlap: bool,
                 text: str, as_json: bool) -> None:  # fmt: skip
    """Price ``arch`` under a prefill pool and a decode pool of ``system`` and print or write the result."""
    from .. import api as D
    from .serving import resolve_system

    if system is None:
        raise bad("disagg", text, "needs --system (the devices the two pools share)")
    if preset != "full":
        raise bad("preset", preset, "disaggregated serving uses the full per-operator model")
    if tiles:
        raise bad("tiles", True, "the tile/wave model is not applied to sharded shapes; drop --tiles")
    if not batch.isdigit() or int(batch) < 1:
        raise bad("batch", batch, "with --disagg: one positive integer (sequences per decode replica)")
    sys_ = resolve_system(device, system)
    d = D.parse_disagg(text)
    wl = api.Workload(int(batch), s_in, s_out, attention)
    import numpy as np  # not at import: `rooflaw --help` loads no heavy library

    cols = {k: np.array([float(v)]) for k, v in arch.columns().items()}
    given = re.search(r"x\d+(,decode=|$)", text.strip()) is not None
    if given:
        D.check_fits(d, sys_)
        r = D.disagg_columns(cols, sys_, d, wl, precision, engine, overlap)
    else:
        d, r = D.balanced_split(cols, sys_, d.prefill.layout.describe(), d.decode.layout.describe(), wl, precision,
                                engine)  # fmt: skip
    v = {k: float(x[0]) for k, x in r.items()}
    out = {
        "disagg": d.describe(), "split_chosen": not given, "system": sys_.to_dict(),
        "architecture": arch.name or arch.spec(), "precision": precision, "engine": engine,
        "workload": {"batch": int(batch), "input_tokens": s_in, "output_tokens": s_out, "attention": attention},
        "prefill_replicas": d.prefill.replicas, "prefill_layout": d.prefill.layout.describe(),
        "decode_replicas": d.decode.replicas, "decode_layout": d.decode.layout.describe(), "devices": d.devices,
        **{k: v[k] for k in ("ttft_s", "prefill_s", "kv_transfer_s", "kv_bytes", "tpot_s", "decode_s", "latency_s",
                              "prefill_rate", "decode_rate", "link_rate", "rate", "tokens_per_s",
                              "tokens_per_s_per_user", "tokens_per_s_per_device", "memory_per_device_bytes",
                              "joules_per_token")},
        "bound": BOUND[int(v["bound"])], "fits": bool(v["fits"]), "divides": bool(v["divides"]),
    }  # fmt: skip
    if as_json:
        print_json(out)
        return
    console.print(f"[bold]{esc(arch.name or 'architecture')}[/bold] on [bold]{esc(sys_.describe())}[/bold] — "
                  f"disaggregated {esc(d.describe())} ({d.devices} devices), {esc(precision)}, B={batch}, "
                  f"S_in={s_in}, S_out={s_out}{' (best split)' if not given else ''}")  # fmt: skip
    rows = [
        ["TTFT (prefill + KV transfer)", f"{fmt_time(out['ttft_s'])} ({fmt_time(out['prefill_s'])} + "
                                         f"{fmt_time(out['kv_transfer_s'])})"],
        ["KV cache per request", fmt_bytes(out["kv_bytes"])], ["TPOT", fmt_time(out["tpot_s"])],
        ["requests/s: prefill / decode / link", f"{out['prefill_rate']:.4g} / {out['decode_rate']:.4g} / "
                                                f"{out['link_rate']:.4g}"],
        ["served (rate-matched)", f"{out['rate']:.4g} req/s, bound by the {out['bound']}"],
        ["tokens/s (all / per user / per GPU)", f"{out['tokens_per_s']:.4g} / {out['tokens_per_s_per_user']:.4g} / "
                                                f"{out['tokens_per_s_per_device']:.4g}"],
        ["memory per device (larger pool)", fmt_bytes(out["memory_per_device_bytes"])],
        ["J/token", f"{out['joules_per_token']:.3g}"], ["fits / divides", f"{out['fits']} / {out['divides']}"],
    ]  # fmt: skip
    console.print(table("disaggregated serving (steady state at the served rate)", ["quantity", "value"], rows))
