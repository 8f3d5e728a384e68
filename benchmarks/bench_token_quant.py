"""What a GEMM's activation quantiser costs per token, in the measured kernels (docs/kernels.md, session 11).

Prints, per GPU, engine and GEMM dtype, how the latency of short-K, narrow GEMMs (K <= 256, N <= 256, where the
GEMM itself is a few µs) grows with the tokens M from 16,384 to 32,768: ns a token and cycles of one SM a token
(``ns · boost clock · SMs``) -- the evidence for ``gemm.PER_TOKEN_QUANT`` (vLLM's per-token fp8 quantiser: ~1,850
SM cycles a token on every GPU); then the same growth for vLLM's and TensorRT-LLM's fp8 per K (N <= 128), whose
steps show the 2,048-element chunks (``gemm.QUANT_CHUNK``). Reads the tables only (no curves, no fit); ~5 s.

    python benchmarks/bench_token_quant.py [KERNELS_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from rooflaw.fitting import kernel_gpus

HERE = Path(__file__).resolve()
DEFAULT = next((p for p in (HERE.parents[2] / "shared" / "data" / "kernels", Path("/work/shared/data/kernels"))
                if p.is_dir()), HERE.parents[2] / "shared" / "data" / "kernels")  # fmt: skip
M_LO, M_HI = 16384, 32768


def slope_s(rows: pd.DataFrame) -> float:
    """Seconds a token between ``M_LO`` and ``M_HI`` rows (median latency at each; NaN where either is absent)."""
    t = rows.groupby("m")["latency"].median() * 1e-3
    return float((t[M_HI] - t[M_LO]) / (M_HI - M_LO)) if M_LO in t.index and M_HI in t.index else float("nan")


def main(root: Path) -> None:
    gpus = kernel_gpus([root], only=["gemm_perf"])
    out, by_k = [], []
    for g in gpus:
        df = pd.concat([t.rows for t in g.tables], ignore_index=True)
        cyc = float(g.device.clock) * float(g.device.sm_count)  # SM cycles a second, all SMs
        for (fw, dt), r in df[(df.k <= 256) & (df.n <= 256)].groupby(["framework", "gemm_dtype"]):
            s = slope_s(r)
            out.append((g.name, fw, dt, s * 1e9, s * cyc))
        for (fw, k), r in df[(df.gemm_dtype == "fp8") & (df.n <= 128)].groupby(["framework", "k"]):
            by_k.append((g.name, fw, int(k), slope_s(r) * cyc))
    pd.set_option("display.width", 200)
    t = pd.DataFrame(out, columns=["gpu", "engine", "dtype", "ns/token", "SM cycles/token"]).dropna()
    print("growth with M (K <= 256, N <= 256), M 16,384 -> 32,768:")
    print(t.round({"ns/token": 2, "SM cycles/token": 0}).to_string(index=False))
    k = pd.DataFrame(by_k, columns=["gpu", "engine", "k", "cyc"]).dropna()
    print("\nfp8, SM cycles a token by K (N <= 128):")
    print(k.pivot_table(index="k", columns=["gpu", "engine"], values="cyc").round(0).to_string())
    print(f"\nvLLM fp8 at K <= 2,048: {np.median(k[(k.engine == 'vllm') & (k.k <= 2048)].cyc):.0f} SM cycles a token")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT)
