"""Every closed form of §5 checked against a sympy derivation: r*, gqa* (Eqs. 12–13, 68, 70, 95–96) as the
fixed points they are, the coefficients of Tables 4 / 18 / 23, Table 17's partial derivatives, Table 22's depths,
and the §5.5.2 "depth-first" workflow with its l > 48 bound.

The derivation: the law (Eq. 15, KV term κ_m·gqa^α_m/d^α_m with d_m = d/gqa) and the constraint g(l, d, r, ρ, gqa)
of the regime, both sympy expressions from rooflaw (the law's own expression, :mod:`rooflaw.constraints.theory`'s
theory-mode cost built from the `paper` preset's operator list). The constraint binds and is linear in l, so
l* = budget/(g/l); the l-stationarity ∂L/∂l + μ·∂g/∂l = 0 gives μ; the r- and gqa-stationarities
∂L/∂x + μ·∂g/∂x = 0 at l* are the conditions. rooflaw's (r*, gqa*) solves them with a root finder; the paper's
value iterates its printed formula to its fixed point (ξ depends on r and gqa). Table 17, Tables 4/18/23 and
Table 22 are compared symbolically (sympy difference simplifies to 0) and numerically.
"""

from __future__ import annotations

import math
from typing import Any

from . import common as C
from .report import md_table, merge_claims, write_section

TITLE = "Closed forms of §5 — r*, gqa*, Tables 4/17/18/22/23, the depth-first workflow"
#: The setting every number is evaluated at: Orin FP16 (b_w = b_kv = 2), B = 1, S_in = 1024, S_out = 16.
D_MODEL, RHO = 2048.0, 1 / 16
BUDGETS = {"prefill": 0.05, "decode": 0.02, "memory": 4e9}
DEPTH_BOUND = 48
WIDTHS = (768, 1024, 1280, 1536, 1792, 2048, 2304, 2560, 3072)


def constants() -> dict[str, float]:
    dev, wl = C.device(), C.WORKLOAD
    return {"B": float(wl.batch), "S_in": float(wl.input_tokens), "S_out": float(wl.output_tokens), "b_w": 2.0,
            "b_kv": 2.0, "pi": float(dev.peak_flops["fp16"]), "beta": float(dev.memory_bandwidth)}  # fmt: skip


def law_params() -> dict[str, float]:
    return dict(C.law().params)


# ---- the paper's printed formulas (the values under test) ----------------------------------------------------
def paper_update(regime: str, r: float, gqa: float, d: float, rho: float, c: dict, budget: float) -> tuple:
    """One application of the paper's printed (r*, gqa*) formulas: Eqs. 12–13 (prefill), 68 and 70 (decode),
    95–96 (memory), as typed from the paper."""
    p = law_params()
    al, kl, ar, am, km = p["alpha_l"], p["kappa_l"], p["alpha_r"], p["alpha_m"], p["kappa_m"]
    b1, b2 = p["beta_1"], p["beta_2"]
    Dt = p["kappa_rho"] * rho ** p["alpha_rho"] * d ** (b2 - b1) + p["kappa_d"]
    bw, bkv = c["b_w"], c["b_kv"]
    if regime == "prefill":
        Fp = budget * c["pi"] / (c["B"] * c["S_in"])
        xi = 4 + 4 / gqa + 6 * r
        r2 = (ar * Dt / (6 * al * kl) * Fp**al / (xi ** (al - 1) * d ** (2 * al + b2))) ** (1 / (ar + 1))
        g2 = (4 * al * kl / (am * km) * xi ** (al - 1) * d ** (2 * al + am) / Fp**al) ** (1 / (am + 1))
    elif regime == "decode":
        Md = budget * c["beta"] / c["S_out"]
        Sb = c["S_in"] + (c["S_out"] + 1) / 2
        G = (2 + 2 / gqa + 3 * r) * d**2 * bw + 2 * Sb * d * bkv / gqa
        r2 = (ar * Dt / (3 * al * kl) * Md**al / (G ** (al - 1) * d ** (2 + b2) * bw)) ** (1 / (ar + 1))
        g2 = (2 * al * kl / (am * km) * G ** (al - 1) * d**am / Md**al * (d**2 * bw + Sb * d * bkv)) ** (1 / (am + 1))
    else:
        xi = 2 + 2 / gqa + 3 * r / rho
        r2 = (ar * Dt * rho / (3 * al * kl) * budget**al / (xi ** (al - 1) * d ** (2 * al + b2) * bw**al)) ** (
            1 / (ar + 1)
        )
        g2 = (2 * al * kl / (am * km) * xi ** (al - 1) * d ** (2 * al + am) * bw**al / budget**al) ** (1 / (am + 1))
    return r2, g2


