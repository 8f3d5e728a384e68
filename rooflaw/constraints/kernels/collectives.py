"""Collectives priced from fitted curves: a protocol's ``latency + bytes / bandwidth``, the one NCCL runs.

One :class:`~rooflaw.constraints.kernels.CollectiveCurve` per ``"<collective>/<link kind>"`` key of
:attr:`KernelCurves.collectives`. ``S`` is the buffer a rank holds, in bytes (the vector all-reduced, the
gathered output of an all-gather, the input of a reduce-scatter, everything one rank sends in an all-to-all);
``B`` is the per-GPU link bandwidth each way (bytes/s, :mod:`rooflaw.devices.systems`), ``n`` the GPU count.
Every figure is a time or a fraction of ``B``, so a curve carries to any GPU of its link kind.

Seconds of one call (:func:`seconds`), with ``f(n)`` the bytes each rank moves per byte of ``S`` (:func:`factor`:
2(n − 1)/n for an all-reduce, (n − 1)/n for the others) and ``steps(n)`` its latency steps (:func:`steps`:
2(n − 1) ring steps of an NCCL all-reduce, n − 1 for the others):

- small-message protocol (NCCL's LL; a custom all-reduce kernel): ``latency + hop·steps + f·S / (B·efficiency)``,
  for NCCL's tuned collectives ``f·S / (efficiency · LL)`` with ``LL = min(cap, 0.5 · share · B)`` NCCL's own LL
  rate (:func:`.nccl_tuner.ll_bandwidth`: half its share of the link, capped per architecture; fitted 1.03-1.32 of
  it on the four GPUs, where a fraction of the link was 0.32 over NVLink and 0.49 over PCIe);
  the custom all-reduce (``allreduce``: TensorRT-LLM's, ``allreduce_vllm``: vLLM's, CUDA graphs) is the cheaper of
  one-shot -- every rank reads the n − 1 peers' whole buffers, (n − 1)·S, one latency -- and two-shot --
  reduce-scatter then all-gather, 2(n − 1)/n·S, two latencies;
- large-message protocol (NCCL's Simple; the frameworks' NCCL fallback above their custom kernel's size),
  where ``efficiency_large`` > 0: ``latency_large + hop·steps + f·S / (B·efficiency_large·(n/2)^scaling)``
  (no hops for the custom all-reduce's fallback): a pipeline fill of tens of µs, then nearly the link's rate,
  rising with the group on NVSwitch (more NVLink ports and channels in flight; NVLink SHARP at 8 GPUs), held at
  its 8-GPU value past the measured groups (:data:`SCALING_MAX_GPUS`);
- NCCL's LL128 (its all-reduce, all-gather and reduce-scatter over NVLink), where ``efficiency_ll128`` > 0:
  ``latency_ll128 + hop·steps + f·S / (B·efficiency_ll128)``;
- NCCL's channel ramp (its all-reduce, all-gather and reduce-scatter's small protocol over NVLink), where
  ``ramp_bytes`` W > 0 and ``ramp_channels`` N > 1: NCCL runs a small message on fewer channels (one below W/N
  bytes, then one more per W/N), each at 1/N of the protocol's bandwidth, so the small protocol prices
  ``max(min(N·S, W), S)`` bytes in place of S: a steep rise, a plateau, then the full rate (the tables' 4-32 KB
  step: A100 all-gather over 2 GPUs 9.4 -> 12.0 us, then 13.6 us at 256 KB). Fitted per architecture only: the pooled
  ``generic`` curves keep none (:func:`fit_split`; see docs/kernels-moe-collectives.md).

Which protocol: NCCL's all-reduce, all-gather and reduce-scatter run the one NCCL's own tuner predicts cheapest
from its published constants and the GPU's architecture (:mod:`.nccl_tuner`), which is not always the cheaper in
fact: the measured tables jump where it switches from LL to Simple (A100 all-reduce over 2 GPUs: 19 µs at 512 KB,
41 µs at 1 MB). The rest (custom all-reduce kernels, all-to-all), and a call priced without an architecture (the
layouts), take the cheapest protocol -- except vLLM's all-reduce over PCIe on more than 2 GPUs, which is NCCL's, not
vLLM's kernel (:data:`VLLM_PCIE_MAX_GPUS`): the curve's large protocol alone. TensorRT-LLM's all-reduce over PCIe
is NCCL's at every size and group (:data:`RUNS_AS`): priced by the NCCL all-reduce curve and NCCL's protocol choice.

The one-line law (``latency + f·S/(B·efficiency)``) over-predicted small messages by ~20 %, under-predicted
1-4 MB by ~25 % and over-predicted the largest by ~20 % on every GPU (docs/kernels-moe-collectives.md).

Link kinds (:data:`CONTENTION`): over NVLink + NVSwitch each GPU has its own port, so the bandwidth per rank
does not depend on n; over PCIe the GPUs share the host's tree, and the measured bus bandwidth of every
collective on the one PCIe box in the data (L40S, 2/4/8 GPUs, NCCL and custom all-reduce) falls as 1/n²:
the bandwidth per rank is ``B · efficiency · (2/n)^c`` with c = 2 there. The exponent is a property of a box's
topology, not of PCIe: the L40S box's aggregate throughput halves with each doubling of the group (58, 28,
14 GB/s at 2, 4, 8 GPUs), which no shared host bridge gives (that holds the aggregate, c = 1); a box whose GPUs
reach each other peer-to-peer at their own link's rate through PCIe switches keeps the per-rank bandwidth (c = 0).
A catalog system may give its own ``link_contention`` (:func:`system_contention`); :data:`CONTENTION` is the
link kind's default.

Fixed times in SM cycles (:func:`in_cycles`): NCCL's kernels' fixed times (``latency``, ``latency_large``,
``latency_ll128`` of its collectives, and the custom all-reduce's NCCL fallback ``latency_large``) are cycles of
the SM clock written as seconds at the curves' ``clock_mhz`` (a device of boost clock ``f`` runs them in
``· clock_mhz / f``, :func:`.gemm.cycle_scale`); a custom all-reduce kernel's own ``latency`` and every ``hop``
stay seconds (a flag round trip over the fabric). See docs/kernels-moe-collectives.md, "Fixed times in SM cycles".

The kernel tables (``custom_allreduce_perf``, ``nccl_perf``) give ``message_size`` in **elements** (× the
dtype's bytes) and ``latency`` in ms. vLLM's eager rows (``backend == vllm_eager``) add the host's launch
overhead, which belongs to the engine level: they are not modelled (NaN).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...devices.device import Device
from . import CollectiveCurve, Family, KernelCurves, register
from .gemm import cycle_scale
from .nccl_tuner import TUNED, ll_bandwidth, protocol

#: Exponent of the per-rank bandwidth's fall with the group size, per link kind: ``B·eff·(2/n)^c``.
CONTENTION = {"nvlink": 0.0, "pcie": 2.0}
LINK_KINDS = tuple(CONTENTION)
#: Collectives with curves; the first two are the custom all-reduce kernels engines run for TP.
COLLECTIVES = ("allreduce", "allreduce_vllm", "nccl_allreduce", "allgather", "reducescatter", "alltoall")
#: nccl_perf's ``op_name`` -> collective key.
NCCL_OPS = {"all_reduce": "nccl_allreduce", "all_gather": "allgather", "reduce_scatter": "reducescatter",
            "alltoall": "alltoall"}  # fmt: skip
#: Bytes per element of the tables' dtypes.
DTYPE_BYTES = {"half": 2, "float16": 2, "bfloat16": 2, "fp16": 2, "bf16": 2, "int8": 1, "fp8": 1, "float": 4,
               "float32": 4}  # fmt: skip
#: The largest group the measured tables hold (2, 4 and 8 GPUs): the large protocol's ``(n/2)^scaling`` growth is
#: held at its 8-GPU value beyond it (an NVL72 domain is not extrapolated to 36^scaling of the 2-GPU bandwidth).
SCALING_MAX_GPUS = 8
#: vLLM runs its custom all-reduce over PCIe on at most 2 GPUs ("Custom allreduce is disabled because it's not
#: supported on more than two PCIe-only GPUs", ``vllm/distributed/device_communicators/custom_all_reduce.py``):
#: beyond, its all-reduce is NCCL's, priced by the curve's large protocol
VLLM_PCIE_MAX_GPUS = 2
#: Collectives that run another's kernel on a link kind: TensorRT-LLM's all-reduce is NCCL's without NVLink (its AUTO
#: strategy picks NCCL there; the L40S box's TensorRT-LLM rows are a median 1.02x nccl_perf's all-reduce of the same
#: bytes at 2 and 4 GPUs, 1.00x at 8): priced by that collective's curve and protocol choice, no figures of its own
RUNS_AS = {("allreduce", "pcie"): "nccl_allreduce"}
#: The fitted figures of each curve (:class:`~rooflaw.constraints.kernels.CollectiveCurve`'s fields).
FIGURES = tuple(f.name for f in dataclasses.fields(CollectiveCurve))
#: NCCL's LL128 figures: fitted only for the collectives NCCL's tuner prices (:data:`.nccl_tuner.TUNED`)
LL128_FIGURES = ("latency_ll128", "efficiency_ll128")
#: starting value, lower and upper bound, typical scale of each figure in a fit (``fit._BOUNDS``' form)
BOUNDS = {
    "collectives.latency": (5e-6, 0.0, 1e-3, 1e-5),
    "collectives.efficiency": (0.3, 0.01, 1.5, 1.0),
    "collectives.hop": (1e-6, 0.0, 1e-4, 1e-6),
    "collectives.latency_large": (3e-5, 0.0, 1e-3, 1e-5),
    "collectives.efficiency_large": (0.7, 0.01, 1.5, 1.0),
    "collectives.scaling": (0.1, -1.0, 1.0, 0.1),
    "collectives.latency_ll128": (1.5e-5, 0.0, 1e-3, 1e-5),
    "collectives.efficiency_ll128": (0.5, 0.01, 1.0, 1.0),  # LL128 carries 120 of every 128 bytes: < the link
    "collectives.ramp_bytes": (2.5e5, 0.0, 1e7, 1e5),
    "collectives.ramp_channels": (8.0, 1.0, 64.0, 4.0),
}
#: The channel-ramp figures: NCCL's tuned collectives' small protocol only (:func:`figures`)
RAMP_FIGURES = ("ramp_bytes", "ramp_channels")


def runs_as(collective: str, kind: str) -> str:
    """The collective whose kernel ``collective`` runs on link ``kind`` (:data:`RUNS_AS`; itself elsewhere)."""
    return RUNS_AS.get((collective, kind), collective)


def figures(collective: str, kind: str) -> tuple[str, ...]:
    """The figures of ``collective``'s curve on link ``kind`` a fit determines (LL128's and the channel ramp's only
    for NCCL's tuned collectives over NVLink; none where it runs another collective's kernel, :func:`runs_as`)."""
    if runs_as(collective, kind) != collective:
        return ()
    ll128 = collective in TUNED and kind == "nvlink"
    return tuple(f for f in FIGURES if (ll128 or f not in LL128_FIGURES) and (ll128 or f not in RAMP_FIGURES))


#: Starting point of a fit (and nothing else: a device whose curves lack a collective is not priced by them).
SEED = CollectiveCurve(latency=5e-6, efficiency=0.6)


def link_kind(link: str) -> str | None:
    """The link kind (:data:`LINK_KINDS`) of a system's ``link`` name (``"NVLink 4"``, ``"PCIe Gen4 x16"``)."""
    text = link.lower().replace(" ", "")
    if text.startswith("nvlink"):
        return "nvlink"
    if text.startswith("pcie"):
        return "pcie"
    return None


