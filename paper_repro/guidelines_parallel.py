"""Seed guidelines 5–7 (serving across GPUs) with numbers: expert parallelism, chunked pipelines, Helix.

Every number comes from ``rooflaw.parallel.evaluate_layout`` / ``max_batch`` (the one cost model on sharded shapes, plus
α–β collectives on the catalog's systems). The models are real configs: DeepSeek-R1 (the seed post's model; its
Hugging Face config numbers below: 671 B total, 37.6 B active parameters) and Llama-3.1-70B (bundled).
"""

from __future__ import annotations

import rooflaw as R

from . import common as C
from .report import figure, md_table, merge_claims, write_section

TITLE = "Seed guidelines 5–7 — serving across GPUs (EP, chunked PP, Helix)"
#: DeepSeek-R1 / V3 config.json (deepseek-ai/DeepSeek-R1): MLA, 256 routed experts top-8, 1 shared, 3 dense layers.
DEEPSEEK_R1 = {
    "model_type": "deepseek_v3", "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048,
    "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128, "n_routed_experts": 256,
    "n_shared_experts": 1, "num_experts_per_tok": 8, "first_k_dense_replace": 3, "kv_lora_rank": 512,
    "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 129280,
    "tie_word_embeddings": False, "moe_layer_freq": 1,
}  # fmt: skip
SYSTEM = "gb200:72"  # one NVLink-5 domain of 72 GPUs
PRECISION = "fp8"


def deepseek_r1(layers: int = 61) -> R.Architecture:
    return R.from_hf_config(
        {**DEEPSEEK_R1, "num_hidden_layers": layers}, name=f"deepseek-r1{'' if layers == 61 else f'-{layers}L'}"
    )


def _ep(quick: bool) -> dict:
    """Guideline 5: TP all-reduces B·d per GPU per layer; EP + DP attention all-to-alls B/ep·top_k·d."""
    a, sys_ = deepseek_r1(), R.get_system(SYSTEM)
    conc = (16, 64, 256) if quick else (16, 32, 64, 128, 256, 512)
    layouts = {"tp=8": 8, "ep=8,dp_attn=8": 8, "ep=32,dp_attn=32": 32}
    rows, curves = [], {k: [] for k in layouts}
    for c in conc:  # concurrency per GPU
        for lay, n in layouts.items():
            r = R.parallel.evaluate_layout(a, sys_, lay, R.Workload(c * n, 4096, 256), PRECISION)
            step = r["comm_s_decode"] / 256
            curves[lay].append({"per_gpu": c, "comm_step_ms": step * 1e3, "tok_s_gpu": r["tokens_per_s_per_device"],
                                "tpot_ms": r["tpot_s"] * 1e3, "fits": r["fits"]})  # fmt: skip
            rows.append([c, lay, f"{step * 1e3:.2f}", f"{r['tpot_s'] * 1e3:.1f}", f"{r['tokens_per_s_per_device']:.0f}",
                         f"{r['memory_per_device_bytes'] / 1e9:.0f}", "yes" if r["fits"] else "NO"])  # fmt: skip
    caps = {lay: R.parallel.max_batch(a, sys_, lay, R.Workload(1, 4096, 256), PRECISION) for lay in layouts}
    ends = {lay: (curves[lay][0]["comm_step_ms"], curves[lay][-1]["comm_step_ms"]) for lay in layouts}
    return {"rows": rows, "curves": curves, "max_batch": caps, "comm_ms_lo_hi": ends, "concurrency": list(conc),
            "m_per_expert": {c: c * 8 * 8 / 256 for c in conc}}  # fmt: skip


def _pp(quick: bool) -> dict:
    """Guideline 6: chunked PP (stages of TP=8) on a 256K-token prefill; 61 layers vs a regular 64-layer twin."""
    sys_ = R.get_system(SYSTEM)
    wl = R.Workload(1, 262144 if not quick else 65536, 1)
    out = {}
    for layers in (61, 64):
        a = deepseek_r1(layers)
        pts = []
        for pp in (1, 2, 4, 8):
            lay = "tp=8" if pp == 1 else f"pp={pp},tp=8,chunk=4096"
            r = R.parallel.evaluate_layout(a, sys_, lay, wl, PRECISION)
            pts.append({"pp": pp, "gpus": 8 * pp, "ttft_s": r["ttft_s"], "balance": r["stage_balance"],
                        "bubble": r["bubble_fraction"], "tok_s_gpu": r["prefill_tokens_per_s_per_device"],
                        "stages": [s["layers"] for s in r.get("stages", [])]})  # fmt: skip
        out[layers] = pts
    return {"input_tokens": wl.input_tokens, "by_layers": out}


