"""Fit the achieved-performance parameters (see :mod:`.engines`) to published measurements.

Parameters, all physical and shared across rows (never one per model or per row):

* per device family: achieved fraction of bandwidth ``memory``; achieved fraction of each
  compute roof the family's rows run on (``fp16``, ``fp4``, ``int8``, ``fp32`` vector …);
  ``kernel_s`` seconds per kernel launch;
* per engine: ``memory_factor`` and ``compute_factor`` (its kernels relative to the reference
  engine, TensorRT-LLM, fixed at 1), ``mixed_factor`` (dequantising GEMMs, where its rows have
  any), ``attention_factor`` (only an engine with unfused attention: llama.cpp), ``gemv_factor`` (an engine with
  its own dequantising GEMV kernels: TensorRT Edge-LLM), ``pass_s`` seconds per pass and ``layer_s`` per layer;
* of the measured workloads: ``spread``, the coefficient of variation of a dataset's prompt lengths, for the rows
  whose prompts differ in length on an engine that pads them to the batch's longest (:func:`padded`).

Fixed, documented, not fitted: kernel counts per layer and pass, each engine's attention kind, GEMV batch limit and
prompt padding (:mod:`.engines`). A device priced by kernel curves has its figures fixed by them: with published.csv
16 engine parameters, the prompt spread and the factors' shared centre for 113 compared quantities.

Least squares on log(predicted / measured) with a robust (soft-L1) loss and weak log-normal
priors (a figure one spread factor off its median costs 1: :func:`prior_residuals`), so a parameter no fitted
row informs stays at its prior instead of drifting -- that is what makes leave-one-source-out predictions
honest. The engines' kernel-class factors share one fitted prior centre (:data:`POOLED`, ``factor_mean``): a
kernel class only one source exercises, with that source left out, takes what the other kernel classes reach;
an engine no row ran on takes its figures' priors (:func:`unfitted_figures`). Predictions inside the fit use the
per-op roofline of the compiled cost model at the mean decode context; the reported errors come from
:func:`rooflaw.evaluate` itself with the fitted figures applied.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..devices.device import Device
from .device_rates import rates
from .engines import BUILTIN_ENGINES, ENGINE_NAMES, EngineProfile, gemv_path, get_engine, mixed_input
from .fit_arrays import CaseFeatures, decode_terms, kernel_math, op_seconds, prefill_terms, serial_key, softmax_keep
from .fit_priors import POOLED, PRIORS, prior_residuals, unfitted_figures
from .published import Case
from .roofline import evaluate
from .serving import VLLM_TOKEN_BUDGET, Schedule, assembly_step_cost, padded_prompt_ratio
from .workload import Workload

#: engines whose kernels a device family's own figures describe (no engine compute/memory factor of their own)
REFERENCE_ENGINES = ("tensorrt-llm", "tensorrt-edge-llm")
#: the one figure of the measured workloads themselves: the coefficient of variation of the lengths of a dataset's
#: prompts (rows with ``Case.uneven_prompts``), which an engine that pads prompts to the batch's longest pays for
PROMPTS = ("prompts", "dataset", "spread")
OBS_SCALE = 0.1  #: relative error at which the robust loss turns linear


def _roof_classes() -> dict[str, str]:
    from . import operators as O

    return O.part_roofs()


def _op_arrays(case: Case, device: Device, w: Workload, names: list[str] | None = None):
    """Op names and per-op (F, B) of ``w``'s prefill and mean decode step (the case's engine: its kernel curves'
    MoE re-read bytes, :mod:`.moe_reread`, are the only bytes an engine adds)."""
    rep = evaluate(case.arch, device, w, case.precision, engine=case.engine)
    names = names or list(dict.fromkeys(o.name for o in rep.ops if o.name != "engine_overhead"))
    idx = {n: i for i, n in enumerate(names)}
    Fp, Bp, Fd, Bd = (np.zeros(len(names)) for _ in range(4))
    for o in rep.ops:
        if o.name not in idx:
            continue
        i = idx[o.name]
        if o.phase == "prefill":
            Fp[i], Bp[i] = o.flops, o.bytes
        else:  # summed over the S_out steps: the mean step (costs are affine in the step index)
            Fd[i], Bd[i] = o.flops / w.output_tokens, o.bytes / w.output_tokens
    return names, (Fp, Bp), (Fd, Bd)


def _schedule(case: Case) -> Schedule:
    w = case.workload
    return Schedule(w.batch, w.input_tokens, w.output_tokens + 1, VLLM_TOKEN_BUDGET)


def _features(case: Case, device: Device) -> CaseFeatures:
    """Per-op FLOPs/bytes of the case's prefill and mean decode step, from the assembly's own breakdown."""
    w = case.workload
    names, (Fp, Bp), (Fd, Bd) = _op_arrays(case, device, w)
    classes = _roof_classes()
    steps = None
    step_tokens: list[float] = []  # the tokens of each step's prefill pass (its decode pass: n)
    if case.concurrent:
        steps = []
        for c, n, count in _schedule(case).steps():
            step_tokens.append(c + n)
            pre = _op_arrays(case, device, Workload(1, c + n, 1, w.attention), names)[1] if c else None
            wd = Workload(n, w.input_tokens, w.output_tokens, w.attention) if n else None
            dec = _op_arrays(case, device, wd, names)[2] if wd else None
            steps.append((count, pre, dec, n))
    from .curves_applied import curves_of, cycle_scale, mixed_share

    kc0 = curves_of(device)
    # a dequantising GEMM of an mma.sync engine on an architecture whose peak is another instruction's: its roof
    share = mixed_share(kc0, case.engine, device) if kc0 is not None and mixed_input(case.precision) else 1.0
    pis, dts, mixed, att = [], [], [], []
    for n in names:
        roof = classes.get(n, "memory")
        if roof in ("linear", "attention"):
            dt = case.precision.linear_dtype if roof == "linear" else case.precision.attention_dtype
            dt, p = device.roof(dt)
        elif roof == "vector":
            dt, p = "fp32", device.vector_flops
        else:
            dt, p = "-", math.inf
        mixed.append(1.0 if roof == "linear" and mixed_input(case.precision) else 0.0)
        pis.append(p * share if mixed[-1] else p)
        dts.append(dt)
        att.append(1.0 if roof == "attention" else 0.0)
    layers, moe = float(case.arch.layers), float(case.arch.experts > 1)
    # the curves' fixed times (kernel_s, moe_s) are SM cycles at their clock: a family's devices differ in clock
    # (Orin Nano 625 MHz, AGX Orin 1300, A100 1410 share the ampere curves), so the counts carry this device's scale
    cycles = cycle_scale(kc0, device) if kc0 is not None else 1.0
    launches = {}
    for name in ENGINE_NAMES:
        e = get_engine(name)
        if e.kernels_per_layer is not None:
            count = layers * (e.kernels_per_layer + e.moe_kernels * moe) + (e.kernels_per_pass or 0.0)
            launches[name] = count * cycles
    from .engines import applied

    extra = {}
    for name in launches:
        r = rates(device, case.precision, applied(device, name))
        extra[name] = r.gemm_s * r.gemms_per_layer * layers
    delta = None
    if padded(case):
        F2, B2 = _op_arrays(case, device, dataclasses.replace(w, input_tokens=2 * w.input_tokens), names)[1]
        delta = (F2 - Fp, B2 - Bp)
    from .moe_padding import padding_value
    from .streams import EXPERT_OPS

    expert = np.array([1.0 if n in EXPERT_OPS and moe else 0.0 for n in names])
    # the grouped GEMMs' rate, moe · ffn/(ffn + moe_half_inter) of the roof (streams.roofline_time): on their FLOPs
    app = applied(device, case.engine)
    r, ar = rates(device, case.precision, app), case.arch
    ffn = float(ar.ffn or 0)
    sh = ar.top_k * ffn / max(ar.top_k * ffn + ar.shared_experts * float(ar.shared_ffn or ffn), 1)  # routed
    keep = softmax_keep(case, device, names)  # the assembly's softmax op: off where the fused kernel prices it

    # ... on their rows padded to whole tiles in a pass of ``tokens`` tokens (.moe_padding; with kernel curves)
    def g(tokens: float, decode: bool = False) -> np.ndarray:  # (a pass run as dequantising GEMVs: no tiles)
        pad = padding_value(tokens, ar.top_k, ar.experts) if r.curves and not (decode and gemv_path(r, tokens)) else 1.0
        return keep * np.where(expert > 0, sh * pad * (1.0 + r.moe_half_inter / max(ffn, 1.0)) / r.moe + 1.0 - sh, 1.0)

    T_pre = w.batch * w.input_tokens
    if delta is not None:  # the prefill at twice the prompt, F2 = Fp + delta
        delta = ((Fp + delta[0]) * g(2 * T_pre) - Fp * g(T_pre), delta[1])
    Fp, Fd = Fp * g(T_pre), Fd * g(w.batch, True)
    steps = None if steps is None else [(k, p if p is None else (p[0] * g(c), p[1]),
                                         d if d is None else (d[0] * g(n, True), d[1]), n)
                                        for (k, p, d, n), c in zip(steps, step_tokens, strict=True)]  # fmt: skip
    step_terms = None if steps is None else [decode_terms(case, device, names, n) if d else None
                                              for _, _, d, n in steps]  # fmt: skip
    # a fused prefill kernel's tiles (their efficiency on the matmuls' FLOPs), blend, waves (fit_arrays.prefill_terms)
    pre_t = prefill_terms(case, device, names, w.batch, w.input_tokens)
    if pre_t is not None:
        Fp = Fp * pre_t[0]
        delta = None if delta is None else (delta[0] * pre_t[0], delta[1])
    step_pre = None
    if steps is not None:
        step_pre = [prefill_terms(case, device, names, 1, c + n) if c else None for c, n, _ in _schedule(case).steps()]
        steps = [(k, p if p is None or t is None else (p[0] * t[0], p[1]), d, n)
                 for (k, p, d, n), t in zip(steps, step_pre, strict=True)]  # fmt: skip
    return CaseFeatures((Fp, Bp), (Fd, Bd), np.array(pis), dts, float(device.memory_bandwidth), launches,
                        np.array(mixed), np.array(att), float(device.vector_flops), steps, extra, delta, expert,
                        layers * moe * cycles, decode_terms(case, device, names, w.batch), step_terms,
                        float(getattr(app, "moe_serial", 0.0)), None if pre_t is None else pre_t[1:],
                        None if step_pre is None else [t if t is None else t[1:] for t in step_pre])  # fmt: skip


def params_for(
    cases: Sequence[Case], feats: Sequence[CaseFeatures], devices: dict[str, Device] | None = None
) -> tuple[list[Case], FitParameters]:
    """The cases as the fit sees them (a device priced by kernel curves: family ``kernels:<architecture>``) and
    their parameters (those device figures fixed)."""
    from .curves_applied import CURVES_FAMILY, curves_of

    relabelled = []
    for c in cases:
        kc = curves_of(case_device(c, devices))
        relabelled.append((c if kc is None else dataclasses.replace(c, family=CURVES_FAMILY + kc.architecture), kc))
    out = [c for c, _ in relabelled]
    return out, FitParameters(out, feats, {c.family: kc for c, kc in relabelled if kc is not None})


class FitParameters:
    """Maps named parameters to a log-space vector; ``fixed`` holds the figures that are not fitted (the device
    figures of a family priced by kernel curves)."""

    def __init__(self, cases: Sequence[Case], feats: Sequence[CaseFeatures], curves: dict[str, Any] | None = None):
        from .curves_applied import TABLE_ENGINES, curve_figures

        self.names: list[tuple[str, str, str]] = []  # (scope, owner, key)
        self.fixed: dict[tuple[str, str, str], float] = {}
        curves = curves or {}
        for c, f in zip(cases, feats, strict=False):
            if padded(c):
                self._add(*PROMPTS)
            if c.family in curves:  # device figures from the kernel curves, held fixed; the engine's host figures
                dts = set(f.dtypes) - {"-"}
                for k, v in curve_figures(curves[c.family], dts).items():
                    self.fixed[("family", c.family, k)] = v
                self.fixed[("family", c.family, serial_key(c))] = f.moe_q  # the blend's q on the case's device
                if c.engine not in TABLE_ENGINES:  # its own kernels: the measured tables do not hold them
                    self._add("engine", c.engine, "memory_factor")
                    self._add("engine", c.engine, "compute_factor")
                    if f.mixed.any():
                        self._add("engine", c.engine, "mixed_factor")
                    if BUILTIN_ENGINES[c.engine].attention == "unfused":
                        self._add("engine", c.engine, "attention_factor")
                    if f.mixed.any() and c.phase != "prefill" and BUILTIN_ENGINES[c.engine].gemv_max_batch:
                        self._add("engine", c.engine, "gemv_factor")  # its CUDA-core dequantising GEMVs
                self._add("engine", c.engine, "pass_s")
                self._add("engine", c.engine, "layer_s")
                continue
            self._add("family", c.family, "memory")
            self._add("family", c.family, "kernel_s")
            for dt in set(f.dtypes) - {"-"}:
                self._add("family", c.family, dt)
            if c.engine not in REFERENCE_ENGINES:
                self._add("engine", c.engine, "memory_factor")
                self._add("engine", c.engine, "compute_factor")
            self._add("engine", c.engine, "pass_s")
            if f.mixed.any():
                self._add("engine", c.engine, "mixed_factor")
            if BUILTIN_ENGINES[c.engine].attention == "unfused":  # fused attention: the family fraction, factor 1
                self._add("engine", c.engine, "attention_factor")
        self.index = {k: i for i, k in enumerate(self.names)}

    def _add(self, scope: str, owner: str, figure: str) -> None:
        key = (scope, owner, figure)
        if key not in self.names:
            self.names.append(key)

    def kind(self, key: tuple[str, str, str]) -> str:
        return key[2] if key[2] in PRIORS else "compute"

    def prior(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        mu, sd, lo, hi = (np.array([math.log(PRIORS[self.kind(k)][j]) for k in self.names]) for j in range(4))
        return mu, sd, lo, hi

    def get(self, x: np.ndarray, scope: str, owner: str, key: str, default: float = 1.0) -> float:
        if (scope, owner, key) in self.fixed:
            return self.fixed[(scope, owner, key)]
        i = self.index.get((scope, owner, key))
        return default if i is None else math.exp(x[i])

    def cls_key(self, family: str, dt: str, kind: str) -> str:
        """The family figure a ``kind`` (``mixed``/``attention``/other) op on roof ``dt`` reads."""
        if kind != "other" and ("family", family, f"{kind}:{dt}") in self.fixed:
            return f"{kind}:{dt}"
        return dt


def padded(case: Case) -> bool:
    """Whether ``case`` is a prefill of prompts of unequal length on an engine that pads them to the longest."""
    return case.phase == "prefill" and case.uneven_prompts and BUILTIN_ENGINES[case.engine].padding == "longest"


def _predict(x: np.ndarray, P: FitParameters, case: Case, f: CaseFeatures) -> float:
    fam, eng = case.family, case.engine
    mf = P.get(x, "engine", eng, "memory_factor")
    cf = P.get(x, "engine", eng, "compute_factor")
    eta_m = min(1.0, P.get(x, "family", fam, "memory") * mf)
    # one engine factor per kernel class: dequantising GEMMs, attention matmuls, everything else
    kinds = np.where(f.mixed > 0, "mixed", np.where(f.att > 0, "attention", "other"))
    fam_eff = np.array([P.get(x, "family", fam, P.cls_key(fam, dt, k)) if dt != "-" else 1.0
                        for dt, k in zip(f.dtypes, kinds, strict=True)])  # fmt: skip
    factor = np.where(f.mixed > 0, P.get(x, "engine", eng, "mixed_factor"),
                      np.where(f.att > 0, P.get(x, "engine", eng, "attention_factor"), cf))  # fmt: skip
    eff = np.where(np.array(f.dtypes) != "-", np.minimum(1.0, fam_eff * factor), 1.0)
    over = P.get(x, "family", fam, "kernel_s", 0.0) * f.launches[eng] + P.get(x, "engine", eng, "pass_s", 0.0)
    over += P.get(x, "engine", eng, "layer_s", 0.0) * float(case.arch.layers) + f.gemm_extra.get(eng, 0.0)
    over += P.get(x, "family", fam, "moe_s", 0.0) * f.moe_layers
    # the memory stream classes (assembly.inv_bandwidth): decode attention's KV reads, the routed experts' stream
    mem = P.get(x, "family", fam, "memory")
    eta_kv = min(1.0, P.get(x, "family", fam, "memory:kv", mem) * mf)
    eta_ex = min(1.0, P.get(x, "family", fam, "memory:experts", mem) * mf)
    expert = f.expert if f.expert is not None else np.zeros(len(f.att))
    eta_pre = np.where(expert > 0, eta_ex, eta_m)
    eta_dec = np.where(f.att > 0, eta_kv, eta_pre)
    q = P.get(x, "family", fam, serial_key(case), P.get(x, "family", fam, "moe_serial", 0.0))

    def t(F, B, gemv=False, decode=False, terms=None, pre=None):
        pi, e = f.pi, eff
        waves, qs, on = 0.0, q, expert
        ks, pn = np.zeros(len(F)), 1.0  # a fused kernel's softmax (fit_arrays.softmax_terms)
        if terms is not None:  # decode attention's stream ramp and waves (decode_terms)
            B, waves, ks, pn = B * terms[0], terms[1], terms[2], terms[3]
        if pre is not None:  # a fused prefill kernel's blend and waves (prefill_terms)
            qs, on, waves, ks, pn = np.where(pre[0] > 0, pre[0], q), (expert > 0) | (pre[0] > 0), pre[1], pre[2], pre[3]
        if gemv:  # dequantising GEMMs as GEMV on the vector roof: the family's fp32 fraction, the GEMV factor
            pi = np.where(f.mixed > 0, f.vector, f.pi)
            gf = P.get(x, "engine", eng, "gemv_factor", cf)
            e = np.where(f.mixed > 0, min(1.0, P.get(x, "family", fam, "fp32") * gf), eff)
        with np.errstate(divide="ignore", invalid="ignore"):
            tc = kernel_math(np.where(np.isfinite(pi), F / (pi * e), 0.0), F * ks, pn)
        return float(np.sum(op_seconds(tc, B / (f.beta * (eta_dec if decode else eta_pre)), on, qs))) + over + waves

    w = case.workload
    gemv = bool(f.mixed.any()) and w.batch <= BUILTIN_ENGINES[eng].gemv_max_batch
    if case.phase == "prefill":
        if f.pad_delta is not None and f.pre is not None:  # prompts padded to the batch's longest: r·S_in tokens
            r1 = padded_prompt_ratio(w.batch, P.get(x, *PROMPTS, 0.0)) - 1.0
            (F0, B0), (dF, dB) = f.pre, f.pad_delta
            return t(F0 + r1 * dF, B0 + r1 * dB, pre=f.pre_terms)
        return t(*f.pre, pre=f.pre_terms)
    if case.phase == "decode":
        return t(*f.dec, gemv=gemv, decode=True, terms=f.dec_terms)
    if f.steps is not None:  # continuous batching: steady-state steps per request (see .serving)
        tot = 0.0
        for k, (count, pre, dec, n) in enumerate(f.steps):
            tp = t(*pre, pre=f.step_pre_terms[k] if f.step_pre_terms else None) if pre is not None else 0.0
            gemv_n = bool(f.mixed.any()) and n <= BUILTIN_ENGINES[eng].gemv_max_batch
            terms = f.step_terms[k] if f.step_terms else None
            td = t(*dec, gemv=gemv_n, decode=True, terms=terms) if dec is not None else 0.0
            tot += count * max(tp, td)
        return tot / (w.output_tokens + 1)
    dec_s = t(*f.dec, gemv=gemv, decode=True, terms=f.dec_terms)
    return (t(*f.pre, pre=f.pre_terms) + w.output_tokens * dec_s) / (w.batch * (w.output_tokens + 1))


@dataclass
class FitResult:
    """Fitted figures: ``families[family][key]``, ``engines[engine][key]``, the rows used."""

    families: dict[str, dict[str, float]]
    engines: dict[str, dict[str, float]]
    rows: dict[str, list[str]]  # family or engine -> row ids
    cost: float
    #: engine -> the device architectures (or kinds) of the rows it was fitted on
    fitted_on: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    #: kernel-curves family -> the device figures held fixed (not fitted)
    fixed: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    #: figures of the measured workloads (``spread``: coefficient of variation of a dataset's prompt lengths)
    prompts: dict[str, float] = dataclasses.field(default_factory=dict)
    #: the fitted centre of the engine kernel-class factors' priors (:data:`POOLED`; 1 where none was fitted)
    factor_mean: float = 1.0

    def device(self, device: Device, family: str) -> Device:
        """``device`` with this fit's figures of ``family`` as its ``achieved`` table."""
        fam = self.families.get(family)
        if fam is None:
            return dataclasses.replace(device, achieved={})
        ach = {"family": family, "provenance": "fitted", **fam, "rows": self.rows.get(family, [])}
        return dataclasses.replace(device, achieved=ach)

    def engine(self, name: str) -> EngineProfile:
        """The built-in profile ``name`` with this fit's figures; an engine no row of the fit ran on (a held-out
        source or board that took all its rows) gets its figures' priors, as any figure no row informs
        (:func:`unfitted_figures`), not the pure roofline's."""
        base = BUILTIN_ENGINES[name]
        fit: dict[str, Any] = self.engines.get(name, {})  # fields named at run time
        prov = dict.fromkeys(fit, "fitted")
        if name not in self.engines and name not in ("ideal", "device"):
            fit = unfitted_figures(name, self.factor_mean)
            prov = dict.fromkeys(fit, "prior")
        on = tuple(self.fitted_on.get(name, ()))
        return dataclasses.replace(base, **fit, provenance=prov, rows=tuple(self.rows.get(name, [])), fitted_on=on)