def device_link(device: Device) -> tuple[str, float] | None:
    """(link kind, per-GPU bandwidth each way in bytes/s) of ``device``'s catalog system, or ``None``."""
    from ...devices.system import system_catalog

    for entry in system_catalog().values():
        if device.id in entry.get("devices", ()):
            kind = link_kind(str(entry.get("link", "")))
            return None if kind is None else (kind, float(entry["link_gbs"]) * 1e9)
    return None


#: NCCL's kernels (its collectives; the custom all-reduce kernels fall back to NCCL's for large messages)
NCCL_KERNELS = ("nccl_allreduce", "allgather", "reducescatter", "alltoall")
#: fixed-time figures of a curve counted in SM cycles (:func:`in_cycles`)
CYCLE_FIGURES = ("latency", "latency_large", "latency_ll128")


def in_cycles(collective: str, figure: str) -> bool:
    """Whether ``figure`` of ``collective``'s curve is SM cycles (written as seconds at the curves' ``clock_mhz``):
    the fixed times of NCCL's kernels (every protocol of its collectives, a custom all-reduce's NCCL fallback);
    not a custom all-reduce kernel's own ``latency`` nor any ``hop`` (seconds)."""
    if figure not in CYCLE_FIGURES:
        return False
    return collective in NCCL_KERNELS or figure == "latency_large"


