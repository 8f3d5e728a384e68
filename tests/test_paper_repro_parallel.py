"""paper_repro's guidelines 5–7 section (reduced mode): the claims it states hold in its own numbers."""

import json

import pytest

paper_repro = pytest.importorskip("paper_repro")


@pytest.fixture(scope="module")
def claims(tmp_path_factory):
    d = tmp_path_factory.mktemp("repro_parallel")
    assert paper_repro.main(["guidelines_parallel", "--quick", "--out", str(d)]) == 0
    assert (d / "guidelines_parallel.png").stat().st_size > 10_000
    assert "<!-- section:guidelines_parallel -->" in (d / "REPORT.md").read_text()
    return json.loads((d / "claims.json").read_text())["guidelines_parallel"]


def test_ep_avoids_tp_all_reduce(claims):
    ep = claims["ep"]
    tp, e8 = ep["curves"]["tp=8"], ep["curves"]["ep=8,dp_attn=8"]
    # with the collectives priced from the fitted NVLink curves (issue 27), the all-to-all's fixed latency makes EP's
    # step dearer than TP's all-reduce at the lowest concurrency (1.79 vs 1.60 ms); from the next one on EP avoids it
    assert all(t["comm_step_ms"] > e["comm_step_ms"] for t, e in zip(tp[1:], e8[1:], strict=True))
    assert (tp[-1]["comm_step_ms"] - e8[-1]["comm_step_ms"]) > (tp[0]["comm_step_ms"] - e8[0]["comm_step_ms"])
    assert [t["comm_step_ms"] for t in tp] == sorted(t["comm_step_ms"] for t in tp)  # grows with concurrency
    caps = ep["max_batch"]
    assert caps["tp=8"] < caps["ep=8,dp_attn=8"] < caps["ep=32,dp_attn=32"]


def test_chunked_pp_cuts_ttft_at_flat_throughput(claims):
    for pts in claims["pp"]["by_layers"].values():
        ttft = [p["ttft_s"] for p in pts]
        assert ttft == sorted(ttft, reverse=True) and ttft[0] / ttft[-1] > 4
        rate = [p["tok_s_gpu"] for p in pts]
        assert min(rate) / max(rate) > 0.85
    b61, b64 = (claims["pp"]["by_layers"][k][-1]["balance"] for k in ("61", "64"))
    # 8/8/8/8/8/7/7/7 against eight even stages (3 dense layers: not exactly 1; 0.9989 since the MoE layer carries
    # its gather/scatter bytes, which the dense first stage does not)
    assert b61 < 0.97 < 0.995 < b64


def test_helix_beyond_kv_heads(claims):
    lay = claims["helix"]["layouts"]
    assert lay["tp=32"]["kv_gb"] == pytest.approx(lay["tp=8"]["kv_gb"])  # replicated beyond kv_heads
    # one KV head per GPU over 128K/4 prompt tokens + 64 generated: 80 layers, head_dim 128, bf16, K and V
    assert lay["helix=kvp4,tpep32"]["kv_gb"] == pytest.approx(2 * 80 * 128 * 2 * (131072 // 4 + 64) / 1e9)
    assert claims["helix_users"] >= claims["tp_users"]
