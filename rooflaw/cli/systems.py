"""``rooflaw devices systems``: the multi-device systems catalog (devices + interconnect, with sources)."""

from __future__ import annotations

import typer

from .common import console, print_json, table
from .devices import devices_app


@devices_app.command("systems")
def systems_cmd(as_json: bool = typer.Option(False, "--json", help="A JSON list of systems, SI units.")) -> None:
    """Systems for --system: devices, node size, link and scale-out bandwidth (each way per GPU), sources."""
    from .. import api

    systems = [api.get_system(s) for s in api.system_ids()]
    if as_json:
        print_json([s.to_dict() for s in systems])
        return
    rows = [[s.id, f"{s.count}x {s.device.id}", str(s.node_size), s.link or "—", f"{s.link_bw / 1e9:.4g} GB/s",
             f"{s.link_latency * 1e6:.3g} µs", f"{s.scale_out_bw / 1e9:.4g} GB/s",
             f"{s.link_pj_per_bit:.3g} / {s.scale_out_pj_per_bit:.3g}", s.source.split(" ")[0]]
            for s in systems]  # fmt: skip
    head = ["id", "devices", "node", "link", "link each way", "latency", "scale-out", "pJ/bit link / out", "source"]
    title = "systems (--system ID, ID:COUNT or DEVICE:COUNT; latencies assumed, pJ/bit estimates: --json for sources)"
    console.print(table(title, head, rows))