def clocked(c: CollectiveCurve, collective: str, scale: float) -> CollectiveCurve:
    """``c`` with its cycle figures (:func:`in_cycles`) times ``scale`` (``clock_mhz / f``, :func:`.cycle_scale`)."""
    if scale == 1.0:
        return c
    return dataclasses.replace(c, **{f: getattr(c, f) * scale for f in CYCLE_FIGURES if in_cycles(collective, f)})


def curve(curves: KernelCurves | None, collective: str, kind: str, device: Device | None = None
          ) -> CollectiveCurve | None:  # fmt: skip
    """The fitted curve of ``collective`` (of the collective it runs as there, :func:`runs_as`) on link ``kind``;
    else the same collective's curve on another link kind (latency and efficiency are fractions and times that carry
    over; the link's own bandwidth and contention apply); else ``None``. Given ``device``, its cycle figures are in
    seconds on that device's clock (:func:`clocked`)."""
    if curves is None:
        return None
    collective = runs_as(collective, kind)
    got = curves.collectives.get(f"{collective}/{kind}")
    if got is None:
        got = next((c for k, c in sorted(curves.collectives.items()) if k.split("/")[0] == collective), None)
    if got is None or device is None:
        return got
    return clocked(got, collective, cycle_scale(curves, device))


def system_contention(device: Device) -> float | None:
    """The ``link_contention`` exponent of ``device``'s catalog system, or ``None`` (the link kind's)."""
    from ...devices.system import contention, system_catalog

    for sid, entry in system_catalog().items():
        if device.id in entry.get("devices", ()):
            return contention(entry, f"systems.toml [{sid}]")
    return None


