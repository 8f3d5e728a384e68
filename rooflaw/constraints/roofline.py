"""Roofline evaluation of the compiled cost model: vectorised over candidate tables, or one
architecture with a per-operator breakdown.

Each operator takes max(FLOPs / roof, bytes / bandwidth) on its own roof (linear layers on the
precision's GEMM roof, QKᵀ and scores·V on the attention roof, softmax/norms/activations on the
FP32 vector roof), optionally divided by the device's efficiency factors and the GEMM tile/wave
efficiency. Decode costs are affine in the step index t, so the sum over all S_out steps of
max(a + b·t, c + e·t) is computed exactly in closed form -- no loop over steps.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..arch.architecture import COLUMNS, Architecture
from ..devices.device import Device
from ..errors import bad
from .compile import ARG_NAMES, Compiled, compile_preset
from .gemm import tile_efficiency
from .precision import Precision
from .workload import Workload

PRESETS = ("full", "paper")
#: Share of the dynamic power attributed to compute (the rest to memory traffic) when a device
#: gives only idle and peak power: E = P_idle·T + (P_peak − P_idle)·(w·Σ F/π + (1 − w)·Σ bytes/β).
COMPUTE_POWER_SHARE = 0.5
CHUNK = 1 << 15

#: Defaults for architecture columns a candidate table may omit.
DEFAULTS = {
    "shared_experts": 0,
    "vocab": 32000,
    "tied": 0,
    "gated": 1,
    "qkv_bias": 0,
    "layernorm": 0,
    "qk_norm_size": 0,
    "norms_per_layer": 2,
    "shared_gate": 0,
    "qk_norm_on": 0,
    "experts": 1,
    "top_k": 1,
}


def complete_columns(columns: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Fill derived/default architecture columns of a candidate table (dict of arrays or DataFrame).

    Required: layers, d_model, heads, ffn. Defaults: kv_heads = heads, head_dim = d_model/heads,
    shared_ffn = ffn, moe = experts > 1, and :data:`DEFAULTS` for the rest.
    """
    cols = {k: np.asarray(columns[k], dtype=np.float64) for k in columns if k in COLUMNS}
    for k in ("layers", "d_model", "heads", "ffn"):
        if k not in cols:
            raise bad("columns", k, f"missing; candidate tables need {', '.join(COLUMNS[:6])}")
    n = max(np.size(v) for v in cols.values())
    cols.setdefault("kv_heads", cols["heads"])
    cols.setdefault("head_dim", cols["d_model"] / cols["heads"])
    cols.setdefault("shared_ffn", cols["ffn"])
    for k, v in DEFAULTS.items():
        cols.setdefault(k, np.float64(v))
    cols.setdefault("moe", (cols["experts"] > 1).astype(np.float64))
    return {k: np.broadcast_to(cols[k], (n,)) for k in COLUMNS}


def _sum_max_affine(a0, a1, b0, b1, n: int):
    """Σ_{t=1..n} max(a0 + a1·t, b0 + b1·t), exactly, and the number of steps where a > b."""
    g0, g1 = a0 - b0, a1 - b1
    base = n * b0 + b1 * n * (n + 1) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        root = np.where(g1 != 0, -g0 / np.where(g1 != 0, g1, 1.0), 0.0)
    # g1 > 0: positive for t > root; g1 < 0: positive for t < root; g1 == 0: all or none.
    lo = np.clip(np.floor(root) + 1, 1, n + 1)
    hi = np.clip(np.ceil(root) - 1, 0, n)
    cnt = np.where(g1 > 0, n - lo + 1, np.where(g1 < 0, hi, np.where(g0 > 0, n, 0)))
    first = np.where(g1 > 0, lo, 1.0)
    last = first + cnt - 1
    pos = cnt * g0 + g1 * (first + last) * cnt / 2
    return base + np.maximum(pos, 0.0), cnt


@dataclass
class _Roofs:
    pi: np.ndarray  # per op FLOP/s (after compute efficiency)
    beta: float  # bytes/s (after memory efficiency)
    raw_pi: np.ndarray
    raw_beta: float
    dtypes: list[str]