def case_device(case: Case, devices: dict[str, Device] | None = None) -> Device:
    """The catalog device of ``case`` (or ``devices[case.device]``), with the row's own FP16 roof where it has one
    (``Case.fp16_flops``: llama.cpp's FP16-accumulate cuBLAS GEMMs)."""
    from ..devices import get_device

    dev = (devices or {}).get(case.device) or get_device(case.device)
    if case.fp16_flops:
        dev = dataclasses.replace(dev, peak_flops={**dev.peak_flops, "fp16": float(case.fp16_flops)})
    return dev


def fit(cases: Sequence[Case], devices: dict[str, Device] | None = None,
        feats: Sequence[CaseFeatures] | None = None) -> FitResult:  # fmt: skip
    """Fit the family and engine parameters to ``cases`` (see the module docstring); ``feats``: their
    :func:`_features`, where already computed."""
    from scipy.optimize import least_squares

    from .fit_arrays import FlatCases

    if feats is None:
        feats = [_features(c, case_device(c, devices)) for c in cases]
    cases, P = params_for(cases, feats, devices)
    mu, sd, lo, hi = P.prior()
    logm = np.log([c.measured_s for c in cases])
    flat = FlatCases(P, cases, feats)  # _predict of every case, as arrays
    n = len(P.names)
    pooled = np.array([P.kind(k) in POOLED for k in P.names], dtype=float)
    if pooled.any():  # the shared centre of the pooled factors' priors: one more entry of the vector, at its end
        extra = (math.log(v) for v in PRIORS["factor_mean"])
        mu, sd, lo, hi = (np.append(a, v) for a, v in zip((mu, sd, lo, hi), extra, strict=True))

    def resid(z: np.ndarray) -> np.ndarray:
        return np.concatenate([(np.log(flat.predict(z[:n])) - logm) / OBS_SCALE, prior_residuals(z, mu, sd, pooled)])

    # Two starts: the priors, and every compute fraction 4× lower. An op memory-bound at the start gives its
    # compute parameters no gradient (the roofline's max), so one start alone can stall short of the optimum.
    slow = np.array([P.kind(k) in ("compute", "compute_factor", "mixed_factor", "attention_factor", "gemv_factor")
                     for k in P.names] + [True] * (len(mu) - n))  # fmt: skip
    sol = None
    for x0 in (mu, mu - np.log(4.0) * slow):
        s = least_squares(resid, np.clip(x0, lo + 1e-9, hi - 1e-9), bounds=(lo, hi), loss="soft_l1", f_scale=1.0,
                          x_scale=1.0, max_nfev=400)  # fmt: skip
        if sol is None or s.cost < sol.cost:
            sol = s
    assert sol is not None  # the loop above ran
    factor_mean = float(math.exp(sol.x[n])) if len(sol.x) > n else 1.0
    fams: dict[str, dict[str, float]] = {}
    engs: dict[str, dict[str, float]] = {}
    prompts: dict[str, float] = {}
    for k, i in P.index.items():
        scope, owner, key = k
        if scope == "prompts":
            prompts[key] = float(math.exp(sol.x[i]))
            continue
        (fams if scope == "family" else engs).setdefault(owner, {})[key] = float(math.exp(sol.x[i]))
    rows: dict[str, list[str]] = {}
    fitted_on: dict[str, list[str]] = {}
    for c in cases:
        for owner in (c.family, c.engine):
            if c.row_id not in rows.setdefault(owner, []):
                rows[owner].append(c.row_id)
        dev = case_device(c, devices)
        where = dev.architecture or dev.kind
        if where not in fitted_on.setdefault(c.engine, []):
            fitted_on[c.engine].append(where)
    fixed: dict[str, dict[str, float]] = {}
    for (_, fam, key), v in P.fixed.items():
        fixed.setdefault(fam, {})[key] = v
    return FitResult(fams, engs, rows, float(sol.cost), {k: sorted(v) for k, v in fitted_on.items()}, fixed, prompts,
                     factor_mean)  # fmt: skip


