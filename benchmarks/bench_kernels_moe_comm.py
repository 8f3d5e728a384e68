"""MoE and collective kernel families: fit per GPU (in sample) and leave one GPU out, on the measured kernel tables.

    PYTHONPATH=. python benchmarks/bench_kernels_moe_comm.py [DATA_DIR] [--json]

DATA_DIR defaults to ``../shared/data/kernels`` (one folder per GPU, one gz CSV per table). The MoE family needs
the GEMM figures (``compute``, ``memory``, ``kernel_s``) of the architecture: where the GEMM family is registered
(``FAMILIES["gemm"]`` and the fit driver ``kernels.fit``) they are fitted by it (``--provisional`` forces the
fallback); otherwise this script fits them provisionally from ``gemm_perf`` with the one kernel formula
``max(2MNK / (peak · compute[dtype]), bytes / (bandwidth · memory)) + kernel_s`` on a seeded subsample.

Leave one GPU out: every figure (GEMM, ``moe``, collective curves) is fitted on the other GPUs' rows pooled (each
GPU with its own datasheet peaks and link), then the held-out GPU is predicted from its datasheet -- what a GPU
whose architecture has no kernel data gets. In sample: the same fit on the GPU's own rows. Printed: median
|predicted/measured − 1| per family (custom all-reduce rows of TensorRT-LLM and vLLM's CUDA-graph path; NCCL rows).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

import rooflaw as R
from rooflaw.constraints.kernels import CollectiveCurve, KernelCurves
from rooflaw.constraints.kernels import collectives as KC
from rooflaw.constraints.kernels import moe as KM

GPUS = {"a100_sxm": "a100-sxm-80gb", "h100_sxm": "h100-sxm", "b200_sxm": "b200", "l40s": "l40s"}
#: gemm_dtype -> (weight bytes, activation bytes, roof dtype, compute key)
GEMM = {"bfloat16": (2, 2, "fp16", "fp16"), "fp8": (1, 1, "fp8", "fp8"), "fp8_block": (1, 1, "fp8", "fp8_block"),
        "nvfp4": (0.5625, 0.5625, "fp4", "fp4"), "int4_wo": (0.5 + 2 / 128, 2, "fp16", "mixed"),
        "int8_wo": (1 + 2 / 128, 2, "fp16", "mixed")}  # fmt: skip
SUBSAMPLE = 20000
SEED = 0


def read(root: Path, gpu: str, table: str) -> pd.DataFrame:
    parts = [pd.read_csv(f) for f in sorted((root / gpu).glob(f"*/{table}.csv.gz"))]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def sub(d: pd.DataFrame) -> pd.DataFrame:
    """A seeded subsample of at most SUBSAMPLE rows to fit on (every row is scored)."""
    return d.sample(min(SUBSAMPLE, len(d)), random_state=SEED).reset_index(drop=True)


def finite(r: np.ndarray) -> np.ndarray:
    """Residuals with the rows a family does not model (NaN) contributing nothing."""
    return np.where(np.isfinite(r), r, 0.0)


# ---- provisional GEMM figures ---------------------------------------------------------------------------
def gemm_rows(root: Path, gpu: str) -> pd.DataFrame:
    d = read(root, gpu, "gemm_perf")
    return sub(d[d.gemm_dtype.isin(list(GEMM))])


def gemm_predict(d: pd.DataFrame, dev, c: KernelCurves) -> np.ndarray:
    spec = np.array([GEMM[t] for t in d.gemm_dtype], dtype=object)
    bw_, ba = spec[:, 0].astype(float), spec[:, 1].astype(float)
    peak = np.array([dev.roof(r)[1] for r in spec[:, 2]])
    frac = np.array([c.compute.get(k, c.compute.get(r, 1.0)) for k, r in zip(spec[:, 3], spec[:, 2], strict=True)])
    m, n, k = (d[x].to_numpy(float) for x in ("m", "n", "k"))
    t_c = 2 * m * n * k / (peak * frac)
    t_m = (m * k * ba + k * n * bw_ + m * n * 2) / (dev.memory_bandwidth * c.memory)
    return (np.maximum(t_c, t_m) + c.kernel_s) * 1e3


def gemm_family_fit(root: Path, train: list[str], sample: int = 8000) -> KernelCurves | None:
    """The GEMM family's own fit (``kernels.fit``) on ``train``'s ``gemm_perf`` tables, pooled; ``None`` where that
    family or driver is not in this tree."""
    from rooflaw.constraints.kernels import FAMILIES

    try:
        from rooflaw.constraints.kernels import fit as kf
        from rooflaw.constraints.kernels.tables import gpu_tables
    except ImportError:
        return None
    if "gemm" not in FAMILIES:
        return None
    gpus = []
    for g in train:
        tabs = [t for t in gpu_tables(root / g)[g] if t.table == "gemm_perf"]
        gpus.append(kf.GPU(g, R.get_device(GPUS[g]), tabs))
    return kf.fit_curves(gpus, "fit", sample, families=[FAMILIES["gemm"]])


def fit_gemm(rows: list[tuple[pd.DataFrame, object]]) -> KernelCurves:
    keys = sorted({GEMM[t][3] for d, _ in rows for t in d.gemm_dtype.unique()})

    def curves(p):
        return KernelCurves(
            "fit", dict(zip(keys, np.exp(p[: len(keys)]), strict=True)), float(np.exp(p[-2])), float(np.exp(p[-1]))
        )

    def res(p):
        c = curves(p)
        return finite(np.concatenate([np.log(gemm_predict(d, dev, c) / d.latency.to_numpy()) for d, dev in rows]))

    x0 = np.log([0.7] * len(keys) + [0.8, 5e-6])
    return curves(least_squares(res, x0, loss="soft_l1", f_scale=0.1).x)


# ---- fitting the MoE and collective figures -------------------------------------------------------------
def fit_moe(rows: list[tuple[pd.DataFrame, object, KernelCurves]]) -> float:
    prepared = [(KM.prepare(d, dev), d.latency.to_numpy() * 1e-3, dev, c) for d, dev, c in rows]

    def res(p):
        return finite(np.concatenate([np.log(KM.evaluate(t, dev, replace(c, moe=float(np.exp(p[0])))) / m)
                                      for t, m, dev, c in prepared]))  # fmt: skip

    return float(np.exp(least_squares(res, [np.log(0.7)], loss="soft_l1", f_scale=0.1).x[0]))


def fit_collective(rows: list[tuple[pd.DataFrame, object]], key: str, predict) -> dict[str, CollectiveCurve]:
    """One curve per link kind present in ``rows`` (keys ``"<key>/<kind>"``); a kind absent stays unfitted (the
    predictor carries another kind's curve to it)."""
    out = {}
    for kind in KC.LINK_KINDS:
        mine = [(d, dev) for d, dev in rows if (KC.device_link(dev) or ("", 0))[0] == kind]
        if not mine:
            continue

        def cv(p, kind=kind):
            c = CollectiveCurve(latency=float(np.exp(p[0])), efficiency=float(np.exp(p[1])))
            return KernelCurves("fit", {}, 1.0, 0.0, collectives={f"{key}/{kind}": c})

        def res(p, mine=mine, cv=cv):
            return finite(np.concatenate([np.log(predict(d, dev, cv(p)) / d.latency.to_numpy()) for d, dev in mine]))

        x = least_squares(res, np.log([KC.SEED.latency, KC.SEED.efficiency]), loss="soft_l1", f_scale=0.1).x
        out[f"{key}/{kind}"] = CollectiveCurve(latency=float(np.exp(x[0])), efficiency=float(np.exp(x[1])))
    return out


def med(x: np.ndarray) -> float:
    x = x[np.isfinite(x)]
    return float(np.median(np.abs(x))) if len(x) else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    repo = Path(__file__).resolve().parents[1]
    found = [p for p in (repo.parent / "shared/data/kernels", repo.parents[1] / "shared/data/kernels") if p.is_dir()]
    ap.add_argument("data", nargs="?", default=str(found[0]) if found else None)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--provisional", action="store_true", help="fit the GEMM figures with this script's formula")
    args = ap.parse_args(argv)
    if args.data is None or not any(Path(args.data).glob("*/*/moe_perf.csv.gz")):
        ap.error(f"data={args.data!r}: no kernel tables (GPU/framework-version/TABLE.csv.gz) there")
    root = Path(args.data)
    t0 = time.perf_counter()
    dev = {g: R.get_device(i) for g, i in GPUS.items()}
    gemm = {g: gemm_rows(root, g) for g in GPUS}
    moe = {g: read(root, g, "moe_perf") for g in GPUS}
    ar = {g: read(root, g, "custom_allreduce_perf") for g in GPUS}
    nccl = {g: read(root, g, "nccl_perf") for g in GPUS}
    ar_keys = {"allreduce": "trtllm", "allreduce_vllm": "vllm"}
    out: dict[str, dict] = {}
    for held in GPUS:
        res = {}
        for mode, train in (("in_sample", [held]), ("held_out", [g for g in GPUS if g != held])):
            gc = None if args.provisional else gemm_family_fit(root, train)
            gemm_source = "GEMM family" if gc is not None else "provisional"
            gc = gc or fit_gemm([(gemm[g], dev[g]) for g in train])
            base = {g: gc for g in GPUS}
            m = fit_moe([(sub(moe[g]), dev[g], base[g]) for g in train])
            coll: dict[str, CollectiveCurve] = {}
            for key, fw in ar_keys.items():
                rows = [(ar[g][ar[g].framework.str.lower() == fw], dev[g]) for g in train]
                coll.update(fit_collective(rows, key, KC.predict_allreduce))
            for op, key in KC.NCCL_OPS.items():
                rows = [(nccl[g][nccl[g].op_name == op], dev[g]) for g in train]
                coll.update(fit_collective(rows, key, KC.predict_nccl))
            cv = replace(gc, moe=m, collectives=coll)
            e = lambda d, p: p / d.latency.to_numpy() - 1  # noqa: E731
            res[mode] = {
                "moe": med(e(moe[held], KM.predict(moe[held], dev[held], cv))),
                "allreduce": med(e(ar[held], KC.predict_allreduce(ar[held], dev[held], cv))),
                "nccl": med(e(nccl[held], KC.predict_nccl(nccl[held], dev[held], cv))),
                "figures": {
                    "gemm_source": gemm_source,
                    "moe": m,
                    "memory": cv.memory,
                    "kernel_s": cv.kernel_s,
                    "compute": cv.compute,
                    "collectives": {k: [c.latency, c.efficiency] for k, c in coll.items()},
                },  # fmt: skip
            }
        out[held] = res
    fams = ("moe", "allreduce", "nccl")
    summary = {m: {f: float(np.median([out[g][m][f] for g in GPUS])) for f in fams} for m in ("in_sample", "held_out")}
    if args.json:
        print(json.dumps({"per_gpu": out, "median_over_gpus": summary, "seconds": time.perf_counter() - t0}, indent=1))
        return 0
    print(f"{'GPU':10s} {'mode':9s} " + " ".join(f"{f:>9s}" for f in fams) + "   moe fraction   GEMM figures")
    for g in GPUS:
        for m in ("in_sample", "held_out"):
            r = out[g][m]
            fig = r["figures"]
            print(f"{g:10s} {m:9s} " + " ".join(f"{r[f]:9.3f}" for f in fams) + f"   {fig['moe']:.3f}"
                  f"   {fig['gemm_source']}")  # fmt: skip
    for m in ("in_sample", "held_out"):
        print(f"{'median':10s} {m:9s} " + " ".join(f"{summary[m][f]:9.3f}" for f in fams))
    print(f"({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
