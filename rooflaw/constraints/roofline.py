"""Roofline evaluation of the compiled cost model: vectorised over candidate tables, or one
architecture with a per-operator breakdown.

Each operator takes max(FLOPs / roof, bytes / bandwidth) on its own roof (linear layers on the
precision's GEMM roof, QKᵀ and scores·V on the attention roof, softmax/norms/activations on the
FP32 vector roof), divided by the achieved efficiencies of the engine profile (:mod:`.engines`;
``ideal``: none) and optionally the GEMM tile/wave efficiency, plus the engine's kernels × launch
cost and per-pass overhead. Decode costs are affine in the step index t, so the sum over all S_out steps of
max(a + b·t, c + e·t) is computed exactly in closed form -- no loop over steps.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..arch.architecture import COLUMNS, Architecture
from ..arch.layer_kinds import kinds, stack_columns
from ..devices.device import Device
from ..devices.precision import Precision
from ..errors import bad
from . import assembly as A
from .assembly import sum_max_affine
from .backends import resolve
from .compile import ARG_NAMES, Compiled, compile_preset
from .curves_applied import curve_tiles
from .engines import Applied, EngineProfile, gemv_path
from .epilogue import fast_outputs, outputs, phase_overheads, with_overhead
from .gemm import gemv_inverse_rate, tile_efficiency
from .scenario import Scenario
from .streams import EXPERT_OPS, roof
from .tiles import rows_ramp, whole_tiles
from .workload import Workload

#: Names of the presets (the registry is :data:`assembly.PRESETS`).
PRESETS = A.PRESETS
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
    shared_ffn = ffn, moe = experts > 1, and :data:`DEFAULTS` for the rest. Layer-stack columns
    (:data:`~rooflaw.arch.STACK_COLUMNS`) default to a uniform stack: attn_layers = layers − mla_layers −
    mixer_layers (each kind that replaces the base attention), ffn_layers = layers − dense_layers (each FFN kind),
    zero layers of every kind (:data:`~rooflaw.arch.layer_kinds.LAYER_KINDS`), the kinds' derived columns
    (``q_lora_on``) from their others.
    """
    stack = stack_columns()
    known = set(COLUMNS) | set(stack)
    cols = {k: np.asarray(columns[k], dtype=np.float64) for k in columns if k in known}
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
    derived = {c: f for k in kinds() for c, f in k.derived.items()}
    for k in stack:
        if k not in ("attn_layers", "ffn_layers") and k not in derived:
            cols.setdefault(k, np.float64(0))
    for base in ("attn_layers", "ffn_layers"):  # the layers the kinds that replace the base leave to it
        own = [cols[k.count] for k in kinds() if k.base == base and not k.in_base]
        cols.setdefault(base, _minus(cols["layers"], *own))
    for c, f in derived.items():
        cols.setdefault(c, np.asarray(f(cols)).astype(np.float64))
    return {k: np.broadcast_to(cols[k], (n,)) for k in (*COLUMNS, *stack)}