def _roofs(compiled: Compiled, device: Device, precision: Precision) -> _Roofs:
    pis, dtypes = [], []
    for op in compiled.ops:
        if op.roof == "linear":
            dt, p = device.roof(precision.linear_dtype)
        elif op.roof == "attention":
            dt, p = device.roof(precision.attention_dtype)
        elif op.roof == "vector":
            dt, p = "fp32", device.vector_flops
        else:
            dt, p = "-", np.inf
        pis.append(p)
        dtypes.append(dt)
    raw = np.array(pis, dtype=np.float64)
    return _Roofs(
        raw * device.compute_efficiency,
        device.memory_bandwidth * device.memory_efficiency,
        raw,
        float(device.memory_bandwidth),
        dtypes,
    )


def _roofs_by_class(device: Device, precision: Precision) -> dict[str, float]:
    """Raw peak FLOP/s of the linear, attention and vector roofs (no efficiency factors)."""
    return {
        "linear": device.roof(precision.linear_dtype)[1],
        "attention": device.roof(precision.attention_dtype)[1],
        "vector": device.vector_flops,
    }


def _args(cols: Mapping[str, np.ndarray], workload: Workload, precision: Precision) -> list:
    scal = {
        "B": workload.batch,
        "S_in": workload.input_tokens,
        "S_out": workload.output_tokens,
        "unfused": 1.0 if workload.attention == "unfused" else 0.0,
        "b_w": precision.weights.bytes,
        "b_a": precision.activations.bytes,
        "b_kv": precision.kv.bytes,
        "b_v": precision.vector_bytes,
    }
    return [cols[n] if n in cols else scal[n] for n in ARG_NAMES]


def _evaluate_fast(cols, device, workload, precision, preset):
    """Bulk path (no per-op breakdown, no tile model): one generated function does most work."""
    comp = compile_preset(preset)
    args = _args(cols, workload, precision)
    r = _roofs_by_class(device, precision)
    ce, ibeta = device.compute_efficiency, 1.0 / (device.memory_bandwidth * device.memory_efficiency)
    vals = comp.fast(*args, 1 / (r["linear"] * ce), 1 / (r["attention"] * ce), 1 / (r["vector"] * ce), ibeta)
    n = len(cols["layers"])
    vals = [np.broadcast_to(np.asarray(v, dtype=np.float64), (n,)) for v in vals]
    S_out = workload.output_tokens
    layers = cols["layers"]
    pre_l, pre_m, dec_l, dec_m = vals[:4]
    for j, i in enumerate(comp.varying):
        a0, a1, b0, b1 = vals[4 + 4 * j : 8 + 4 * j]
        td, _ = _sum_max_affine(a0, a1, b0, b1, S_out)
        if comp.ops[i].scope == "layer":
            dec_l = dec_l + td
        else:
            dec_m = dec_m + td
    totals = vals[4 + 4 * len(comp.varying) :]
    pre_t, dec_t = layers * pre_l + pre_m, layers * dec_l + dec_m
    if device.kernel_overhead and preset == "full":
        launches = layers * totals[-2] + totals[-1]
        pre_t = pre_t + device.kernel_overhead * launches
        dec_t = dec_t + device.kernel_overhead * S_out * launches
    return _finish(cols, device, precision, preset, workload, pre_t, dec_t, totals)


