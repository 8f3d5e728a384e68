"""How a GEMM's time grows with K at few output tiles, per engine kernel (docs/kernels.md, session 13).

Prints, per GPU, engine and GEMM dtype, the latency growth between K = 4,096 and K = 65,536 of GEMMs with M = 16
and N <= 512 (one wave of CTAs on every GPU): ns per element of K, and SM cycles per 64-deep main-loop step
(``ns · 64 · boost clock``) -- the evidence for ``gemm.SCALED_KSTEP``: TensorRT-LLM's block-fp8 and nvfp4 kernels
walk all of K in each CTA (their growth does not fall with N, and is 2-7x the other kernels'), a kernel that splits
K grows far less. Reads the tables only (no curves, no fit); ~5 s.

    python benchmarks/bench_gemm_kwalk.py [KERNELS_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from rooflaw.fitting import kernel_gpus

HERE = Path(__file__).resolve()
DEFAULT = next((p for p in (HERE.parents[2] / "shared" / "data" / "kernels", Path("/work/shared/data/kernels"))
                if p.is_dir()), HERE.parents[2] / "shared" / "data" / "kernels")  # fmt: skip
K_LO, K_HI, M, N_MAX = 4096, 65536, 16, 512


def main(root: Path) -> None:
    out = []
    for g in kernel_gpus([root], only=["gemm_perf"]):
        df = pd.concat([t.rows for t in g.tables], ignore_index=True)
        df = df[(df.m == M) & (df.n <= N_MAX) & df.k.isin([K_LO, K_HI])]
        for (fw, dt), r in df.groupby(["framework", "gemm_dtype"]):
            t = r.groupby("k")["latency"].median() * 1e-3
            if K_LO in t.index and K_HI in t.index:
                ns = (t[K_HI] - t[K_LO]) / (K_HI - K_LO) * 1e9
                out.append((g.name, fw, dt, ns, ns * 1e-9 * 64 * float(g.device.clock)))
    pd.set_option("display.width", 200)
    t = pd.DataFrame(out, columns=["gpu", "engine", "dtype", "ns per K", "SM cycles per 64-K step"])
    print(f"growth with K (M = {M}, N <= {N_MAX}), K {K_LO:,} -> {K_HI:,}:")
    print(t.round({"ns per K": 3, "SM cycles per 64-K step": 0}).to_string(index=False))


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT)