def rank_bandwidth(link_bw: float, kind: str, n: Any, efficiency: float, contention: float | None = None) -> Any:
    """Achieved bytes/s per rank: ``link_bw · efficiency · (2/n)^c``, ``c = contention`` (the system's exponent),
    else ``CONTENTION[kind]``."""
    c = CONTENTION[kind] if contention is None else contention
    return link_bw * efficiency * (2.0 / np.asarray(n, dtype=float)) ** c


def factor(collective: str, n: Any) -> Any:
    """Bytes each rank moves per byte of its buffer in the ring/bandwidth algorithm: 2(n−1)/n for an all-reduce,
    (n−1)/n for an all-gather, reduce-scatter or all-to-all."""
    n = np.maximum(np.asarray(n, dtype=float), 1.0)
    if collective in ("allreduce", "allreduce_vllm", "nccl_allreduce"):
        return 2 * (n - 1) / n
    if collective in ("allgather", "reducescatter", "alltoall"):
        return (n - 1) / n
    raise KeyError(collective)


def steps(collective: str, n: Any) -> Any:
    """Latency steps of one call: 2(n−1) ring steps of an all-reduce, n − 1 of the others (an all-gather's or
    reduce-scatter's ring steps, an all-to-all's peers, a custom all-reduce's peers signalled)."""
    n = np.maximum(np.asarray(n, dtype=float), 1.0)
    return 2 * (n - 1) if collective == "nccl_allreduce" else n - 1


