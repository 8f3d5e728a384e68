"""Fig. 7 and the MoE-dominance claim: how depth, width, experts, top_k and FFN ratio evolve along each frontier."""

from __future__ import annotations

import numpy as np

from . import common as C
from .report import claims_table, figure, merge_claims, write_section

TITLE = "Fig. 7 — architecture along the frontiers, and MoE dominance"
BOX = dict(boxstyle="round", fc="white", ec="0.8", alpha=0.9)
VARS = (
    ("layers", "depth l [layers]"),
    ("d_model", "width d [d_model]"),
    ("experts", "experts E"),
    ("top_k", "top-K"),
    ("r", "FFN ratio r = K·ffn/d"),
)


def stats(df, d_max: int) -> dict[str, float]:
    return {
        "moe_share": C.share(df["experts"] > 1),
        "top1_share": C.share(df["top_k"] == 1),
        "depth_le_20_share": C.share(df["layers"] <= 20),
        "width_at_bound_share": C.share(df["d_model"] >= d_max),
        "r_below_1_share": C.share(df["r"] < 1),
        "r_below_4_share": C.share(df["r"] < 4),
        "median_experts": float(np.median(df["experts"])),
        "experts_8_share": C.share(df["experts"] == 8),
        "median_layers": float(np.median(df["layers"])),
        "median_r": float(np.median(df["r"])),
        "points": len(df),
    }