def paper_fixed_point(regime: str, d: float = D_MODEL, rho: float = RHO, budget: float | None = None) -> dict:
    """Iterate the printed formulas to their fixed point (damped in log space)."""
    c, budget = constants(), BUDGETS[regime] if budget is None else budget
    r, g = 1.0, 4.0
    for it in range(1, 2001):
        r2, g2 = paper_update(regime, r, g, d, rho, c, budget)
        if abs(math.log(r2 / r)) < 1e-13 and abs(math.log(g2 / g)) < 1e-13:
            return {"r": r2, "gqa": g2, "iterations": it}
        r, g = math.sqrt(r * r2), math.sqrt(g * g2)
    raise RuntimeError(f"{regime}: the printed formulas did not reach a fixed point")


# ---- rooflaw's derivation ---------------------------------------------------------------------------------------
def _sym():
    import sympy as sp

    return {n: sp.Symbol(n, positive=True) for n in ("l", "d", "r", "rho", "gqa", "d_m", "budget")}


def derived(regime: str) -> dict[str, Any]:
    """Sympy: the regime's constraint g, l*, μ and the r- and gqa-stationarity conditions (law numbers bound)."""
    import sympy as sp

    from rooflaw.explain import theory_expressions

    s = _sym()
    th = theory_expressions()
    g = {"prefill": th["T_pre"], "decode": th["T_dec"], "memory": th["M"]}[regime]
    law = C.law()
    L = law.bound_expr().subs(s["d_m"], s["d"] / s["gqa"])
    l_star = sp.solve(sp.Eq(g, s["budget"]), s["l"])[0]
    mu = -sp.diff(L, s["l"]) / sp.diff(g, s["l"])
    conds = {x: (sp.diff(L, s[x]) + mu * sp.diff(g, s[x])).subs(s["l"], l_star) for x in ("r", "gqa")}
    return {"g": g, "l_star": l_star, "conditions": conds, "symbols": s}


def rooflaw_optimum(regime: str, d: float = D_MODEL, rho: float = RHO, budget: float | None = None) -> dict:
    """(r*, gqa*) solving the derived stationarity conditions with scipy's root finder (log variables)."""
    import sympy as sp
    from scipy.optimize import root

    budget = BUDGETS[regime] if budget is None else budget
    dv = derived(regime)
    s = dv["symbols"]
    subs = {sp.Symbol(k, positive=True): v for k, v in constants().items()}
    subs.update({s["d"]: d, s["rho"]: rho, s["budget"]: budget})
    fr = sp.lambdify((s["r"], s["gqa"]), dv["conditions"]["r"].subs(subs), "math")
    fg = sp.lambdify((s["r"], s["gqa"]), dv["conditions"]["gqa"].subs(subs), "math")
    start = paper_fixed_point(regime, d, rho, budget)  # a start point only; the root is rooflaw's own

    def F(z):
        r, g = math.exp(z[0]), math.exp(z[1])
        return [fr(r, g) * r, fg(r, g) * g]  # scaled to elasticities

    sol = root(F, [math.log(start["r"]) + 0.3, math.log(start["gqa"]) - 0.3], method="hybr", tol=1e-14)
    r, g = math.exp(sol.x[0]), math.exp(sol.x[1])
    lsub = dict(subs)
    lsub.update({s["r"]: r, s["gqa"]: g})
    return {"r": r, "gqa": g, "l": float(dv["l_star"].subs(lsub)), "converged": bool(sol.success)}


