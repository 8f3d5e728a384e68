"""Published measurements as cost-model cases: which architecture, device, precision, engine and
workload each row of ``published.csv`` measured, and which predicted quantity it compares with.

Rows are read with the csv module (no pandas at import). A row is used when its
``use_for_validation`` starts with ``Y`` and its device/power mode is in the catalog; every other
row is returned with the reason it was skipped. What each ``measurement_type`` measures (see the
README beside the data):

* ``prefill``: the prefill time of the whole batch (TensorRT Edge-LLM "prefill ms", llama.cpp
  server TTFT p50, llama-bench pp512 = 512 / tok/s);
* ``decode``: the mean time of one decode step of the batch (TensorRT Edge-LLM batch / tok/s,
  llama.cpp ITL p50, llama-bench tg512 from an empty context);
* ``e2e``: time per generated token *including* the prefill: gpt-fast tokens/s = (prefill +
  (S_out − 1) decode steps) / (batch · S_out); vLLM "output token throughput" at ``max-concurrency``
  N = the steady state of continuous batching with chunked prefill (:mod:`.serving`), whose steps
  carry one request's prompt chunk with the other requests' decode tokens.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from ..arch import Architecture, from_hf_config
from ..devices.precision import FORMATS, Format, Precision
from ..errors import RooflawError
from .engines import get_engine
from .workload import Workload

#: Hugging Face model id (lower case, quantised-checkpoint prefixes dropped) -> bundled config.
MODEL_CONFIGS = {
    "qwen3-0.6b": "qwen3-0.6b",
    "qwen3-1.7b": "qwen3-1.7b",
    "qwen3-4b": "qwen3-4b",
    "qwen3-4b-2507": "qwen3-4b",
    "qwen3-8b": "qwen3-8b",
    "qwen3-32b": "qwen3-32b",
    "qwen3-30b-a3b": "qwen3-30b-a3b",
    "llama-3.1-8b": "llama-3.1-8b",
    "meta-llama-3.1-8b": "llama-3.1-8b",
    "meta-llama-3.1-70b": "llama-3.1-70b",
    "meta-llama-3-8b": "llama-3-8b",
    "meta-llama-3-70b": "llama-3-70b",
    "llama-2-7b": "llama-2-7b",
    "llama-2-70b": "llama-2-70b",
    "llama-3.2-1b": "llama-3.2-1b",
    "llama-3.2-3b": "llama-3.2-3b",
    "smollm2-135m": "smollm2-135m",
    "smollm2-360m": "smollm2-360m",
    "qwen2.5-0.5b": "qwen2.5-0.5b",
    "gemma-3-1b": "gemma-3-1b",
}
ENGINE_OF = (
    ("edge-llm", "tensorrt-edge-llm"),
    ("tensorrt", "tensorrt-llm"),
    ("llama.cpp", "llama.cpp"),
    ("vllm", "vllm"),
    ("gpt-fast", "gpt-fast"),
)
#: Device families the achieved-performance figures are fitted per.
FAMILY_OF = {
    "jetson-orin-nano-8gb": "jetson-ampere",
    "jetson-orin-nx-16gb": "jetson-ampere",
    "jetson-agx-orin-32gb": "jetson-ampere",
    "jetson-agx-orin-64gb": "jetson-ampere",
    "jetson-agx-thor": "jetson-blackwell",
    "a100-sxm-80gb": "datacenter-ampere-hopper",
    "h100-sxm": "datacenter-ampere-hopper",
    "h200-sxm": "datacenter-ampere-hopper",
    "rtx-4090": "datacenter-ampere-hopper",
    "l4": "datacenter-ampere-hopper",
}


@dataclass(frozen=True)
class Case:
    """One comparable quantity of one published row."""

    row_id: str
    source: str
    device: str  #: catalog id (with ``@mode``)
    family: str
    engine: str
    model: str  #: bundled config name
    arch: Architecture
    precision: Precision
    workload: Workload
    phase: str  #: prefill | decode | e2e
    measured_s: float
    #: e2e measured as the aggregate throughput of a server kept at ``workload.batch`` requests in flight
    #: (``vllm bench serve --max-concurrency``): continuous batching with chunked prefill (:mod:`.serving`)
    concurrent: bool = False
    #: the FP16 roof (FLOP/s) this row's 16-bit GEMMs run on when it is not the catalog's: llama.cpp's cuBLAS
    #: path accumulates in FP16 (:data:`FP16_ACCUMULATE_FLOPS`)
    fp16_flops: float | None = None
    #: the batch's prompts differ in length (a dataset's prompts; ``input_tokens`` is their mean): an engine that pads
    #: them to the longest (:attr:`.engines.EngineProfile.padding`) prefills more tokens than B × the mean
    uneven_prompts: bool = False


class _RowFields(TypedDict):
    """The :class:`Case` fields every case of one published row shares (the prompt's may differ in precision and
    FP16 roof on llama.cpp)."""

    row_id: str
    source: str
    device: str
    family: str
    engine: str
    model: str
    arch: Architecture
    precision: Precision
    fp16_flops: float | None


def _num(text: str) -> float:
    m = re.match(r"\s*([0-9]+(?:\.[0-9]+)?)", text or "")
    return float(m.group(1)) if m else math.nan


#: Columns of published.csv that hold counts, latencies or rates: a value given there must be positive and finite.
NUMBER_COLUMNS = ("batch", "input_tokens", "output_tokens", "prefill_ms", "prefill_tok_s", "decode_tok_s",
                  "decode_ms_per_token")  # fmt: skip


def _check_numbers(row: dict[str, str], path: Path) -> None:
    """Refuse a number column that reads as a number but is NaN, infinite, zero or negative (``_num`` would read it
    as "not given" and silently drop the measurement)."""
    for col in NUMBER_COLUMNS:
        text = (row.get(col) or "").strip()
        try:
            v = float(text)
        except ValueError:
            continue  # empty, or a number with a note ("12.3 (est.)"), read by _num
        if not (math.isfinite(v) and v > 0):
            raise RooflawError(
                f"published data {str(path)!r}: row {row.get('row_id', '?')}: {col}={text!r}: must be a positive, "
                "finite number (or empty when not given)"
            )


def _model(hf: str) -> str | None:
    name = hf.split(" ")[0].split("/")[-1].lower()
    name = re.sub(r"^meta-llama\.", "", name)
    name = re.sub(r"(-instruct|-chat-hf|-it|-hf|-quantized\.w4a16|_w4a16|-gptq-int4|-awq)+$", "", name)
    name = re.sub(r"-instruct(?=-2507)", "", name)
    return MODEL_CONFIGS.get(name)


def _device(row: dict[str, str]) -> str | None:
    dev, mode = row["device_id"].strip(), (row["catalog_mode"] or "").strip()
    if not dev:
        return None
    if not mode:
        return dev
    if mode.startswith("(none"):
        return None
    if mode.startswith("base"):
        return dev
    return f"{dev}@{mode}"


def _file_bytes(text: str) -> float:
    """A reported file size: llama.cpp sizes are binary units (MB = MiB, GB = GiB)."""
    m = re.search(r"([0-9]+(?:\.[0-9]+)?)\s*[MG]B", text)
    v = float(m.group(1)) if m else math.nan
    if "GB" in text:
        return v * 2**30
    if "MB" in text:
        return v * 2**20
    return math.nan


def _precision(row: dict[str, str], arch: Architecture, engine: str) -> Precision:
    p = row["precision"].lower()
    fp16, bf16 = FORMATS["fp16"], FORMATS["bf16"]
    head16 = bf16 if engine in ("tensorrt-llm", "tensorrt-edge-llm", "vllm") else None
    if p.startswith("gguf"):
        if "f16" in p:
            return Precision(fp16, fp16, fp16)
        size = _file_bytes(row["weights_size_reported"] or "")
        bpw = size / arch.params_total if math.isfinite(size) else FORMATS["q4_k_m"].bytes
        fmt = Format("gguf", bpw, "int8", f"GGUF {p.split()[1]}: {8 * bpw:.2f} b/w from the file size", True)
        return Precision(fmt, FORMATS["int8"], fp16, fmt)  # MMQ: int8 activations, f16 KV cache
    if p == "nvfp4":  # TensorRT Edge-LLM's NVFP4 recipe quantises the LM head too (--lm_head_quantization nvfp4)
        head = FORMATS["nvfp4"] if engine == "tensorrt-edge-llm" else head16
        return Precision(FORMATS["nvfp4"], FORMATS["nvfp4"], fp16, head)
    if "awq" in p:
        return Precision(FORMATS["awq"], fp16, fp16, head16)
    if "gptq" in p or "w4a16" in p:
        return Precision(FORMATS["gptq"], fp16, fp16, head16)
    if p == "bf16":
        return Precision(bf16, bf16, bf16)
    if "int8" in p:
        return Precision(FORMATS["int8wo"], bf16, bf16)
    if "int4" in p and "32" in p:
        return Precision(FORMATS["int4-g32"], bf16, bf16)
    raise RooflawError(f"precision={row['precision']!r}: not mapped to a format")


#: FP16 tensor rate with FP16 accumulation, FLOP/s, where it exceeds the catalog's FP16 roof (FP32 accumulate):
#: GeForce parts run FP16-accumulate MMA at twice the rate (Ada whitepaper, appendix A: RTX 4090 330.3 TFLOPS).
#: llama.cpp's cuBLAS GEMMs use it: ``ggml_cuda_op_mul_mat_cublas`` "convert src0 and src1 to fp16, multiply as
#: fp16" with ``CUBLAS_COMPUTE_16F`` (F16 GGUF prompts, and quantised prompts in builds before PR #8075).
FP16_ACCUMULATE_FLOPS = {"rtx-4090": 330.3e12}
#: llama.cpp's CUDA backend switched its prompt GEMMs on quantised weights from "dequantise to F16, then cuBLAS
#: FP16 GEMM" (every batch of more than ``MMQ_MAX_BATCH_SIZE`` = 32 tokens) to its int8 tensor-core MMQ kernels by
#: default in ggml-org/llama.cpp PR #8075 ("CUDA: use MMQ instead of cuBLAS by default", merged 2024-06-24).
LLAMACPP_MMQ_SINCE = (2024, 6)
LLAMACPP_MMQ_MIN_TOKENS = 33
_MONTHS = {m: i + 1 for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
                                           "nov", "dec"))}  # fmt: skip


def _build_month(row: dict[str, str]) -> tuple[int, int] | None:
    """(year, month) of the engine build: from ``engine_version`` ("build of May 2024"), else the source's date."""
    m = re.search(r"\b([A-Za-z]{3})[a-z]*\.? (20\d\d)\b", row.get("engine_version") or "")
    if m and m.group(1).lower() in _MONTHS:
        return int(m.group(2)), _MONTHS[m.group(1).lower()]
    m = re.search(
        r"\b(20\d\d)-(\d\d)(?:-\d\d)?\b", (row.get("engine_version") or "") + " " + (row.get("source_ref") or "")
    )
    return (int(m.group(1)), int(m.group(2))) if m else None


