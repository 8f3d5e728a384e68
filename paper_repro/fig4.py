"""Fig. 4 analogue: fit the paper's law form (depth and width only) and a Chinchilla form to the Gemstones runs.

The paper's 170 training runs are unpublished. Gemstones (McLeish et al. 2025, MIT, bundled with rooflaw) trains
a width × depth grid of dense models; its cooled-down runs at ≈ 11B tokens are the closest public analogue of the
paper's fixed 10B-token budget. The paper's Eq. 14 with r, ρ and d_m fixed (dense, ffn = 4d, MHA) reduces to
L∞ + κ_l/l^α_l + κ_d/d^β, which is fitted there; a data term B/D^β_D extends it to every token count.
"""

from __future__ import annotations

import numpy as np

from . import common as C
from .report import claims_table, figure, merge_claims, write_section

TITLE = "Fig. 4 analogue — law fit quality on public runs (Gemstones)"
PAPER_R2 = {"train": 0.975, "holdout": 0.952, "n_train": 138, "n_holdout": 32}
LAWS = {
    "paper_form_fixed_tokens": ("L_inf + k_l/l**a_l + k_d/d**b_d", ("l", "d")),
    "chinchilla_fixed_tokens": ("E + A/N**alpha", ("N",)),
    "paper_form_plus_data": ("L_inf + k_l/l**a_l + k_d/d**b_d + B/D**beta", ("l", "d", "D")),
    "chinchilla": ("E + A/N**alpha + B/D**beta", ("N", "D")),
}
MAP = {"l": "depth", "d": "width", "N": "params_active_precise", "D": "tokens"}
N_HELD_MODELS = 4


