"""Achieved-performance curves per GPU architecture, fitted to measured kernels -- the seam.

This module fixes what the rest of rooflaw may rely on; the fit (``fit.py``), the per-family kernel
predictors (``predict.py`` and friends) and the kernel-table reader (``tables.py``) live beside it.

A device names its ``architecture`` (:data:`rooflaw.devices.device.ARCHITECTURES`); :func:`curves_for`
returns that architecture's :class:`KernelCurves` from the catalog shipped in the package
(``kernel_curves.toml`` beside this file, written by ``rooflaw devices fit-kernels``), or the ``generic`` curves
(one fit on every GPU's rows; ``fit-kernels --generic median``: each figure the median of the architectures',
:mod:`.generic`) for a GPU whose architecture has none, or
``None`` for a device with no architecture (CPU, NPU, TPU, another vendor's GPU: its own scalar efficiencies apply).

Every figure is **dimensionless, a time or a bandwidth per SM** (``l2_sm_gbps``), so it carries to any GPU of the
architecture with its own datasheet peaks, SMs and L2: ``t_kernel = max(FLOPs / (peak_dtype · compute[dtype] ·
tile/wave), bytes / (bandwidth · memory)) + kernel_s`` is the one time formula of a kernel (the assembly's
per-operator time); the GEMM family refines it with a few shape figures (``gemm_blend``, ``split_s``, ``kstep_s``,
``l2_sm_gbps``, ``l2_share``, ``quant_passes``: :mod:`.gemm`) that keep ``compute``, ``memory`` and ``kernel_s``
meaning the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any


@dataclass(frozen=True)
class CollectiveCurve:
    """One collective on one link kind, up to three protocols (s; :func:`.collectives.seconds`): the small-message
    one ``latency + hop·steps + bytes_moved / (link_bandwidth · efficiency)``, where ``efficiency_large`` > 0 the
    large-message one ``latency_large + hop·steps + bytes_moved / (link_bandwidth · efficiency_large · (n/2)^scaling)``
    and, where ``efficiency_ll128`` > 0, NCCL's LL128 ``latency_ll128 + hop·steps + bytes_moved / (link_bandwidth ·
    efficiency_ll128)``. NCCL's collectives run the protocol NCCL's own tuner picks (:mod:`.nccl_tuner`); otherwise
    the call takes the cheapest (a custom all-reduce kernel vs the NCCL fallback). Over NVLink NCCL's small protocol
    prices ``max(min(ramp_channels·S, ramp_bytes), S)`` bytes where ``ramp_bytes`` > 0 (its channel ramp)."""

    #: s, fixed per call (small-message protocol); NCCL's fixed times are SM cycles written as seconds at the curves'
    #: ``clock_mhz`` (:func:`.collectives.in_cycles`)
    latency: float
    #: achieved fraction of the link's datasheet bandwidth (small-message protocol); NCCL's all-reduce, all-gather
    #: and reduce-scatter: of NCCL's own LL rate (:func:`.nccl_tuner.ll_bandwidth`)
    efficiency: float
    hop: float = 0.0  #: s per step of the algorithm (ring step, or peer signalled)
    latency_large: float = 0.0  #: s, fixed per call of the large-message protocol (pipeline fill)
    efficiency_large: float = 0.0  #: its achieved fraction of the link bandwidth at n = 2 (0: no such protocol)
    scaling: float = 0.0  #: exponent of the large-message bandwidth's growth with the group, ``(n/2)^scaling``
    latency_ll128: float = 0.0  #: s, fixed per call of NCCL's LL128 protocol
    efficiency_ll128: float = 0.0  #: its achieved fraction of the link bandwidth (0: no such protocol)
    #: NCCL's small protocol on fewer channels for small messages: bytes of ``S`` from which all channels run
    #: (below, ``ramp_channels · S / ramp_bytes`` of them, at least one); 0: every channel at every size
    ramp_bytes: float = 0.0
    ramp_channels: float = 0.0  #: channels sharing the small protocol's bandwidth once all run (≤ 1: no ramp)


@dataclass(frozen=True)
class KernelCurves:
    """Achieved performance of one GPU architecture, as fractions of datasheet figures plus fixed latencies.

    ``compute``: achieved fraction of each roof dtype's dense datasheet peak for large, well-tiled GEMMs (keys as
    :data:`rooflaw.devices.device.DTYPES`: ``fp16`` also prices bf16; ``fp8``, ``fp4``, ``int8``; ``fp8_block``
    block-scaled fp8; ``mixed`` a weight-only quantised GEMM as a fraction of the activation dtype's peak).
    ``memory``: achieved fraction of DRAM bandwidth for a kernel that streams its operands (small-M GEMM, GEMV,
    decode attention's KV reads). ``kernel_s``: seconds every kernel costs on top of its roofline (launch,
    prologue/epilogue, the tail wave). ``half_rows``: GEMM rows at which the large-M rate is halved (``M/(M +
    half_rows)`` ramp with r = max(M, 8) rows for M; 0 none). ``gemm_blend``, ``split_s``, ``kstep_s``,
    ``l2_sm_gbps``, ``l2_share``, ``quant_passes``: the GEMM family's shape figures (:mod:`.gemm`): the exponent of
    the round roofline corner (0: the hard max), seconds a split-K reduction adds, least seconds of one 64-deep
    main-loop iteration of a CTA, the L2 bandwidth per SM of operands found resident there and the share of the L2
    they can fill, and per framework the passes its activation quantiser makes over the bf16 activations.
    ``attention``: achieved fraction of the attention dtype's peak of a FlashAttention-style prefill kernel's
    matmuls, with causal FLOPs (the masked half skipped; its softmax is ``attention_softmax``, on the fp32 roof).
    ``attention_memory``: achieved bandwidth fraction of a decode attention
    kernel reading the KV cache. ``moe``: achieved fraction of the GEMM rate inside a grouped-GEMM MoE layer.
    ``collectives``: per ``"<collective>/<link>"`` key (e.g. ``"allreduce/nvlink"``). ``bands``: per family
    (``gemm``, ``context_attention``, ``generation_attention``, ``context_mla``, ``generation_mla``, ``moe``,
    ``allreduce``, ``nccl``), the (low, high) quantiles
    of measured/predicted in leave-one-GPU-out for the 80 % band. ``provenance``: source, commit, rows, command,
    residuals (median |predicted/measured - 1| per family, in sample and held out).
    """

    architecture: str
    compute: dict[str, float]
    memory: float
    kernel_s: float
    half_rows: float = 0.0
    #: exponent p of the GEMM's round roofline corner ``(t_c^p + t_m^p)^(1/p)`` (0: the hard max)
    gemm_blend: float = 0.0
    #: seconds a split-K GEMM adds for reducing its partial sums
    split_s: float = 0.0
    #: least seconds of one main-loop iteration (64 of K) of a GEMM CTA: a long-K GEMM of few CTAs is latency-bound
    kstep_s: float = 0.0
    #: GB/s per SM (1e9 bytes/s; in GB/s so the fit's step tolerance sees it at order 1) at which a GEMM reads
    #: operands resident in L2 (fitting in half of it) where that beats DRAM
    l2_sm_gbps: float = 0.0
    #: share of the L2 a re-run GEMM's operands can fill and still be found there (0: none; :func:`.gemm.l2_hits`)
    l2_share: float = 0.0
    #: MHz: the boost clock at which ``kernel_s``, ``kstep_s`` and ``split_s`` are seconds -- the GEMM family counts
    #: them in cycles, so a device of boost clock ``f`` (``Device.clock``) runs them in ``· clock_mhz / f``
    #: (:func:`.gemm.cycle_scale`); the fit sets it to the geometric mean of the fitted GPUs' clocks (0: seconds on
    #: every device)
    clock_mhz: float = 0.0
    attention: float = 1.0
    #: achieved fraction of the fp8 peak of a prefill attention kernel whose math runs in fp8 (0: ``attention``)
    attention_fp8: float = 0.0
    attention_memory: float = 1.0
    #: seconds each wave of prefill-attention CTAs (query tiles x heads x sequences over the SMs) costs beyond its
    #: FLOPs: loading Q, the softmax epilogue and writing O of a tile -- SM cycles written as seconds at
    #: ``clock_mhz`` (as ``decode_tile_s``; a device of clock ``f`` runs them in ``· clock_mhz / f``)
    attention_tile_s: float = 0.0
    #: the same for the warp-specialised TMA prefill kernels (sm90 ``fmha_v2``, trtllm-gen, FlashAttention-3:
    #: :func:`.attention_prefill.warp_specialised`), SM cycles at ``clock_mhz``; 0: ``attention_tile_s``
    attention_ws_tile_s: float = 0.0
    #: share of vLLM's prefill tiles that pack a GQA group's query heads into one 128-row tile (FlashAttention-3's
    #: pack-GQA: S·g rows per KV head instead of S per query head; 0: none, 1: all)
    prefill_pack_gqa: float = 0.0
    #: p of a prefill attention kernel's blend of its MMA/softmax time and its stream of Q, K, V, O,
    #: ``(t_math^p + t_bytes^p)^(1/p)`` (0: the hard ``max``): near the ridge neither hides the other whole
    prefill_blend: float = 0.0
    #: seconds each wave of decode-attention CTAs (one per sequence and KV head) costs beyond its KV reads: SM cycles
    #: written as seconds at ``clock_mhz`` (as ``decode_mha_tile_s``; a device of clock ``f`` runs them in ``· clock_mhz
    #: / f``)
    decode_tile_s: float = 0.0
    #: decode CTAs per SM at which a decode attention kernel reaches half its ``attention_memory`` bandwidth (Little's
    #: law: few CTAs per SM keep too few loads in flight): its KV bytes take ``1 + decode_half_occupancy / (CTAs /
    #: SMs)`` times their time at that bandwidth, CTAs = streams (sequence x KV head) x split-KV splits (0: no ramp)
    decode_half_occupancy: float = 0.0
    #: CTAs per SM up to which a split-KV (flash-decoding) kernel splits each stream's context (0: no split)
    decode_split: float = 0.0
    #: least cached tokens per split of a split-KV decode kernel (0: no such limit)
    decode_split_tokens: float = 0.0
    #: seconds per cached token of an MLA decode CTA that walks a sequence's tokens one after another (the latent
    #: is shared by all heads: its time does not grow with them; 0: no such limit): SM cycles written as seconds at
    #: ``clock_mhz`` (a device of clock ``f`` runs them in ``· clock_mhz / f``; :mod:`.mla`)
    mla_token_s: float = 0.0
    #: p of the blend of the MLA token walk with the rest of its kernel (the KV stream at the shared bandwidth, the
    #: math, the prologues), ``(t_rest^p + t_walk^p)^(1/p)``: the walk's loads queue as the stream nears the bandwidth
    mla_walk_blend: float = 3.0
    #: achieved bandwidth fraction of an MLA decode kernel's latent stream (0: ``attention_memory``)
    mla_memory: float = 0.0
    #: seconds each wave of a streaming MLA decode kernel's CTAs costs (Q of its heads, page table, split merge, O):
    #: SM cycles written as seconds at ``clock_mhz``, as ``decode_tile_s`` (0: ``decode_tile_s``; :mod:`.mla`)
    mla_tile_s: float = 0.0
    #: p of a decode kernel's blend of its KV stream and its CTA prologues, ``(t_stream^p + t_prologues^p)^(1/p)`` (1:
    #: their sum, large: the larger), reached with many waves of CTAs: with ``W`` waves ``p = 1 + (decode_blend - 1)·(1
    #: - 1/W)`` (one wave's prologue has no earlier stream to hide under)
    decode_blend: float = 1.0
    #: seconds each wave costs of TensorRT-LLM's masked-MHA decode kernel, one CTA per (sequence, query head), which
    #: it runs where a KV head serves one query head or more than its XQA kernel takes (0: ``decode_tile_s``)
    decode_mha_tile_s: float = 0.0
    #: seconds each wave costs of the trtllm-gen decode kernel (TensorRT-LLM's on sm100, vLLM's FlashInfer
    #: ``trtllm`` decode), a warp-specialised persistent kernel that pipelines a CTA's next tile under its current
    #: one: SM cycles written as seconds at ``clock_mhz``, as ``decode_tile_s`` (0: ``decode_tile_s``;
    #: :func:`.attention_decode.trtllm_gen`)
    decode_ws_tile_s: float = 0.0
    #: cached tokens before a sliding window that a decode kernel clipped by it reads as well (the partial KV pages the
    #: window starts in; 0: none)
    decode_window_tokens: float = 0.0
    #: share of a decode wave's fixed seconds that grows with the head dim (``1 - s + s·d/128``; 0: none)
    decode_dim_share: float = 0.0
    #: share of a decode wave's fixed seconds paid per CTA rather than per wave: a partial wave of ``n < SMs`` CTAs
    #: pays ``1 - c + c·n/SMs`` of it (their Q, page-table and O traffic contends; 0: every wave pays it whole)
    decode_cta_share: float = 0.0
    #: L2 bandwidth a decode attention kernel reaches when its whole working set fits in L2 (a benchmark re-running it
    #: finds it there), in bytes per SM per SM clock cycle (``SMs · clock · decode_l2``); it applies where it beats
    #: DRAM (0: the prefill's ``attention_l2``)
    decode_l2: float = 0.0
    #: L2 bandwidth an attention kernel reaches when its whole working set fits in L2 (a kernel re-run over the same
    #: tensors, as a benchmark does, finds them there), in bytes per FLOP of the fp32 roof (a proxy of SMs x clock);
    #: it applies where it beats DRAM (0: never)
    attention_l2: float = 0.0
    #: fp32 vector FLOP-equivalents (at the device's fp32 roof) each scored (query, key) pair costs beyond its
    #: ``4·head_dim`` tensor FLOPs: the softmax's max, exponent, sum and rescale, which an fp8 kernel does not speed up
    attention_softmax: float = 0.0
    #: how the softmax overlaps the tensor-core work: ``(t_mma^p + t_softmax^p)^(1/p)`` (1: in series, large: hidden
    #: under the larger of the two, as a ping-pong FlashAttention-3 schedule does)
    softmax_overlap: float = 1.0
    moe: float = 1.0
    #: achieved fraction of the GEMM family's ``memory`` streaming rate inside a grouped MoE kernel (1: the same)
    moe_memory: float = 1.0
    #: seconds an MoE layer costs beyond its launches' ``kernel_s`` (routing, permutation, the scatter-reduce's tail)
    moe_s: float = 0.0
    #: expert width per GPU (``inter/tp``, elements) at which the grouped MoE GEMMs' compute rate is halved,
    #: ``i/(i + moe_half_inter)``: the down projection's short K loop and the up projection's narrow N tiles
    #: amortise each CTA's prologue and epilogue over little work (0: no such loss)
    moe_half_inter: float = 0.0
    #: share of the other GPUs' routed slots (T·K token-expert pairs not on this GPU) whose d-wide bf16 output an MoE
    #: layer's final reduction still reads under expert parallelism (0: only its own rows; 1: every slot)
    moe_slot: float = 0.0
    #: share of an expert's token tiles beyond its first that stream the expert's weights from DRAM again when they
    #: do not fit in L2 (the grouped GEMM walks each token tile across the whole expert; 0: read once, 1: every tile)
    moe_reread: float = 0.0
    #: per ``"<framework>/<library>"`` of a non-reference engine's MoE kernel (:func:`.moe.reread_key`), its own
    #: ``moe_reread`` (the order a library walks its tiles in decides how often an expert's weights are re-read)
    moe_reread_lib: dict[str, float] = field(default_factory=dict)
    #: per ``compute`` key, the grouped MoE GEMM's rate relative to ``compute[key] · moe`` (TensorRT-LLM's kernels;
    #: bf16 is the reference, 1; a key not named: 1): a grouped kernel's per-dtype rate is not the dense GEMM's
    moe_compute: dict[str, float] = field(default_factory=dict)
    #: q of the MoE layer's roofline blend ``(t_compute^(1/q) + t_memory^(1/q))^q``: 0 the hard max (compute and
    #: weight streaming fully overlapped), 1 their sum (none overlapped)
    moe_serial: float = 0.0
    #: DRAM GB/s per SM at which that q is 1/2 on a device, q = x/(x + moe_serial_gbps) with x the device's
    #: bandwidth per SM (:mod:`.moe_blend`); 0: q is ``moe_serial`` on every device
    moe_serial_gbps: float = 0.0
    #: extra fixed seconds per ``"<framework>/<op>"`` on top of ``kernel_s`` (op: a ``compute`` key or an attention
    #: family): the quantise kernels and host work an engine runs with a GEMM (``"trtllm/fp8"``), its attention
    #: kernel's prologue (``"vllm/generation_attention"``). An engine the curves do not name gets the smallest.
    #: ``"<framework>/<key>/<library>"``: a GEMM kernel library's own (:mod:`.gemm_library`).
    launch: dict[str, float] = field(default_factory=dict)
    #: per ``"<framework>/<op>"`` (op: an attention family), the rate of that engine's own kernel relative to the
    #: curves' fraction for ``op``, measured against TensorRT-LLM's (whose rate is 1, as is an engine not named):
    #: vLLM ships FlashAttention where TensorRT-LLM runs its own FMHA; and per ``"<framework>/moe_<moe_dtype>"`` the
    #: rate of that engine's whole MoE layer kernel (:mod:`.moe`)
    rate: dict[str, float] = field(default_factory=dict)
    #: per framework, passes its activation quantiser makes over a GEMM's bf16 activations (fp8/nvfp4/int8 GEMMs;
    #: an engine the curves do not name gets the fewest; none: 1)
    quant_passes: dict[str, float] = field(default_factory=dict)
    #: per ``"<framework>/<compute key>"`` (and ``".../chunk"``), microseconds of one SM at ``clock_mhz`` (cycles, in
    #: µs so the fit sees them at order 1) each token costs an engine's per-token activation quantiser, and each
    #: 2,048-element chunk of K it walks per token (:func:`.gemm.token_seconds`; a framework not named: none);
    #: ``".../kstep"``: one 64-deep main-loop step of a block-scaled kernel that never splits K
    #: (:data:`.gemm.OWN_KSTEP`)
    token_us: dict[str, float] = field(default_factory=dict)
    #: per ``"<framework>/<compute key>"``, the rate of that engine's GEMM kernel over the reference engine's
    #: (TensorRT-LLM's, which ``compute`` describes): vLLM's cuBLAS bf16, its per-token fp8, its block-fp8 kernels;
    #: per ``"<framework>/moe_<moe_dtype>"`` the compute rate of that engine's MoE kernel on top of its ``rate``
    engine_compute: dict[str, float] = field(default_factory=dict)
    #: per ``"<framework>/<op>"`` (``.../fp8`` for its fp8-KV kernel), the share of ``decode_split`` a decode kernel
    #: splits its KV streams up to, relative to TensorRT-LLM's bf16-KV kernel (1, as a kernel not named; 0: it never
    #: splits, each CTA walks its whole stream -- TensorRT-LLM's fp8-KV XQA on Ada); a kernel's own figures, not
    #: pooled in ``generic``
    split_share: dict[str, float] = field(default_factory=dict)
    collectives: dict[str, CollectiveCurve] = field(default_factory=dict)
    bands: dict[str, tuple[float, float]] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)


# ---- families: how a measured table is priced and which figures it fits --------------------------
from collections.abc import Callable  # noqa: E402


@dataclass(frozen=True)
class Family:
    """A kernel family: the measured tables it prices, the :class:`KernelCurves` figures it fits, its predictor.

    ``params``: dotted paths into :class:`KernelCurves` (``"memory"``, ``"compute.fp8"``,
    ``"collectives.allreduce/nvlink.latency"``) that this family's rows determine; families are fitted in
    registration order, each holding the figures fitted before it fixed (GEMM first: ``compute.*``, ``memory``,
    ``kernel_s``, ``half_rows``; then attention, MoE, collectives). ``predict(rows, device, curves)`` returns the
    predicted latency of each row of a table (a ``pandas.DataFrame`` with the table's own columns) in
    **milliseconds**, NaN where a row is not modelled.
    """

    name: str
    tables: tuple[str, ...]
    params: tuple[str, ...]
    predict: Callable[..., Any]
    #: ``used(rows) -> params``: the figures a table's rows determine (those ``params`` its dtypes touch plus
    #: per-engine ``launch.<framework>/<op>`` entries); ``None``: all of ``params``.
    used: Callable[..., tuple[str, ...]] | None = None
    #: ``prepare(rows, device) -> terms`` and ``evaluate(terms, device, curves) -> seconds``: the curve-independent
    #: part of ``predict`` computed once, so a fit re-evaluates only the curves (``None``: the fit calls ``predict``).
    prepare: Callable[..., Any] | None = None
    evaluate: Callable[..., Any] | None = None
    #: ``fit(family, data, curves, fit_one) -> curves``: a family whose figures fall into problems that share no
    #: figure fits each on its own rows (``fit_one``: the driver's one-problem fit; ``None``: one joint problem).
    fit: Callable[..., Any] | None = None


#: name -> Family, in fit order (see :func:`register`).
FAMILIES: dict[str, Family] = {}


def register(family: Family) -> Family:
    """Add ``family`` to :data:`FAMILIES` (a module defining one calls this at import)."""
    FAMILIES[family.name] = family
    return family


def family_of_table(table: str) -> Family | None:
    """The family that prices measured table ``table`` (e.g. ``gemm_perf``), or ``None``."""
    return next((f for f in FAMILIES.values() if table in f.tables), None)


# ---- the shipped catalog --------------------------------------------------------------------------
import sys  # noqa: E402
from functools import lru_cache  # noqa: E402
from pathlib import Path  # noqa: E402

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: The fitted curves shipped in the package (written by ``rooflaw devices fit-kernels --write-catalog``).
CATALOG = Path(__file__).with_name("kernel_curves.toml")
GENERIC = "generic"


#: the scalar figures of :class:`KernelCurves` (seconds or fractions), written and read by name
SCALARS = tuple(f.name for f in fields(KernelCurves) if f.type == "float")


def curves_from_dict(name: str, d: dict[str, Any]) -> KernelCurves:
    """A :class:`KernelCurves` from one ``[curves.<name>]`` table of the catalog (absent scalars: defaults)."""
    names = [f.name for f in fields(CollectiveCurve)]
    coll = {
        k: CollectiveCurve(**{n: float(v[n]) for n in names if n in v}) for k, v in d.get("collectives", {}).items()
    }
    return KernelCurves(
        architecture=name,
        compute={k: float(v) for k, v in d.get("compute", {}).items()},
        launch={k: float(v) for k, v in d.get("launch", {}).items()},
        rate={k: float(v) for k, v in d.get("rate", {}).items()},
        quant_passes={k: float(v) for k, v in d.get("quant_passes", {}).items()},
        token_us={k: float(v) for k, v in d.get("token_us", {}).items()},
        engine_compute={k: float(v) for k, v in d.get("engine_compute", {}).items()},
        split_share={k: float(v) for k, v in d.get("split_share", {}).items()},
        moe_compute={k: float(v) for k, v in d.get("moe_compute", {}).items()},
        moe_reread_lib={k: float(v) for k, v in d.get("moe_reread_lib", {}).items()},
        collectives=coll,
        bands={k: (float(v[0]), float(v[1])) for k, v in d.get("bands", {}).items()},
        provenance=dict(d.get("provenance", {})),
        **{k: float(d[k]) for k in SCALARS if k in d},
    )


@lru_cache(maxsize=8)
def load_curves(path: str | None = None) -> dict[str, KernelCurves]:
    """Architecture name -> :class:`KernelCurves` of the catalog at ``path`` (default: the shipped one); empty when
    the file does not exist."""
    from ...errors import RooflawError

    p = Path(path) if path else CATALOG
    if not p.is_file():
        return {}
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
        return {name: curves_from_dict(name, d) for name, d in data.get("curves", {}).items()}
    except (tomllib.TOMLDecodeError, KeyError, TypeError, ValueError) as e:
        raise RooflawError(f"kernel curves {str(p)!r}: {type(e).__name__}: {e}") from None


def curves_for(device: Any) -> KernelCurves | None:
    """The curves that price ``device``: its kernels' architecture's (``Device.curves_architecture``: the
    ``kernel_architecture`` where its device file names one, else its ``architecture``), else the
    ``generic`` ones; ``None`` for a device with no ``architecture`` (or when the catalog holds neither)."""
    arch = getattr(device, "curves_architecture", None) or getattr(device, "architecture", None)
    if not arch:
        return None
    cat = load_curves()
    return cat.get(arch) or cat.get(GENERIC)


# The families, in fit order (GEMM first: later families hold its figures fixed).
from . import gemm as _gemm  # noqa: E402,F401,I001  (attention imports gemm too)
from . import attention as _attention  # noqa: E402,F401
from . import mla as _mla  # noqa: E402,F401  (holds the attention figures fixed: after attention)
from . import moe as _moe  # noqa: E402,F401  (holds the GEMM figures fixed: after gemm)
from . import collectives as _collectives  # noqa: E402,F401