def _minus(a: np.ndarray, *terms: Any) -> np.ndarray:
    """``a − t₁ − t₂ …``, skipping a term that is +0.0 for every row (``x − (+0.0)`` is ``x`` bit for bit, NaN
    and −0.0 included): a uniform stack's per-kind layer counts are then the ``layers`` column itself, no copy."""
    for t in terms:
        t = np.asarray(t)
        one = t.ndim == 0 or (t.ndim == 1 and t.size > 0 and t.strides[0] == 0)
        if not (one and t.flat[0] == 0 and not np.signbit(t.flat[0])):
            a = a - t
    return a


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays are views of the same data with the same layout (hence equal, with no pass)."""
    ia, ib = a.__array_interface__, b.__array_interface__
    return ia["data"][0] == ib["data"][0] and a.strides == b.strides and a.shape == b.shape and a.dtype == b.dtype


def stack_kinds(cols: Mapping[str, np.ndarray]) -> frozenset[str]:
    """Layer kinds present in a completed table (empty for uniform stacks: the fastest compiled model)."""
    present = {k.name for k in kinds() if k.count in cols and _any_positive(cols[k.count])}
    per_kind = (cols["attn_layers"], cols["ffn_layers"])
    if not present and any(not _same(c, cols["layers"]) and np.any(c != cols["layers"]) for c in per_kind):
        present.add("stack")  # per-kind counts without extra ops
    return frozenset(present)


def _any_positive(c: np.ndarray) -> bool:
    """``np.any(c > 0)``, reading one value of a broadcast column (stride 0) instead of every row."""
    c = np.asarray(c)
    if c.ndim == 1 and c.strides[0] == 0 and c.size:
        c = c[:1]
    return bool(np.any(c > 0))


def model_call(cols: Mapping[str, np.ndarray], sc: Scenario, comp: Compiled, tiles: bool = False) -> tuple:
    """The arguments of ``comp``'s generated functions for completed columns ``cols`` in scenario ``sc``: the
    architecture and workload arguments, the inverse roofs of both phases, the stream classes' 1/β, the experts'
    blend exponent and the per-kernel overhead (:meth:`device_rates.Rates.stream_args`)."""
    args = _args(cols, sc, comp.args)
    ipp, ipd = _inverse_roofs(comp, sc, args, len(cols["layers"]), tiles)
    return (*args, *ipp, *ipd, *sc.rates.stream_args(tiles, (False, gemv_path(sc.rates, sc.workload.batch))))


def _args(cols: Mapping[str, np.ndarray], sc: Scenario, names: tuple[str, ...] = ARG_NAMES) -> list:
    scal = sc.scalars()
    return [cols[n] if n in cols else scal[n] for n in names]


def _inverse_roofs(comp: Compiled, sc: Scenario, args: list, n: int, tiles: bool):
    """Per part inverse roofs (s/FLOP) of prefill and decode; divided by the tile/wave efficiency with ``tiles`` (a
    routed-expert layer's grouped-GEMM rate is :func:`.streams.roofline_time`'s, in every model)."""
    ipp, ipd = sc.inverse_roofs(comp.roofs)
    if tiles:
        device, rates = sc.chip, sc.rates
        g = [np.broadcast_to(np.asarray(v, dtype=np.float64), (n,)) for v in comp.gemms(*args)]
        half = len(g) // 2
        half_k = float(getattr(device, "gemv_half_k", 0.0))
        half_k16 = float(getattr(device, "gemv16_half_k", 0.0))
        b_w, b_h = (float(args[comp.args.index(k)]) for k in ("b_w", "b_h"))
        moe = np.broadcast_to(np.asarray(args[comp.args.index("moe")], dtype=np.float64), (n,)) > 0
        for j, i in enumerate(comp.gemm_parts):
            b = b_h if comp.names[i] == "lm_head" else b_w
            w16 = b == 2.0 and rates.inv_beta16 > 0  # a 16-bit weight GEMV: its own measured roof and K curve
            inv_b, hk = (rates.inv_beta16, half_k16) if w16 else (rates.inv_beta, half_k)
            for off, ip in ((0, ipp), (half, ipd)):
                M, N, K, grp = g[off + 4 * j : off + 4 * j + 4]
                if rates.curves and comp.roofs[i] == "linear":  # the kernel library's best tile, the curves' M ramp
                    # (a routed expert's rows are padded to whole tiles in its compute time, .moe_padding: its M
                    # here is whole tiles, and the tiles' N quantisation and waves stay)
                    padded = moe & (comp.names[i] in EXPERT_OPS)
                    te, we = curve_tiles(np.where(padded, whole_tiles(M), M), N, grp, device), 1.0
                    te = te * rows_ramp(M, rates.half_rows)  # (a routed expert's grouped-GEMM rate: roofline_time)
                else:
                    te, we = tile_efficiency(M, N, grp, device)
                ip[i] = ip[i] / (te * we)
                if (hk or w16) and comp.roofs[i] == "linear":  # a one-token GEMV's weight stream
                    ip[i] = np.maximum(ip[i], gemv_inverse_rate(M, K, b, inv_b, hk, flat=w16))
    return ipp, ipd


def evaluate_chunk(cols: Mapping[str, np.ndarray], sc: Scenario, tiles: bool = False, per_op: bool = False) -> dict:
    """The numpy backend: every output of :func:`evaluate_columns` for completed columns ``cols`` (one chunk) in
    scenario ``sc`` (one chip: a layout prices each shard with this); ``per_op`` adds ``_ops``, the per-operator
    (FLOPs, bytes, seconds, compute-bound share) of each phase, for breakdowns and layouts."""
    pr = sc.spec
    tiles = tiles and not pr.theory
    comp = compile_preset(sc.preset, stack_kinds(cols) if pr.kinds else frozenset(), tiles)
    workload = sc.workload
    if pr.theory:
        extra, extra_dec = 0.0, 0.0
    else:
        extra, extra_dec = phase_overheads(sc.rates, cols, workload.batch, workload.input_tokens)
    overlap = sc.host_overlap
    n = len(cols["layers"])
    call = model_call(cols, sc, comp, tiles)
    arr = lambda v: np.broadcast_to(np.asarray(v, dtype=np.float64), (n,))  # noqa: E731
    if not per_op:
        vals = [arr(v) for v in comp.fast(*call)]
        out = fast_outputs(vals, sum(comp.n_varying), overlap, extra, extra_dec, workload.output_tokens,
                           pr.memory, sc.energy)  # fmt: skip
        return _finish(sc, out)
    vals = comp.parts(*call)
    S_out = workload.output_tokens
    pre_t, dec_t = np.zeros(n), np.zeros(n)
    ops_out = []
    k = 0
    for i, name in enumerate(comp.names):
        count, F, By, tp, tc, tm, Fd, Bd, td, ncomp = (arr(v) for v in vals[k : k + 10])
        k += 10
        for _ in range(comp.n_varying[i]):
            _, steps, a0, a1, b0, b1 = (arr(v) for v in vals[k : k + 6])
            s, c = sum_max_affine(a0, a1, b0, b1, steps)
            td, ncomp = td + s, ncomp + c
            k += 6
        pre_t, dec_t = pre_t + count * tp, dec_t + count * td
        full = not pr.theory
        ops_out.append({
            "name": name, "roof": roof(comp.roofs[i], sc.chip, sc.precision)[0], "scope": comp.scopes[i],
            "prefill": (count * F, count * By, count * tp, np.where(tc >= tm, 1.0, 0.0) if full else np.ones(n)),
            "decode": (count * Fd, count * Bd, count * td, ncomp / S_out if full else np.zeros(n)),
        })  # fmt: skip
    if not pr.theory:
        z = np.zeros(n)
        e, ed = arr(extra), S_out * arr(extra_dec)
        if overlap:  # host launch on an accelerator: the part of the overhead the roofline does not hide
            e, ed = with_overhead(True, pre_t, e) - pre_t, with_overhead(True, dec_t, ed) - dec_t
        ops_out.append({"name": "engine_overhead", "roof": "-", "scope": "model",
                        "prefill": (z, z, e, z), "decode": (z, z, ed, z)})  # fmt: skip
        pre_t, dec_t = pre_t + e, dec_t + ed
    out = _finish(sc, outputs(pre_t, dec_t, [arr(v) for v in vals[k:]], S_out, pr.memory, sc.energy))
    out["_ops"] = ops_out
    return out


def _finish(sc: Scenario, out: dict[str, Any]) -> dict[str, Any]:
    """:func:`outputs` as arrays of their own (a value serving two outputs, or a read-only view, is copied), with
    ``fits_in_memory`` after ``memory_bytes``."""
    res: dict[str, Any] = {}
    for key, v in out.items():
        res[key] = v.copy() if not v.flags.writeable or any(v is x for x in res.values()) else v
        if key == "memory_bytes":
            res["fits_in_memory"] = v <= sc.chip.memory_capacity
    return res


def evaluate_columns(
    columns: Mapping[str, Any],
    scenario: Scenario | Device,
    workload: Workload | None = None,
    precision: str | Precision = "fp16",
    preset: str = "full",
    tiles: bool = False,
    chunk: int = CHUNK,
    engine: str | EngineProfile | None = None,
    backend: str = "auto",
) -> dict[str, np.ndarray]:
    """Evaluate a table of candidates (dict of equal-length arrays or a DataFrame) in one call.

    ``scenario``: a :class:`~rooflaw.constraints.scenario.Scenario` (device, workload, precision, preset, engine,
    layout); a :class:`Device` with the loose ``workload``, ``precision``, ``preset`` and ``engine`` builds one
    (``Scenario.of``). Returns arrays (SI units): prefill_s, decode_s (all S_out steps), ttft_s, tpot_s, total_s,
    prefill/decode FLOPs and bytes, weight_bytes, kv_cache_bytes, activation_bytes, memory_bytes,
    fits_in_memory, energy_j, params_total, params_active, for one chip (``rooflaw.constraints.evaluate_columns``
    also serves a scenario with a layout). Work is done in chunks of ``chunk`` rows, so memory stays bounded
    whatever the table size. ``backend``: ``numpy``,
    ``numba`` (the generated fused kernel of :mod:`.backend_numba`, same values bit for bit; needs the ``fast``
    extra) or ``auto`` (numba for tables of at least ``backends.AUTO_MIN_ROWS`` rows when installed and ``tiles``
    is off; a warning says why when it cannot).
    """
    sc = Scenario.coerce(scenario, workload, precision, preset, engine)
    if sc.layout is not None:
        raise bad("scenario", sc.describe(), "has a layout: rooflaw.constraints.evaluate_columns serves it")
    pr = sc.spec
    cols = complete_columns(columns)
    n = len(cols["layers"])
    if resolve(backend, n) == "numba":
        from .backend_numba import evaluate_rows  # the optional backend, below this module

        kinds = stack_kinds(cols) if pr.kinds else frozenset()
        call = model_call(cols, sc, compile_preset(sc.preset, kinds))
        res = evaluate_rows(cols, sc, kinds, call, backend == "numba", tiles)
        if res is not None:
            return _finish(sc, res)
    if n <= chunk:
        return evaluate_chunk(cols, sc, tiles)
    parts = []
    for s in range(0, n, chunk):
        sub = {k: v[s : s + chunk] for k, v in cols.items()}
        parts.append(evaluate_chunk(sub, sc, tiles))
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


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
    applied: Applied | None = None

    def __getattr__(self, key: str) -> Any:
        values = self.__dict__.get("values", {})
        if key in values:
            return values[key]
        raise AttributeError(key)

    @property
    def provenance(self) -> str:
        tags = sorted(set(self.device.provenance.values())) or ["unspecified"]
        text = f"preset={self.preset}; device {self.device.id} figures: {', '.join(tags)}"
        if self.applied is not None:
            text += f"; {self.applied.describe()}"
        return text

    def to_frame(self) -> Any:
        """The per-operator breakdown as a pandas DataFrame (phase, name, flops, bytes, seconds, bound, roof)."""
        import pandas as pd

        return pd.DataFrame([o.to_dict() for o in self.ops], columns=list(OpCost.__dataclass_fields__))

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
            "engine": self.applied.engine if self.applied else None,
            "applied": self.applied.to_dict() if self.applied else None,
            "provenance": self.provenance,
            "arch": self.arch.to_dict(),
            "ops": [o.to_dict() for o in self.ops],
        }


def evaluate(
    arch: Architecture,
    scenario: Scenario | Device,
    workload: Workload | None = None,
    precision: str | Precision = "fp16",
    preset: str = "full",
    tiles: bool = False,
    engine: str | EngineProfile | None = None,
) -> CostReport:
    """Latency per phase, memory, energy and the per-operator breakdown of one architecture.

    ``scenario``: a :class:`Scenario`, or a :class:`Device` with the loose ``workload``, ``precision``,
    ``preset`` and ``engine`` (serving-stack profile, :mod:`.engines`; default: the device's; ``"ideal"``: the
    pure roofline). The report's ``applied`` says which efficiencies and overheads were used.
    """
    sc = Scenario.coerce(scenario, workload, precision, preset, engine)
    theory = sc.spec.theory
    cols = complete_columns({k: np.array([float(v)]) for k, v in arch.columns().items()})
    res = evaluate_chunk(cols, sc, tiles, per_op=True)
    ops: list[OpCost] = []
    for phase in ("prefill", "decode"):
        for o in res["_ops"]:
            F, By, s, frac = (float(np.asarray(x).ravel()[0]) for x in o[phase])
            if o["name"] == "engine_overhead":
                if s > 0:
                    ops.append(OpCost(o["name"], phase, 0.0, 0.0, s, "overhead", "-"))
                continue
            if F == 0 and By == 0:
                continue
            if theory:
                bound = "compute" if phase == "prefill" else "memory"
            elif phase == "prefill" or frac in (0.0, 1.0):
                bound = "compute" if frac >= 1.0 else "memory"
            else:
                bound = f"mixed ({frac:.0%} of steps compute-bound)"
            ops.append(OpCost(o["name"], phase, F, By, s, bound, o["roof"]))
    values = {k: (float(v[0]) if k != "fits_in_memory" else bool(v[0])) for k, v in res.items() if k != "_ops"}
    return CostReport(arch, sc.chip, sc.workload, sc.precision, sc.preset, tiles, values, ops, sc.applied)