def _helix(quick: bool) -> dict:
    """Guideline 7: decode at 128K context; TP stops helping at TP = kv_heads (8); Helix shards the KV."""
    a, sys_ = R.load_architecture("llama-3.1-70b"), R.get_system(SYSTEM)
    s_in, target = 131072, 0.010  # 100 tokens/s per user
    layouts = ["tp=8", "tp=16", "tp=32", "tp=64", "helix=kvp2,tpep16", "helix=kvp4,tpep32", "helix=kvp8,tpep64"]
    if quick:
        layouts = ["tp=8", "tp=32", "helix=kvp4,tpep32"]
    batches = [1, 2, 4, 8, 16, 32, 64, 128] if not quick else [1, 8, 32]
    res = {}
    for lay in layouts:
        sweep = R.parallel.batch_sweep(a, sys_, lay, batches, R.Workload(1, s_in, 64), "bf16")
        ok = [r["batch"] for r in sweep if r["fits"] and r["tpot_s"] <= target]
        res[lay] = {"tpot_ms": {r["batch"]: r["tpot_s"] * 1e3 for r in sweep},
                    "fits": {r["batch"]: r["fits"] for r in sweep},
                    "kv_gb": sweep[0]["kv_cache_bytes_per_device"] / 1e9,
                    "users_at_target": max(ok) if ok else 0}  # fmt: skip
    return {"input_tokens": s_in, "target_tpot_s": target, "batches": batches, "layouts": res}