def xi_expressions() -> dict[str, Any]:
    """ξ_F, ξ_W^eff (decode bytes per l·S_out·d²·b_w, KV included) and ξ_W^all from rooflaw's theory model."""
    import sympy as sp

    from rooflaw.explain import theory_expressions

    s = _sym()
    th = theory_expressions()
    beta, S_out, b_w = (sp.Symbol(n, positive=True) for n in ("beta", "S_out", "b_w"))
    B = sp.Symbol("B", positive=True)
    xi_eff = sp.simplify((th["T_dec"] * beta / (s["l"] * S_out * s["d"] ** 2 * b_w)).subs(B, 1))
    return {"xi_F": th["xi_F"], "xi_W_eff": xi_eff, "xi_W_all": th["xi_W_all"], "symbols": s}


def table17() -> list[dict[str, Any]]:
    """Table 17's three partial derivatives: derived vs printed (symbolic difference)."""
    import sympy as sp

    x = xi_expressions()
    s = x["symbols"]
    r, rho, gqa, d = s["r"], s["rho"], s["gqa"], s["d"]
    Sbar = sp.Symbol("S_in", positive=True) + (sp.Symbol("S_out", positive=True) + 1) / 2
    b_w, b_kv = sp.Symbol("b_w", positive=True), sp.Symbol("b_kv", positive=True)
    printed = {
        ("xi_F", "gqa"): -4 / gqa**2,
        ("xi_W_eff", "gqa"): -2 / gqa**2 - 2 * Sbar * b_kv / (gqa**2 * d * b_w),
        ("xi_W_all", "rho"): -3 * r / rho**2,
    }
    rows = []
    for (xi, var), p in printed.items():
        der = sp.diff(x[xi], s[var])
        rows.append({"claim": f"∂{xi}/∂{var}", "paper": str(p), "rooflaw": str(sp.simplify(der)),
                     "agree": bool(sp.simplify(der - p) == 0)})  # fmt: skip
    return rows


def coefficients() -> dict[str, dict[str, Any]]:
    """Tables 4 / 18 / 23: C_r = ∂ξ/∂r and C_g = −gqa²·∂ξ/∂gqa of the binding constraint, per regime (derived),
    and the coefficients 1/C_r and C_g as they stand in front of the r* and gqa* formulas."""
    import sympy as sp

    x = xi_expressions()
    s = x["symbols"]
    out = {}
    for reg, xi in (("prefill", "xi_F"), ("decode", "xi_W_eff"), ("memory", "xi_W_all")):
        cr = sp.simplify(sp.diff(x[xi], s["r"]))
        cg = sp.simplify(-(s["gqa"] ** 2) * sp.diff(x[xi], s["gqa"]))
        out[reg] = {"C_r": str(cr), "C_g": str(cg), "C_r_value": float(cr.subs(s["rho"], RHO)),
                    "C_g_value_no_kv": float(cg.subs({sp.Symbol("b_kv", positive=True): 0}))}  # fmt: skip
    return out


def table22() -> list[dict[str, Any]]:
    """Table 22's depths: the derived l* (constraint = budget, solved for l) vs the printed ones."""
    import sympy as sp

    x = xi_expressions()
    s = x["symbols"]
    n = {k: sp.Symbol(k, positive=True) for k in ("B", "S_in", "S_out", "b_w", "b_kv", "pi", "beta")}
    Fp = s["budget"] * n["pi"] / (n["B"] * n["S_in"])
    Md = s["budget"] * n["beta"] / n["S_out"]
    Sbar = n["S_in"] + (n["S_out"] + 1) / 2
    xi_dec = 2 + 2 / s["gqa"] + 3 * s["r"]
    printed = {
        "prefill": Fp / (x["xi_F"] * s["d"] ** 2),
        "decode": Md / (xi_dec * s["d"] ** 2 * n["b_w"] + 2 * Sbar * s["d"] * n["b_kv"] / s["gqa"]),
        "memory": s["budget"] / (x["xi_W_all"] * s["d"] ** 2 * n["b_w"]),
    }
    rows = []
    for reg, p in printed.items():
        ls = derived(reg)["l_star"].subs(n["B"], 1)
        rows.append({"claim": f"l* ({reg})", "paper": str(p), "rooflaw": str(sp.simplify(ls)),
                     "agree": bool(sp.simplify(ls - p.subs(n["B"], 1)) == 0)})  # fmt: skip
    return rows