def run(ctx: C.Context) -> dict:
    plt = C.plt()
    fr = C.all_frontiers()
    d_max = int(max(df["d_model"].max() for df in fr.values()))
    d_max = max(d_max, 3072)
    per: dict = {}
    for (ps, pr, ph), df in fr.items():
        per.setdefault(ps, {}).setdefault(ph, {})[pr] = stats(df, d_max)
    keys = ("moe_share", "top1_share", "depth_le_20_share", "width_at_bound_share", "median_experts")
    claims: dict = {
        k: {ps: {ph: {pr: per[ps][ph][pr][k] for pr in C.PRECISIONS} for ph in C.PHASES} for ps in C.PRESETS}
        for k in keys
    }
    claims["by_frontier"] = per
    claims["width_bound"] = d_max

    names = []
    for ps in C.PRESETS:
        fig, axes = plt.subplots(len(VARS), 3, figsize=(14, 12), sharex="col")
        for j, ph in enumerate(C.PHASES):
            for i, (col, label) in enumerate(VARS):
                ax = axes[i, j]
                for pr in C.PRECISIONS:
                    df = fr[(ps, pr, ph)]
                    ax.plot(
                        df["latency_s"] * 1e3,
                        df[col],
                        drawstyle="steps-post",
                        lw=1.2,
                        ms=3,
                        label=pr.upper(),
                        **C.PREC_STYLE[pr],
                    )
                ax.set_xscale("log")
                if col in ("experts", "d_model", "layers"):
                    ax.set_yscale("log", base=2)
                    vals = sorted(set().union(*(fr[(ps, pr, ph)][col].unique() for pr in C.PRECISIONS)))
                    ax.set_yticks(vals)
                    ax.set_yticklabels([str(int(v)) for v in vals], fontsize=7)
                    ax.minorticks_off()
                s = per[ps][ph]
                claim = {
                    "layers": "paper: depth 'generally below 20'",
                    "d_model": f"paper: width saturates at the bound ({d_max}) first",
                    "experts": "paper: 100% MoE; prefill few experts, decode max, total ≈ 8\n"
                    f"here MoE share FP16 {s['fp16']['moe_share']:.0%}, INT8 {s['int8']['moe_share']:.0%}",
                    "top_k": "paper: top-1 routing",
                    "r": "paper: r 'substantially smaller than 4×', often < 1×",
                }
                if col in claim:
                    ax.text(0.02, 0.95, claim[col], transform=ax.transAxes, fontsize=7, va="top", bbox=BOX)
                if col in ("layers", "r"):
                    ax.axhline(20 if col == "layers" else 1, color="k", ls=":", lw=0.8)
                if col == "experts":
                    ax.set_ylim(0.7, 64)
                if col == "top_k":
                    ax.set_yticks([1, 2])
                    ax.set_ylim(0.8, 2.2)
                ax.set_ylabel(label)
                if i == 0:
                    ax.set_title(f"{ph} frontier")
                if i == len(VARS) - 1:
                    ax.set_xlabel(f"{C.PHASE_LABEL[ph]} [ms, log]")
        axes[0, 0].legend(loc="lower right", fontsize=8)
        fig.suptitle(
            f"Fig. 7 analogue — architecture along the frontiers, {C.PRESET_LABEL[ps]}, Jetson AGX Orin 64GB",
            fontsize=12,
        )
        fig.tight_layout()
        names.append(C.savefig(fig, ctx, f"fig7_evolution_{ps}.png"))

    def cells(key, fmt="{:.0%}"):
        out = []
        for ps in C.PRESETS:
            out.append(
                "; ".join(
                    f"{ph[:3]} " + "/".join(fmt.format(per[ps][ph][pr][key]) for pr in C.PRECISIONS) for ph in C.PHASES
                )
            )
        return out

    def allof(key, pred):
        return all(pred(per[ps][ph][pr][key]) for ps in C.PRESETS for ph in C.PHASES for pr in C.PRECISIONS)

    moe_ok = allof("moe_share", lambda x: x >= 0.999)

    def experts_verdict() -> str:
        """Each part of 'prefill few, decode max (16), total ≈ 8' checked per preset (FP16 medians)."""
        out = []
        for ps in C.PRESETS:
            m = {ph: per[ps][ph]["fp16"]["median_experts"] for ph in C.PHASES}
            parts = [
                f"prefill < decode {'yes' if m['prefill'] < m['decode'] else 'no'}",
                f"decode = 16 {'yes' if m['decode'] == 16 else 'no'}",
                f"total ≈ 8 {'yes' if 6 <= m['total'] <= 10 else 'no (' + format(m['total'], '.0f') + ')'}",
            ]
            out.append(f"{ps}: " + ", ".join(parts))
        return "; ".join(out)

    r1 = [per[ps][ph][pr]["r_below_1_share"] for ps in C.PRESETS for ph in C.PHASES for pr in C.PRECISIONS]
    r4 = [per[ps][ph][pr]["r_below_4_share"] for ps in C.PRESETS for ph in C.PHASES for pr in C.PRECISIONS]
    rows = [
        [
            "MoE share of frontier points (pre; dec; tot, FP16/INT8)",
            "100 % at batch 1",
            *cells("moe_share"),
            "matches" if moe_ok else "partly: dense points appear at the fast end",
        ],
        [
            "top-1 share",
            "top-K = 1 throughout",
            *cells("top1_share"),
            "matches" if allof("top1_share", lambda x: x >= 0.95) else "mostly",
        ],
        [
            "depth ≤ 20 share",
            "'generally below 20'",
            *cells("depth_le_20_share"),
            "matches" if allof("depth_le_20_share", lambda x: x >= 0.5) else "does not match",
        ],
        [
            f"width at the bound (d = {d_max}) share",
            "width saturates first",
            *cells("width_at_bound_share"),
            "see figure: width rises first, then depth",
        ],
        [
            "median experts (pre; dec; tot, FP16/INT8)",
            "prefill few, decode max (16), total ≈ 8",
            *cells("median_experts", "{:.0f}"),
            experts_verdict(),
        ],
        [
            "share with r < 1",
            "often < 1×; 'substantially smaller than 4×'",
            *cells("r_below_1_share"),
            f"r < 1 on {min(r1):.0%}–{max(r1):.0%} of points, r < 4 on {min(r4):.0%}–{max(r4):.0%} "
            "(the paper gives no share)",
        ],
    ]
    body = (
        "Shares are fractions of frontier points (every point of the staircase counts once), per phase "
        "(pre = prefill, dec = decode, tot = total) and precision (FP16/INT8).\n\n"
        + claims_table(rows)
        + "\nWhy: under every preset ρ = K/E does not enter per-token FLOPs or decode bytes at batch 1, while "
        "Eq. 15's sparsity term rewards small ρ, so the largest E with K = 1 wins whenever memory allows — the "
        "paper's Theorem 5.1 'free lunch'. The `paper` preset never charges prefill for touching experts, so it "
        "keeps E = 16 in prefill too. The `paper-ops` preset (App. D) reads the weights of every expert the 1,024 "
        "prompt tokens are routed to — all E — so its prefill MoE FFN has 2·S·K/(E·b_w) FLOP/byte (64 at E = 16, "
        "K = 1), below the Orin's FP16 ridge of 208: prefill becomes memory-bound on expert weights and its "
        "frontier picks fewer experts (median "
        f"{per['paper-ops']['prefill']['fp16']['median_experts']:.0f}) — the paper's 'prefill favours fewer "
        "experts' — and often top-2 with a smaller r (more FLOPs per weight byte read). The `full` preset reads "
        "the expected number of distinct experts E·(1−(1−K/E)^T), all of them at T = 1024, with the same effect "
        f"(median {per['full']['prefill']['fp16']['median_experts']:.0f}). Decode reads only the K active experts "
        "in every preset, so decode keeps E = 16. Total latency mixes the two (prefill ≈ 0.3× decode under "
        "`paper`, ≈ 0.7–0.8× under `paper-ops` and `full` on the total frontier): E = 8 then makes up "
        f"{per['paper-ops']['total']['fp16']['experts_8_share']:.0%} (`paper-ops`) and "
        f"{per['full']['total']['fp16']['experts_8_share']:.0%} (`full`) of the FP16 total frontier, but the "
        "median stays 16 under all three presets — the paper's 'total ≈ 8' is approached, not reproduced. Depth "
        "and width trade inversely along the frontier (l* ∝ d⁻² at fixed budget, see Theorems).\n\n"
        + "".join(figure(n, f"Fig. 7 analogue, {ps} preset.") for n, ps in zip(names, C.PRESETS, strict=True))
    )
    write_section(ctx.out, "fig7", TITLE, body)
    merge_claims(ctx.out, "fig7", claims)
    return claims