def seconds(collective: str, n: Any, nbytes: Any, link_bw: float, kind: str, c: CollectiveCurve,
            contention: float | None = None, architecture: str | None = None) -> Any:  # fmt: skip
    """Seconds of one ``collective`` of ``nbytes`` over ``n`` GPUs (0 for n ≤ 1), vectorised over n and nbytes:
    the cheapest of the curve's protocols (module docstring), or, for NCCL's tuned collectives given the GPU's
    ``architecture``, the one NCCL's own tuner picks (:mod:`.nccl_tuner`), priced by the curve;
    ``contention``: the system's exponent (:func:`rank_bandwidth`; ``None``: the link kind's). A collective that
    runs another's kernel on ``kind`` (:func:`runs_as`) is priced as that one, ``c`` being its curve (:func:`curve`)."""
    collective = runs_as(collective, kind)
    n = np.asarray(n, dtype=float)
    s = np.asarray(nbytes, dtype=float)
    nn = np.maximum(n, 1.0)
    bw = rank_bandwidth(link_bw, kind, nn, c.efficiency, contention)
    if collective in TUNED:  # NCCL's LL: a fraction of NCCL's own LL bandwidth (its share of the link, its cap)
        bw = c.efficiency * ll_bandwidth(rank_bandwidth(link_bw, kind, nn, 1.0, contention), kind, architecture)
    lat = c.latency + c.hop * steps(collective, nn)
    if collective in ("allreduce", "allreduce_vllm"):
        one = lat + (n - 1) * s / bw
        two = 2 * lat + factor(collective, nn) * s / bw
        t = np.minimum(one, two)
        large_lat = c.latency_large  # the frameworks' NCCL fallback: its own latency
    else:
        moved = s  # NCCL's channel ramp over NVLink: N·S on one channel, W while channels are added, S on all
        if c.ramp_bytes > 0 and c.ramp_channels > 1 and collective in TUNED and kind == "nvlink":
            moved = np.maximum(np.minimum(c.ramp_channels * s, c.ramp_bytes), s)
        t = lat + factor(collective, nn) * moved / bw
        large_lat = c.latency_large + c.hop * steps(collective, nn)
    inf = np.full(np.broadcast(n, s).shape, np.inf)
    big = inf
    if c.efficiency_large > 0:
        growth = (np.minimum(nn, SCALING_MAX_GPUS) / 2.0) ** c.scaling  # not extrapolated past the measured groups
        big = large_lat + factor(collective, nn) * s / (rank_bandwidth(link_bw, kind, nn, c.efficiency_large,
                                                                        contention) * growth)  # fmt: skip
    mid = inf
    if c.efficiency_ll128 > 0 and collective in TUNED:
        mid = c.latency_ll128 + c.hop * steps(collective, nn) + factor(collective, nn) * s / rank_bandwidth(
            link_bw, kind, nn, c.efficiency_ll128, contention)  # fmt: skip
    if architecture is not None and collective in TUNED:  # the protocol NCCL runs, not the cheapest
        pick = protocol(collective, nn, s, link_bw, kind, architecture, (True, c.efficiency_ll128 > 0,
                                                                         c.efficiency_large > 0))  # fmt: skip
        t = np.choose(pick, np.broadcast_arrays(t, mid, big))
    else:
        t = np.minimum(np.minimum(t, big), mid)
    if collective == "allreduce_vllm" and kind == "pcie" and c.efficiency_large > 0:  # vLLM's kernel is off there
        t = np.where(n > VLLM_PCIE_MAX_GPUS, big, t)
    return np.where(n > 1, t, 0.0)


@dataclass(frozen=True)
class Terms:
    """The curve-independent part of a collective table: each row's curve key ('' not modelled), GPUs, bytes."""

    key: np.ndarray
    n: np.ndarray
    nbytes: np.ndarray


def evaluate(terms: Terms, device: Device, curves: KernelCurves | None) -> np.ndarray:
    """Seconds of each prepared row (NaN where not modelled, the device has no catalog link or no curve)."""
    out = np.full(len(terms.n), np.nan)
    link = device_link(device)
    if link is None:
        return out
    kind, bw = link
    contention = system_contention(device)
    for key in np.unique(terms.key):
        c = curve(curves, key, kind, device) if key else None
        if c is None:
            continue
        m = terms.key == key
        out[m] = seconds(key, terms.n[m], terms.nbytes[m], bw, kind, c, contention, device.architecture or None)
    return out


def _dtype_bytes(col) -> np.ndarray:
    return np.array([DTYPE_BYTES.get(str(v).lower(), np.nan) for v in col], dtype=float)


#: the ``implementation`` (TensorRT-LLM) and ``backend`` (vLLM) values of the custom all-reduce kernels the curves
#: price; a row naming another (NCCL, a one-shot/two-shot or MNNVL strategy, pynccl) is not modelled (blank: priced)
CUSTOM_ALLREDUCE = {"trtllm", "vllm_graph"}