def l_star_numeric(regime: str, d: float, r: float = 1.0, gqa: float = 4.0, rho: float = RHO,
                   budget: float | None = None) -> float:  # fmt: skip
    """l* from the derived expression at one point."""
    import sympy as sp

    dv = derived(regime)
    s = dv["symbols"]
    subs = {sp.Symbol(k, positive=True): v for k, v in constants().items()}
    subs.update({s["d"]: d, s["r"]: r, s["gqa"]: gqa, s["rho"]: rho,
                 s["budget"]: BUDGETS[regime] if budget is None else budget})  # fmt: skip
    return float(dv["l_star"].subs(subs))


def depth_first() -> dict[str, Any]:
    """§5.5.2: pick d from the width–sparsity law for each ρ of Table 5, solve l*, and test the rule 'shrink d if
    l* > 48' against l*(d) (decode 20 ms on the Orin, r = 1, gqa = 4)."""
    from . import kkt_theorems

    k = kkt_theorems.width_sparsity_exponent()
    c0 = kkt_theorems.rho_star_memory(1.0)  # ρ*(d) = c0·d^k
    rows = []
    for rho in (1 / 16, 1 / 8, 1 / 4):
        d = (rho / c0) ** (1 / k)
        rows.append({"rho": rho, "d_from_law": d, "l_star_decode": l_star_numeric("decode", d, rho=rho),
                     "l_star_prefill": l_star_numeric("prefill", d, rho=rho)})  # fmt: skip
    ls = {w: l_star_numeric("decode", w) for w in WIDTHS}
    ls100 = {w: l_star_numeric("decode", w, budget=0.1) for w in WIDTHS}
    too_deep = [w for w, v in ls100.items() if v > DEPTH_BOUND]
    # the rule's direction: does shrinking d lower l*? (it raises it: l* ∝ d^-2)
    shrink_lowers = all(ls[a] > ls[b] for a, b in zip(WIDTHS, WIDTHS[1:], strict=False))
    return {"width_sparsity_exponent": k, "rho_star_coefficient": c0, "by_rho": rows, "l_star_decode": ls,
            "l_star_decode_100ms": ls100, "widths_with_l_star_above_48_at_100ms": too_deep,
            "shrinking_d_raises_l_star": shrink_lowers,
            "space_depth_bound": 32, "paper_depth_bound": DEPTH_BOUND}  # fmt: skip


