"""Joint `solve --explain` and joint `frontier --plot`: every combination's best point against a solve of that
combination alone, the pick's communication share against evaluate_layout, the figure written atomically."""

from __future__ import annotations

import json

import pytest
from cli_helpers import run_cli, space_file

import rooflaw as R
from rooflaw.arch import Space

SPACE = Space(name="tiny-joint", layers=[4, 8], d_model=[512, 1024], head_dim=[128], kv_heads=[1, "heads"],
              moe=[(1, 1), (8, 2)], r_single=[1.0, 3.0], vocab=[32000], tied=[False])  # fmt: skip
WL = R.Workload(16, 256, 16)
LAYOUTS = ("tp=4", "ep=8,dp_attn=8")


def problem(**kw):
    return R.Problem(law="chinchilla-precision", device="h100-sxm", space=SPACE, tokens=1e11, workload=WL,
                     allow_extrapolation=True, **kw)  # fmt: skip


def test_explain_joint_against_each_combination_solved_alone():
    prob = problem(latency_budget="3ms")  # EP's all-to-all keeps it above 3.5 ms here (kernel-fitted collectives)
    opts = R.layout_options("h100-sxm:8", LAYOUTS, min_tokens_per_s_per_device=50.0)
    js = R.JointSpace(("bf16", "fp8"), (1, 16), opts)
    res = R.solve_joint(prob, js)
    ex = R.explain_joint(prob, js, res)
    assert (ex["pick"]["precision"], ex["pick"]["option"], ex["pick"]["loss"]) == (
        res.extra["precision"], res.extra["option"], res.loss)  # fmt: skip
    assert len(ex["combinations"]) == 8 and sum(r["picked"] for r in ex["combinations"]) == 1
    cons = {c["name"]: c for c in ex["constraints"]}
    assert set(cons) == {"latency", "capacity (per device)", "tokens/s per device (floor)"}
    assert ex["tightest"] == "latency" and all(c["slack"] >= 0 for c in cons.values())
    assert cons["latency"]["value"] == res.latency_s["decode"] and cons["latency"]["budget"] == 3e-3
    infeasible = 0
    for r in ex["combinations"]:
        alone = R.JointSpace((r["precision"],), (r["batch"],), tuple(o for o in opts if o.name == r["option"]))
        if "best" in r:
            one = R.solve_joint(prob, alone)
            assert r["best"]["loss"] == one.loss and r["best"]["layers"] == one.architecture.layers
            assert r["best"]["loss_change"] == pytest.approx(one.loss / res.loss - 1)
        else:
            infeasible += 1
            with pytest.raises(R.Infeasible) as e:
                R.solve_joint(prob, alone)
            assert r["minimum"]["latency"] == pytest.approx(e.value.smallest, rel=1e-12)
    assert infeasible == 4  # every EP combination: said, with its smallest latency
    # the pick's per-device memory and communication share, from evaluate_layout on the picked architecture
    a = res.architecture
    r = R.evaluate_layout(a, R.get_system("h100-sxm:8"), res.extra["option"],
                          R.Workload(res.extra["batch"], 256, 16), res.extra["precision"])  # fmt: skip
    p = ex["pick"]
    assert p["memory_per_device_bytes"] == pytest.approx(r["memory_per_device_bytes"], rel=1e-12)
    assert p["comm_share_decode"] == pytest.approx(r["comm_s_decode"] / r["decode_s"], rel=1e-12)
    assert 0 < p["comm_share_decode"] < 1
    assert "why precision" in R.explain_joint_text(ex)


def test_cli_joint_explain_and_plot(tmp_path, capsys):
    space = space_file(tmp_path)
    common = ["--device", "h100-sxm", "--space", str(space), "--law", "chinchilla-precision", "--tokens", "1e11",
              "--allow-extrapolation", "--batch", "16", "--input-tokens", "256", "--system", "h100-sxm:8",
              "--layouts", "tp=4;ep=8,dp_attn=8", "--precisions", "bf16,fp8"]  # fmt: skip
    code, out, err = run_cli(capsys, "solve", "--method", "exhaustive", *common, "--explain", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["explain_joint"]["pick"]["option"] == d["option"] and len(d["explain_joint"]["combinations"]) == 4
    code, out, err = run_cli(capsys, "solve", "--method", "exhaustive", *common, "--explain")
    assert code == 0 and "best point of each combination" in out and "<- pick" in out
    png = tmp_path / "joint.png"
    code, out, err = run_cli(capsys, "frontier", *common, "--objectives", "loss,latency,throughput", "--plot", str(png),
                          "--engine", "vllm")  # fmt: skip
    assert code == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["joint.png", "tiny.toml"]  # no temporary left behind
