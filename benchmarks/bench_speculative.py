"""Speculative decoding: the best target on a Jetson AGX Orin at a 20 ms TPOT budget with and without a draft
co-designed from the same space and law, and the model against published speculative speed-ups (docs/speculative.md).

Part 1 -- the study. The paper's space and law, W4A16, S_in = 512, S_out = 128, batch 1, the device's fitted engine,
a decode budget of 128 × 20 ms (mean TPOT ≤ 20 ms). Plain: the lowest-loss target that meets it. Speculative: the
joint search over target × draft × γ, the drafts taken from the same space and law (its loss-size front), γ in
{1, 2, 3, 4, 6, 8}, at a given acceptance α (0.6, 0.7, 0.8: the fitted law is only a prior, see acceptance.csv).
For each speculative pick: its break-even α (below it the draft does not pay) and the α it needs to meet the
budget (bisection on the priced model). The same for the space's dense architectures only (``--dense``).

Part 2 -- published speed-ups (rooflaw/constraints/acceptance.csv rows with a speed-up and a chain draft of known
length): predicted speed-up at the published α, |predicted/published − 1|, median.

    python benchmarks/bench_speculative.py [--dense] [--quick]
"""

from __future__ import annotations

import json
import math
import sys
import time

import numpy as np

import rooflaw as rl
from rooflaw.speculative import Draft, evaluate_speculative, explain_speculative

DEVICE = "jetson-agx-orin-64gb"
WL = dict(batch=1, input_tokens=512, output_tokens=128)
TPOT = 0.020
GAMMAS = (1, 2, 3, 4, 6, 8)
DENSE = """name = "paper-dense"
layers = { start = 4, stop = 32, step = 4 }
d_model = [768, 1024, 1280, 1536, 1792, 2048, 2304, 2560, 3072]
head_dim = [128]
kv_heads = [1, 2, 4, 8, "heads"]
moe = [[1, 1]]
r_single = [0.5, 1, 2, 3, 4]
ffn_align = 128
vocab = [32000]
tied = [false]

[fixed]
gated = true
"""


def study(space: str, alphas: tuple[float, ...]) -> dict:
    wl = rl.Workload(**WL)
    prob = rl.Problem(law="paper-2602.10377", device=DEVICE, space=space, precision="w4a16", workload=wl,
                      latency_budget=TPOT * wl.output_tokens, phase="decode")  # fmt: skip
    t0 = time.time()
    plain = rl.solve_joint(prob, rl.JointSpace())
    out = {"space": prob.space.name, "plain": _pick(plain), "seconds_plain": time.time() - t0, "speculative": []}
    drafts = rl.speculative.space_drafts(prob)
    out["drafts"] = [{"name": d.name, "params": d.arch.params_total, "loss": prob.law.loss(d.arch)} for d in drafts]
    for a in alphas:
        t0 = time.time()
        opts = rl.speculative.speculative_options(drafts, GAMMAS, a)
        res = rl.solve_joint(prob, rl.JointSpace(options=opts))
        row = {"alpha": a, **_pick(res), "seconds": time.time() - t0}
        opt = next(o for o in opts if o.name == res.extra["option"])
        if opt.columns is not None:
            e = explain_speculative(prob, res.architecture, opt)
            row.update(breakeven_alpha=e["breakeven_alpha"], alpha_needed=e["alpha_needed"],
                       speedup=e["speedup"], tpot_without_draft_s=e["tpot_without_draft_s"],
                       optimal_gamma=e["optimal_gamma"], cost_ratio=e["cost_ratio"])  # fmt: skip
        out["speculative"].append(row)
    return out


def _pick(res) -> dict:
    a = res.architecture
    return {
        "loss": res.loss, "option": (res.extra or {}).get("option"), "params_total": a.params_total,
        "params_active": a.params_active, "arch": a.spec(), "tpot_s": res.latency_s["decode"] / WL["output_tokens"],
        "ttft_s": res.latency_s["prefill"], "memory_bytes": res.memory_bytes,
    }  # fmt: skip


