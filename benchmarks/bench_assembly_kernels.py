"""Measured kernel shapes priced THROUGH the one assembly (docs/kernels.md, "The assembly on kernel shapes").

For a seeded sample of rows of the measured ``generation_attention_perf`` (one decode attention kernel) and
``moe_perf`` (one routed-expert MoE layer) tables of every GPU folder, builds the one-layer model of the row's shape
and prices it with :func:`rooflaw.evaluate` (kernel curves of the GPU's architecture, the row's engine):

* decode attention: batch B, context ``isl + step`` (decode step 1 of a prompt of ``isl + step - 1`` tokens), the
  row's heads, KV heads, head dim and KV dtype; the assembly's time is the decode seconds of its attention ops
  (``attn_scores``, ``softmax``, ``attn_values``) plus one ``kernel_s`` (the fused kernel's launch);
* prefill attention (``context_attention_perf``, no window, 16-bit attention math): batch B, a prompt of ``isl``
  tokens, the row's heads, KV heads, head dim and KV dtype; the assembly's time is the prefill seconds of its attention
  ops (``attn_scores``, ``softmax``, ``attn_values``; TensorRT-LLM's measured op runs RoPE too: plus ``qk_norm_rope``,
  its Q and K read and written -- the KV-cache write the op also runs is in the assembly's K/V projections) plus one
  ``kernel_s``;
* decode MLA attention (``generation_mla_perf``, one GPU): DeepSeek's latent cache (kv_lora_rank 512, rope 64) as
  a one-layer MLA model of the row's heads; ``mla_scores``, ``mla_softmax``, ``mla_values`` plus one ``kernel_s``;
* GEMM (bf16, per-tensor fp8): M×N×K as the query projection of a one-layer model of d_model K and one head of
  width N, M tokens (a prefill of M one-token prompts), tile/wave model on; the assembly's time is ``q_proj``'s
  seconds plus one ``kernel_s``;
* MoE layer: T tokens (a prefill of T one-token prompts), E experts, top-k, hidden size, expert width inter/tp, gated
  or not, bf16 or fp8 weights, tile/wave model on; the assembly's time is the seconds of ``ffn_up``, ``ffn_act`` and
  ``ffn_down`` plus five ``kernel_s`` (the MoE family's launches) plus the rates' ``moe_s`` (0 where the assembly
  has none). Rows with expert parallelism or a skewed routing law are left out (the assembly's coverage is uniform
  routing on one GPU).

Prints per family and GPU the median |assembly/measured - 1|, the same with the measured call's per-call extra
added (the kernel curves' ``launch[<framework>/<table's op>]``: a benchmark call's host work, which an engine's own
overheads price instead; ``+call``), the kernel family's own predictor's median |family/measured - 1| on the same
rows, and the median |assembly/family - 1|; for MoE the median assembly/family and assembly/measured by the layer's
tokens (:data:`BANDS`); then one JSON line. Run it on two
trees to compare (the script reads only the public API)::

    PYTHONPATH=. python benchmarks/bench_assembly_kernels.py [KERNELS_DIR] [--sample N]
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np

import rooflaw as rl

HERE = Path(__file__).resolve()
DEFAULT = next((p for p in (HERE.parents[2] / "shared" / "data" / "kernels", Path("/work/shared/data/kernels"))
                if p.is_dir()), HERE.parents[2] / "shared" / "data" / "kernels")  # fmt: skip
ENGINES = {"trtllm": "tensorrt-llm", "vllm": "vllm"}
KV = {"bfloat16": "bf16", "float16": "fp16", "fp8": "fp8", "fp8_e4m3": "fp8"}
MOE_PRECISION = {"bfloat16": "bf16", "float16": "fp16", "fp8": "fp8"}
GEMM_PRECISION = MOE_PRECISION
ATTENTION_OPS = ("attn_scores", "softmax", "attn_values")
MLA_OPS = ("mla_scores", "mla_softmax", "mla_values")
MOE_OPS = ("ffn_up", "ffn_act", "ffn_down")
MOE_KERNELS = 5  # routing/alignment, two grouped GEMMs, activation, scatter-reduce (the MoE family's count)
BANDS = ((1, 512), (513, 8192), (8193, 1 << 30))  # MoE layers' tokens: decode-size, mid, prefill-size steps
PROMPTS = ((1, 511), (512, 2047), (2048, 8191), (8192, 1 << 30))  # prefill attention's prompt tokens
#: engines whose measured prefill attention op applies RoPE itself (vLLM's model runs it outside the call)
ROPE_INSIDE = ("trtllm",)


def _ops_seconds(rep, names, phase) -> float:
    return sum(o.seconds for o in rep.ops if o.name in names and o.phase == phase)


def _decode_step(arch, row, device, kc, ops) -> float:
    """Seconds of ``ops`` in one decode step of ``arch`` at the row's batch, context ``isl + step`` and KV dtype,
    plus one ``kernel_s`` (the fused kernel's launch)."""
    ctx = int(row.isl) + int(row.step)
    prec = f"w=bf16,a=bf16,kv={KV[str(row.kv_cache_dtype)]}"
    rep = rl.evaluate(arch, device, precision=prec, engine=ENGINES[row.framework], batch=int(row.batch_size),
                      input_tokens=ctx - 1, output_tokens=1)  # fmt: skip
    return _ops_seconds(rep, ops, "decode") + kc.kernel_s


def _attention(row, device, kc) -> float:
    heads, kvh, hd = int(row.num_heads), int(row.num_key_value_heads), int(row.head_dim)
    arch = rl.Architecture(layers=1, d_model=heads * hd, heads=heads, kv_heads=kvh, head_dim=hd, ffn=256, vocab=256)
    return _decode_step(arch, row, device, kc, ATTENTION_OPS)


def _prefill(row, device, kc) -> float:
    """Seconds of the prefill attention ops (and TensorRT-LLM's RoPE) of the row's one-layer model, + ``kernel_s``."""
    heads, kvh, hd = int(row.num_heads), int(row.num_key_value_heads), int(row.head_dim)
    arch = rl.Architecture(layers=1, d_model=heads * hd, heads=heads, kv_heads=kvh, head_dim=hd, ffn=256, vocab=256)
    prec = f"w=bf16,a=bf16,kv={KV[str(row.kv_cache_dtype)]}"
    rep = rl.evaluate(arch, device, precision=prec, engine=ENGINES[row.framework], batch=int(row.batch_size),
                      input_tokens=int(row.isl), output_tokens=1)  # fmt: skip
    ops = ATTENTION_OPS + (("qk_norm_rope",) if row.framework in ROPE_INSIDE else ())
    return _ops_seconds(rep, ops, "prefill") + kc.kernel_s


def _mla(row, device, kc) -> float:
    base = rl.load_architecture("deepseek-v2-lite")  # kv_lora_rank 512, rope 64: DeepSeek-V3's latent cache
    arch = dataclasses.replace(base, layers=1, layer_types=("mla",), heads=int(row.num_heads), first_dense=0,
                               experts=1, top_k=1, shared_experts=0, ffn=256)  # fmt: skip
    return _decode_step(arch, row, device, kc, MLA_OPS)


def _gemm(row, device, kc) -> float:
    M, N, K = int(row.m), int(row.n), int(row.k)
    arch = rl.Architecture(layers=1, d_model=K, heads=1, kv_heads=1, head_dim=N, ffn=256, vocab=256)
    rep = rl.evaluate(arch, device, precision=GEMM_PRECISION[str(row.gemm_dtype)], engine=ENGINES[row.framework],
                      tiles=True, batch=M, input_tokens=1, output_tokens=1)  # fmt: skip
    return _ops_seconds(rep, ("q_proj",), "prefill") + kc.kernel_s


def _moe(row, device, kc) -> float:
    d, inter = int(row.hidden_size), int(row.inter_size) // int(row.moe_tp_size)
    heads = max(1, d // 128)
    arch = rl.Architecture(layers=1, d_model=heads * 128, heads=heads, kv_heads=heads, head_dim=d // heads, ffn=inter,
                           experts=int(row.num_experts), top_k=int(row.topk), vocab=256,
                           gated="nongated" not in str(row.kernel_source))  # fmt: skip
    engine = ENGINES[row.framework]
    prec = MOE_PRECISION[str(row.moe_dtype)]
    rep = rl.evaluate(arch, device, precision=prec, engine=engine, tiles=True, batch=int(row.num_tokens),
                      input_tokens=1, output_tokens=1)  # fmt: skip
    moe_s = float(getattr(rl.Scenario.of(device, precision=prec, engine=engine).rates, "moe_s", 0.0))
    return _ops_seconds(rep, MOE_OPS, "prefill") + MOE_KERNELS * kc.kernel_s + moe_s


def _rows(table, fam: str):
    df = table.rows
    if fam == "generation_mla":
        keep = df["kv_cache_dtype"].astype(str).isin(list(KV)) & (df["tp_size"] == 1)
        return df[keep & (df["mla_dtype"].astype(str) == "bfloat16")]
    if fam == "gemm":
        return df[df["gemm_dtype"].astype(str).isin(list(GEMM_PRECISION))]
    if fam == "context_attention":
        keep = df["kv_cache_dtype"].astype(str).isin(list(KV))
        keep &= df["attn_dtype"].astype(str).isin(["bfloat16", "float16"])
        return df[keep & (df["window_size"].fillna(0) == 0)] if "window_size" in df else df[keep]
    if fam == "generation_attention":
        keep = df["kv_cache_dtype"].astype(str).isin(list(KV))
        if "window_size" in df:
            keep &= df["window_size"].fillna(0) == 0
        if "beam_width" in df:
            keep &= df["beam_width"].fillna(1) == 1
        return df[keep]
    keep = (df["moe_ep_size"] == 1) & df["distribution"].astype(str).isin(["balanced", "uniform"])
    keep &= df["moe_dtype"].astype(str).isin(list(MOE_PRECISION)) & (df["inter_size"] % df["moe_tp_size"] == 0)
    return df[keep]


def main(argv: list[str]) -> dict:
    args = [a for a in argv if not a.startswith("--")]
    sample = int(argv[argv.index("--sample") + 1]) if "--sample" in argv else 120
    if "--sample" in argv:
        args.remove(str(sample))
    root = Path(args[0]) if args else DEFAULT
    t0 = time.perf_counter()
    tables = {
        "gemm": "gemm_perf",
        "generation_attention": "generation_attention_perf",
        "context_attention": "context_attention_perf",
        "generation_mla": "generation_mla_perf",
        "moe": "moe_perf",
    }
    gpus = rl.fitting.kernel_gpus([root], only=list(tables.values()))
    report: dict = {"sample": sample, "families": {}}
    print("median |x/measured - 1| per family and GPU (assembly: the one-layer model priced by rooflaw.evaluate)")
    print(f"{'family':<22}{'gpu':<10}{'rows':>6}{'assembly':>10}{'+call':>8}{'family':>9}{'asm/fam-1':>11}")
    for fam, tname in tables.items():
        for g in gpus:
            kc = rl.fitting.curves_for(g.device)
            if kc is None:
                continue
            asm, ref, meas, call, tok = [], [], [], [], []
            for t in g.tables:
                if t.table != tname or t.framework not in ENGINES:
                    continue
                rows = _rows(t, fam)
                if not len(rows):
                    continue
                rows = rows.sample(min(sample, len(rows)), random_state=0).reset_index(drop=True)
                pred = rl.fitting.predict_tables([dataclasses.replace(t, rows=rows)], g.device, kc)[0]
                for i, row in enumerate(rows.itertuples(index=False)):
                    price = {"gemm": _gemm, "generation_attention": _attention, "context_attention": _prefill,
                             "generation_mla": _mla, "moe": _moe}[fam]  # fmt: skip
                    asm.append(price(row, g.device, kc) * 1e3)
                    ref.append(pred[i])
                    meas.append(float(row.latency))
                    tok.append(float(getattr(row, "num_tokens", getattr(row, "isl", np.nan))))
                    op = GEMM_PRECISION.get(str(getattr(row, "gemm_dtype", "")), fam).replace("bf16", "fp16")
                    call.append(float(kc.launch.get(f"{row.framework}/{op}", 0.0)) * 1e3)
            if not asm:
                continue
            a, r, m, c = (np.asarray(v, dtype=float) for v in (asm, ref, meas, call))
            ok = np.isfinite(a) & np.isfinite(r) & (m > 0)
            out = {"rows": int(ok.sum()), "assembly": float(np.median(np.abs(a[ok] / m[ok] - 1))),
                   "assembly_call": float(np.median(np.abs((a[ok] + c[ok]) / m[ok] - 1))),
                   "family": float(np.median(np.abs(r[ok] / m[ok] - 1))),
                   "assembly_vs_family": float(np.median(np.abs(a[ok] / r[ok] - 1)))}  # fmt: skip
            if fam in ("moe", "context_attention"):  # median asm/family, asm/measured by tokens (BANDS, PROMPTS)
                t, out["bands"] = np.asarray(tok), {"all": {"rows": int(ok.sum()), "asm/family": float(
                    np.median(a[ok] / r[ok])), "asm/measured": float(np.median(a[ok] / m[ok]))}}  # fmt: skip
                for lo, hi in BANDS if fam == "moe" else PROMPTS:
                    k = ok & (t >= lo) & (t <= hi)
                    if k.any():
                        out["bands"][f"{lo}-{hi}" if hi < 1 << 30 else f"> {lo - 1}"] = {
                            "rows": int(k.sum()), "asm/family": float(np.median(a[k] / r[k])),
                            "asm/measured": float(np.median(a[k] / m[k]))}  # fmt: skip
            report["families"].setdefault(fam, {})[g.name] = out
            print(f"{fam:<22}{g.name:<10}{out['rows']:>6}{out['assembly']:>10.1%}{out['assembly_call']:>8.1%}"
                  f"{out['family']:>9.1%}"
                  f"{out['assembly_vs_family']:>11.1%}")  # fmt: skip
    for fam, what in (("moe", "tokens"), ("context_attention", "prompt tokens")):
        print(f"{fam} by {what}: median assembly/family, assembly/measured")
        for gpu, out in report["families"].get(fam, {}).items():
            for band, v in out["bands"].items():
                print(f"  {gpu:<10}{band:>12}{v['rows']:>6}{v['asm/family']:>8.3f}{v['asm/measured']:>8.3f}")
    report["seconds"] = time.perf_counter() - t0
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