def _evaluate_chunk(cols, device, workload, precision, preset, tiles, per_op):
    if not per_op and not tiles:
        return _evaluate_fast(cols, device, workload, precision, preset)
    comp = compile_preset(preset)
    roofs = _roofs(comp, device, precision)
    args = _args(cols, workload, precision)
    n = len(cols["layers"])
    vals = [np.broadcast_to(np.asarray(v, dtype=np.float64), (n,)) for v in comp.phases(*args)]
    totals = vals[comp.n_phase_values :]
    nops = len(comp.ops)
    layers = cols["layers"]
    S_out = workload.output_tokens
    eff_pre = [1.0] * nops
    eff_dec = [1.0] * nops
    if tiles and preset == "full":
        g = [np.broadcast_to(np.asarray(v, dtype=np.float64), (n,)) for v in comp.gemms(*args)]
        half = len(g) // 2
        for j, i in enumerate(comp.gemm_ops):
            M, N, _, grp = g[4 * j : 4 * j + 4]
            te, we = tile_efficiency(M, N, grp, device)
            eff_pre[i] = te * we
            M, N, _, grp = g[half + 4 * j : half + 4 * j + 4]
            te, we = tile_efficiency(M, N, grp, device)
            eff_dec[i] = te * we
    out: dict[str, Any] = {}
    pre = {"layer": np.zeros(n), "model": np.zeros(n)}
    dec_const = {"layer": np.zeros(n), "model": np.zeros(n)}  # one step; times S_out at the end
    dec = {"layer": np.zeros(n), "model": np.zeros(n)}
    ibeta = 1.0 / roofs.beta
    ops_out = []
    for i, op in enumerate(comp.ops):
        F, By = vals[2 * i], vals[2 * i + 1]
        f0, f1, b0, b1 = vals[2 * nops + 4 * i : 2 * nops + 4 * i + 4]
        ipi = 0.0 if not np.isfinite(roofs.pi[i]) else 1.0 / roofs.pi[i]
        ipi_p, ipi_d = ipi / eff_pre[i], ipi / eff_dec[i]
        tc, tm = F * ipi_p, By * ibeta
        launch = device.kernel_overhead * np.sign(F + By) if preset == "full" else 0.0
        if preset == "paper":  # theory mode: compute-bound prefill, memory-bound decode
            tp = tc
            td = (S_out * b0 + b1 * S_out * (S_out + 1) / 2) * ibeta
            ncomp = np.zeros(n)
            dec[op.scope] += td
        elif comp.step_constant[i]:
            tp = np.maximum(tc, tm) + launch
            c0, m0 = f0 * ipi_d, b0 * ibeta
            step = np.maximum(c0, m0) + launch
            dec_const[op.scope] += step
            if per_op:
                td = S_out * step
                ncomp = np.where(c0 > m0, float(S_out), 0.0)
        else:
            tp = np.maximum(tc, tm) + launch
            td, ncomp = _sum_max_affine(f0 * ipi_d, f1 * ipi_d, b0 * ibeta, b1 * ibeta, S_out)
            td = td + S_out * launch
            dec[op.scope] += td
        pre[op.scope] += tp
        if per_op:
            mult = layers if op.scope == "layer" else 1.0
            Fd = S_out * f0 + f1 * S_out * (S_out + 1) / 2
            Bd = S_out * b0 + b1 * S_out * (S_out + 1) / 2
            ops_out.append(
                {
                    "name": op.name,
                    "roof": roofs.dtypes[i],
                    "scope": op.scope,
                    "prefill": (
                        mult * F,
                        mult * By,
                        mult * tp,
                        np.where(tc >= tm, 1.0, 0.0) if preset == "full" else np.ones(n),
                    ),
                    "decode": (mult * Fd, mult * Bd, mult * td, ncomp / S_out if preset == "full" else np.zeros(n)),
                }
            )
    pre_t = layers * pre["layer"] + pre["model"]
    dec_t = layers * (dec["layer"] + S_out * dec_const["layer"]) + dec["model"] + S_out * dec_const["model"]
    out = _finish(cols, device, precision, preset, workload, pre_t, dec_t, totals)
    if per_op:
        out["_ops"] = ops_out
    return out