# ---- part 2: published speed-ups ----------------------------------------------------------------------------------
#: Published rows the chain model applies to (a fixed draft length; llama.cpp's early-stopped drafts do not), with
#: the architectures (Hugging Face configs) and a catalog device standing in for the one measured on. The draft
#: length of the hurjun rows is not printed: it is the integer γ that the published α and accepted/round give.
GPT2 = dict(vocab=50257, tied=True, gated=False, norm="layernorm", qkv_bias=True)
ROWS = {
    "hurjun-gpt2l": dict(
        target=rl.Architecture(layers=36, d_model=1280, heads=20, ffn=5120, name="gpt2-large", **GPT2),
        draft=rl.Architecture(layers=6, d_model=768, heads=12, ffn=3072, name="distilgpt2", **GPT2),
        accepted_per_round=2.84, device="apple-m4-max", precision="fp32", engine="torch-eager"),
    "hurjun-gpt2m": dict(
        target=rl.Architecture(layers=24, d_model=1024, heads=16, ffn=4096, name="gpt2-medium", **GPT2),
        draft=rl.Architecture(layers=6, d_model=768, heads=12, ffn=3072, name="distilgpt2", **GPT2),
        accepted_per_round=2.46, device="apple-m4-max", precision="fp32", engine="torch-eager"),
}  # fmt: skip


def gamma_from(alpha: float, tau: float) -> int:
    """The draft length whose τ(α, γ) is closest to the published accepted tokens per round."""
    return int(round(math.log(1 - tau * (1 - alpha)) / math.log(alpha) - 1))


def published() -> dict:
    rows = {r.id: r for r in rl.speculative.load_acceptance_rows()}
    out = []
    for rid, spec in ROWS.items():
        r = rows[rid]
        g = gamma_from(r.alpha, spec["accepted_per_round"])
        wl = rl.Workload(1, 32, 128)
        rep = evaluate_speculative(spec["target"], Draft(spec["draft"]), rl.get_device(spec["device"]), wl, g,
                                   r.alpha, spec["precision"], engine=spec["engine"])  # fmt: skip
        out.append({"id": rid, "gamma": g, "alpha": r.alpha, "published": r.speedup, "predicted": rep.speedup,
                    "error": rep.speedup / r.speedup - 1, "device_stand_in": spec["device"],
                    "measured_on": r.device, "source": r.source})  # fmt: skip
    errs = [abs(o["error"]) for o in out]
    return {"rows": out, "median_abs_error": float(np.median(errs)) if errs else None}


def main(argv: list[str]) -> None:
    alphas = (0.7,) if "--quick" in argv else (0.6, 0.7, 0.8)
    res: dict = {"published": published()}
    for o in res["published"]["rows"]:
        print(f"{o['id']}: γ={o['gamma']} α={o['alpha']} speed-up published {o['published']:.2f}, predicted "
              f"{o['predicted']:.2f} ({o['error']:+.1%}) on {o['device_stand_in']} for {o['measured_on']}")  # fmt: skip
    print(f"median |error| of the speed-up: {res['published']['median_abs_error']:.1%}")
    spaces = ["paper"]
    if "--dense" in argv:
        import tempfile

        with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
            f.write(DENSE)
        spaces.append(f.name)
    res["study"] = [study(s, alphas) for s in spaces]
    for s in res["study"]:
        p = s["plain"]
        print(f"\n{s['space']}: plain: loss {p['loss']:.4f}, {p['params_total'] / 1e9:.2f} B params "
              f"({p['params_active'] / 1e9:.2f} B active), TPOT {p['tpot_s'] * 1e3:.2f} ms: {p['arch']}")  # fmt: skip
        for r in s["speculative"]:
            extra = ""
            if "alpha_needed" in r:
                need = "never" if r["alpha_needed"] is None else f"{r['alpha_needed']:.3f}"
                be = "never" if r["breakeven_alpha"] is None else f"{r['breakeven_alpha']:.3f}"
                extra = (
                    f"; alone {r['tpot_without_draft_s'] * 1e3:.1f} ms, speed-up ×{r['speedup']:.2f}, α needed "
                    f"{need}, break-even α {be}, γ* {r['optimal_gamma']} at c = {r['cost_ratio']:.3f}"
                )
            print(f"  α = {r['alpha']}: loss {r['loss']:.4f} ({r['loss'] - p['loss']:+.4f}), "
                  f"{r['params_total'] / 1e9:.2f} B params ({r['params_active'] / 1e9:.2f} B active), "
                  f"TPOT {r['tpot_s'] * 1e3:.2f} ms, {r['option']}{extra}: {r['arch']}")  # fmt: skip
    print(json.dumps(res, default=float))


if __name__ == "__main__":
    main(sys.argv[1:])