def run(ctx: C.Context) -> dict:
    plt = C.plt()
    ep, pp, hx = _ep(ctx.quick), _pp(ctx.quick), _helix(ctx.quick)
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.6))
    ax = axes[0]
    for lay, pts in ep["curves"].items():
        ax.plot([p["per_gpu"] for p in pts], [p["comm_step_ms"] for p in pts], "-o", ms=3, label=f"{lay}: comm")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrent sequences per GPU")
    ax.set_ylabel("collectives per decode step (ms)")
    ax.set_title("G5: DeepSeek-R1 fp8, GB200 NVL72 — TP all-reduce vs EP all-to-all")
    ax.legend()
    ax = axes[1]
    for layers, pts in pp["by_layers"].items():
        g = [p["gpus"] for p in pts]
        ax.plot(g, [p["ttft_s"] for p in pts], "-o", ms=3, label=f"{layers} layers: TTFT (s)")
    ax2 = ax.twinx()
    for layers, pts in pp["by_layers"].items():
        ax2.plot(
            [p["gpus"] for p in pts], [p["tok_s_gpu"] for p in pts], "--s", ms=3, label=f"{layers} layers: tok/s/GPU"
        )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("GPUs (TP 8 × PP stages)")
    ax.set_ylabel("time to first token (s)")
    ax2.set_ylabel("prefill tokens/s per GPU")
    ax2.set_ylim(bottom=0)
    ax.set_title(f"G6: chunked PP, {pp['input_tokens'] // 1024}K-token prefill")
    ax.legend(loc="center right", fontsize=7)
    ax2.legend(loc="upper right", fontsize=7)
    ax = axes[2]
    for lay, r in hx["layouts"].items():
        b = [k for k in hx["batches"] if r["fits"][k]]
        ax.plot(b, [r["tpot_ms"][k] for k in b], "-o" if lay.startswith("helix") else "--s", ms=3, label=lay)
    ax.axhline(hx["target_tpot_s"] * 1e3, c="0.5", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrent users")
    ax.set_ylabel("TPOT (ms)")
    ax.set_title("G7: Llama-3.1-70B bf16, 128K context — TP vs Helix")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(ctx.out / "guidelines_parallel.png", dpi=130)
    plt.close(fig)

    tp_best = max(v["users_at_target"] for k, v in hx["layouts"].items() if k.startswith("tp"))
    hx_best = max(v["users_at_target"] for k, v in hx["layouts"].items() if k.startswith("helix"))
    p61, p64 = pp["by_layers"][61], pp["by_layers"][64]
    body = (
        "Assumptions: the catalog's GB200 NVL72 (72 GPUs, NVLink 5: 900 GB/s each way per GPU, α = 2 µs per step, "
        "assumed); collectives α–β (ring/tree all-reduce, whichever is faster; all-to-all posts every peer at once); "
        "no compute/communication overlap; uniform expert routing (imbalance 1); the `full` cost model with the "
        "device's fitted engine profile; DeepSeek-R1 at fp8 from its config.json, Llama-3.1-70B at bf16. "
        "Concurrency is per GPU (the replica's batch = concurrency × its GPUs). Memory that does not fit is marked.\n\n"
        "**Guideline 5 — expert parallelism.** Per-expert GEMM M = concurrency × top_k / experts = concurrency/32 "
        "for DeepSeek-R1 summed over an 8-GPU replica's tokens (M = "
        + ", ".join(f"{m:g}" for m in list(ep["m_per_expert"].values())[:3])
        + " at "
        + ", ".join(str(c) for c in ep["concurrency"][:3])
        + " per GPU).\n\n"
        + md_table(
            ("conc./GPU", "layout", "comm/step (ms)", "TPOT (ms)", "tok/s/GPU", "mem/GPU (GB)", "fits"), ep["rows"]
        )  # fmt: skip
        + f"\nCollectives per decode step at {ep['concurrency'][0]} → {ep['concurrency'][-1]} sequences per GPU: "
        + ", ".join(f"{k} {lo:.2f} → {hi:.2f} ms" for k, (lo, hi) in ep["comm_ms_lo_hi"].items())
        + ": TP all-reduces every token's hidden state on every GPU (B·d per layer), EP sends each token's top_k "
        "copies once from its own GPU. The largest batch whose KV cache fits (4K in + 256 out): "
        + ", ".join(f"{k}: {v}" for k, v in ep["max_batch"].items())
        + " sequences — TP replicates the MLA latent cache on every GPU; DP attention keeps each sequence on one "
        "GPU, and wider EP frees memory for KV (fewer experts per GPU).\n\n"
        f"**Guideline 6 — chunked pipelines.** One {pp['input_tokens'] // 1024}K-token prefill, chunks of 4096 tokens, "
        "stages of TP 8:\n\n"
        + md_table(
            ("layers", "PP", "GPUs", "stage layers", "balance", "bubble", "TTFT (s)", "prefill tok/s/GPU"),
            [
                [
                    lay,
                    p["pp"],
                    p["gpus"],
                    "/".join(map(str, p["stages"])) or "all",
                    f"{p['balance']:.1%}",
                    f"{p['bubble']:.1%}",
                    f"{p['ttft_s']:.2f}",
                    f"{p['tok_s_gpu']:.0f}",
                ]
                for lay, pts in pp["by_layers"].items()
                for p in pts
            ],
        )  # fmt: skip
        + f"\nTTFT falls {p61[0]['ttft_s'] / p61[-1]['ttft_s']:.1f}× from PP 1 to PP {p61[-1]['pp']} while "
        f"tokens/s per GPU stays at {p61[-1]['tok_s_gpu'] / p61[0]['tok_s_gpu']:.0%} of PP 1; 61 layers split "
        f"{'/'.join(map(str, p61[-1]['stages']))} (balance {p61[-1]['balance']:.1%}) against 64 layers' even 8s "
        f"(balance {p64[-1]['balance']:.0%}). Each chunk's stage time grows with the context it attends to (the "
        "pipeline's makespan: every chunk through one stage, the slowest through the others).\n\n"
        f"**Guideline 7 — Helix.** Decode at {hx['input_tokens'] // 1024}K context; users served within a "
        f"{hx['target_tpot_s'] * 1e3:.0f} ms TPOT (batches {hx['batches']}):\n\n"
        + md_table(
            ("layout", "KV cache/GPU at batch 1 (GB)", "TPOT at batch 1 (ms)", "users within target"),
            [
                [k, f"{v['kv_gb']:.2f}", f"{v['tpot_ms'][hx['batches'][0]]:.2f}", v["users_at_target"]]
                for k, v in hx["layouts"].items()
            ],
        )  # fmt: skip
        + f"\nTP beyond kv_heads = 8 replicates the KV cache (same GB per GPU), so its KV reads stop shrinking; Helix "
        f"shards the KV along the sequence: {hx_best} users within the target against TP's best {tp_best}. (The "
        "Helix paper's 32× is for DeepSeek-R1 in its own simulator; this row is Llama-3.1-70B under rooflaw's "
        "model.)\n\n"
        + figure(
            "guidelines_parallel.png",
            "G5 collectives vs concurrency; G6 TTFT and tokens/s/GPU vs PP; G7 TPOT vs users, TP vs Helix",
        )  # fmt: skip
    )
    write_section(ctx.out, "guidelines_parallel", TITLE, body)
    claims = {"ep": {k: v for k, v in ep.items() if k != "rows"}, "pp": pp, "helix": hx,
              "helix_users": hx_best, "tp_users": tp_best}  # fmt: skip
    merge_claims(ctx.out, "guidelines_parallel", claims)
    return claims
