"""``rooflaw validate --cuda``: measure real eager decoders of 0.3-8 B parameters on the CUDA GPU and compare.

The GPU configs (:data:`CONFIGS_CUDA`) are sized for a datacenter GPU: every one's weights are several times the
L2 (decode streams them from HBM as the model assumes), prefill of a 1024-token prompt is compute-heavy, and
decode is 32 KV-cached steps. Each row is timed as :func:`rooflaw.validate.measure` does (host wall clock, a
device sync at the end, best of repeats) and predicted with :func:`rooflaw.evaluate` under engine
``torch-eager`` on the given device: the GPU calibrated by micro-benchmarks (:mod:`rooflaw.devices.calibrate_cuda`)
or a catalog device with its published-fitted ``[achieved]`` figures (an out-of-sample check of that fit).
Each row also carries the part of the prediction that is launch overhead (kernels × seconds per kernel), the
rest (the roofline), and the host syncs per pass of the eager MoE code (counted, not priced).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable

from .api import Architecture, Device, Workload, evaluate

#: name -> (spec, precision): dense and MoE, MHA/GQA/MQA, narrow/wide, shallow/deep, bf16 and fp16, 0.3-8 B
#: parameters, vocab 32k-128k. Every one weighs ≥ 4 × the 60 MB L2 of an H200 (tests check it). The MoE configs are
#: bf16: random fp16 weights could overflow to NaN, and a NaN router would change which experts run.
CONFIGS_CUDA: dict[str, tuple[dict[str, int], str]] = {
    "llama3-8b": ({"layers": 32, "d_model": 4096, "heads": 32, "kv_heads": 8, "ffn": 14336, "vocab": 128256}, "bf16"),
    "gqa-3072x28": ({"layers": 28, "d_model": 3072, "heads": 24, "kv_heads": 8, "ffn": 8192, "vocab": 128256}, "bf16"),
    "mha-2048x24": ({"layers": 24, "d_model": 2048, "heads": 16, "ffn": 5632, "vocab": 32000}, "fp16"),
    "gqa-deep-1024x48": ({"layers": 48, "d_model": 1024, "heads": 16, "kv_heads": 4, "ffn": 2816, "vocab": 32000},
                         "bf16"),
    "gqa-wide-6144x4": ({"layers": 4, "d_model": 6144, "heads": 48, "kv_heads": 8, "ffn": 16384, "vocab": 65536},
                        "bf16"),
    "mha-narrow-1024x12": ({"layers": 12, "d_model": 1024, "heads": 16, "ffn": 4096, "vocab": 32000}, "fp16"),
    "gqa-1536x28": ({"layers": 28, "d_model": 1536, "heads": 12, "kv_heads": 2, "ffn": 8960, "vocab": 100352}, "fp16"),
    "mha-4096x8": ({"layers": 8, "d_model": 4096, "heads": 32, "ffn": 11008, "vocab": 32000}, "fp16"),
    "mqa-2048x16": ({"layers": 16, "d_model": 2048, "heads": 16, "kv_heads": 1, "ffn": 8192, "vocab": 50304}, "fp16"),
    "moe-8x2-2048x16": (
        {"layers": 16, "d_model": 2048, "heads": 16, "kv_heads": 4, "ffn": 5632, "experts": 8, "top_k": 2,
         "vocab": 32000}, "bf16"),
    "moe-16x4-1024x12": (
        {"layers": 12, "d_model": 1024, "heads": 8, "ffn": 1408, "experts": 16, "top_k": 4, "vocab": 50304}, "bf16"),
    "moe-64x6-1024x8": (
        {"layers": 8, "d_model": 1024, "heads": 16, "ffn": 512, "experts": 64, "top_k": 6, "vocab": 32000}, "bf16"),
}  # fmt: skip
#: ``--quick``: a narrow dense, a wide dense and a MoE config.
QUICK_CUDA = ("mha-narrow-1024x12", "gqa-wide-6144x4", "moe-16x4-1024x12")
#: batch 1, a 1024-token prompt (compute-heavy prefill), 32 decode steps.
WORKLOAD_CUDA = Workload(1, 1024, 32)
REPEATS_CUDA = 5
ENGINE = "torch-eager"


def _without_launch(device: Device) -> Device:
    """``device`` with no per-kernel cost (neither its own nor its fitted family's): the roofline part alone."""
    ach = {**device.achieved, "kernel_s": 0.0} if device.achieved else {}
    return dataclasses.replace(device, kernel_overhead=0.0, achieved=ach)


def predict(arch: Architecture, precision: str, device: Device, wl: Workload, graphs: bool = False) -> dict:
    """Predicted prefill and decode-step seconds, their roofline part and their launch overhead (all of it: on a GPU
    the model takes max(roofline, launch) for a host-launching engine, ``combine`` = max, on a CPU the sum).
    ``graphs``: the kernels replay from CUDA graphs: their cost is device-side and adds (``launch`` = device)."""
    from .constraints.engines import applied, get_engine

    summed = dataclasses.replace(get_engine(ENGINE), launch="device")  # the same kernels, their cost added
    engine = summed if graphs else get_engine(ENGINE)
    rep = evaluate(arch, device, wl, precision, engine=engine, tiles=True)
    no_kernels = dataclasses.replace(
        engine, kernels_per_layer=0.0, kernels_per_pass=0.0, moe_kernels=0.0, kernels_per_expert=0.0
    )  # a GPU priced by kernel curves has its kernel_s there
    bare = evaluate(arch, _without_launch(device), wl, precision, engine=no_kernels, tiles=True)
    add = evaluate(arch, device, wl, precision, engine=summed, tiles=True)
    return {"prefill_s": rep.prefill_s, "decode_s": rep.tpot_s, "prefill_roofline_s": bare.prefill_s,
            "decode_roofline_s": bare.tpot_s, "prefill_launch_s": add.prefill_s - bare.prefill_s,
            "decode_launch_s": add.tpot_s - bare.tpot_s, "weight_bytes": float(rep.values["weight_bytes"]),
            "combine": "max" if applied(device, engine).overlap else "sum"}  # fmt: skip


def syncs(arch: Architecture, tokens: int) -> float:
    """Host syncs one pass of ``tokens`` tokens makes in the eager MoE code (0 for a dense model)."""
    from .constraints.engines import experts_touched
    from .devices.eager_decoder import host_syncs

    moe_layers = arch.layers - arch.first_dense if arch.experts > 1 else 0
    return host_syncs(moe_layers, experts_touched(arch.experts, arch.top_k, tokens)) if moe_layers else 0.0


#: The warning torch's CUDA sync debug mode issues at each synchronising operation. Only it is counted: turning the
#: mode on also warns once per process that it "is a prototype feature and does not yet detect all synchronizing
#: operations" -- matching "synchroniz" counted that one too, one extra sync at the first count of a process (GPU
#: runs 1-3: llama3-8b prefill 1 for 0, the MoE test 9 for 8).
SYNC_WARNING = "called a synchronizing CUDA operation"


def count_syncs(fn: Callable[[], object]) -> int | None:
    """Host-device synchronisations one call of ``fn`` makes, counted by torch's CUDA sync debug mode (its
    :data:`SYNC_WARNING` warnings); None without CUDA."""
    import warnings

    import torch

    if not torch.cuda.is_available():
        return None
    before = torch.cuda.get_sync_debug_mode()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode(before)
    return sum(SYNC_WARNING in str(w.message) for w in caught)


def measure(arch: Architecture, precision: str, wl: Workload, torch_device: str, repeats: int, graphs: bool = False):
    """(prefill, decode step) :class:`~rooflaw.validate.Timing` of an eager decoder of ``arch`` built on
    ``torch_device`` in ``precision`` (as :func:`rooflaw.validate.measure`), and the host syncs one prefill and one
    decode step make (None off CUDA or with ``graphs``).

    ``graphs``: the prefill and each of the decode steps captured as CUDA graphs (one graph per step position: the
    KV-cache slice of step t is baked into graph t; the decode graphs share one memory pool and replay in capture
    order), so that the GPU runs the same kernels without the host's per-kernel launch cost. Only for a model
    without host syncs (no MoE routing): a sync cannot be captured."""
    import torch

    from .devices.calibrate_cuda import capture_graph
    from .devices.eager_decoder import build
    from .validate import time_calls

    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    model = build(arch, dtype, torch_device)
    B, S_in, S_out = wl.batch, wl.input_tokens, wl.output_tokens
    cols = arch.columns()  # the derived sizes as ints
    shape = (B, cols["kv_heads"], S_in + S_out + 1, cols["head_dim"])
    kv = lambda: torch.zeros(shape, dtype=dtype, device=torch_device)  # noqa: E731
    caches = [(kv(), kv()) for _ in range(arch.layers)]
    ids = torch.randint(0, arch.vocab, (B, S_in), device=torch_device)
    tok = torch.randint(0, arch.vocab, (B, 1), device=torch_device)
    on_gpu = torch_device == "cuda"
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)

    def prefill() -> None:
        model(ids, caches, 0)

    def step(t: int) -> Callable[[], None]:
        return lambda: model(tok, caches, S_in + t)

    steps = [step(t) for t in range(S_out)]
    if graphs:
        with torch.no_grad():
            pre_graph = capture_graph(prefill)
            pool = torch.cuda.graph_pool_handle()
            steps = [capture_graph(f, pool).replay for f in steps]
        prefill = pre_graph.replay  # noqa: F811

    def decode() -> None:
        for f in steps:
            f()

    with torch.inference_mode():
        pre = time_calls(prefill, sync, repeats)
        dec = time_calls(decode, sync, repeats).per(S_out)
        counted = on_gpu and not graphs
        syncs_pre = count_syncs(prefill) if counted else None
        syncs_dec = count_syncs(steps[0]) if counted else None
    return pre, dec, syncs_pre, syncs_dec


