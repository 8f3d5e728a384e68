"""Fig. 5: loss–latency Pareto frontiers for prefill, decode and total latency, FP16 vs INT8.

``int8_speedup`` = FP16 latency ÷ INT8 latency at equal loss along the frontier: for every loss level L
that both frontiers reach, the smallest FP16 latency reaching loss ≤ L over the smallest INT8 one.
"""

from __future__ import annotations

import numpy as np

from . import common as C
from .report import claims_table, figure, merge_claims, write_section

TITLE = "Fig. 5 — loss–latency Pareto frontiers, FP16 vs INT8"


def speedup(f16, f8) -> dict[str, float]:
    """min/median/max of FP16 ÷ INT8 frontier latency at equal loss (over the loss levels both reach)."""
    lo = max(f16["loss"].min(), f8["loss"].min())
    levels = np.unique(np.r_[f16["loss"].to_numpy(), f8["loss"].to_numpy()])
    levels = levels[levels >= lo]
    r = C.staircase(f16, levels) / C.staircase(f8, levels)
    r = r[np.isfinite(r)]
    return {"min": float(r.min()), "median": float(np.median(r)), "max": float(r.max()), "levels": int(r.size)}


#: Other INT8 recipes: KV cache kept in FP16; weight-only INT8 (dequantised to the FP16 roof).
VARIANTS = {"w8a8kv16": "INT8 weights+activations, FP16 KV cache", "w8a16": "INT8 weights only (W8A16)"}


def same_arch(ps: str, ph: str, f16) -> dict[str, float]:
    """FP16 ÷ INT8 latency of the very same architectures (the FP16 frontier points)."""
    dev = C.device()
    cols = {k: f16[k].to_numpy() for k in C.rooflaw.COLUMNS if k in f16}
    col = {"prefill": "prefill_s", "decode": "decode_s", "total": "total_s"}[ph]
    t16 = C.rooflaw.evaluate_columns(cols, dev, C.WORKLOAD, "fp16", ps)[col]
    t8 = C.rooflaw.evaluate_columns(cols, dev, C.WORKLOAD, "int8", ps)[col]
    r = t16 / t8
    return {"min": float(r.min()), "median": float(np.median(r)), "max": float(r.max())}