def _finish(cols, device, precision, preset, workload, pre_t, dec_t, totals):
    """Memory, energy and the output dict from phase times and the generated totals."""
    n = len(pre_t)
    S_out = workload.output_tokens
    out: dict[str, Any] = {}
    (weights, kv, act, p_total, p_active, fpl, fpa, fpv, fdl, fda, fdv, bpre, bdec) = totals[:13]
    memory = weights + (kv + act if preset == "full" else 0.0)
    total = pre_t + dec_t
    flops_pre, flops_dec = fpl + fpa + fpv, fdl + fda + fdv
    if device.energy_per_flop is not None and device.energy_per_byte is not None:
        dyn = device.energy_per_flop * (flops_pre + flops_dec) + device.energy_per_byte * (bpre + bdec)
    elif device.power_peak is not None:
        r = _roofs_by_class(device, precision)
        busy_c = (fpl + fdl) / r["linear"] + (fpa + fda) / r["attention"] + (fpv + fdv) / r["vector"]
        busy_m = (bpre + bdec) / device.memory_bandwidth
        dyn = (device.power_peak - (device.power_idle or 0.0)) * (
            COMPUTE_POWER_SHARE * busy_c + (1 - COMPUTE_POWER_SHARE) * busy_m
        )
    else:
        dyn = np.full(n, np.nan)
    energy = (device.power_idle or 0.0) * total + dyn
    out.update(
        prefill_s=pre_t,
        decode_s=dec_t,
        ttft_s=pre_t.copy(),
        tpot_s=dec_t / S_out,
        total_s=total,
        prefill_flops=flops_pre,
        decode_flops=flops_dec,
        prefill_bytes=bpre.copy(),
        decode_bytes=bdec.copy(),
        weight_bytes=weights.copy(),
        kv_cache_bytes=kv.copy(),
        activation_bytes=act.copy(),
        memory_bytes=memory,
        fits_in_memory=memory <= device.memory_capacity,
        energy_j=energy,
        params_total=p_total.copy(),
        params_active=p_active.copy(),
    )
    return out


def evaluate_columns(
    columns: Mapping[str, Any],
    device: Device,
    workload: Workload | None = None,
    precision: str | Precision = "fp16",
    preset: str = "full",
    tiles: bool = False,
    chunk: int = CHUNK,
    backend: str = "auto",
) -> dict[str, np.ndarray]:
    """Evaluate a table of candidates (dict of equal-length arrays or a DataFrame) in one call.

    Returns arrays (SI units): prefill_s, decode_s (all S_out steps), ttft_s, tpot_s, total_s,
    prefill/decode FLOPs and bytes, weight_bytes, kv_cache_bytes, activation_bytes, memory_bytes,
    fits_in_memory, energy_j, params_total, params_active. Work is done in chunks of ``chunk``
    rows, so memory stays bounded whatever the table size. ``backend``: ``numpy``, ``numba`` (the generated fused
    kernel of :mod:`.backend_numba`, same values bit for bit; needs the ``fast`` extra) or ``auto`` (numba for
    tables of at least ``AUTO_MIN_ROWS`` rows when installed and ``tiles`` is off).
    """
    if preset not in PRESETS:
        raise bad("preset", preset, f"must be one of {', '.join(PRESETS)}")
    workload = workload or Workload()
    precision = Precision.parse(precision)
    cols = complete_columns(columns)
    n = len(cols["layers"])
    if _use_numba(backend, n, tiles):
        from .backend_numba import evaluate_rows

        res = evaluate_rows(cols, device, workload, precision, preset, strict=backend == "numba")
        if res is not None:
            return res
    if n <= chunk:
        res = _evaluate_chunk(cols, device, workload, precision, preset, tiles, False)
        return res
    parts = []
    for s in range(0, n, chunk):
        sub = {k: v[s : s + chunk] for k, v in cols.items()}
        parts.append(_evaluate_chunk(sub, device, workload, precision, preset, tiles, False))
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _use_numba(backend: str, n: int, tiles: bool) -> bool:
    from . import backend_numba as bn

    if bn.resolve(backend, n) == "numpy":
        return False
    if tiles:
        if backend == "numba":
            raise bad("backend", backend, "the numba kernel has no tile/wave model; use tiles=False or numpy")
        return False
    return True


