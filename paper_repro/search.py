"""The paper's search procedure (§4.3.1: Latin hypercube + adaptive refinement) against rooflaw's exact frontier,
its speed claim ("50,000+ configurations in approximately 20 minutes"), and where the `paper` space departs from
Table 5 -- with the paper's undivided GQA grid as an option (:func:`table5_grid`).
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from . import common as C
from .report import claims_table, figure, md_table, merge_claims, write_section

TITLE = "Search — the paper's LHS + adaptive refinement, its speed, and the Table 5 grid"
PRESET, PHASE = "paper-ops", "total"  # the paper's frontier model and its headline phase
KEY = ("layers", "d_model", "heads", "kv_heads", "ffn", "experts", "top_k")
PAPER_RATE = 50_000 / (20 * 60)  # "50,000+ configurations in approximately 20 minutes"
CHECKPOINTS = (50, 100, 200, 300, 500, 750, 1000, 1500, 2000)
TABLE5 = {"layers": list(range(4, 33, 4)), "d_model": [768, 1024, 1280, 1536, 1792, 2048, 2304, 2560, 3072],
          "moe": [(1, 1), (8, 1), (8, 2), (16, 1), (16, 2)], "kv_heads": [1, 2, 4, 8, "heads"]}  # fmt: skip


def table5_grid(divisible: bool = False, head_dim: int = 128, r_single=(0.5, 1, 2, 3, 4), vocab: int = 32000):
    """The paper's Table 5 grid as a candidate table (DataFrame of architecture columns).

    ``divisible=False`` keeps every n_kv of {1, 2, 4, 8, n_h} up to n_h, also where n_kv does not divide n_h
    (the paper lists the values without a divisibility rule). A rooflaw :class:`~rooflaw.Architecture` (and
    :class:`~rooflaw.Space`) requires kv_heads | heads, because GQA groups query heads evenly; the cost model
    and the law only use n_kv·d_h (= d_m) and gqa = n_h/n_kv as numbers, so these rows are evaluated as a table
    (``Problem.evaluate``), never built as architectures. n_kv > n_h (8 at d = 768, n_h = 6) is dropped: more KV
    than query heads is not GQA. ``divisible=True`` reproduces the `paper` space (6,800 points).
    """
    rows = []
    for d in TABLE5["d_model"]:
        heads = d // head_dim
        kvs = sorted({heads if k == "heads" else k for k in TABLE5["kv_heads"]})
        kvs = [k for k in kvs if k <= heads and (not divisible or heads % k == 0)]
        ffns = sorted({max(128, int(round(rs * d / 128)) * 128) for rs in r_single})
        for kv in kvs:
            for ffn in ffns:
                for e, k in TABLE5["moe"]:
                    for lay in TABLE5["layers"]:
                        rows.append((lay, d, heads, kv, head_dim, ffn, e, k))
    df = pd.DataFrame(rows, columns=["layers", "d_model", "heads", "kv_heads", "head_dim", "ffn", "experts", "top_k"])
    df["vocab"], df["tied"], df["gated"] = vocab, 0, 1
    return df


def _front(df: pd.DataFrame) -> pd.DataFrame:
    ok = df[df["feasible"]]
    m = C.rooflaw.pareto_mask(ok[["loss", "latency_s"]].to_numpy(float))
    return ok[m]


def _hv(front: pd.DataFrame, ref: np.ndarray) -> float:
    pts = np.column_stack([front["loss"].to_numpy(float), np.log10(front["latency_s"].to_numpy(float))])
    return C.rooflaw.hypervolume(pts, ref)


def _keys(df: pd.DataFrame) -> set:
    return set(map(tuple, df[list(KEY)].astype(int).to_numpy()))


def curve(order: pd.DataFrame, true_keys: set, ref: np.ndarray, hv_true: float) -> list[dict]:
    """Share of the exact frontier found and hypervolume ratio after the first n evaluations of ``order``."""
    out = []
    for n in [c for c in CHECKPOINTS if c < len(order)] + [len(order)]:
        f = _front(order.iloc[:n])
        out.append({"evaluations": n, "share": len(_keys(f) & true_keys) / len(true_keys),
                    "hv_ratio": _hv(f, ref) / hv_true})  # fmt: skip
    return out


def run(ctx: C.Context) -> dict:
    plt = C.plt()
    prob = C.problem(PRESET, "fp16", PHASE)
    claims: dict = {"preset": PRESET, "phase": PHASE, "space": C.SPACE, "space_size": prob.space.size}
    # ---- speed, one run: exhaustive frontier of the 6,800 points, 50,000 configurations, the adaptive search
    t = time.perf_counter()
    exact = C.rooflaw.frontier(prob, objectives=("loss", "latency"))
    t_exact = time.perf_counter() - t
    wide = C.rooflaw.get_space("wide")
    cols = wide.columns_at(np.arange(50_000), np.float64)
    t = time.perf_counter()
    prob.evaluate(cols)
    t_50k = time.perf_counter() - t
    everything = prob.evaluate(prob.space.columns_at(np.arange(prob.space.size), np.float64))
    true = everything[everything["feasible"]]
    true_front = _front(true)
    true_keys = _keys(true_front)
    assert true_keys == _keys(exact.frontier), "exhaustive frontier and full evaluation disagree"
    ref = np.array([true["loss"].max(), np.log10(true["latency_s"].max())]) * 1.001
    hv_true = _hv(true_front, ref)
    seeds = (0,) if ctx.quick else (0, 1, 2)
    budget = 1000 if ctx.quick else 2000
    runs, t_ad, n_ad = [], 0.0, 0
    for s in seeds:
        res = C.rooflaw.adaptive_search(prob, budget=budget, seed=s)
        t_ad += res.seconds
        n_ad += res.evaluations
        c = curve(res.evaluated, true_keys, ref, hv_true)
        runs.append({"seed": s, "evaluations": res.evaluations, "stopped": res.stopped, "rounds": len(res.history),
                     "seconds": res.seconds, "curve": c, "final_share": c[-1]["share"],
                     "final_hv_ratio": c[-1]["hv_ratio"]})  # fmt: skip
    # baselines at the same evaluation counts: uniform random order; a Latin hypercube alone
    rnd = everything.iloc[np.random.default_rng(0).permutation(len(everything))[:budget]]
    random_curve = curve(rnd, true_keys, ref, hv_true)
    claims.update(
        exact={"frontier_points": len(true_front), "seconds": t_exact, "evaluations": prob.space.size,
               "rate_per_s": prob.space.size / t_exact},
        evaluate_50k={"seconds": t_50k, "rate_per_s": 50_000 / t_50k, "space": "wide (first 50,000 points)"},
        adaptive={"runs": runs, "rate_per_s": n_ad / t_ad, "budget": budget},
        random=random_curve,
        paper={"configurations": 50_000, "seconds": 1200, "rate_per_s": PAPER_RATE},
        hypervolume={"objectives": ["loss", "log10 latency_s"], "reference": ref.tolist(), "exact": hv_true},
    )  # fmt: skip
    # ---- Table 5 vs the `paper` space; the undivided GQA grid
    g_div, g_all = table5_grid(True), table5_grid(False)
    ev = prob.evaluate(g_all)
    f_all = _front(ev)
    uneven = f_all[(f_all["heads"] % f_all["kv_heads"]) != 0]
    added = g_all[(g_all["heads"] % g_all["kv_heads"]) != 0]
    claims["table5"] = {
        "paper_space_points": prob.space.size, "divisible_grid_points": len(g_div), "undivided_grid_points": len(g_all),
        "added_points": len(added),
        "added_by_kv": {int(k): sorted(int(x) for x in v["d_model"].unique()) for k, v in added.groupby("kv_heads")},
        "frontier_points_undivided": len(f_all), "frontier_points_uneven_kv": len(uneven),
        "hv_ratio_undivided_over_paper": _hv(f_all, ref) / hv_true,
        "min_loss_paper": float(true_front["loss"].min()), "min_loss_undivided": float(f_all["loss"].min()),
    }  # fmt: skip

    # ---- figure
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.8))
    for ax, key, label in ((axes[0], "share", "share of the exact frontier found"),
                           (axes[1], "hv_ratio", "hypervolume ratio (loss × log latency)")):  # fmt: skip
        for r in runs:
            lab = "LHS + adaptive refinement" if r is runs[0] else None
            ax.plot([c["evaluations"] for c in r["curve"]], [c[key] for c in r["curve"]], "o-", ms=3,
                    color="tab:blue", alpha=0.8, label=lab)  # fmt: skip
        ax.plot([c["evaluations"] for c in random_curve], [c[key] for c in random_curve], "s--", ms=3,
                color="0.5", label="uniform random sample")  # fmt: skip
        ax.axvline(prob.space.size, color="k", ls=":", lw=1)
        ax.text(prob.space.size, 0.02 if key == "share" else 0.76, " exhaustive: 6,800", fontsize=8)
        ax.set_xscale("log")
        ax.set_xlabel("evaluations")
        ax.set_ylabel(label)
        ax.set_ylim(*((0, 1.05) if key == "share" else (0.75, 1.01)))
        ax.legend(fontsize=8, loc="upper left")
        ax.set_title(f"{label}; {PRESET} preset, {PHASE} latency, FP16")
    ax = axes[2]
    tf = true_front.sort_values("latency_s")
    fa = f_all.sort_values("latency_s")
    ax.step(tf["latency_s"] * 1e3, tf["loss"], where="post", label=f"`paper` space ({prob.space.size:,} pts)")
    ax.step(fa["latency_s"] * 1e3, fa["loss"], where="post", ls="--", label=f"Table 5 undivided GQA ({len(g_all):,})")
    ax.plot(uneven["latency_s"] * 1e3, uneven["loss"], "rx", label="frontier points with n_kv ∤ n_h")
    ax.set_xscale("log")
    ax.set_xlabel("total latency [ms, log]")
    ax.set_ylabel("predicted loss (Eq. 15)")
    ax.set_title("the paper's undivided GQA grid vs the `paper` space")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fname = C.savefig(fig, ctx, "search_adaptive.png")

    def at(curve_, n):
        c = [x for x in curve_ if x["evaluations"] <= n]
        return c[-1] if c else None

    ad_rows = []
    for n in [c for c in CHECKPOINTS if c <= budget]:
        cs = [at(r["curve"], n) for r in runs]
        if any(c is None or c["evaluations"] != n for c in cs):
            continue
        rc = at(random_curve, n)
        ad_rows.append([n, f"{np.mean([c['share'] for c in cs]):.0%} ({min(c['share'] for c in cs):.0%}–"
                        f"{max(c['share'] for c in cs):.0%})", f"{np.mean([c['hv_ratio'] for c in cs]):.4f}",
                        f"{rc['share']:.0%}", f"{rc['hv_ratio']:.4f}"])  # fmt: skip
    for r in runs:
        c = r["curve"][-1]
        ad_rows.append([f"{c['evaluations']} (seed {r['seed']}, stopped: {r['stopped']})", f"{c['share']:.0%}",
                        f"{c['hv_ratio']:.4f}", "—", "—"])  # fmt: skip
    t5 = claims["table5"]
    rows = [
        ["search procedure", "LHS initial sample, adaptive refinement of sparse frontier regions and Pareto "
         "neighbourhoods, stop when stable", "—",
         f"`rooflaw.solver.adaptive.adaptive_search`: share of the exact frontier after {budget} evaluations "
         f"{np.mean([r['final_share'] for r in runs]):.0%}, hypervolume ratio "
         f"{np.mean([r['final_hv_ratio'] for r in runs]):.4f} (mean of {len(runs)} seeds)", "—",
         "reproduced as a procedure; the exact frontier is cheaper here"],
        ["evaluation rate", f"50,000+ configurations in ≈ 20 min (≈ {PAPER_RATE:.0f}/s)", "—",
         f"{50_000 / t_50k:,.0f}/s (50,000 configurations in {t_50k:.2f} s); exhaustive frontier of "
         f"{prob.space.size:,} points in {t_exact:.2f} s; adaptive search {n_ad / t_ad:,.0f} evaluations/s", "—",
         f"{50_000 / t_50k / PAPER_RATE:,.0f}× the paper's rate (this machine, this run)"],
        ["Table 5 grid vs the `paper` space", "n_kv ∈ {1, 2, 4, 8, n_h}, no divisibility rule stated", "—",
         f"`paper` space {prob.space.size:,} points; undivided grid {t5['undivided_grid_points']:,} "
         f"(+{t5['added_points']:,}: n_kv = 4 at d ∈ {t5['added_by_kv'].get(4)}, n_kv = 8 at d ∈ "
         f"{t5['added_by_kv'].get(8)}); {t5['frontier_points_uneven_kv']} of {t5['frontier_points_undivided']} "
         f"frontier points use n_kv ∤ n_h; hypervolume ratio {t5['hv_ratio_undivided_over_paper']:.4f}", "—",
         "the divisibility rule barely moves the frontier"],
    ]  # fmt: skip
    body = (
        f"Problem: space `{C.SPACE}`, preset `{PRESET}` (the paper's App. D model), FP16, {PHASE} latency, Orin; "
        "objectives loss and latency; only points that fit memory count. The exact frontier is "
        f"`rooflaw.solver.frontier` ({len(true_front)} points). Hypervolume in (loss, log₁₀ latency) with the "
        "reference point 0.1 % beyond the worst feasible loss and latency of the space (log latency because the "
        "frontier spans three decades). The adaptive search is `rooflaw.solver.adaptive.adaptive_search` "
        f"(budget {budget}, initial Latin hypercube {budget // 4}, `scipy.stats.qmc.LatinHypercube` seeded; "
        "refinement: the 8 widest frontier gaps × 4 points and one-step neighbours of every Pareto point per "
        "round; stop after 3 unchanged rounds).\n\n"
        + claims_table(rows)
        + "\nShare of the exact frontier found and hypervolume ratio by evaluations (adaptive: mean and range "
        "over seeds; random: one uniform sample without replacement):\n\n"
        + md_table(
            ("evaluations", "adaptive: share", "adaptive: HV ratio", "random: share", "random: HV ratio"), ad_rows
        )  # fmt: skip
        + "\n**Speed.** The paper's rate (≈ 42 configurations/s, 50,000 in 20 minutes) is set beside rooflaw's "
        "measured in this run on this machine: the numpy-compiled cost model evaluates whole tables of candidates "
        "per call, so an exhaustive frontier of the 6,800-point space costs less than the paper's search spent on "
        "one minute of its budget, and the adaptive search is slower per evaluation than exhaustive evaluation "
        "(it maps each sample through `Space.point` in Python). Adaptive search pays off only on spaces too large "
        "to enumerate.\n\n"
        "**Where the `paper` space departs from Table 5.** Table 5 lists depth, width, (E, K) and n_kv only. The "
        "`paper` space adds what the paper does not state: head_dim 128 (so n_h = d/128: 6 heads at d = 768 … "
        "24 at 3,072), per-expert FFN ratios r_single ∈ {0.5, 1, 2, 3, 4} (ffn rounded to 128; the paper reports "
        "r < 1 optima but no grid), a 32,000-token untied vocabulary (which only the `full` preset prices), a "
        "SwiGLU FFN, and the rule n_kv | n_h — which drops n_kv = 4 at four widths (n_h = 6, 10, 14, 18) and "
        "n_kv = 8 at six (n_h = 6, 10, 12, 14, 18, 20). `paper_repro.search.table5_grid(divisible=False)` gives "
        "the undivided grid (n_kv = 8 > n_h = 6 at d = 768 stays out); it is a candidate table, not a rooflaw "
        "`Space`, because an `Architecture` must group query heads evenly — the cost model and the law only see "
        "d_m = n_kv·d_h and gqa = n_h/n_kv, so an uneven grouping is costed as those numbers.\n\n"
        + figure(fname, "Adaptive search vs the exact frontier; the undivided GQA grid's frontier.")
    )
    write_section(ctx.out, "search", TITLE, body)
    merge_claims(ctx.out, "search", claims)
    return claims