def _sizes(rows, dtype_col: str) -> tuple[np.ndarray, np.ndarray]:
    """GPUs and bytes of each row (NaN bytes where ``message_size`` is negative or the dtype unknown)."""
    elements = rows["message_size"].to_numpy(dtype=float)
    nbytes = np.where(elements >= 0, elements, np.nan) * _dtype_bytes(rows[dtype_col])
    return rows["num_gpus"].to_numpy(dtype=float), nbytes


def prepare_allreduce(rows, device: Device | None = None) -> Terms:
    """``custom_allreduce_perf`` rows: TensorRT-LLM rows -> ``allreduce``, vLLM CUDA-graph rows ->
    ``allreduce_vllm``, vLLM eager rows and kernels outside :data:`CUSTOM_ALLREDUCE` -> not modelled."""
    fw = rows["framework"].astype(str).str.lower().to_numpy()
    keys = np.where(fw == "trtllm", "allreduce", np.where(fw == "vllm", "allreduce_vllm", ""))
    for col in ("implementation", "backend"):
        if col in rows:
            v = rows[col].fillna("").astype(str).str.strip().str.lower()
            keys = np.where((v == "").to_numpy() | v.isin(CUSTOM_ALLREDUCE).to_numpy(), keys, "")  # blank: not told
    n, nbytes = _sizes(rows, "allreduce_dtype")
    return Terms(keys.astype(str), n, nbytes)


def prepare_nccl(rows, device: Device | None = None) -> Terms:
    """``nccl_perf`` rows (``op_name``: all_reduce, all_gather, reduce_scatter, alltoall)."""
    keys = np.array([NCCL_OPS.get(str(o), "") for o in rows["op_name"]], dtype=object).astype(str)
    n, nbytes = _sizes(rows, "nccl_dtype")
    return Terms(keys, n, nbytes)


def predict_allreduce(rows, device: Device, curves: KernelCurves | None) -> np.ndarray:
    """ms of each ``custom_allreduce_perf`` row (:func:`prepare_allreduce`)."""
    return evaluate(prepare_allreduce(rows), device, curves) * 1e3


def predict_nccl(rows, device: Device, curves: KernelCurves | None) -> np.ndarray:
    """ms of each ``nccl_perf`` row (:func:`prepare_nccl`)."""
    return evaluate(prepare_nccl(rows), device, curves) * 1e3


def _model_tokens(name: str) -> set[str]:
    """The model-number tokens of a GPU name (``"NVIDIA H100 80GB HBM3"`` -> {"H100"}): letters and digits mixed,
    not a memory size."""
    toks = re.findall(r"[A-Za-z0-9]+", name.upper())
    return {t for t in toks if re.search(r"[A-Z]", t) and re.search(r"\d", t) and not re.fullmatch(r"\d+GB", t)}


def device_of_rows(rows) -> Device | None:
    """The catalog device with a catalog link whose name shares a model token with the tables' ``device`` column
    (the GPU name as the collectors wrote it), or ``None``."""
    from ...devices.catalog import get_device
    from ...devices.system import system_catalog

    if "device" not in rows or not len(rows):
        return None
    want = _model_tokens(str(rows["device"].iloc[0]))
    for entry in system_catalog().values():
        for ident in entry.get("devices", ()):
            dev = get_device(ident)
            if want & _model_tokens(dev.name) & _model_tokens(dev.id.replace("-", " ")):
                return dev
    return None


def used_params(prepare_fn, rows, device: Device | None = None) -> tuple[str, ...]:
    """The ``collectives.<key>/<kind>.{latency,efficiency}`` figures ``rows`` on ``device`` determine: the keys its
    rows use, on the device's own link kind (none without a catalog link). Without ``device``, the device is found
    from the rows' ``device`` column (:func:`device_of_rows`)."""
    dev = device if device is not None else device_of_rows(rows)
    link = None if dev is None else device_link(dev)
    if link is None:
        return ()
    keys = sorted(k for k in set(prepare_fn(rows).key.tolist()) if k)
    return tuple(f"collectives.{k}/{link[0]}.{f}" for k in keys for f in figures(k, link[0]))


