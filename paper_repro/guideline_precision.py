"""Seed guideline 4 (design for NVFP4): NVFP4 vs FP8 vs BF16 at equal predicted loss, with a precision-aware law.

The seed post says to design for NVFP4 (4.5 bits per weight with its scales) because GB300 runs FP4 at 3× its FP8
and 6× its BF16 tensor rate, and NVFP4 stays within about a point of FP8 on benchmarks. rooflaw asks the question
the other way round: if a model is trained for a precision (Kumar et al. 2024's effective parameters), how many
more parameters does the lower precision need for the same predicted loss, and how much decode latency does it
still win once that is paid for?
"""

from __future__ import annotations

import math

import numpy as np

from . import common as C
from .report import md_table, merge_claims, write_section

TITLE = "Seed guideline 4 — NVFP4 vs FP8 vs BF16 at equal predicted loss"
DEVICE = "gb300"
LAW = "chinchilla-precision"
TOKENS = 1e11
#: precision label -> format text: NVFP4 weights and activations with an FP8 KV cache, as NVFP4 deployments run.
PRECISIONS = {"bf16": "bf16", "fp8": "fp8", "nvfp4": "w=nvfp4,a=nvfp4,kv=fp8"}
COLORS = {"bf16": "tab:blue", "fp8": "tab:orange", "nvfp4": "tab:green"}


def _factor(bits: dict[str, float], gammas: dict[str, float]) -> float:
    """Kumar et al.'s effective-parameter factor Π(1 − e^(−P_x/γ_x)) for one precision."""
    return math.prod(1 - math.exp(-bits[v] / gammas[g]) for v, g in (("P_w", "gamma_w"), ("P_a", "gamma_a"),
                                                                       ("P_kv", "gamma_kv")))  # fmt: skip


