"""Theorems 5.1–5.3, Corollary 1, l* ∝ d⁻² and the §5.5.2 worked example, from rooflaw's closed-form solver."""

from __future__ import annotations

import math

import numpy as np

from . import common as C
from . import kkt_theorems as S
from .report import claims_table, figure, md_table, merge_claims, write_section

TITLE = "Theorems 5.1–5.3, Corollary 1, l* ∝ d⁻², worked example"
#: the paper's stated ρ* examples under memory constraints: d -> (value, where)
PAPER_RHO = {1024: (0.25, "§5.3 '500M model, d ≈ 1024'; §5.5.2 says ≈ 0.20"), 2048: (0.15, "§5.3 '2B model, d ≈ 2048'")}
WIDTHS = (768, 1024, 1536, 2048, 2560, 3072)
LAT = {"prefill": 0.05, "decode": 0.02, "total": 0.1}


def _consts(dev, wl, b: float = 2.0) -> dict[str, float]:
    return {
        "B": wl.batch,
        "S_in": wl.input_tokens,
        "S_out": wl.output_tokens,
        "b_w": b,
        "b_kv": b,
        "pi": dev.peak_flops["fp16"],
        "beta": dev.memory_bandwidth,
    }


def paper_5_3b(eta: float, r: float, gqa: float, delta: float) -> float:
    """The paper's Eq. 117 as printed (for comparison only)."""
    a = 2 + 2 / gqa
    return 6 * eta * r / ((a + 3 * r) - 2 * eta * a + math.sqrt((a + 3 * r) ** 2 + 4 * eta * delta))