def fit_split(fam: Family, data: Sequence[Any], curves: KernelCurves,
              fit_one: Callable[[Family, Sequence[Any], KernelCurves], KernelCurves]) -> KernelCurves:  # fmt: skip
    """``curves`` with each ``"<collective>/<link kind>"`` curve whose figures ``fam``'s prepared rows ``data`` (the
    fit driver's ``Prepared``) determine fitted by ``fit_one`` on that curve's rows alone: the rows of its collective
    on GPUs of its link kind. A row's seconds read only that one curve (:func:`evaluate`), so the curves share no
    figure and the joint problem's optimum is theirs; fitted jointly, though, one curve's rows moved where the solver
    stopped on the others' (with H100 held out, the pooled vLLM NVLink large-message latency 39 µs without the vLLM
    PCIe rule and 64 µs with it, which touches PCIe rows only). A curve none of whose rows is sampled stays as is.
    The ``generic`` curves carry no channel ramp (:data:`RAMP_FIGURES`: an architecture's own; fitted pooled, they
    moved the pooled small-message latency, docs/kernels-moe-collectives.md): :func:`.generic.pooled` leaves them out
    of ``fit_one``'s generic problem (and of the median)."""
    parts: dict[str, list[str]] = {}  # "collectives.<key>/<kind>" -> its figures the rows determine, in order
    for p in data:
        for name in fam.used(p.rows) if fam.used is not None else fam.params:
            figs = parts.setdefault(name.rsplit(".", 1)[0], [])
            if name not in figs:
                figs.append(name)
    kinds = [(device_link(p.gpu.device) or ("",))[0] for p in data]
    for path, names in parts.items():
        key, kind = path.removeprefix("collectives.").split("/")
        own = []
        for p, k in zip(data, kinds, strict=True):
            m = (p.sample_terms.key == key) & (k == kind)
            if m.any():
                t = p.sample_terms
                terms = Terms(t.key[m], t.n[m], t.nbytes[m])
                own.append(dataclasses.replace(p, sample=p.sample[m], sample_terms=terms))
        if own:
            curves = fit_one(dataclasses.replace(fam, params=tuple(names), used=None, fit=None), own, curves)
    return curves


def _params(*collectives: str) -> tuple[str, ...]:
    return tuple(f"collectives.{c}/{k}.{f}" for c in collectives for k in LINK_KINDS for f in figures(c, k))


#: The custom all-reduce kernels (the issue's "all-reduce" family) and NCCL's collectives. Each architecture's
#: rows determine the parameters of its own link kind (an architecture with one link kind leaves the other's).
def family(name: str, tables: tuple[str, ...], params: tuple[str, ...], predict, **hooks: Any) -> Family:
    """A :class:`Family` with those of the fit hooks (``used``, ``prepare``, ``evaluate``) the seam defines."""
    known = {f.name for f in dataclasses.fields(Family)}
    return Family(name, tables, params, predict, **{k: v for k, v in hooks.items() if k in known})


ALLREDUCE = register(family("allreduce", ("custom_allreduce_perf",), _params("allreduce", "allreduce_vllm"),
                            predict_allreduce, used=functools.partial(used_params, prepare_allreduce),
                            prepare=prepare_allreduce, evaluate=evaluate, fit=fit_split))  # fmt: skip
NCCL = register(family("nccl", ("nccl_perf",), _params("nccl_allreduce", "allgather", "reducescatter", "alltoall"),
                       predict_nccl, used=functools.partial(used_params, prepare_nccl), prepare=prepare_nccl,
                       evaluate=evaluate, fit=fit_split))  # fmt: skip


__all__ = ["ALLREDUCE", "BOUNDS", "COLLECTIVES", "CONTENTION", "CYCLE_FIGURES", "FIGURES", "LINK_KINDS",
           "LL128_FIGURES", "NCCL", "NCCL_KERNELS", "NCCL_OPS", "RUNS_AS", "SCALING_MAX_GPUS", "SEED", "Terms",
           "VLLM_PCIE_MAX_GPUS", "clocked", "curve", "device_link", "device_of_rows", "evaluate", "factor", "figures",
           "fit_split", "in_cycles", "link_kind", "predict_allreduce", "predict_nccl", "prepare_allreduce",
           "prepare_nccl", "rank_bandwidth", "runs_as", "seconds", "steps", "system_contention",
           "used_params"]  # fmt: skip