def _staircase(df, losses: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each target loss: the lowest decode latency reaching it and that point's total parameters."""
    lat, par = np.full(len(losses), np.nan), np.full(len(losses), np.nan)
    for i, t in enumerate(losses):
        ok = df[df["loss"] <= t]
        if len(ok):
            j = ok["latency_s"].idxmin()
            lat[i], par[i] = ok.at[j, "latency_s"], ok.at[j, "params_total"]
    return lat, par


def run(ctx: C.Context) -> dict:
    rl = C.rooflaw
    plt = C.plt()
    law = rl.get_law(LAW)
    bits = {k: rl.precision_bits(v) for k, v in PRECISIONS.items()}
    f = {k: _factor(b, law.params) for k, b in bits.items()}
    prob = rl.Problem(law=LAW, device=DEVICE, space=C.SPACE, workload=C.WORKLOAD, tokens=TOKENS, phase="decode")
    fronts = {k: rl.joint_frontier(prob, rl.JointSpace((v,)), n_jobs=1).frontier for k, v in PRECISIONS.items()}
    joint = rl.joint_frontier(prob, rl.JointSpace(tuple(PRECISIONS.values())), n_jobs=1).frontier
    names = {rl.Precision.parse(v).name: k for k, v in PRECISIONS.items()}
    joint["label"] = joint["precision"].map(names)

    lo = max(df["loss"].min() for df in fronts.values())
    hi = min(df["loss"].max() for df in fronts.values())
    losses = np.linspace(lo, hi, 60)
    stair = {k: _staircase(df, losses) for k, df in fronts.items()}
    claims: dict = {"device": DEVICE, "law": LAW, "tokens": TOKENS, "space": C.SPACE, "workload": C.WORKLOAD.to_dict(),
                    "precisions": PRECISIONS, "loss_range": [float(lo), float(hi)]}  # fmt: skip
    for k in PRECISIONS:
        lat_ratio = stair["bf16"][0] / stair[k][0]
        par_ratio = stair[k][1] / stair["bf16"][1]
        claims[k] = {
            "bits": bits[k], "effective_factor": f[k],
            "params_for_equal_loss_vs_bf16": f["bf16"] / f[k],  # equal loss <=> equal N_eff
            "weight_bytes_for_equal_loss_vs_bf16": f["bf16"] / f[k] * bits[k]["P_w"] / 16.0,
            "decode_speedup_vs_bf16_median": float(np.nanmedian(lat_ratio)),
            "decode_speedup_vs_bf16_range": [float(np.nanmin(lat_ratio)), float(np.nanmax(lat_ratio))],
            "frontier_params_vs_bf16_median": float(np.nanmedian(par_ratio)),
            "joint_frontier_share": float((joint["label"] == k).mean()),
            "frontier_points": len(fronts[k]),
        }  # fmt: skip

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.8))
    for k in PRECISIONS:
        df = fronts[k]
        ax1.step(df["latency_s"] * 1e3, df["loss"], where="post", color=COLORS[k], label=f"{k} ({len(df)} points)")
        sub = joint[joint["label"] == k]
        ax2.plot(sub["latency_s"] * 1e3, sub["loss"], "o", ms=3.5, color=COLORS[k],
                 label=f"{k}: {claims[k]['joint_frontier_share']:.0%} of the joint frontier")  # fmt: skip
    for ax, title in ((ax1, "frontier per precision"), (ax2, "one joint frontier over precision × architecture")):
        ax.set_xscale("log")
        ax.set_xlabel("decode latency, 16 tokens, batch 1 [ms, log]")
        ax.set_ylabel(f"predicted loss ({LAW}, D = 100B) [nats/token]")
        ax.set_title(f"{title} — {DEVICE}", fontsize=9)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fname = C.savefig(fig, ctx, "guideline4_precision.png")

    rows = []
    for k in PRECISIONS:
        c = claims[k]
        lo_s, hi_s = c["decode_speedup_vs_bf16_range"]
        rows.append([k, f"{bits[k]['P_w']:g} / {bits[k]['P_a']:g} / {bits[k]['P_kv']:g}", f"{f[k]:.4f}",
                     f"{c['params_for_equal_loss_vs_bf16']:.3f}×", f"{c['weight_bytes_for_equal_loss_vs_bf16']:.3f}×",
                     f"{c['decode_speedup_vs_bf16_median']:.2f}× ({lo_s:.2f}–{hi_s:.2f})",
                     f"{c['frontier_params_vs_bf16_median']:.2f}×", f"{c['joint_frontier_share']:.0%}"])  # fmt: skip
    head = ("precision", "bits w / a / kv", "N_eff / N", "params for equal loss (vs bf16)",
            "weight bytes for equal loss", "decode speed-up at equal loss, median (range)",
            "params of the fastest equal-loss point (median)", "share of the joint frontier")  # fmt: skip
    n4 = claims["nvfp4"]
    body = (
        f"Assumptions: law `{LAW}` — Chinchilla (Hoffmann approach 3) with N replaced by Kumar et al.'s effective "
        "parameters N·Π(1 − e^(−P_x/γ_x)) over weight, activation and KV-cache bits (scales included: NVFP4 = 4 + 8/16 "
        "= 4.5 bits); this holds for models *trained* (or quantisation-aware trained) in that precision, as in that "
        "paper's fits (integer fake quantisation, 30M–220M parameters, 3–16 bits), so NVFP4's floating-point grid is "
        "an extrapolation of form; γ_w, γ_a, γ_kv are as cited in the law's source (not re-checked against the "
        f"paper's table here). D = {TOKENS:.0e} training tokens. Device `{DEVICE}` "
        f"({C.device_summary(C.device(DEVICE))}); space `{C.SPACE}`, batch 1, S_in 1024, S_out 16, decode latency of "
        "all 16 tokens, `full` cost model with the device's engine profile; NVFP4 runs weights and activations in "
        "NVFP4 on the FP4 roof with an FP8 KV cache.\n\n"
        + md_table(head, rows)
        + "\nEqual predicted loss means equal N_eff: an NVFP4-trained model needs "
        f"{n4['params_for_equal_loss_vs_bf16']:.2f}× "
        f"the parameters of a BF16 one (FP8: {claims['fp8']['params_for_equal_loss_vs_bf16']:.3f}×), yet its weights "
        f"take {n4['weight_bytes_for_equal_loss_vs_bf16']:.2f}× the bytes, so decode — which reads the weights every "
        f"step — is {_speed(n4['decode_speedup_vs_bf16_median'])} than BF16 at equal loss (median over "
        f"{len(losses)} loss targets {lo:.3f}–{hi:.3f}), and NVFP4 points make up "
        f"{n4['joint_frontier_share']:.0%} of the joint loss–latency frontier. The fastest NVFP4 architecture for a "
        f"given loss has {n4['frontier_params_vs_bf16_median']:.2f}× the parameters of the BF16 one (median): the "
        "solver spends the saved bytes on parameters, as guideline 4 suggests — the precision is no longer free, "
        "the law charges for it.\n\n" + f"![Guideline 4 frontiers]({fname})\n\n*Decode-latency frontiers per "
        "precision (left) and the joint frontier over precision × architecture (right), precision-aware law.*\n"
    )
    write_section(ctx.out, "guideline_precision", TITLE, body)
    merge_claims(ctx.out, "guideline_precision", claims)
    return claims


def _speed(ratio: float) -> str:
    """``1.31× faster`` / ``0.87× as fast (slower: …)``: the median decode speed-up in words, whichever way it goes."""
    if ratio >= 1.0:
        return f"still {ratio:.2f}× faster"
    return (f"only {ratio:.2f}× as fast (slower: on this device these small architectures' decode is bound by the "
            "per-kernel latency of the kernel curves, not by the weight bytes the lower precision saves)")  # fmt: skip
