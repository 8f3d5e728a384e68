"""Fig. 8: Qwen2.5-0.5B against the best frontier architecture at equal latency on the Orin."""

from __future__ import annotations

import math

import numpy as np

from . import common as C
from .report import claims_table, figure, md_table, merge_claims, write_section
from .table2 import best, pick_dict

TITLE = "Fig. 8 — Qwen2.5-0.5B vs the co-designed frontier"
PAPER_PPL = {"co-designed": 50.88, "qwen2.5-0.5b": 63.14, "gap": (63.14 - 50.88) / 63.14}


def arch_loss(cols) -> float:
    return float(C.law().evaluate(C.rooflaw.law_inputs(cols))[0])


def run(ctx: C.Context) -> dict:
    plt = C.plt()
    dev = C.device()
    q = C.rooflaw.from_hf_config("qwen2.5-0.5b")
    qcols = {k: np.array([v]) for k, v in q.columns().items()}
    q_loss = arch_loss(qcols)
    pc = C.rooflaw.param_counts(q.columns())
    q_small_vocab = q.replace(vocab=32000, tied=False)
    claims: dict = {
        "qwen": {
            "config": q.to_dict(), "r": q.r, "gqa": q.gqa, "params_total": q.params_total,
            "embedding_params": float(pc["embed"] + pc["lm_head"]),
            "predicted_loss": q_loss, "predicted_perplexity": math.exp(q_loss),
        },
        "paper": PAPER_PPL,
    }  # fmt: skip
    rows, picks = [], {}
    for ps in C.PRESETS:
        rep = C.rooflaw.evaluate(q, dev, C.WORKLOAD, "fp16", ps)
        rep32 = C.rooflaw.evaluate(q_small_vocab, dev, C.WORKLOAD, "fp16", ps)
        lat = {"prefill_s": rep.prefill_s, "decode_s": rep.decode_s, "total_s": rep.total_s}
        claims["qwen"][ps] = {**lat, "memory_bytes": rep.memory_bytes,
                              "total_s_with_32k_untied_vocab": rep32.total_s,
                              "decode_s_with_32k_untied_vocab": rep32.decode_s}  # fmt: skip
        fr = C.frontier(ps, "fp16", "total")
        p = pick_dict(best(fr, rep.total_s))
        picks[ps] = p
        out = {"pick": p}
        if p is not None:
            out["loss_gap"] = q_loss - p["loss"]
            out["perplexity_gap"] = 1 - math.exp(p["loss"]) / math.exp(q_loss)
            # the same pick with Qwen's 151,936-token tied vocabulary (the paper space uses 32,000 untied)
            a = C.rooflaw.Architecture(
                layers=p["layers"], d_model=p["d_model"], heads=p["heads"], kv_heads=p["kv_heads"], ffn=p["ffn"],
                experts=p["experts"], top_k=p["top_k"], vocab=q.vocab, tied=True,
            )  # fmt: skip
            rq = C.rooflaw.evaluate(a, dev, C.WORKLOAD, "fp16", ps)
            out["pick_total_s_with_qwen_vocab"] = rq.total_s
            # best point of the space re-costed with Qwen's vocabulary, at Qwen's latency
            prob = C.problem(ps, "fp16", "total", latency_budget=rep.total_s)
            frame = prob.space.to_frame()
            frame["vocab"], frame["tied"] = q.vocab, 1
            ev = prob.evaluate(frame)
            ev = ev[ev["feasible"]]
            if len(ev):
                b = ev.loc[ev["loss"].idxmin()]
                out["pick_with_qwen_vocab"] = pick_dict(b)
                out["perplexity_gap_with_qwen_vocab"] = 1 - math.exp(float(b["loss"])) / math.exp(q_loss)
        claims[ps] = out

    def cell(ps, what):
        o, qq = claims[ps], claims["qwen"][ps]
        if what == "lat":
            return (f"prefill {C.fmt_ms(qq['prefill_s'])}, decode {C.fmt_ms(qq['decode_s'])}, "
                    f"total {C.fmt_ms(qq['total_s'])}")  # fmt: skip
        if o.get("pick") is None:
            return "none"
        p = o["pick"]
        if what == "pick":
            return f"{C.arch_label(p)}; loss {p['loss']:.3f}; {C.fmt_ms(p['latency_s'])}"
        if what == "gap":
            return f"{o['perplexity_gap']:.1%} lower ppl (Δloss {o['loss_gap']:.3f})"
        if what == "vocab":
            pv = o.get("pick_with_qwen_vocab")
            return (f"{C.arch_label(pv)}; loss {pv['loss']:.3f}; {o['perplexity_gap_with_qwen_vocab']:.1%} lower ppl"
                    if pv else "none")  # fmt: skip
        if what == "v32":
            return (f"total {C.fmt_ms(claims['qwen'][ps]['total_s_with_32k_untied_vocab'])} "
                    f"(vs {C.fmt_ms(qq['total_s'])})")  # fmt: skip
        return ""

    gap_full = claims["full"].get("perplexity_gap")
    rows = [
        ["Qwen2.5-0.5B latency on Orin (FP16)", "not given", *(cell(ps, "lat") for ps in C.PRESETS),
         "no paper number"],
        ["Qwen2.5-0.5B predicted loss (Eq. 15)", "not given (retrained, WikiText-2 ppl 63.14)",
         *(f"{q_loss:.3f} (ppl {math.exp(q_loss):.1f})" for _ in C.PRESETS),
         "the law has no vocabulary/embedding term: same under every preset"],
        ["best frontier architecture at Qwen's total latency", "co-designed model (config not given)",
         *(cell(ps, "pick") for ps in C.PRESETS), "config not comparable"],
        ["perplexity gap vs Qwen2.5-0.5B", f"{PAPER_PPL['gap']:.2%} lower (50.88 vs 63.14)",
         *(cell(ps, "gap") for ps in C.PRESETS),
         "same direction" if gap_full is not None and gap_full > 0 else "does not match"],
        ["same, space re-costed with Qwen's 151,936-token tied vocabulary", "—",
         *(cell(ps, "vocab") for ps in C.PRESETS), "LM head/embedding cost only in `full`"],
        ["Qwen2.5-0.5B with a 32,000-token untied vocabulary", "—", *(cell(ps, "v32") for ps in C.PRESETS),
         "what the embedding/LM head costs"],
    ]  # fmt: skip
    emb = claims["qwen"]["embedding_params"]
    body = (
        'Qwen2.5-0.5B from its real config (`from_hf_config("qwen2.5-0.5b")`: 24 layers, d 896, 14/2 heads, '
        f"ffn 4864, vocab 151,936 tied, {q.params_total / 1e6:.0f}M parameters of which {emb / 1e6:.0f}M are the "
        "embedding) evaluated on the Orin in FP16 at B=1, S_in=1024, S_out=16; then the lowest-loss point of the "
        "total-latency frontier with latency ≤ Qwen's.\n\n"
        + claims_table(rows)
        + "\nWhat cannot be reproduced: the paper's 19.42 % is a WikiText-2 perplexity gap between two models "
        "*retrained* on its unpublished 10B-token mixture, and it does not publish the co-designed configuration, "
        "its latency or Qwen's measured latency. Here both losses come from Eq. 15, whose exp() is a perplexity on "
        "the paper's validation mix, not WikiText-2. Eq. 15 has no vocabulary or embedding term, so the 136M "
        "embedding parameters neither help nor hurt Qwen's predicted loss; Qwen's r = 5.43 is also above the "
        "ratios the paper reports on its frontier. What the embedding/LM head changes: the `paper` and `paper-ops` "
        "presets ignore them (neither App. D nor App. E has them), so Qwen looks cheaper than it is; the "
        "`full` preset reads the 151,936 × 896 LM head on every decode step, a large share of Qwen's decode "
        "traffic, so Qwen's latency grows and the equal-latency budget for the frontier grows with it. Giving "
        "the frontier models Qwen's vocabulary (same tokenizer, fair) costs them that LM head too and shrinks "
        "the gap.\n\n"
        + md_table(
            ("preset", "Qwen prefill", "Qwen decode", "Qwen total", "Qwen memory"),
            [
                [
                    ps,
                    C.fmt_ms(claims["qwen"][ps]["prefill_s"]),
                    C.fmt_ms(claims["qwen"][ps]["decode_s"]),
                    C.fmt_ms(claims["qwen"][ps]["total_s"]),
                    f"{claims['qwen'][ps]['memory_bytes'] / 1e9:.2f} GB",
                ]
                for ps in C.PRESETS
            ],
        )  # fmt: skip
    )
    fig, axes = plt.subplots(1, len(C.PRESETS), figsize=(7 * len(C.PRESETS), 5.5))
    for ax, ps in zip(axes, C.PRESETS, strict=True):
        fr = C.frontier(ps, "fp16", "total")
        ax.step(fr["latency_s"] * 1e3, fr["loss"], where="post", color="tab:blue", label="FP16 total-latency frontier")
        qq = claims["qwen"][ps]
        ax.plot(qq["total_s"] * 1e3, q_loss, "X", ms=12, color="tab:red", mec="k",
                label=f"Qwen2.5-0.5B: {C.fmt_ms(qq['total_s'])}, loss {q_loss:.3f}")  # fmt: skip
        p = picks[ps]
        if p is not None:
            ax.plot(p["latency_s"] * 1e3, p["loss"], "*", ms=15, color="tab:green", mec="k",
                    label=f"best at equal latency: {C.arch_label(p)}\nloss {p['loss']:.3f}, "
                          f"ppl {claims[ps]['perplexity_gap']:.1%} lower (paper: 19.42%)")  # fmt: skip
            ax.annotate("", xy=(qq["total_s"] * 1e3, p["loss"]), xytext=(qq["total_s"] * 1e3, q_loss),
                        arrowprops=dict(arrowstyle="->", color="0.3"))  # fmt: skip
        ax.axvline(qq["total_s"] * 1e3, color="tab:red", ls=":", lw=1)
        ax.set_xscale("log")
        ax.set_xlabel("total latency [ms, log]")
        ax.set_ylabel("predicted loss (Eq. 15) [nats/token]")
        ax.set_title(f"Fig. 8(a) analogue — {C.PRESET_LABEL[ps]}")
        ax.legend(fontsize=7.5, loc="upper right")
    fig.tight_layout()
    body += "\n" + figure(C.savefig(fig, ctx, "fig8_qwen.png"), "Fig. 8(a) analogue: Qwen2.5-0.5B on the frontier.")
    write_section(ctx.out, "qwen", TITLE, body)
    merge_claims(ctx.out, "qwen", claims)
    return claims