def run(ctx: C.Context) -> dict:
    rows: list[dict[str, Any]] = []
    opt = {}
    for reg, eqs in (("prefill", "Eqs. 12–13 (P1)"), ("decode", "Eqs. 68, 70 (D1)"), ("memory", "Eqs. 95–96 (D2)")):
        p = paper_fixed_point(reg)
        q = rooflaw_optimum(reg)
        opt[reg] = {"paper": p, "rooflaw": q}
        for v in ("r", "gqa"):
            rel = abs(q[v] - p[v]) / abs(q[v])
            rows.append({
                "claim": f"{v}* {reg}-bound, {eqs}, fixed point at d = {D_MODEL:.0f}, ρ = 1/16",
                "paper": p[v], "rooflaw": q[v], "agree": rel < 1e-8,
                "why": f"relative difference {rel:.1e}; the printed formula is the stationarity condition solved "
                "for the variable, with l eliminated by the binding constraint — implicit (ξ depends on r and "
                f"gqa), so it holds at its fixed point ({p['iterations']} damped iterations)",
            })  # fmt: skip
    co = coefficients()
    paper_cr = {"prefill": 6.0, "decode": 3.0, "memory": 3 / RHO}
    paper_cg = {"prefill": 4.0, "decode": 2.0, "memory": 2.0}
    for reg in ("prefill", "decode", "memory"):
        rows.append({
            "claim": f"Tables 4/18/23: C_r ({reg}); r* coefficient 1/C_r",
            "paper": f"C_r = {'3/ρ' if reg == 'memory' else int(paper_cr[reg])} (r* coefficient "
            f"{'ρ/3' if reg == 'memory' else '1/' + str(int(paper_cr[reg]))})",
            "rooflaw": f"C_r = {co[reg]['C_r']}", "agree": co[reg]["C_r_value"] == paper_cr[reg],
            "why": "∂ξ/∂r of the binding constraint: 6 FLOPs per FFN weight in prefill, 3 bytes-per-b_w per active "
            "weight in decode, 3/ρ stored weights in memory — '1/6 vs 1/3' is one FLOP = 2 × one byte per weight",
        })  # fmt: skip
        rows.append({
            "claim": f"Tables 4/18/23: C_g ({reg}); gqa* coefficient",
            "paper": f"C_g = {int(paper_cg[reg])}" + (" × (d²b_w + S̄db_kv)/(d²b_w)" if reg == "decode" else ""),
            "rooflaw": f"C_g = {co[reg]['C_g']}", "agree": co[reg]["C_g_value_no_kv"] == paper_cg[reg],
            "why": "−gqa²·∂ξ/∂gqa: the K and V projections (2 per layer in FLOPs ×2 in prefill); in decode the KV "
            "cache adds 2S̄b_kv/(d·b_w), the paper's 'additional KV-cache coupling factor'",
        })  # fmt: skip
    for t in table17():
        rows.append({**t, "claim": f"Table 17: {t['claim']}",
                     "why": "symbolic difference of derived and printed simplifies to 0" if t["agree"] else
                     "symbolic difference does not vanish"})  # fmt: skip
    for t in table22():
        rows.append({**t, "claim": f"Table 22: {t['claim']}",
                     "why": "the constraint is linear in l and binds: l* = budget/(per-layer cost)" if t["agree"] else
                     "derived and printed l* differ"})  # fmt: skip
    df = depth_first()
    ls = df["l_star_decode"]
    rows.append({
        "claim": "§5.5.2 depth-first: 'shrink d if l* exceeds the bound'",
        "paper": "shrink d when l* > 48",
        "rooflaw": f"l*(d), decode 20 ms, r = 1, gqa = 4: d 768 → {ls[768]:.1f}, 2048 → {ls[2048]:.1f}, "
        f"3072 → {ls[3072]:.1f} layers; at 100 ms l* > 48 for d ∈ {df['widths_with_l_star_above_48_at_100ms']}",
        "agree": False,
        "why": "as worded the rule moves the wrong way: l* ∝ d⁻² (Table 22), so shrinking d *raises* l*; a "
        "too-deep l* calls for a wider d. The bound 48 is also outside Table 5's 4–32 layers",
    })  # fmt: skip
    by = df["by_rho"]
    rows.append({
        "claim": "§5.5.2 depth-first: d from the width–sparsity law, then l*",
        "paper": "pick d from ρ* ∝ d^−1.19, then l*",
        "rooflaw": "; ".join(f"ρ = {b['rho']:.4g} → d = {b['d_from_law']:.0f}, l*(decode 20 ms) = "
                             f"{b['l_star_decode']:.1f}" for b in by),
        "agree": None,
        "why": "computed (the paper gives no number); computable as stated; ρ = 1/16 (E = 16, K = 1) asks for "
        "d beyond Table 5's 3,072",
    })  # fmt: skip
    claims = {"setting": {"d": D_MODEL, "rho": RHO, "budgets": BUDGETS, **constants()}, "rows": rows,
              "optima": opt, "coefficients": co, "depth_first": df}  # fmt: skip

    def fmt(v):
        return f"{v:.6g}" if isinstance(v, float) else str(v)

    word = {True: "agree", False: "disagree", None: "computed"}
    table = md_table(
        ("claim", "paper", "rooflaw", "agree", "why"),
        [[r["claim"], fmt(r["paper"]), fmt(r["rooflaw"]), word[r["agree"]], r["why"]] for r in rows],
    )
    n_ok = sum(r["agree"] is True for r in rows)
    n_cmp = sum(r["agree"] is not None for r in rows)
    body = (
        "Setting: Orin FP16 (π = 42.5 TFLOP/s, β = 204.8 GB/s, b_w = b_kv = 2), B = 1, S_in = 1024, S_out = 16, "
        f"d = {D_MODEL:.0f}, ρ = 1/16; budgets prefill 50 ms, decode 20 ms, memory 4 GB. All from the `paper` "
        "preset's theory expressions (the closed forms are about that model; `paper-ops` and `full` have no "
        "closed form). "
        + __doc__.split("\n\n", 1)[1].replace("\n", " ").strip()
        + f"\n\n{n_ok} of {n_cmp} comparable statements agree.\n\n"
        + table
    )
    write_section(ctx.out, "closed_forms", TITLE, body)
    merge_claims(ctx.out, "closed_forms", claims)
    return claims