def run(ctx: C.Context) -> dict:
    plt = C.plt()
    allruns = C.rooflaw.fitting.gemstones("cool_end")
    fixed = allruns[allruns["tokens"] == allruns["tokens"].min()].reset_index(drop=True)
    models = sorted(allruns["run_name"].unique())
    held = {str(m) for m in np.random.default_rng(0).choice(models, size=N_HELD_MODELS, replace=False)}
    starts = 48 if ctx.quick else "grid"
    claims: dict = {"paper": PAPER_R2, "held_out_models": sorted(held), "tokens_fixed": float(fixed["tokens"].iloc[0])}
    fits = {}
    for key, (expr, vars_) in LAWS.items():
        df = fixed if "D" not in vars_ else allruns
        mask = df["run_name"].isin(held).to_numpy()
        res = C.rooflaw.fit_law(expr, df, mapping={v: MAP[v] for v in vars_}, loss_column="final_loss",
                                holdout=mask, seed=0, starts=starts)  # fmt: skip
        fits[key] = res
        claims[key] = {"expression": expr, "params": res.params, "r2_train": res.r2, "r2_holdout": res.r2_holdout,
                       "rmse_train": res.rmse, "rmse_holdout": res.rmse_holdout, "n_train": res.n_points,
                       "n_holdout": res.n_holdout, "seconds": res.seconds}  # fmt: skip
    # the paper's own Eq. 15 coefficients on the same runs (dense, r = 4, rho = 1, d_m = d): transfer, not a fit
    law = C.law()
    x = {"l": fixed["depth"].to_numpy(float), "d": fixed["width"].to_numpy(float), "r": np.full(len(fixed), 4.0),
         "rho": np.ones(len(fixed)), "d_m": fixed["width"].to_numpy(float)}  # fmt: skip
    y, yp = fixed["final_loss"].to_numpy(), law.evaluate(x)
    ss = ((y - y.mean()) ** 2).sum()
    claims["paper_eq15_transfer"] = {"r2": float(1 - ((y - yp) ** 2).sum() / ss),
                                     "r2_after_offset": float(1 - ((y - yp - (y - yp).mean()) ** 2).sum() / ss),
                                     "mean_offset": float((y - yp).mean())}  # fmt: skip

    fig, axes = plt.subplots(1, 2, figsize=(13, 5.5))
    for ax, key in zip(axes, ("paper_form_fixed_tokens", "paper_form_plus_data"), strict=True):
        res = fits[key]
        m = res.holdout_mask
        lo, hi = min(res.y.min(), res.y_pred.min()), max(res.y.max(), res.y_pred.max())
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8, label="y = x")
        ax.plot(res.y_pred[~m], res.y[~m], "o", ms=5, label=f"train ({(~m).sum()}): R² = {res.r2:.3f}")
        ax.plot(res.y_pred[m], res.y[m], "s", ms=6, color="tab:red",
                label=f"held-out models ({m.sum()}): R² = {res.r2_holdout:.3f}")  # fmt: skip
        ax.set_xlabel("predicted loss [nats/token]")
        ax.set_ylabel("actual final loss (Gemstones, cooled down) [nats/token]")
        sub = "≈11B tokens, one point per model" if key.endswith("fixed_tokens") else "all token counts (11–110B)"
        ax.set_title(f"{LAWS[key][0]}\n{sub}", fontsize=9)
        ax.text(0.98, 0.03, f"paper (Fig. 4): train R² {PAPER_R2['train']}, held-out {PAPER_R2['holdout']}\n"
                "(138 / 32 configs, its own unpublished runs)", transform=ax.transAxes, ha="right", fontsize=8,
                bbox=dict(boxstyle="round", fc="white", ec="0.7"))  # fmt: skip
        ax.legend(loc="upper left", fontsize=8)
    fig.suptitle("Fig. 4 analogue: the paper's law form (depth + width terms) fitted to Gemstones", fontsize=11)
    fig.tight_layout()
    fname = C.savefig(fig, ctx, "fig4_fit.png")

    def cell(key):
        c = claims[key]
        return f"train {c['r2_train']:.3f} ({c['n_train']}), held-out {c['r2_holdout']:.3f} ({c['n_holdout']})"

    rows = [
        ["paper form, depth + width, fixed ≈ 10B tokens", "train 0.975 (138), held-out 0.952 (32)",
         "—", cell("paper_form_fixed_tokens"), "same form; different data (see text)"],
        ["Chinchilla E + A/N^α, same runs", "—", "—", cell("chinchilla_fixed_tokens"), "baseline"],
        ["paper form + B/D^β, all token counts", "—", "—", cell("paper_form_plus_data"), "extension"],
        ["Chinchilla E + A/N^α + B/D^β, all token counts", "—", "—", cell("chinchilla"), "baseline"],
        ["paper's Eq. 15 coefficients applied to Gemstones (no refit)", "—", "—",
         f"R² {claims['paper_eq15_transfer']['r2']:.2f}; {claims['paper_eq15_transfer']['r2_after_offset']:.2f} "
         f"after a constant offset {claims['paper_eq15_transfer']['mean_offset']:+.2f}", "does not transfer"],
    ]  # fmt: skip
    body = (
        "The loss law does not depend on the cost preset, so only one rooflaw column applies. Held-out: every run "
        f"of {N_HELD_MODELS} whole models (seeded): {', '.join(sorted(held))}. Fits: rooflaw's `fit_law` (log-Huber, "
        f"δ = 10⁻³, {'48 Latin-hypercube' if ctx.quick else 'the grid of'} starts).\n\n"
        + claims_table(rows)
        + "\nWhy the numbers differ from the paper's: the paper fits 11 parameters to 170 of its own MoE/GQA runs "
        "(unpublished; its text says 120/17, its caption 138/32); Gemstones has 20 dense MHA models, so ρ, r and "
        "d_m do not vary and only the depth and width terms can be tested. The depth + width form fits the public "
        "runs about as well as the paper reports for its own, and better than Chinchilla's parameter-count form at "
        "the same token budget — depth and width carry information N alone does not. With few models the held-out "
        "R² is noisy (4 models). The paper's own coefficients do not transfer to another data mix and tokenizer "
        "(absolute losses differ), which is expected of a fixed-budget surrogate with no D term.\n\n"
        + figure(fname, "Predicted vs actual loss, train and held-out models (cf. the paper's Fig. 4).")
    )
    write_section(ctx.out, "fig4", TITLE, body)
    merge_claims(ctx.out, "fig4", claims)
    return claims