def run(ctx: C.Context) -> dict:
    plt = C.plt()
    dev, wl = C.device(), C.WORKLOAD
    cst = _consts(dev, wl)
    claims: dict = {}
    # Theorem 5.1: latency-constrained -> rho* = rho_min (closed form) and on the empirical frontier
    t51 = {}
    for ph, T in LAT.items():
        cf = C.rooflaw.closed_form(C.problem("paper", "fp16", ph, latency_budget=T))
        fr = {ps: C.frontier(ps, "fp16", ph) for ps in C.PRESETS}
        t51[ph] = {
            "latency_budget_s": T,
            "regime": cf.regime,
            "x": cf.x,
            "rho_at_lower_bound": cf.at_bound.get("rho") == "lower",
            "loss": cf.loss,
            "frontier_rho_min_share": {ps: C.share(np.isclose(f["rho"], f["rho"].min())) for ps, f in fr.items()},
        }
    claims["theorem_5_1"] = t51
    # Theorem 5.2 / Corollary 1
    table = S.rho_star_table(WIDTHS)
    k = S.width_sparsity_exponent()
    claims["theorem_5_2"] = {
        "rho_star": table,
        "paper_examples": {d: v for d, (v, _) in PAPER_RHO.items()},
        "k2_e16_rho": 2 / 16,
    }
    claims["corollary_1"] = {"exponent": k, "paper_exponent": -1.19, "doubling_factor": 2 ** (-k), "paper_factor": 2.3}
    # Theorem 5.3 (a) and (b)
    r, gqa, d, M = 1.0, 4.0, 2048.0, 4e9
    etas = np.linspace(0.05, 1.9, 38)
    a_rooflaw = np.array([S.rho_star_prefill_memory_eta(r, gqa, e) for e in etas])
    a_paper = 3 * etas * r / ((2 + 2 / gqa) * (2 - etas) + 6 * r)
    b_cmp = []
    for Tdec in (0.01, 0.02, 0.05):
        rho_r = S.rho_star_dual("decode", r, gqa, d, cst, Tdec, M)
        eta = Tdec * cst["beta"] / cst["S_out"] / M
        delta = 2 * wl.mean_context * cst["b_kv"] / (gqa * d * cst["b_w"])
        rho_p = paper_5_3b(eta, r, gqa, delta)
        b_cmp.append({"decode_budget_s": Tdec, "eta": eta, "delta": delta, "rooflaw": rho_r, "paper_eq117": rho_p})
    rho_a = S.rho_star_dual("prefill", r, gqa, d, cst, 0.05, M)
    claims["theorem_5_3"] = {
        "a_max_abs_diff_vs_paper": float(np.abs(a_rooflaw - a_paper).max()),
        "a_orin_prefill_50ms_4GB": rho_a,
        "b": b_cmp,
        "setting": {"r": r, "gqa": gqa, "d": d, "memory_budget": M},
    }
    # l* ∝ d^-2
    ex = {}
    for con, bud in (("prefill", 0.05), ("decode", 0.02), ("memory", 4e9)):
        ex[con] = S.depth_width_exponent(con, WIDTHS, r, gqa, 0.0625, cst, bud)
    lstar = {
        con: [S.l_star(con, w, r, gqa, 0.0625, cst, bud) for w in WIDTHS]
        for con, bud in (("prefill", 0.05), ("decode", 0.02), ("memory", 4e9))
    }
    claims["depth_width"] = {"exponent": ex, "l_star": {c: dict(zip(WIDTHS, v, strict=True)) for c, v in lstar.items()}}
    # worked example (§5.5.2)
    we = S.worked_example()
    wdev = C.rooflaw.Device(
        id="worked-example",
        name="§5.5.2 device: 10 TOPS, 50 GB/s, 4 GB",
        peak_flops={"fp16": 10e12, "int8": 10e12},
        memory_bandwidth=50e9,
        memory_capacity=4e9,
    )
    wprob = C.rooflaw.Problem(
        law=C.LAW,
        device=wdev,
        space=C.SPACE,
        workload=C.rooflaw.Workload(1, 1024, 1),
        phase="decode",
        latency_budget=0.1,
        preset="paper",
    )
    reg = S.regime(wprob)
    cf1024 = C.rooflaw.closed_form(wprob, fix={"d": 1024})
    claims["worked_example"] = {
        **we,
        "rooflaw_regime": reg["regime"],
        "paper_rule_regime_with_correct_eta": reg["paper_regime"],
        "paper_regime": "memory",
        "rho_star_d1024_thm52": table[1024],
        "paper_rho_d1024": 0.20,
        "closed_form_d1024": cf1024.x,
        "paper_model": {"layers": 20, "d": 1024, "K": 2, "E": 10, "rho": 0.2},
        "E10_in_grid": False,
    }

    # figure
    fig, axes = plt.subplots(1, 3, figsize=(17, 5))
    ax = axes[0]
    dd = np.linspace(768, 3072, 200)
    ax.plot(dd, S.rho_star_memory(dd), label=f"Theorem 5.2 with Table 6 (ρ* ∝ d^{k:.2f})")
    for w, (v, _where) in PAPER_RHO.items():
        ax.plot(w, v, "rv", ms=9)
        ax.annotate(
            f"paper: {v} (d={w})\nEq. 9 gives {table[w]:.3f}",
            (w, v),
            xytext=(8, 14),
            textcoords="offset points",
            fontsize=8,
        )
    ax.plot(1024, 0.20, "mv", ms=8, label="paper §5.5.2: ≈ 0.20 at d = 1024")
    for rho in (1 / 16, 1 / 8, 1 / 4):
        ax.axhline(rho, color="0.7", ls=":", lw=0.8)
    ax.set_xlabel("width d")
    ax.set_ylabel("memory-constrained activation rate ρ* = K/E")
    ax.set_title("Theorem 5.2 / Corollary 1: ρ*(d)")
    ax.legend(fontsize=8)
    ax = axes[1]
    for con, v in lstar.items():
        ax.loglog(WIDTHS, v, "o-", label=f"{con}: slope {ex[con]:.3f}")
    ax.set_xlabel("width d")
    ax.set_ylabel("l* that saturates the constraint [layers]")
    ax.set_title("Table 22: l* ∝ d⁻² (r = 1, gqa = 4, ρ = 1/16; Orin FP16;\nprefill 50 ms, decode 20 ms, memory 4 GB)")
    ax.legend(fontsize=8)
    ax = axes[2]
    ax.plot(etas, a_rooflaw, lw=3, alpha=0.5, label="rooflaw (sympy-derived)")
    ax.plot(etas, a_paper, "k--", label="paper Theorem 5.3(a) as printed")
    ax.set_xlabel("η_p·b_w = F̄_p·b_w/M_budget [FLOPs per token per parameter]")
    ax.set_ylabel("ρ* (prefill + memory binding)")
    ax.set_title("Theorem 5.3(a): r = 1, gqa = 4")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fname = C.savefig(fig, ctx, "theorems.png")

    t = claims["theorem_5_1"]
    rows = [
        [
            "Thm 5.1: latency-bound ⇒ ρ* = ρ_min",
            "ρ* = ρ_min (top-1, max E)",
            "; ".join(
                f"{ph}: ρ* {t[ph]['x']['rho']:.4f} ({'at' if t[ph]['rho_at_lower_bound'] else 'not at'} bound)"
                for ph in LAT
            ),
            "frontier share with ρ = 1/16: "
            + ", ".join(f"{ph} {t[ph]['frontier_rho_min_share']['full']:.0%}" for ph in LAT),
            "holds in the closed form; on the discrete frontiers see Fig. 7 (paper preset: "
            + ", ".join(f"{ph} {t[ph]['frontier_rho_min_share']['paper']:.0%}" for ph in LAT)
            + " at ρ = 1/16)",
        ],
        [
            "Cor. 1: ρ* ∝ d^k",
            "k = −1.19; doubling d cuts ρ* 2.3×",
            f"k = {k:.4f}; {2 ** (-k):.3f}×",
            "(law only)",
            "matches",
        ],
        [
            "Thm 5.2: ρ*(1024)",
            "0.25 (§5.3), ≈ 0.20 (§5.5.2)",
            f"{table[1024]:.3f}",
            "(law only)",
            "does not match the paper's own constants",
        ],
        [
            "Thm 5.2: ρ*(2048)",
            "≈ 0.15, 'e.g. K=2, E=16'",
            f"{table[2048]:.3f} (K=2, E=16 is 0.125)",
            "(law only)",
            "close; the example is not 0.15",
        ],
        [
            "Thm 5.3(a) formula",
            "3η_p b_w r/(α(2−η_p b_w)+6r)",
            f"max |Δ| = {claims['theorem_5_3']['a_max_abs_diff_vs_paper']:.1e} over η_p b_w ∈ [0.05, 1.9]",
            "—",
            "matches; η_p·b_w is FLOPs per token per parameter, the unit of ξ_F/ξ_W^all, so '< 2' (2 FLOPs per "
            "weight) is consistent",
        ],
        [
            "Thm 5.3(b) (Eq. 117), decode 20 ms, 4 GB, d 2048",
            f"{b_cmp[1]['paper_eq117']:.4f} (evaluated)",
            f"{b_cmp[1]['rooflaw']:.4f}",
            "—",
            "does not match: the exact condition is linear in ξ_W^all",
        ],
        [
            "l* ∝ d⁻² (Table 22)",
            "−2",
            ", ".join(f"{c} {v:.3f}" for c, v in ex.items()),
            "—",
            "holds; decode slightly above −2 (KV term ∝ d)",
        ],
        [
            "worked example: M̄_d = T·β/S_out",
            "0.5 GB, η = 0.125",
            f"{we['M_d_bar'] / 1e9:.3g} GB, η = {we['eta']:.3g}",
            "—",
            "paper's arithmetic is off by 10×",
        ],
        [
            "worked example: regime",
            "memory-constrained (η ≪ 1)",
            f"KKT: {reg['regime']}; paper's own rule with the correct η: {reg['paper_regime']}",
            "—",
            "conclusion holds, for another reason",
        ],
        [
            "worked example: ρ* at d = 1024",
            "≈ 0.20 → K=2, E=10",
            f"Thm 5.2: {table[1024]:.3f}; closed form with d fixed "
            f"(r at its bound): {cf1024.x['rho']:.3f}, l* = {cf1024.x['l']:.1f}",
            "—",
            "does not match; E=10 is not in Table 5",
        ],
    ]
    body = (
        "Computed with rooflaw's closed-form solver (`rooflaw.closed_form`, `rho_star_table`, "
        "`width_sparsity_exponent`, `rho_star_dual`, `depth_width_exponent`, `worked_example`, `regime`), which "
        "derives the KKT conditions with sympy from the `paper` preset's expressions instead of typing the "
        "paper's results. The theory is the paper preset only (prefill compute-bound, decode memory-bound), so "
        "the `full` column is filled where an empirical check on the full-preset frontier exists. Orin FP16 "
        f"(π = {cst['pi'] / 1e12:.4g} TFLOP/s, β = {cst['beta'] / 1e9:.4g} GB/s), S̄ = {wl.mean_context}.\n\n"
        + claims_table(rows)
        + "\n**ρ\\* examples.** Eq. 9 with Table 6 gives ρ\\*(d) = "
        + ", ".join(f"{d}: {v:.3f}" for d, v in table.items())
        + ". The paper's 0.25 and 0.20 at d = 1024 do not follow from its constants; 0.15 at d = 2048 is close to "
        "0.173, but its illustration K=2, E=16 is ρ = 0.125.\n\n"
        "**Theorem 5.3(b).** With l eliminated by the decode constraint, memory = budget gives "
        "ξ_W^all = (ξ_W^dec + δ)/η, i.e. ρ\\* = 3ηr/(α_attn + 3r + δ − ηα_attn) — linear, because δ = "
        "2S̄b_kv/(gqa·d·b_w) does not depend on ξ. The paper's quadratic ηx² − (α+3r)x − δ = 0 treats the KV term "
        "as if it scaled with 1/ξ. Both agree as δ → 0; at the Orin setting:\n\n"
        + md_table(
            ("decode budget", "η", "δ", "rooflaw ρ*", "paper Eq. 117"),
            [
                [
                    C.fmt_ms(b["decode_budget_s"]),
                    f"{b['eta']:.3f}",
                    f"{b['delta']:.3f}",
                    f"{b['rooflaw']:.4f}",
                    f"{b['paper_eq117']:.4f}",
                ]
                for b in b_cmp
            ],
        )
        + "\n**Worked example (§5.5.2).** 10 TOPS, 50 GB/s, 4 GB, decode < 100 ms for one token: §5.1's definition "
        f"gives M̄_d = 0.1 × 50 GB/s / 1 = {we['M_d_bar'] / 1e9:.0f} GB and η = {we['eta']:.2f}, not 0.5 GB and "
        "0.125 (the '/10' matches neither S_out nor the 10 TOPS). With η = 1.25 the paper's own rule would say "
        f"'dual'; rooflaw's KKT multipliers say **{reg['regime']}** (the latency budget allows 5 GB of weight "
        "reads, the device holds 4 GB), so the paper's conclusion survives its arithmetic. Note the paper's "
        "rule reads η ≪ 1 as memory-bound, but a small η = M̄_d/M means a *tight latency* budget — the rule points "
        "the wrong way. Its 20-layer, d = 1024, K = 2, E = 10 model has ρ = 0.2 (Eq. 9: 0.395) and E = 10 is "
        "outside Table 5.\n\n"
        + figure(fname, "ρ*(d) vs the paper's examples; l*(d) slopes; Theorem 5.3(a) derived vs printed.")
    )
    write_section(ctx.out, "theorems", TITLE, body)
    merge_claims(ctx.out, "theorems", claims)
    return claims
