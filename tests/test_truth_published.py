"""Published-row harness: configs, formats and the mapping of published.csv rows to cases."""

from pathlib import Path

import pytest

from rooflaw import Precision, Workload, evaluate, from_hf_config, get_device
from rooflaw.constraints.published import load_cases
from rooflaw.devices.precision import FORMATS

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "measured" / "published.csv"
for cand in (DATA, Path("/work/shared/data/measured/published.csv")):
    if cand.is_file():
        DATA = cand
        break

# Exact totals printed by the models' safetensors metadata / model cards.
EXACT = {
    "llama-3.1-8b": 8_030_261_248,
    "llama-2-7b": 6_738_415_616,
    "smollm2-135m": 134_515_008,
    "gemma-3-1b": 999_885_952,
}
# Model-card totals (billions, as rounded by the card).
CARD = {"qwen3-1.7b": 1.7, "qwen3-4b": 4.0, "qwen3-8b": 8.2, "qwen3-32b": 32.8, "qwen3-30b-a3b": 30.5,
        "llama-3.2-3b": 3.21, "llama-2-70b": 69.0, "llama-3-70b": 70.6}  # fmt: skip


@pytest.mark.parametrize("name,total", EXACT.items())
def test_exact_param_counts(name, total):
    assert from_hf_config(name).params_total == total


@pytest.mark.parametrize("name,billions", CARD.items())
def test_card_param_counts(name, billions):
    assert from_hf_config(name).params_total / 1e9 == pytest.approx(billions, abs=0.051)


def test_qwen3_moe_active():
    assert from_hf_config("qwen3-30b-a3b").params_active / 1e9 == pytest.approx(3.3, abs=0.06)


@pytest.mark.parametrize(
    "fmt,bits",
    [("awq", 4.125), ("gptq", 4.15625), ("int4-g64", 4.5), ("int4-g32", 5.0), ("int8wo", 8.0), ("q8_0", 8.5),
     ("q6_k", 6.5625), ("nvfp4", 4.5)],
)  # fmt: skip
def test_format_bits(fmt, bits):
    assert FORMATS[fmt].bytes * 8 == pytest.approx(bits)


def test_head_precision_weight_bytes():
    """16-bit embeddings with AWQ body: weight bytes = body·4.125/8 + embedding·2 (tied Qwen3-0.6B)."""
    a = from_hf_config("qwen3-0.6b")
    p = Precision.parse("w=awq,a=fp16,head=bf16")
    assert p.head_format.bytes == 2.0
    emb = a.vocab * a.d_model
    rep = evaluate(a, get_device("jetson-agx-thor"), Workload(1, 16, 1), p, engine="ideal")
    assert rep.weight_bytes == pytest.approx((a.params_total - emb) * 4.125 / 8 + emb * 2)
    assert Precision.parse("w4a16h16").head_format.name == "fp16"


@pytest.mark.skipif(not DATA.is_file(), reason="shared/data/measured/published.csv not present")
def test_load_cases():
    cases, skipped = load_cases(DATA)
    ids = {c.row_id for c in cases}
    assert len(ids) == 73 and len(cases) == 113
    assert {c.phase for c in cases} == {"prefill", "decode", "e2e"}
    reasons = dict(skipped)
    assert "not in the catalog" in reasons["R0124"]  # 7 W mode: no catalog device
    assert reasons["R0100"].startswith("use_for_validation = N")
    smol = next(c for c in cases if c.row_id == "R0125")
    # GGUF file of 101 MiB over 134.5 M parameters
    assert smol.precision.weights.bytes == pytest.approx(101 * 2**20 / 134_515_008)
    vllm = next(c for c in cases if c.row_id == "R0171")
    assert vllm.phase == "e2e" and vllm.workload.batch == 8 and vllm.workload.input_tokens == 2048


def _gguf_row(version: str, ref: str = "") -> dict[str, str]:
    return {"engine_version": version, "source_ref": ref}


def test_llamacpp_prompt_path_follows_the_build():
    """Builds before llama.cpp PR #8075 (2024-06-24) dequantise GGUF to F16 and run cuBLAS for prompts > 32 tokens."""
    from rooflaw.constraints.engines import mixed_input
    from rooflaw.constraints.published import llamacpp_prompt_precision
    from rooflaw.devices.precision import FORMATS, Format, Precision

    q = Format("gguf", 0.6, "int8", "Q4_K_M", True)
    prec = Precision(q, FORMATS["int8"], FORMATS["fp16"], q)
    old = llamacpp_prompt_precision(_gguf_row("build of May 2024 (commit not stated)"), prec, 512)
    assert old.weights.dtype == "fp16" and old.activations.name == "fp16" and not mixed_input(old)
    # a dequantise kernel of its own reads the quantised block and writes F16 (0.6 + 2, adding to the GEMM's time);
    # the GEMM reads the F16 copy (2)
    assert old.weights.bytes == 2.0 and old.dequantise_bytes == pytest.approx(0.6 + 2.0)
    assert old.head_format is q  # the last token's logits: one row, MMVQ reads the quantised head
    assert prec.dequantise_bytes == 0.0  # MMQ dequantises in its inner loop
    # the MMQ path: later builds, a build dated by its source only, undated builds, and batches of <= 32 tokens
    ref = "SmolHub@48c9f3f _posts/2026-05-29-jetson-nano.md"
    for row, tokens in ((_gguf_row("b3600, Aug 2024"), 512), (_gguf_row("commit not stated", ref), 2048),
                        (_gguf_row("not stated"), 512), (_gguf_row("build of May 2024"), 32)):  # fmt: skip
        assert llamacpp_prompt_precision(row, prec, tokens) is prec
    f16 = Precision(FORMATS["fp16"], FORMATS["fp16"], FORMATS["fp16"])
    assert llamacpp_prompt_precision(_gguf_row("build of May 2024"), f16, 512) is f16  # F16 GGUF: cuBLAS anyway


@pytest.mark.skipif(not DATA.is_file(), reason="shared/data/measured/published.csv not present")
def test_published_rows_map_to_their_schedule_and_kernel_path():
    cases, _ = load_cases(DATA)
    xjd = {(c.row_id, c.phase): c for c in cases if c.source == "XJD-LLAMACPP"}
    assert xjd[("R0222", "prefill")].precision.weights.name == "gguf-cublas"  # May 2024 build, pp512
    assert xjd[("R0222", "decode")].precision.weights.name == "gguf"  # tg512: batch 1, MMVQ in every build
    # cuBLAS with FP16 accumulation: 2x the FP32-accumulate roof on the GeForce RTX 4090, the same on the A100
    assert xjd[("R0225", "prefill")].fp16_flops == xjd[("R0226", "prefill")].fp16_flops == 330.3e12
    assert xjd[("R0222", "prefill")].fp16_flops is None and xjd[("R0225", "decode")].fp16_flops is None
    assert all(c.precision.weights.name == "gguf" for c in cases if c.source == "SMOLHUB-NANO-SUPER" and
               c.precision.weights.dequant)  # fmt: skip
    served = {c.row_id for c in cases if c.concurrent}
    assert served == {c.row_id for c in cases if c.source == "JETSONAILAB-VLLM"}
    assert not any(c.concurrent for c in cases if c.source == "GPTFAST-A100")  # one stream, no server
