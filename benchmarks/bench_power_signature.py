"""Is a GPU's sustained tensor rate power-limited? The signature in the measured kernels (docs/kernels.md, s10-pw).

A board-power cap ``rate <= P_tdp / e`` would make the achieved fraction of the dense peak *fall* as large
compute-bound kernels grow, on the capped GPU only and in every engine's table alike. Prints, per GPU:

* bf16 GEMMs (M, N, K >= 1,024) present in both engines' tables, paired by (m, n, k): the median achieved fraction
  of the dense bf16 peak per half-decade of ``2MNK``, TensorRT-LLM / vLLM;
* causal prefill attention (S >= 1,024, bf16): achieved fraction of the bf16 peak (``2·B·S²·H·D`` FLOPs) per decade;
* the shipped curves' GEMM residual (predicted / measured, M, N, K >= 1,024) per engine and decade of ``2MNK``;
* catalog GPUs' W per dense bf16 TFLOPS, and what a cap that each fitted GPU sits on exactly would do to them.

    python benchmarks/bench_power_signature.py [KERNELS_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

import rooflaw as rl

HERE = Path(__file__).resolve()
DEFAULT = next((p for p in (HERE.parents[2] / "shared" / "data" / "kernels", Path("/work/shared/data/kernels"))
                if p.is_dir()), HERE.parents[2] / "shared" / "data" / "kernels")  # fmt: skip
TABLES = ("gemm_perf", "context_attention_perf")
#: the GPU each architecture's curves are fitted on, and catalog siblings to compare by W per TFLOPS
FITTED = {"ampere": "a100-sxm-80gb", "hopper": "h100-sxm", "blackwell": "b200", "ada": "l40s"}
SIBLINGS = ("h100-pcie", "h200-sxm", "l4", "rtx-4090", "rtx-pro-6000-server", "b300", "gb200")


def _tables(gpu, name: str) -> list:
    return [t for t in gpu.tables if t.table == name]


def gemm_pairs(gpu) -> pd.DataFrame:
    """Median bf16 fraction of the dense peak per half-decade of 2MNK, shapes present in both engines' tables."""
    peak = gpu.device.roof("fp16")[1]
    d = pd.concat([t.rows[t.rows.gemm_dtype == "bfloat16"].assign(engine=t.framework) for t in _tables(gpu, TABLES[0])])
    p = d.pivot_table(index=["m", "n", "k"], columns="engine", values="latency", aggfunc="median").dropna()
    p = p.reset_index()
    p = p[(p.m >= 1024) & (p.n >= 1024) & (p.k >= 1024)]
    flops = 2.0 * p.m * p.n * p.k
    out = pd.DataFrame({e: flops / (p[e] * 1e-3) / peak for e in ("trtllm", "vllm")})
    return out.groupby(pd.cut(np.log10(flops), np.arange(10.0, 15.0, 0.5)), observed=True).median()


def prefill_fraction(gpu) -> dict[str, pd.Series]:
    """Median causal-prefill fraction of the bf16 peak per decade of FLOPs (S >= 1,024), per engine."""
    peak = gpu.device.roof("fp16")[1]
    out = {}
    for t in _tables(gpu, TABLES[1]):
        d = t.rows
        keep = (d.isl >= 1024) & d.attn_dtype.astype(str).isin(["bfloat16", "float16"])
        if "window_size" in d:
            keep &= d.window_size == 0
        d = d[keep]
        flops = 2.0 * d.batch_size * d.isl**2 * d.num_heads * d.head_dim
        frac = flops / (d.latency * 1e-3) / peak
        out[t.framework] = frac.groupby(pd.cut(np.log10(flops), np.arange(9.0, 15.0)), observed=True).median()
    return out


def residuals(gpu) -> None:
    """Shipped curves' predicted / measured for large GEMMs, per engine, dtype and decade of 2MNK."""
    tabs = _tables(gpu, TABLES[0])
    for t, pred in zip(tabs, rl.fitting.predict_tables(tabs, gpu.device, rl.fitting.curves_for(gpu.device)),
                       strict=True):  # fmt: skip
        r = t.rows
        keep = (r.gemm_dtype.isin(["bfloat16", "fp8"]) & (r.m >= 1024) & (r.n >= 1024) & (r.k >= 1024)).to_numpy()
        r = r[keep]
        q = pred[keep] / r.latency.to_numpy()
        dec = np.floor(np.log10(2.0 * r.m * r.n * r.k)).to_numpy()
        s = pd.Series(q).groupby([r.gemm_dtype.to_numpy(), dec]).median()
        cells = " ".join(f"{dt}@1e{int(k):d}:{v:.2f}" for (dt, k), v in s.items())
        print(f"  {gpu.name:9s} {t.framework:7s} {cells}")


def siblings() -> None:
    """Each catalog sibling's W per dense bf16 TFLOPS and the factor a cap met exactly by its fitted GPU gives it."""
    for ident in (*FITTED.values(), *SIBLINGS):
        d = rl.get_device(ident)
        ref = rl.get_device(FITTED[str(d.architecture)])
        w_tf = float(d.power_peak or np.nan) / (d.roof("fp16")[1] / 1e12)
        w_ref = float(ref.power_peak or np.nan) / (ref.roof("fp16")[1] / 1e12)
        print(f"  {ident:20s} {d.architecture:9s} {w_tf:5.2f} W/TFLOPS (fitted {ref.id}: {w_ref:4.2f}) "
              f"-> capped rate x{min(1.0, w_tf / w_ref):.2f}")  # fmt: skip


def main(argv: list[str]) -> None:
    gpus = sorted(rl.fitting.kernel_gpus([Path(argv[0]) if argv else DEFAULT], only=TABLES), key=lambda g: g.name)
    print("bf16 GEMM fraction of the dense peak, paired shapes, TensorRT-LLM / vLLM, by log10(2MNK):")
    for g in gpus:
        t = gemm_pairs(g)
        print(f"  {g.name:9s} " + " ".join(f"{i.left:.1f}:{r.trtllm:.2f}/{r.vllm:.2f}" for i, r in t.iterrows()))
    print("causal prefill attention fraction of the bf16 peak by log10(FLOPs):")
    for g in gpus:
        for e, s in prefill_fraction(g).items():
            print(f"  {g.name:9s} {e:7s} " + " ".join(f"{i.left:.0f}:{v:.2f}" for i, v in s.items()))
    print("shipped curves, predicted / measured, M, N, K >= 1,024:")
    for g in gpus:
        residuals(g)
    print("catalog W per TFLOPS (sanity check of the cap, not a score):")
    siblings()


if __name__ == "__main__":
    main(sys.argv[1:])
