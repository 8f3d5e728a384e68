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

from rooflaw.constraints.kernels import gemm, load_curves
from rooflaw.constraints.kernels.fit import device_for_folder, kernel_gpus
from rooflaw.devices.catalog import get_device

HERE = Path(__file__).resolve()
DEFAULT = next((p for p in (HERE.parents[2] / "shared" / "data" / "kernels", Path("/work/shared/data/kernels"))
                if p.is_dir()), HERE.parents[2] / "shared" / "data" / "kernels")  # fmt: skip
GPUS = ("a100_sxm", "h100_sxm", "b200_sxm", "l40s")
#: the GPU each architecture's curves are fitted on, and catalog siblings to compare by W per TFLOPS
FITTED = {"ampere": "a100-sxm-80gb", "hopper": "h100-sxm", "blackwell": "b200", "ada": "l40s"}
SIBLINGS = ("h100-pcie", "h200-sxm", "l4", "rtx-4090", "rtx-pro-6000-server", "b300", "gb200")


def _engine(path: Path) -> str:
    return path.parent.name.split("-", 1)[0]


def gemm_pairs(root: Path, gpu: str) -> pd.DataFrame:
    """Median bf16 fraction of the dense peak per half-decade of 2MNK, shapes present in both engines' tables."""
    peak = device_for_folder(gpu).roof("fp16")[1]
    frames = []
    for f in sorted((root / gpu).glob("*/gemm_perf.csv.gz")):
        d = pd.read_csv(f)
        frames.append(d[d.gemm_dtype == "bfloat16"].assign(engine=_engine(f)))
    d = pd.concat(frames)
    p = d.pivot_table(index=["m", "n", "k"], columns="engine", values="latency", aggfunc="median").dropna()
    p = p.reset_index()
    p = p[(p.m >= 1024) & (p.n >= 1024) & (p.k >= 1024)]
    flops = 2.0 * p.m * p.n * p.k
    out = pd.DataFrame({e: flops / (p[e] * 1e-3) / peak for e in ("trtllm", "vllm")})
    out["rows"] = 1
    bins = pd.cut(np.log10(flops), np.arange(10.0, 15.0, 0.5))
    return out.groupby(bins, observed=True).agg({"trtllm": "median", "vllm": "median", "rows": "sum"})


def prefill_fraction(root: Path, gpu: str) -> dict[str, pd.Series]:
    """Median causal-prefill fraction of the bf16 peak per decade of FLOPs (S >= 1,024), per engine."""
    peak = device_for_folder(gpu).roof("fp16")[1]
    out = {}
    for f in sorted((root / gpu).glob("*/context_attention_perf.csv.gz")):
        d = pd.read_csv(f)
        keep = (d.isl >= 1024) & d.attn_dtype.astype(str).isin(["bfloat16", "float16"])
        if "window_size" in d:
            keep &= d.window_size == 0
        d = d[keep]
        flops = 2.0 * d.batch_size * d.isl**2 * d.num_heads * d.head_dim
        frac = flops / (d.latency * 1e-3) / peak
        out[_engine(f)] = frac.groupby(pd.cut(np.log10(flops), np.arange(9.0, 15.0)), observed=True).median()
    return out


def residuals(root: Path) -> None:
    """Shipped curves' predicted / measured for large GEMMs, per GPU, engine, dtype and decade of 2MNK."""
    curves = load_curves()
    for g in kernel_gpus([root], only=("gemm_perf",)):
        c = curves[g.device.architecture]
        for t in g.tables:
            r = t.rows
            r = r[r.gemm_dtype.isin(["bfloat16", "fp8"]) & (r.m >= 1024) & (r.n >= 1024) & (r.k >= 1024)]
            q = gemm.predict(r, g.device, c) / r.latency.to_numpy()
            dec = np.floor(np.log10(2.0 * r.m * r.n * r.k)).to_numpy()
            s = pd.Series(q).groupby([r.gemm_dtype.to_numpy(), dec]).median()
            cells = " ".join(f"{dt}@1e{int(k):d}:{v:.2f}" for (dt, k), v in s.items())
            print(f"  {g.name:9s} {r.framework.iloc[0]:7s} {cells}")


def siblings() -> None:
    """Each catalog sibling's W per dense bf16 TFLOPS and the factor a cap met exactly by its fitted GPU gives it."""
    for ident in (*FITTED.values(), *SIBLINGS):
        d = get_device(ident)
        ref = get_device(FITTED[str(d.architecture)])
        w_tf = float(d.power_peak or np.nan) / (d.roof("fp16")[1] / 1e12)
        w_ref = float(ref.power_peak or np.nan) / (ref.roof("fp16")[1] / 1e12)
        print(f"  {ident:20s} {d.architecture:9s} {w_tf:5.2f} W/TFLOPS (fitted {ref.id}: {w_ref:4.2f}) "
              f"-> capped rate x{min(1.0, w_tf / w_ref):.2f}")  # fmt: skip


def main(argv: list[str]) -> None:
    root = Path(argv[0]) if argv else DEFAULT
    print("bf16 GEMM fraction of the dense peak, paired shapes, TensorRT-LLM / vLLM, by log10(2MNK):")
    for g in GPUS:
        t = gemm_pairs(root, g)
        print(f"  {g:9s} " + " ".join(f"{i.left:.1f}:{r.trtllm:.2f}/{r.vllm:.2f}" for i, r in t.iterrows()))
    print("causal prefill attention fraction of the bf16 peak by log10(FLOPs):")
    for g in GPUS:
        for e, s in prefill_fraction(root, g).items():
            print(f"  {g:9s} {e:7s} " + " ".join(f"{i.left:.0f}:{v:.2f}" for i, v in s.items()))
    print("shipped curves, predicted / measured, M, N, K >= 1,024:")
    residuals(root)
    print("catalog W per TFLOPS (sanity check of the cap, not a score):")
    siblings()


if __name__ == "__main__":
    main(sys.argv[1:])