def llamacpp_prompt_precision(row: dict[str, str], prec: Precision, tokens: int) -> Precision:
    """The formats llama.cpp's prompt GEMMs of ``tokens`` rows run in. Builds before PR #8075 (dated before
    June 2024) dequantise GGUF weights to F16 for batches over 32 tokens and run cuBLAS: the GEMM is FP16 x FP16
    on the 16-bit roof, and each weight is read quantised and written as F16 by a dequantise kernel of its own
    (``Format.staged``: its bytes add to the GEMM's time), then read as F16 by the GEMM, every pass.
    Later builds (and undated ones) keep the int8 MMQ kernels (``prec`` unchanged)."""
    w = prec.weights
    when = _build_month(row)
    if w.name != "gguf" or tokens < LLAMACPP_MMQ_MIN_TOKENS or when is None or when >= LLAMACPP_MMQ_SINCE:
        return prec
    fp16 = FORMATS["fp16"]
    f16 = Format("gguf-cublas", 2.0, "fp16", f"{w.note}; dequantised to F16 for cuBLAS (llama.cpp before #8075)",
                 staged=w.bytes + 2.0)  # fmt: skip
    # the prompt's LM head multiplies one row per sequence: llama.cpp's MMVQ reads it quantised, as stored
    head = prec.head if prec.head is not None else f16
    return Precision(f16, fp16, fp16, head)


