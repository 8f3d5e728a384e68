"""The efficiency fit's predictions of every case at once, as flat per-op arrays.

:func:`.fit_efficiency._predict` prices one case in Python; called for all 113 published cases it takes
6 ms per residual evaluation, and a fit makes about 2 500 (finite-difference Jacobians). :class:`FlatCases`
lays the same arithmetic out once — every op of every timed pass ("t-call") of every case in one array,
each parameter looked up by an index — so one evaluation is a few numpy ufuncs (0.05 ms). The two
give the same seconds (tests/test_truth_fit.py).

A case's prediction is ``Σ_g w_g · max(t_j1(g), t_j2(g))`` over its groups ``g``: one group for a prefill
or a decode step, two (prefill, decode steps) for a gpt-fast end-to-end token, one per steady-state step
kind of continuous batching (the slower of its prompt chunk and its decode tokens). A prefill whose prompts an
engine pads to the batch's longest (``fit_efficiency.padded``) prices each op at F + (r − 1)·ΔF FLOPs and
B + (r − 1)·ΔB bytes, r the padded-to-mean token ratio of the fitted prompt spread (``CaseFeatures.pad_delta``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import sympy as sp

from .engines import BUILTIN_ENGINES
from .serving import expected_max_normal

if TYPE_CHECKING:
    from ..devices.device import Device
    from .published import Case

#: :class:`.fit_efficiency.FitParameters` (duck-typed here: this module sits below ``fit_efficiency``, which imports
#: it)
FitParameters = Any
#: Per-op FLOPs and bytes of one pass (F, B).
OpFB = tuple[np.ndarray, np.ndarray]


def serial_key(case: Any) -> str:
    """The fixed figure holding the MoE blend's q on ``case``'s device under kernel curves (q follows the device's
    bandwidth per SM, :mod:`.kernels.moe_blend`; the architecture's ``moe_serial`` is its fitted GPUs')."""
    return f"moe_serial@{case.device}"


@dataclass
class CaseFeatures:
    """Per-op FLOPs/bytes of one case's passes (summed over layers) and its roof dtypes."""

    pre: tuple[np.ndarray, np.ndarray]  # F, B per op
    dec: tuple[np.ndarray, np.ndarray]
    pi: np.ndarray
    dtypes: list[str]
    beta: float
    #: engine -> kernels per pass, times the device's cycle scale (``curves_applied.cycle_scale``: the curves'
    #: kernel_s is SM cycles at their clock; 1 without curves)
    launches: dict[str, float]
    mixed: np.ndarray  # per op: 1 for a dequantising (mixed-input) linear GEMM
    att: np.ndarray  # per op: 1 for an attention matmul (QKᵀ, scores·V)
    vector: float  # the vector (FP32 CUDA-core) roof, FLOP/s: dequantising GEMVs of small decode batches
    #: continuous batching (``Case.concurrent``): per steady-state step kind, (count, prefill F/B of its c + n
    #: tokens or None, decode-step F/B of its n sequences or None, n)
    steps: (
        list[tuple[float, tuple[np.ndarray, np.ndarray] | None, tuple[np.ndarray, np.ndarray] | None, int]] | None
    ) = None
    #: engine -> seconds per pass the kernel curves' per-GEMM-call extras add (0 without curves)
    gemm_extra: dict[str, float] = field(default_factory=dict)
    #: a padded prefill (:func:`.fit_efficiency.padded`): per-op (F, B) of prompts of 2·S_in less those of S_in, so
    #: prompts padded to r·S_in cost pre + (r − 1)·pad_delta (exact for the terms linear in the tokens)
    pad_delta: tuple[np.ndarray, np.ndarray] | None = None
    #: per op: 1 for a routed-expert layer's grouped GEMM (:data:`.assembly.EXPERT_OPS` of an MoE model): its bytes
    #: stream at ``memory:experts`` and its times blend with ``moe_serial``; decode attention matmuls (``att``) read
    #: the KV cache at ``memory:kv`` (the assembly's memory stream classes)
    expert: np.ndarray | None = None
    #: MoE layers per pass (each adds ``moe_s``), times the device's cycle scale (as ``launches``)
    moe_layers: float = 0.0
    #: decode attention's kernel terms (:func:`decode_terms`) of ``dec`` and of each ``steps`` decode (None: none)
    dec_terms: tuple[Any, ...] | None = None
    step_terms: list[tuple[Any, ...] | None] | None = None
    #: the MoE blend's q on the case's device (:attr:`.engines.Applied.moe_serial`; the fit holds it under curves)
    moe_q: float = 0.0
    #: a fused prefill kernel's terms (:func:`prefill_terms`: per-op blend q, the waves' seconds, the softmax's seconds
    #: per FLOP and p; ``pre`` already carries the tiles' efficiency) of ``pre`` and of each ``steps`` prefill
    pre_terms: tuple[Any, ...] | None = None
    step_pre_terms: list[tuple[Any, ...] | None] | None = None