@dataclass
class OpCost:
    """One operator in one phase, summed over layers (and over all decode steps for ``decode``)."""

    name: str
    phase: str
    flops: float
    bytes: float
    seconds: float
    bound: str
    roof: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class CostReport:
    """Latency, memory and energy of one architecture on one device. SI units."""

    arch: Architecture
    device: Device
    workload: Workload
    precision: Precision
    preset: str
    tiles: bool
    values: dict[str, float]
    ops: list[OpCost] = field(default_factory=list)

    def __getattr__(self, key: str) -> Any:
        values = self.__dict__.get("values", {})
        if key in values:
            return values[key]
        raise AttributeError(key)

    @property
    def provenance(self) -> str:
        tags = sorted(set(self.device.provenance.values())) or ["unspecified"]
        return f"preset={self.preset}; device {self.device.id} figures: {', '.join(tags)}"

    def to_dict(self) -> dict[str, Any]:
        v = self.values
        return {
            "params_total": int(v["params_total"]),
            "params_active": int(v["params_active"]),
            "weight_bytes": v["weight_bytes"],
            "kv_cache_bytes": v["kv_cache_bytes"],
            "activation_bytes": v["activation_bytes"],
            "memory_bytes": v["memory_bytes"],
            "fits_in_memory": bool(v["fits_in_memory"]),
            "prefill_s": v["prefill_s"],
            "decode_s": v["decode_s"],
            "ttft_s": v["ttft_s"],
            "tpot_s": v["tpot_s"],
            "total_s": v["total_s"],
            "energy_j": v["energy_j"],
            "prefill_flops": v["prefill_flops"],
            "decode_flops": v["decode_flops"],
            "prefill_bytes": v["prefill_bytes"],
            "decode_bytes": v["decode_bytes"],
            "preset": self.preset,
            "device": self.device.id,
            "precision": self.precision.to_dict(),
            "workload": self.workload.to_dict(),
            "tiles": self.tiles,
            "provenance": self.provenance,
            "arch": self.arch.to_dict(),
            "ops": [o.to_dict() for o in self.ops],
        }


def evaluate(
    arch: Architecture,
    device: Device,
    workload: Workload | None = None,
    precision: str | Precision = "fp16",
    preset: str = "full",
    tiles: bool = False,
) -> CostReport:
    """Latency per phase, memory, energy and the per-operator breakdown of one architecture."""
    if preset not in PRESETS:
        raise bad("preset", preset, f"must be one of {', '.join(PRESETS)}")
    workload = workload or Workload()
    precision = Precision.parse(precision)
    cols = {k: np.array([float(v)]) for k, v in arch.columns().items()}
    res = _evaluate_chunk(cols, device, workload, precision, preset, tiles, True)
    ops: list[OpCost] = []
    for phase in ("prefill", "decode"):
        for o in res["_ops"]:
            F, By, s, frac = (float(x[0]) for x in o[phase])
            if F == 0 and By == 0:
                continue
            if preset == "paper":
                bound = "compute" if phase == "prefill" else "memory"
            elif phase == "prefill" or frac in (0.0, 1.0):
                bound = "compute" if frac >= 1.0 else "memory"
            else:
                bound = f"mixed ({frac:.0%} of steps compute-bound)"
            ops.append(OpCost(o["name"], phase, F, By, s, bound, o["roof"]))
    values = {k: (float(v[0]) if k != "fits_in_memory" else bool(v[0])) for k, v in res.items() if k != "_ops"}
    return CostReport(arch, device, workload, precision, preset, tiles, values, ops)


def decode_steps(
    arch: Architecture,
    device: Device,
    workload: Workload | None = None,
    precision: str | Precision = "fp16",
    preset: str = "full",
    tiles: bool = False,
) -> list[dict[str, float]]:
    """Latency of every decode step t = 1..S_out (context S_in + t), one dict per step.

    Evaluates each step as a one-step decode at its own context, independently of the closed-form
    sum used by :func:`evaluate` -- the two agree exactly (a test checks it).
    """
    workload = workload or Workload()
    steps = []
    for step in range(1, workload.output_tokens + 1):
        w = Workload(workload.batch, workload.input_tokens + step - 1, 1, workload.attention)
        rep = evaluate(arch, device, w, precision, preset, tiles)
        steps.append(
            {
                "step": step,
                "context": workload.input_tokens + step,
                "seconds": rep.decode_s,
                "flops": rep.decode_flops,
                "bytes": rep.decode_bytes,
            }
        )
    return steps