def _cases(row: dict[str, str], arch: Architecture, device: str, engine: str) -> list[Case]:
    prec = _precision(row, arch, engine)
    batch = int(_num(row["batch"]))
    s_in = max(1, round(_num(row["input_tokens"])))
    s_out_text = row["output_tokens"] or ""
    s_out = int(_num(s_out_text)) if s_out_text else 128  # output length not stated: 128
    mtype = row["measurement_type"].lower()
    att = get_engine(engine).attention
    fam = FAMILY_OF.get(device.split("@")[0], "other")
    base = _RowFields(row_id=row["row_id"], source=row["source_id"], device=device, family=fam, engine=engine,
                      model=_model(row["model_hf"]) or "", arch=arch, precision=prec, fp16_flops=None)  # fmt: skip
    out = []
    pre_base = base
    if engine == "llama.cpp":  # the prompt GEMMs' kernel path depends on the build (PR #8075)
        pp = llamacpp_prompt_precision(row, prec, batch * s_in)
        cublas = pp.weights.dtype == "fp16" and batch * s_in >= LLAMACPP_MMQ_MIN_TOKENS  # F16 GGUF or cuBLAS path
        acc16 = FP16_ACCUMULATE_FLOPS.get(device.split("@")[0]) if cublas else None
        pre_base = {**base, "precision": pp, "fp16_flops": acc16}
    tok_s = _num(row["decode_tok_s"])
    if "llama-bench" in mtype:  # separate pp512 and tg512 tests
        pp_tok_s = _num(row["prefill_tok_s"])
        if math.isfinite(pp_tok_s) and "tg only" not in row["use_for_validation"]:
            w = Workload(batch, s_in, 1, att)
            out.append(Case(**pre_base, workload=w, phase="prefill", measured_s=s_in / pp_tok_s))
        out.append(Case(**base, workload=Workload(batch, 1, s_out, att), phase="decode", measured_s=batch / tok_s))
        return out
    if "output token throughput" in mtype or "end-to-end" in mtype:
        w = Workload(batch, s_in, max(1, s_out - 1), att)
        served = "max-concurrency" in mtype
        return [Case(**base, workload=w, phase="e2e", measured_s=1.0 / tok_s, concurrent=served)]
    pre = _num(row["prefill_ms"])
    if math.isfinite(pre):
        uneven = batch > 1 and "dataset prompts" in mtype  # TensorRT Edge-LLM's dataset: input_tokens is the mean
        out.append(Case(**pre_base, workload=Workload(batch, s_in, 1, att), phase="prefill", measured_s=pre / 1e3,
                        uneven_prompts=uneven))  # fmt: skip
    step = _num(row["decode_ms_per_token"])
    step = step / 1e3 if math.isfinite(step) else batch / tok_s
    out.append(Case(**base, workload=Workload(batch, s_in, s_out, att), phase="decode", measured_s=step))
    return out