def predict(case: Case, result: FitResult | None, devices: dict[str, Device] | None = None) -> float:
    """Seconds :func:`rooflaw.evaluate` predicts for ``case`` (``result=None``: pure roofline)."""
    dev = case_device(case, devices)
    if result is None:
        engine: str | EngineProfile = "ideal"
    else:
        dev = result.device(dev, case.family)
        engine = result.engine(case.engine)
    w = case.workload
    if case.concurrent:
        step = assembly_step_cost(case.arch, dev, case.precision, engine, w.input_tokens, w.output_tokens,
                                  w.attention)  # fmt: skip
        return _schedule(case).seconds_per_token(step)
    if result is not None and padded(case):  # prompts padded to the batch's longest: more tokens per sequence
        s_pad = round(w.input_tokens * padded_prompt_ratio(w.batch, result.prompts.get("spread", PRIORS["spread"][0])))
        w = dataclasses.replace(w, input_tokens=max(w.input_tokens, s_pad))
    rep = evaluate(case.arch, dev, w, case.precision, engine=engine)
    if case.phase == "prefill":
        return rep.prefill_s
    if case.phase == "decode":
        return rep.tpot_s
    return (rep.prefill_s + rep.decode_s) / (w.batch * (w.output_tokens + 1))


# ----------------------------------------------------------------------------- errors & storage