class FlatCases:
    """Index arrays of ``cases`` against the parameter vector of ``P`` (plus a constant 1 and 0 at its end)."""

    # per t-call, set from ``_tc`` in __init__: parameter indices, and the float columns launch, beta, nlayers, const,
    # nmoe
    mf: np.ndarray
    pad: np.ndarray
    kern: np.ndarray
    launch: np.ndarray
    pass_: np.ndarray
    beta: np.ndarray
    layer: np.ndarray
    nlayers: np.ndarray
    const: np.ndarray
    moes: np.ndarray
    nmoe: np.ndarray

    def __init__(self, P: FitParameters, cases: Sequence[Case], feats: Sequence[CaseFeatures]):
        n = len(P.names)
        self.one, self.zero = n, n + 1
        self.fixed_keys = list(P.fixed)  # figures held fixed: after the constants 1 and 0
        self.fixed_index = {k: n + 2 + j for j, k in enumerate(self.fixed_keys)}
        self.fixed_values = np.array([P.fixed[k] for k in self.fixed_keys], dtype=float)
        self._ops: dict[str, list[np.ndarray]] = {
            k: []
            for k in ("F", "B", "invpi", "a", "b", "tid", "dF", "dB", "spread", "emax", "mem", "q", "qv", "ks", "ps")
        }
        self._tc: dict[str, list] = {
            k: [] for k in ("mf", "pad", "kern", "launch", "pass_", "beta", "layer", "nlayers", "const", "moes", "nmoe")
        }
        self._groups: list[tuple[int, int, float, int]] = []  # (t-call 1, t-call 2, weight, case)
        for ci, (c, f) in enumerate(zip(cases, feats, strict=True)):
            self._case(P, ci, c, f)
        ops, tc, groups = self._ops, self._tc, self._groups
        cat = {k: np.concatenate(v) for k, v in ops.items()}
        self.F, self.B, self.invpi = cat["F"], cat["B"], cat["invpi"]
        self.a, self.b, self.tid = cat["a"].astype(int), cat["b"].astype(int), cat["tid"].astype(int)
        self.dF, self.dB, self.emax, self.spread = cat["dF"], cat["dB"], cat["emax"], cat["spread"].astype(int)
        self.mem, self.q = cat["mem"].astype(int), cat["q"].astype(int)  # per op: its stream's figure, its blend q
        self.qv = cat["qv"]  # per op: a fixed blend q (a fused prefill kernel's; 0: ``q``'s)
        self.ks, self.ps = cat["ks"], cat["ps"]  # per op: a fused kernel's softmax s per FLOP (0: none), its p
        self.blends = bool(np.any(self.q != self.zero) or np.any(self.qv > 0))
        self.pads = bool(np.any(self.emax))
        self.compute = self.invpi > 0
        for k, v in tc.items():
            setattr(self, k, np.array(v, dtype=float if k in ("launch", "beta", "nlayers", "const", "nmoe") else int))
        g = np.array(groups, dtype=float)
        self.j1, self.j2, self.gw, self.gcase = g[:, 0].astype(int), g[:, 1].astype(int), g[:, 2], g[:, 3].astype(int)
        self.n_cases, self.n_t = len(cases), len(tc["mf"])

    def _case(self, P: FitParameters, ci: int, c: Case, f: CaseFeatures) -> None:
        """Append the t-calls and groups of case ``ci`` (the arithmetic of :func:`.fit_efficiency._predict`)."""
        fam, eng, one = c.family, c.engine, self.one
        ops, tc = self._ops, self._tc

        def idx(scope: str, owner: str, key: str, default: int) -> int:
            if (scope, owner, key) in self.fixed_index:
                return self.fixed_index[(scope, owner, key)]
            return P.index.get((scope, owner, key), default)

        i_cf = idx("engine", eng, "compute_factor", one)
        kinds = np.where(f.mixed > 0, "mixed", np.where(f.att > 0, "attention", "other"))
        fam_i = np.array([idx("family", fam, P.cls_key(fam, dt, k), one) if dt != "-" else one
                          for dt, k in zip(f.dtypes, kinds, strict=True)])  # fmt: skip
        fac_i = np.where(f.mixed > 0, idx("engine", eng, "mixed_factor", one),
                         np.where(f.att > 0, idx("engine", eng, "attention_factor", one), i_cf))  # fmt: skip
        fac_i = np.where(np.array(f.dtypes) != "-", fac_i, one)
        i_fp32 = idx("family", fam, "fp32", one)
        i_gf = idx("engine", eng, "gemv_factor", i_cf)  # the engine's GEMV factor, else its compute factor
        i_pad = one  # no padding factor: packed prompts (the former batch_pad is gone); padded ones: pad_delta
        gemv_max = BUILTIN_ENGINES[eng].gemv_max_batch

        # the memory stream classes (assembly.inv_bandwidth): an op's bytes at its class's figure, else ``memory``'s
        i_mem = idx("family", fam, "memory", one)
        i_kv, i_ex = idx("family", fam, "memory:kv", i_mem), idx("family", fam, "memory:experts", i_mem)
        expert = f.expert if f.expert is not None else np.zeros(len(f.att))
        mem_pre = np.where(expert > 0, i_ex, i_mem)
        mem_dec = np.where(f.att > 0, i_kv, mem_pre)
        q_fam = idx("family", fam, "moe_serial", self.zero)
        q_op = np.where(expert > 0, idx("family", fam, serial_key(c), q_fam), self.zero)

        def add(F: np.ndarray, B: np.ndarray, pad: bool = False, gemv: bool = False, delta: Any = None,
                decode: bool = False, terms: tuple[Any, ...] | None = None,
                pre: tuple[Any, ...] | None = None) -> int:  # fmt: skip
            j = len(tc["mf"])
            waves, qv, ks, ps = 0.0, np.zeros(len(F)), np.zeros(len(F)), 1.0
            if terms is not None:  # decode attention's stream ramp (on its memory time), waves, softmax
                B, waves, ks, ps = B * terms[0], terms[1], terms[2], terms[3]
            if pre is not None:  # a fused prefill kernel's blend, waves and softmax
                qv, waves, ks, ps = pre
            ops["qv"].append(np.asarray(qv, dtype=float))
            ops["ks"].append(np.asarray(ks, dtype=float))
            ops["ps"].append(np.full(len(F), float(ps)))
            zeros = np.zeros(len(F))
            dF, dB = delta if delta is not None else (zeros, zeros)
            i_spread = idx("prompts", "dataset", "spread", self.zero) if delta is not None else self.zero
            emax = expected_max_normal(c.workload.batch) if delta is not None else 0.0
            n_op = len(F)
            for k, v in (("dF", dF), ("dB", dB), ("spread", np.full(n_op, i_spread)), ("emax", np.full(n_op, emax))):
                ops[k].append(np.asarray(v, dtype=float))
            pi, a, b = f.pi, fam_i, fac_i
            if gemv:  # dequantising GEMMs as GEMV on the vector roof at the family's fp32 fraction
                pi = np.where(f.mixed > 0, f.vector, f.pi)
                a, b = np.where(f.mixed > 0, i_fp32, a), np.where(f.mixed > 0, i_gf, b)
            with np.errstate(divide="ignore"):
                invpi = np.where(np.isfinite(pi), 1.0 / pi, 0.0)
            for k, v in (("F", F), ("B", B), ("invpi", invpi), ("a", a), ("b", b), ("tid", np.full(len(F), j)),
                         ("mem", mem_dec if decode else mem_pre), ("q", q_op)):  # fmt: skip
                ops[k].append(np.asarray(v))
            tc["mf"].append(idx("engine", eng, "memory_factor", one))
            tc["pad"].append(i_pad if pad else one)
            tc["kern"].append(idx("family", fam, "kernel_s", self.zero))
            tc["launch"].append(f.launches[eng])
            tc["pass_"].append(idx("engine", eng, "pass_s", self.zero))
            tc["beta"].append(f.beta)
            tc["layer"].append(idx("engine", eng, "layer_s", self.zero))
            tc["nlayers"].append(float(c.arch.layers))
            tc["const"].append(f.gemm_extra.get(eng, 0.0) + waves)
            tc["moes"].append(idx("family", fam, "moe_s", self.zero))
            tc["nmoe"].append(float(f.moe_layers))
            return j

        w, groups = c.workload, self._groups
        mixed = bool(f.mixed.any())
        gemv = mixed and w.batch <= gemv_max
        pt = f.step_pre_terms or []
        if c.phase == "prefill":
            j = add(*f.pre, pad=True, delta=f.pad_delta, pre=f.pre_terms)
            groups.append((j, j, 1.0, ci))
        elif c.phase == "decode":
            j = add(*f.dec, gemv=gemv, decode=True, terms=f.dec_terms)
            groups.append((j, j, 1.0, ci))
        elif f.steps is not None:  # continuous batching: steady-state steps per request (see .serving)
            for k, (count, pre, dec, nseq) in enumerate(f.steps):
                jp = add(*pre, pre=pt[k] if pt else None) if pre is not None else -1
                terms = f.step_terms[k] if f.step_terms else None
                jd = add(*dec, gemv=mixed and nseq <= gemv_max, decode=True, terms=terms) if dec is not None else jp
                groups.append((jp if jp >= 0 else jd, jd, count / (w.output_tokens + 1), ci))
        else:
            den = w.batch * (w.output_tokens + 1)
            jp, jd = add(*f.pre, pad=True, pre=f.pre_terms), add(*f.dec, gemv=gemv, decode=True, terms=f.dec_terms)
            groups += [(jp, jp, 1.0 / den, ci), (jd, jd, w.output_tokens / den, ci)]

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Seconds of every case for the log-parameters ``x``."""
        ex = np.concatenate([np.exp(x), [1.0, 0.0], self.fixed_values])
        eff = np.minimum(1.0, ex[self.a] * ex[self.b])
        F, B = self.F, self.B
        if self.pads:  # prompts padded to the batch's longest: r − 1 = spread·E[max of B normals] more per sequence
            r1 = ex[self.spread] * self.emax
            F, B = F + r1 * self.dF, B + r1 * self.dB
        tcomp = np.where(self.compute, F * self.invpi / eff, 0.0) * ex[self.pad][self.tid]
        tcomp = kernel_math(tcomp, F * self.ks, self.ps)  # a fused kernel's matmuls with its softmax
        eta = np.minimum(1.0, ex[self.mem] * ex[self.mf][self.tid])
        tmem = B / (self.beta[self.tid] * eta)
        q, on = np.where(self.qv > 0, self.qv, ex[self.q]), (self.q != self.zero) | (self.qv > 0)
        per_op = op_seconds(tcomp, tmem, on, q) if self.blends else np.maximum(tcomp, tmem)
        t = np.bincount(self.tid, per_op, minlength=self.n_t)
        t += ex[self.kern] * self.launch + ex[self.pass_] + ex[self.layer] * self.nlayers + self.const
        t += ex[self.moes] * self.nmoe
        return np.bincount(self.gcase, self.gw * np.maximum(t[self.j1], t[self.j2]), minlength=self.n_cases)


def op_seconds(tc: np.ndarray, tm: np.ndarray, expert: np.ndarray, q: Any) -> np.ndarray:
    """Per op max(compute, memory) seconds; a routed expert's grouped GEMM (``expert`` true) blends them with q =
    ``moe_serial`` (per op; 0: the hard max) as :func:`.assembly.roofline_time` does."""
    hi = np.maximum(tc, tm)
    q = np.broadcast_to(np.asarray(q, dtype=float), hi.shape)
    on = np.asarray(expert, dtype=bool) & (q > 0)
    if not np.any(on):
        return hi
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(hi > 0, np.minimum(tc, tm) / hi, 0.0)
        blend = hi * (1.0 + ratio ** (1.0 / np.where(on, q, 1.0))) ** np.where(on, q, 1.0)
    return np.where(on, blend, hi)


def decode_terms(case: Case, device: Device, names: list[str], batch: int) -> tuple[Any, ...] | None:
    """Decode attention's kernel-curve terms of a decode pass of ``batch`` sequences, as the assembly prices them
    (:func:`.assembly.inv_bandwidth`, :func:`.assembly.decode_waves`): per op of ``names``, the factor on its memory
    time (1 + decode_half_occupancy / max(streams / SMs, decode_split) for a decode attention op, else 1), and the
    seconds of the waves of the decode attention kernel (over all its layers), and the fused kernel's softmax
    (:func:`softmax_terms`). None where the device has no curves (or no SM count)."""
    from . import operators as O
    from . import streams as A
    from .curves_applied import curves_of, cycle_scale, decode_wave_s
    from .roofline import complete_columns
    from .symbols import ARCH, B

    kc, sms = curves_of(device), float(device.sm_count or 0)
    if kc is None or not sms:
        return None
    cols = complete_columns({k: np.array([float(v)]) for k, v in case.arch.columns().items()})
    subs = {B: float(batch), ARCH["kv_heads"]: float(cols["kv_heads"][0])}
    ramp, waves, seen = np.ones(len(names)), 0.0, set()
    wave = decode_wave_s(kc, device, case.engine) * cycle_scale(kc, device)  # SM cycles at the curves' clock
    for i, n in enumerate(names):
        op = O.op_named(n)
        if op.roof != "attention" or op.name not in A.KV_STREAMS:
            continue
        streams = float(A.KV_STREAMS[op.name].xreplace(subs))
        ramp[i] = 1.0 + float(kc.decode_half_occupancy) / max(streams / sms, float(kc.decode_split))
        if op.name in A.WAVE_OPS and op.name not in seen:  # all its copies (windowed kinds) run in op.count layers
            seen.add(op.name)
            waves += float(cols[op.count][0]) * math.ceil(streams / sms) * wave
    return ramp, waves, *softmax_terms(case, device, names)


def prefill_terms(case: Case, device: Device, names: list[str], batch: int, prompt: int) -> tuple[Any, ...] | None:
    """A fused prefill kernel's terms in a prefill of ``batch`` prompts of ``prompt`` tokens, as the assembly prices
    them (:mod:`.fused_prefill`, its expressions evaluated): per op of ``names``, the factor on its FLOPs (1 / the
    query tiles' efficiency for a matmul op of the kernel, else 1), its blend q (1 / ``prefill_blend``; 0: none) and
    the seconds of the kernel's waves (over all its layers), and its softmax (:func:`softmax_terms`, per FLOP of the
    tiles' FLOPs). None where the device has no curves (or no SM count) or the attention is unfused."""
    from . import fused_prefill as FP
    from . import operators as O
    from .curves_applied import PREFILL_BLOCK, curves_of, cycle_scale, prefill_wave_s
    from .roofline import complete_columns
    from .streams import SMS
    from .symbols import ARCH, B, S_in, unfused

    kc, sms = curves_of(device), float(device.sm_count or 0)
    if kc is None or not sms or case.workload.attention == "unfused":
        return None
    cols = complete_columns({k: np.array([float(v)]) for k, v in case.arch.columns().items()})
    subs = {B: float(batch), S_in: float(prompt), unfused: 0.0, ARCH["heads"]: float(cols["heads"][0]), SMS: sms,
            FP.ATTN_BLOCK: PREFILL_BLOCK}  # fmt: skip
    inv = float(FP.inv_tile_efficiency().xreplace(subs).replace(O.nonzero, sp.sign))
    n_waves = float(FP.tile_waves().xreplace(subs))
    wave = prefill_wave_s(kc, device, case.engine) * cycle_scale(kc, device)  # SM cycles at the curves' clock
    p = float(kc.prefill_blend)
    mult, q, waves, seen = np.ones(len(names)), np.zeros(len(names)), 0.0, set()
    for i, n in enumerate(names):
        op = O.op_named(n)
        if op.roof != "attention" or op.name not in FP.MMA_OPS:
            continue
        mult[i], q[i] = inv, 1.0 / p if p > 0 else 0.0
        if op.name in FP.WAVE_OPS and op.name not in seen:  # all its copies (windowed kinds) run in op.count layers
            seen.add(op.name)
            waves += float(cols[op.count][0]) * n_waves * wave
    ks, pn = softmax_terms(case, device, names)
    return mult, q, waves, ks / mult, pn


def softmax_terms(case: Case, device: Device, names: list[str]) -> tuple[np.ndarray, float]:
    """The fused kernel's softmax as the assembly prices it (:func:`.fused_prefill.kernel_math`): per op of
    ``names``, its softmax seconds per FLOP (``softmax_pair_s`` / the kernel's FLOPs per pair and head for a matmul op
    of the kernel, else 0) and the p-norm's p (``softmax_overlap``); zeros where the softmax is not the kernel's (no
    curves, no SMs, unfused attention)."""
    from . import fused_prefill as FP
    from . import operators as O
    from .curves_applied import curves_of, softmax_fields
    from .roofline import complete_columns

    kc, ks = curves_of(device), np.zeros(len(names))
    if kc is None or not device.sm_count or case.workload.attention == "unfused":
        return ks, 1.0
    sm = softmax_fields(kc, device)
    cols = complete_columns({k: np.array([float(v)]) for k, v in case.arch.columns().items()})
    for i, n in enumerate(names):
        op = O.op_named(n)
        if op.roof == "attention" and op.name in FP.MMA_OPS:
            e = sp.Max(FP.pair_flops(op.name), 1)
            ks[i] = sm["softmax_pair_s"] / float(e.xreplace({x: float(cols[x.name][0]) for x in e.free_symbols}))
    return ks, sm["softmax_overlap"]


def softmax_keep(case: Case, device: Device, names: list[str]) -> np.ndarray:
    """Per op of ``names``: 0 for the assembly's own softmax op where the fused kernel prices the softmax
    (:func:`softmax_terms`), else 1 (the factor on its FLOPs' time)."""
    from .fused_prefill import SOFTMAX_OPS

    on = bool(np.any(softmax_terms(case, device, names)[0] > 0))
    return np.array([0.0 if on and n in SOFTMAX_OPS else 1.0 for n in names])


def kernel_math(tc: np.ndarray, ts: np.ndarray, p: Any) -> np.ndarray:
    """``(tc^p + ts^p)^(1/p)`` where ``ts`` > 0, else ``tc`` (:func:`.fused_prefill.kernel_math`'s p-norm)."""
    hi, lo = np.maximum(tc, ts), np.minimum(tc, ts)
    on = (ts > 0) & (hi > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(on, hi * (1.0 + (lo / np.where(on, hi, 1.0)) ** p) ** (1.0 / p), tc)