def load_cases(path: str | Path) -> tuple[list[Case], list[tuple[str, str]]]:
    """The comparable cases of ``published.csv`` and the (row id, reason) of every row not used."""
    p = Path(path)
    if not p.exists():
        raise RooflawError(f"published data {str(p)!r}: no such file")
    from ..safe_io import read_text

    rows = list(csv.DictReader(io.StringIO(read_text(p, "data"), newline="")))
    need = {"row_id", "use_for_validation", "device_id", "catalog_mode", "model_hf", "precision", "engine"}
    if rows and not need <= set(rows[0]):
        raise RooflawError(f"published data {str(p)!r}: missing columns {sorted(need - set(rows[0]))}")
    from ..devices import get_device

    cases, skipped = [], []
    for row in rows:
        rid = row["row_id"]
        if not row["use_for_validation"].startswith("Y"):
            skipped.append((rid, f"use_for_validation = {row['use_for_validation']}"))
            continue
        device = _device(row)
        if device is None:
            skipped.append((rid, f"power mode {row['catalog_mode']!r} not in the catalog"))
            continue
        get_device(device)
        model = _model(row["model_hf"])
        if model is None:
            skipped.append((rid, f"no bundled config for {row['model_hf']!r}"))
            continue
        engine = next((e for k, e in ENGINE_OF if k in row["engine"].lower()), None)
        if engine is None:
            skipped.append((rid, f"engine {row['engine']!r} has no profile"))
            continue
        _check_numbers(row, p)
        try:
            got = _cases(row, from_hf_config(model), device, engine)
        except (ValueError, ZeroDivisionError, OverflowError) as e:  # a count that is NaN, negative, ...
            if isinstance(e, RooflawError):
                raise RooflawError(f"published data {str(p)!r}: row {rid}: {e}") from None
            raise RooflawError(f"published data {str(p)!r}: row {rid}: unusable numbers ({e})") from None
        for c in got:
            if not (math.isfinite(c.measured_s) and c.measured_s > 0):
                raise RooflawError(
                    f"published data {str(p)!r}: row {rid}: measured {c.phase} time {c.measured_s!r} s: latencies and "
                    "rates must be positive, finite numbers (prefill_ms, decode_tok_s, decode_ms_per_token, ...)"
                )
        cases += got
    if not cases:
        raise RooflawError(f"published data {str(p)!r}: no usable measurement ({len(skipped)} rows skipped)")
    return cases, skipped