def run(ctx: C.Context) -> dict:
    plt = C.plt()
    fr = C.all_frontiers()
    claims: dict = {"int8_speedup": {}, "frontier_points": {}, "min_latency_ms": {}, "min_loss": {}}
    fig, axes = plt.subplots(len(C.PRESETS), 3, figsize=(15, 4.3 * len(C.PRESETS)))
    for i, ps in enumerate(C.PRESETS):
        claims["int8_speedup"][ps], claims["frontier_points"][ps] = {}, {}
        claims["min_latency_ms"][ps], claims["min_loss"][ps] = {}, {}
        for j, ph in enumerate(C.PHASES):
            ax = axes[i, j]
            for pr in C.PRECISIONS:
                df = fr[(ps, pr, ph)]
                ax.step(
                    df["latency_s"] * 1e3,
                    df["loss"],
                    where="post",
                    label=f"{pr.upper()} ({len(df)} pts)",
                    lw=1.4,
                    **{k: v for k, v in C.PREC_STYLE[pr].items() if k != "marker"},
                )
                ax.plot(df["latency_s"] * 1e3, df["loss"], ls="none", ms=3.5, **C.PREC_STYLE[pr])
                claims["frontier_points"][ps].setdefault(ph, {})[pr] = len(df)
                claims["min_latency_ms"][ps].setdefault(ph, {})[pr] = float(df["latency_s"].min() * 1e3)
                claims["min_loss"][ps].setdefault(ph, {})[pr] = float(df["loss"].min())
            w = C.frontier(ps, "w8a16", ph)
            ax.step(
                w["latency_s"] * 1e3,
                w["loss"],
                where="post",
                color="0.5",
                ls=":",
                lw=1.2,
                label="W8A16 (weight-only INT8)",
            )
            sp = speedup(fr[(ps, "fp16", ph)], fr[(ps, "int8", ph)])
            claims["int8_speedup"][ps][ph] = sp
            claims.setdefault("int8_speedup_same_arch", {}).setdefault(ps, {})[ph] = same_arch(
                ps, ph, fr[(ps, "fp16", ph)]
            )
            for v in VARIANTS:
                claims.setdefault("variants_speedup", {}).setdefault(v, {}).setdefault(ps, {})[ph] = speedup(
                    fr[(ps, "fp16", ph)], C.frontier(ps, v, ph)
                )
            ax.set_xscale("log")
            ax.set_xlabel(f"{C.PHASE_LABEL[ph]} [ms, log]")
            ax.set_ylabel("predicted loss (paper Eq. 15) [nats/token]")
            ax.set_title(f"{ph} — {C.PRESET_LABEL[ps]}")
            ax.text(
                0.97,
                0.97,
                f"FP16/INT8 at equal loss:\nmedian {sp['median']:.2f}× (min {sp['min']:.2f}, "
                f"max {sp['max']:.2f})\npaper: 'notably less than 2×'",
                transform=ax.transAxes,
                ha="right",
                va="top",
                fontsize=8,
                bbox=dict(boxstyle="round", fc="white", ec="0.7"),
            )
            ax.legend(loc="lower left", fontsize=8)
    dev = C.device()
    fig.suptitle(f"Pareto frontiers on {dev.name} (B=1, S_in=1024, S_out=16; space 'paper'; law Eq. 15)", fontsize=12)
    fig.tight_layout()
    name = C.savefig(fig, ctx, "fig5_frontiers.png")

    s, sa, va = claims["int8_speedup"], claims["int8_speedup_same_arch"], claims["variants_speedup"]

    def cell(d, ps, ph):
        x = d[ps][ph]
        return f"median {x['median']:.3f}× (min {x['min']:.3f}, max {x['max']:.3f})"

    rows = []
    for ph in C.PHASES:
        po = s["paper-ops"][ph]["median"]
        rows.append(
            [
                f"INT8 (W8A8KV8) speed-up at equal loss, {ph}",
                "notably below 2× (no number given)",
                *(cell(s, ps, ph) for ps in C.PRESETS),
                "paper: exactly 2×; paper-ops: "
                + ("below 2× (matches)" if po < 1.95 else "≈ 2×")
                + "; full: "
                + ("below 2×" if s["full"][ph]["median"] < 1.95 else "≈ 2×"),
            ]
        )
    for ph in C.PHASES:
        rows.append(
            [
                f"same architectures FP16 ÷ INT8, {ph}",
                "—",
                *(cell(sa, ps, ph) for ps in C.PRESETS),
                "≤ 2× by construction",
            ]
        )
    for v, what in VARIANTS.items():
        rows.append(
            [
                f"{what} ({v}), total, at equal loss",
                "—",
                *(cell(va[v], ps, "total") for ps in C.PRESETS),
                "sub-2× only when something stays FP16",
            ]
        )
    fr16 = {ps: fr[(ps, "fp16", "total")] for ps in C.PRESETS}
    rows.append(
        [
            "frontier on Jetson Orin for all three phases",
            "yes (Fig. 5)",
            *(f"{sum(claims['frontier_points'][ps][p]['fp16'] for p in C.PHASES)} FP16 points (3 phases)"
              for ps in C.PRESETS),
            "reproduced (shape)",
        ]
    )  # fmt: skip
    rows.append(
        [
            "lowest total latency on the frontier (FP16)",
            "not given",
            *(C.fmt_ms(fr16[ps]["latency_s"].min()) for ps in C.PRESETS),
            "no paper number",
        ]
    )
    body = (
        f"Device: {C.device_summary(dev)} — the paper gives no Orin numbers; these are the catalog's (dense, MAXN). "
        "Workload B=1, S_in=1024, S_out=16; space `paper` (Table 5 + head_dim 128, r_single ∈ {0.5,1,2,3,4}); "
        "law `paper-2602.10377` (Eq. 15). Only points whose memory fits the 64 GB are candidates. "
        "`int8` means weights, activations and KV cache in INT8 (W8A8KV8).\n\n"
        + claims_table(rows)
        + "\nWhy: the paper's §5 / App. E theory model is linear in the precision — prefill counts only "
        "linear-layer FLOPs (the catalog's INT8 peak = 2× FP16 peak on Orin) and decode only weight + KV bytes "
        "(halved) — so under the `paper` preset INT8 is *exactly* 2× for every architecture: the exact 2× holds "
        "only for those theory formulas with an INT8 roof of exactly twice the FP16 one. The paper's App. D "
        "per-operator model (`paper-ops`), with the score matrix and softmax kept in 16 bits as its prose says, "
        f"gives {s['paper-ops']['prefill']['median']:.2f}× prefill, {s['paper-ops']['decode']['median']:.2f}× "
        f"decode and {s['paper-ops']['total']['median']:.2f}× total (medians at equal loss): the S² score traffic "
        "does not shrink, and it weighs most in prefill — the number that stands beside the paper's 'notably "
        "less than 2×'. The `full` preset goes further: softmax, norms, RoPE and "
        "the FFN activation run on the FP32 vector roof and read/write 16-bit tensors (the score matrix too), so "
        "INT8 halves only the linear layers. "
        f"Prefill, where the S² attention traffic and vector ops weigh most, gains a median "
        f"{s['full']['prefill']['median']:.2f}×; total {s['full']['total']['median']:.2f}×; batch-1 decode, "
        f"dominated by weight bytes, stays near 2× ({s['full']['decode']['median']:.2f}×). "
        "Keeping the KV cache in FP16 (w8a8kv16) or quantising only weights (w8a16, prefill on the FP16 roof) "
        "lowers the gain further; quantise/dequantise kernels and launch overheads are not modelled. "
        "Equal-loss ratios above 2× (the `max` column) are not speed-ups of one model: INT8 halves the weight "
        "memory, so larger MoE models that do not fit 64 GB in FP16 enter the INT8 frontier at low loss.\n\n"
        + figure(name, "Fig. 5 analogue: Pareto frontiers per phase, FP16 vs INT8, under the three cost presets.")
    )
    write_section(ctx.out, "fig5", TITLE, body)
    merge_claims(ctx.out, "fig5", claims)
    return claims