def measured_rows(path: str) -> dict:
    """(name, phase) -> (:class:`~rooflaw.validate.Timing`, host syncs counted) of an earlier ``validate --cuda
    --json`` report: the measurements another device's predictions can be compared with (no GPU work); the key
    ``"meta"`` holds the report's ``gpu``, ``versions``, ``graphs`` and ``workload``."""
    from .errors import RooflawError
    from .safe_io import load
    from .validate import Timing

    rep = load(path, "measured", ".json")  # a regular file, nesting-limited: a one-line error otherwise
    try:
        rows: dict = {(c["name"], c["phase"]): (Timing(c["wall_best_s"], c["wall_median_s"], c["cpu_s"]),
                                                c.get("host_syncs_counted")) for c in rep["configs"]}  # fmt: skip
        rows["meta"] = {"gpu": rep["gpu"], "versions": rep["versions"], "graphs": bool(rep.get("graphs", False)),
                        "workload": rep["workload"]}  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise RooflawError(f"--measured={path!r}: not a validate --cuda --json report ({e})") from None
    return rows


def run_cuda(
    device: Device,
    progress: Callable[[str, float], None] | None = None,
    names: tuple[str, ...] | None = None,
    *,
    configs: dict[str, tuple[dict[str, int], str]] | None = None,
    workload: Workload = WORKLOAD_CUDA,
    torch_device: str = "cuda",
    graphs: bool = False,
    measured: dict | None = None,
) -> dict[str, object]:
    """Measure every GPU config (or ``names``) on ``torch_device`` and predict it on ``device``; the JSON-ready
    report (the keys of :func:`rooflaw.validate.run`, and per row the predicting device and engine).
    ``configs``/``workload``/``torch_device``: other sets, sizes and devices (tests run tiny ones on the CPU).
    ``graphs``: time CUDA-graph replays (:func:`measure`); the MoE configs, whose routing syncs the host, are left
    out. ``measured``: reuse these measurements (:func:`measured_rows`) instead of measuring: the same runs
    predicted on another device."""
    import torch

    from .api import from_mapping
    from .validate import Run, load_average

    wl, table = workload, configs or CONFIGS_CUDA
    meta = (measured or {}).get("meta")
    if meta is not None:  # the runs were measured with these settings: predict the same
        from .errors import bad

        wl = Workload(**meta["workload"])
        if bool(meta["graphs"]) != graphs:
            raise bad("--measured", "graphs" if meta["graphs"] else "eager", f"needs --graphs={meta['graphs']}")
    names = tuple(n for n in (names or table) if not (graphs and table[n][0].get("experts", 1) > 1))
    on_gpu = torch_device == "cuda"
    # CUDA graphs: no host launch per kernel, only the device-side cost per kernel (the device's achieved kernel_s:
    # calibrate --cuda's graph replay, or the catalog's published fit)
    pdev = dataclasses.replace(device, kernel_overhead=0.0) if graphs else device
    rows: list[dict[str, object]] = []
    runs: list[Run] = []
    skipped: dict[str, str] = {}
    for i, name in enumerate(names):
        spec, prec = table[name]
        if progress:
            progress(name, i / len(names))
        arch = from_mapping(spec, name=name)
        p = predict(arch, prec, pdev, wl, graphs)
        if measured is not None:
            if (name, "prefill") not in measured or (name, "decode") not in measured:
                from .errors import RooflawError

                raise RooflawError(f"--measured: the report has no measurement of {name!r}")
            (pre, syncs_pre), (dec, syncs_dec) = measured[(name, "prefill")], measured[(name, "decode")]
        else:
            try:
                pre, dec, syncs_pre, syncs_dec = measure(arch, prec, wl, torch_device, REPEATS_CUDA, graphs)
            except RuntimeError as e:  # a graph capture torch refuses: say so, measure the others
                if not graphs:
                    raise
                skipped[name] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
                continue
            finally:
                if on_gpu:
                    torch.cuda.empty_cache()
        for phase, timing, tokens, counted in (("prefill", pre, wl.batch * wl.input_tokens, syncs_pre),
                                               ("decode", dec, wl.batch, syncs_dec)):  # fmt: skip
            r = Run(name, phase, p[f"{phase}_s"], timing, "wall")
            runs.append(r)
            roof = p[f"{phase}_roofline_s"]
            extra = {"predicted_by": device.id, "engine": ENGINE, "precision": prec, "params": int(arch.params_total),
                     "weight_bytes": p["weight_bytes"], "roofline_s": roof, "launch_s": p[f"{phase}_launch_s"],
                     "combine": p["combine"],
                     "host_syncs": syncs(arch, tokens), "host_syncs_counted": counted}  # fmt: skip
            rows.append(r.to_dict() | extra)
    if progress:
        progress("done", 1.0)

    def mape(phase: str) -> float:
        errs = [abs(r.error) for r in runs if r.phase == phase]
        return float(sum(errs) / len(errs)) if errs else math.nan

    return {
        "device": device.id,
        "device_name": device.name,
        "engine": ENGINE,
        "graphs": graphs,
        "kernel_s": float(pdev.kernel_overhead or pdev.achieved.get("kernel_s", 0.0)),
        "measured_here": measured is None,
        "torch_device": torch_device,
        "gpu": meta["gpu"] if meta else torch.cuda.get_device_name(0) if on_gpu else torch_device,
        "versions": meta["versions"] if meta else f"torch {torch.__version__}, CUDA {torch.version.cuda}",
        "threads": torch.get_num_threads(),
        "workload": wl.to_dict(),
        "configs": rows,
        "skipped": skipped,
        "mape_prefill": mape("prefill"),
        "mape_decode": mape("decode"),
        "clock": "wall",
        "statistic": f"best wall time (device synchronised) of {REPEATS_CUDA} repeats",
        "median_spread": statistics.median(r.timing.spread for r in runs) if runs else math.nan,
        "load_avg_1min": load_average(),
    }
