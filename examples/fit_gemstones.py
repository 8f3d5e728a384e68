"""Fit a depth-and-width law and a Chinchilla law to the Gemstones runs; compare them on held-out models.

The Gemstones runs (McLeish et al. 2025, MIT; shipped in ``rooflaw/objectives/data/gemstones``) cover a
width x depth grid of 22 models trained to several token counts. We hold out every run of 4 whole models
(chosen at random, seeded) and fit on the rest:

- ``depth-width``: the paper's Eq. 14 restricted to l and d (dense, fixed GQA) plus a data term, because
  Gemstones vary the token count: ``L_inf + k_l/l**a_l + k_d/d**b_d + B/D**beta``
- ``chinchilla``: ``E + A/N**alpha + B/D**beta`` with N the parameter count.

    python examples/fit_gemstones.py [--plot-dir out/]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from rooflaw.objectives import fit_law, gemstones, plot_fit

LAWS = {
    "depth-width": "L_inf + k_l/l**a_l + k_d/d**b_d + B/D**beta",
    "chinchilla": "E + A/N**alpha + B/D**beta",
}
MAP = {"l": "depth", "d": "width", "N": "params_active_precise", "D": "tokens"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="cool_end", choices=["cool_end", "hot", "hot_100b+"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--plot-dir", type=Path, default=None)
    args = ap.parse_args()

    df = gemstones(args.data)
    models = sorted(df.run_name.unique())
    held = {str(m) for m in np.random.default_rng(args.seed).choice(models, size=4, replace=False)}
    mask = df.run_name.isin(held).to_numpy()
    print(f"{len(df)} runs of {len(models)} models; held out {mask.sum()} runs of {sorted(held)}")
    for name, expr in LAWS.items():
        mapping = {k: v for k, v in MAP.items() if k in _symbols(expr)}
        res = fit_law(expr, df, mapping=mapping, loss_column="final_loss", holdout=mask, seed=args.seed)
        params = ", ".join(f"{k}={v:.4g}" for k, v in res.params.items())
        print(f"\n{name}: {expr}\n  {params}")
        print(f"  train R2 {res.r2:.4f} RMSE {res.rmse:.4f} | held out R2 {res.r2_holdout:.4f} "
              f"RMSE {res.rmse_holdout:.4f}  ({res.seconds:.1f} s)")  # fmt: skip
        if args.plot_dir:
            args.plot_dir.mkdir(parents=True, exist_ok=True)
            print("  plot:", plot_fit(res, args.plot_dir / f"gemstones_{name}.png"))


def _symbols(expr: str) -> set[str]:
    import re

    return set(re.findall(r"[A-Za-z_]\w*", expr))


if __name__ == "__main__":
    main()