def errors(cases: Sequence[Case], result: FitResult | None) -> list[dict[str, object]]:
    """Per case: row, source, device, engine, model, weight format, batch, phase, measured and predicted seconds,
    error = predicted/measured − 1."""
    out = []
    for c in cases:
        p = predict(c, result)
        out.append({"row_id": c.row_id, "source": c.source, "device": c.device, "family": c.family,
                    "engine": c.engine, "model": c.model, "format": c.precision.weights.name,
                    "batch": c.workload.batch, "phase": c.phase, "measured_s": c.measured_s,
                    "predicted_s": p, "error": p / c.measured_s - 1.0})  # fmt: skip
    return out


def median_abs_error(rows: Sequence[dict[str, object]]) -> dict[str, float]:
    """Median |error| per phase (prefill, decode, e2e) and over all rows."""
    by: dict[str, list[float]] = {}
    for r in rows:
        by.setdefault(str(r["phase"]), []).append(abs(float(r["error"])))  # type: ignore[arg-type]
        by.setdefault("all", []).append(abs(float(r["error"])))  # type: ignore[arg-type]
    return {k: float(np.median(v)) for k, v in by.items()}


# the catalog writers (``[achieved]`` tables, ``engines.toml``) live in .fit_storage
from .fit_storage import FIT_COMMAND, achieved_table, engines_toml, write_catalog  # noqa: E402,F401

# names under which the public API (``rooflaw``) exports this module's entry points
fit_efficiencies = fit
efficiency_errors = errors
write_engine_catalog = write_catalog
