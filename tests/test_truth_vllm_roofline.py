"""The pure-roofline decode step of a published vLLM concurrency-8 row, against bytes counted by hand: the bound
behind docs/kernels.md's session-16 finding that 8 of JETSONAILAB-VLLM's concurrency-8 rows are faster than the
pure roofline of their stated workload under vLLM's default schedule."""

from pathlib import Path

import pytest

from rooflaw import get_device
from rooflaw.constraints.published import load_cases
from rooflaw.constraints.serving import assembly_step_cost

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "measured" / "published.csv"
for cand in (DATA, Path("/work/shared/data/measured/published.csv")):
    if cand.is_file():
        DATA = cand
        break


@pytest.mark.skipif(not DATA.is_file(), reason="shared/data/measured/published.csv not present")
def test_orin_qwen3_8b_w4a16_decode_step_of_eight_streams_its_bytes():
    """R0189 (AGX Orin 64 GB, Qwen3-8B W4A16 GPTQ g128, vLLM, concurrency 8): a decode step of 8 sequences at the
    schedule's mean context reads the int4 linear weights, the 16-bit LM head and 8 sequences' bf16 KV once, at
    the datasheet 204.8 GB/s (engine "ideal": no efficiency, no overhead)."""
    c = next(c for c in load_cases(DATA)[0] if c.row_id == "R0189")
    w = c.workload
    step = assembly_step_cost(
        c.arch, get_device(c.device), c.precision, "ideal", w.input_tokens, w.output_tokens, w.attention
    )
    d, L, ffn, kv, hd, vocab = 4096, 36, 12288, 8, 128, 151936  # Qwen3-8B config.json
    linear = L * (d * d + 2 * d * kv * hd + d * d + 3 * d * ffn)  # q, k, v, o, gate, up, down
    weights = linear * (4 + 20 / 128) / 8  # int4, fp16 scale + 4-bit zero per 128 (GPTQ)
    head = vocab * d * 2  # vLLM keeps lm_head in 16 bits
    ctx = w.input_tokens + w.output_tokens / 2  # the schedule's mean decode context
    kv_bytes = 8 * ctx * L * 2 * kv * hd * 2  # K and V, bf16
    by_hand = (weights + head + kv_bytes) / 204.8e9
    assert by_hand == pytest.approx(0.0359, rel=0.01)
    assert step(0, 8) == pytest.approx(by_hand, rel=0.03)  # + norms, activations, logits
