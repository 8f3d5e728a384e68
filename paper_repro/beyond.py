"""Beyond the paper: does MoE still dominate at batch 8 and 64, or when memory capacity binds (Orin Nano 8GB)?"""

from __future__ import annotations

import numpy as np

from . import common as C
from .report import claims_table, figure, merge_claims, write_section

TITLE = "Beyond the paper — batching and memory capacity"
NANO = "jetson-orin-nano-8gb"
SCENARIOS = {
    "agx_b1": (C.DEVICE, 1, "AGX Orin 64GB, B=1 (paper)"),
    "agx_b8": (C.DEVICE, 8, "AGX Orin 64GB, B=8"),
    "agx_b64": (C.DEVICE, 64, "AGX Orin 64GB, B=64"),
    "nano_b1": (NANO, 1, "Orin Nano 8GB, B=1"),
}
PHASES = ("decode", "total")
#: The paper studies only batch 1 on one device; these scenarios compare its theory formulas with rooflaw's model.
PRESETS = ("paper", "full")
E_COLORS = {1: "0.55", 8: "tab:orange", 16: "tab:red"}


def workload(batch: int) -> C.rooflaw.Workload:
    return C.rooflaw.Workload(batch=batch, input_tokens=C.WORKLOAD.input_tokens, output_tokens=C.WORKLOAD.output_tokens)


def run(ctx: C.Context) -> dict:
    plt = C.plt()
    claims: dict = {}
    for key, (dev, b, label) in SCENARIOS.items():
        claims[key] = {"device": dev, "batch": b, "label": label}
        for ps in PRESETS:
            prob = C.problem(ps, "fp16", "total", dev, workload(b))
            ev = prob.evaluate(prob.space.to_frame())
            claims[key].setdefault(ps, {})["fits_share"] = float((ev["memory_bytes"] <= prob.capacity).mean())
            for ph in PHASES:
                df = C.frontier(ps, "fp16", ph, dev, workload(b))
                claims[key][ps][ph] = {
                    "moe_share": C.share(df["experts"] > 1), "top1_share": C.share(df["top_k"] == 1),
                    "median_experts": float(np.median(df["experts"])), "points": len(df),
                    "min_loss": float(df["loss"].min()),
                    "min_latency_ms": float(df["latency_s"].min() * 1e3),
                    "dense_share_fast_half": C.share(df["experts"].iloc[: max(1, len(df) // 2)] == 1),
                }  # fmt: skip

    fig, axes = plt.subplots(2, len(SCENARIOS), figsize=(18, 8), sharey="row")
    for i, ps in enumerate(PRESETS):
        for j, (key, (dev, b, label)) in enumerate(SCENARIOS.items()):
            ax = axes[i, j]
            df = C.frontier(ps, "fp16", "total", dev, workload(b))
            ax.step(df["latency_s"] * 1e3, df["loss"], where="post", color="0.7", lw=1)
            for e, col in E_COLORS.items():
                sub = df[df["experts"] == e]
                ax.plot(sub["latency_s"] * 1e3, sub["loss"], "o", ms=4, color=col,
                        label=f"E = {e}" if e > 1 else "dense")  # fmt: skip
            s = claims[key][ps]["total"]
            ax.text(0.97, 0.97, f"MoE share {s['moe_share']:.0%}\nmedian E {s['median_experts']:.0f}\n"
                    f"fits memory: {claims[key][ps]['fits_share']:.0%} of space", transform=ax.transAxes,
                    ha="right", va="top", fontsize=8, bbox=dict(boxstyle="round", fc="white", ec="0.7"))  # fmt: skip
            ax.set_xscale("log")
            ax.set_title(f"{label}\n{C.PRESET_LABEL[ps]}", fontsize=9)
            ax.set_xlabel(f"total latency for the batch of {b} [ms, log]")
            if j == 0:
                ax.set_ylabel("predicted loss (Eq. 15) [nats/token]")
            if i == 0 and j == 0:
                ax.legend(loc="lower left", fontsize=8)
    fig.suptitle("Total-latency frontiers coloured by expert count (FP16); paper: MoE is 100 % of the frontier at B=1",
                 fontsize=11)  # fmt: skip
    fig.tight_layout()
    fname = C.savefig(fig, ctx, "beyond_moe.png")

    rows = []
    for key, (_dev, _b, label) in SCENARIOS.items():
        for ph in PHASES:
            c = [f"{claims[key][ps][ph]['moe_share']:.0%} MoE, median E {claims[key][ps][ph]['median_experts']:.0f}, "
                 f"{claims[key][ps][ph]['points']} pts" for ps in PRESETS]  # fmt: skip
            full = claims[key]["full"][ph]["moe_share"]
            verdict = "MoE still dominates" if full >= 0.9 else ("MoE loses ground" if full >= 0.5 else "dense wins")
            rows.append([f"{label}, {ph} frontier", "100 % MoE (B=1 only)" if key == "agx_b1" else "not studied",
                         *c, verdict])  # fmt: skip

    def f(key, ph):
        return f"{claims[key]['full'][ph]['moe_share']:.0%}"

    def m(key, ph):
        return f"{claims[key]['full'][ph]['median_experts']:.0f}"

    body = (
        "The same frontier (FP16, S_in = 1024, S_out = 16, space `paper`) at batch 8 and 64 on the AGX Orin 64GB, "
        "and at batch 1 on the Jetson Orin Nano 8GB "
        f"({C.device_summary(C.device(NANO))}), where memory capacity binds.\n\n"
        + claims_table(rows)
        + "\nWhat changes the regime: (1) **batching** — the `full` preset reads the expected number of distinct "
        "experts touched by the B tokens of a decode step, E·(1−(1−K/E)^B): at B = 8 a 16-expert top-1 layer reads "
        f"≈ {16 * (1 - (15 / 16) ** 8):.1f} experts' weights per step, at B = 64 ≈ {16 * (1 - (15 / 16) ** 64):.1f}. "
        "The decode 'free lunch' of Theorem 5.1 (ρ absent from decode traffic) erodes: the decode frontier's MoE "
        f"share falls from {f('agx_b1', 'decode')} at B = 1 to {f('agx_b8', 'decode')} at B = 8 and "
        f"{f('agx_b64', 'decode')} at B = 64 (median E {m('agx_b64', 'decode')}), with dense models taking the "
        "fast end. The total-latency frontier stays MoE-dominated "
        f"({f('agx_b64', 'total')} at B = 64) because prefill of B·1024 tokens dominates total latency and is "
        "compute-bound, where E costs nothing, while Eq. 15 keeps rewarding small ρ. The `paper` preset charges "
        "only the K active experts whatever the batch, so it predicts 100 % MoE everywhere. (2) **capacity** — on "
        "8 GB the weights of all experts (plus KV cache and activations in `full`) must fit, so only "
        f"{claims['nano_b1']['full']['fits_share']:.0%} of the space is feasible (vs "
        f"{claims['agx_b1']['full']['fits_share']:.0%} on 64 GB) and the frontier's lowest loss rises from "
        f"{claims['agx_b1']['full']['total']['min_loss']:.3f} to {claims['nano_b1']['full']['total']['min_loss']:.3f}; "
        f"MoE still makes up {f('nano_b1', 'total')} of the total frontier, with fewer experts at the low-loss end "
        f"(median E {m('nano_b1', 'total')}) because E multiplies FFN storage (Theorem 5.2's regime).\n\n"
        + figure(fname, "Frontiers coloured by expert count for batching and capacity scenarios, both presets.")
    )
    write_section(ctx.out, "beyond", TITLE, body)
    merge_claims(ctx.out, "beyond", claims)
    return claims
