"""The MoE kernel family's large-expert DRAM re-read, carried into the one assembly's routed-expert GEMMs.

A grouped GEMM walks each token tile (up to :data:`TILE` rows) across its expert's whole weight matrices, so an
expert whose weights do not fit in the L2 is streamed from DRAM again by each of its tiles beyond the first
(:mod:`.kernels.moe`, ``_reread_bytes``: ``moe_reread · (padded/tile − touched) · m·d·i·b_w · (1 − l2_hits)``).
Here, per op of :data:`.streams.EXPERT_OPS` of a routed-expert layer (``ffn_up``: its ``n_up`` gate/up matrices,
``ffn_down``: one), in bytes::

    reread = MOE_REREAD · E_cov · max(r/TILE − 1/2, 0) · mats · d · ffn · b_w · (1 − 1/(1 + X^L2_STEEPNESS)),
    r = T·K/E_cov (rows per touched expert),  X = (n_up + 1)·d·ffn·b_w · INV_L2 (one expert's bytes over the L2)

``E_cov · max(r/TILE − 1/2, 0)``: the tiles beyond each touched expert's first, the expected ceiling of a load
spread over more than one tile being r/TILE + 1/2 (the family counts them from its routing law's padded rows;
a load of at most 64 rows here gets none, where the family's binomial spread gives it up to half a small tile).
``MOE_REREAD`` is the curves' own ``moe_reread`` (the reference engine's: the assembly prices every table engine at
the reference rates), ``INV_L2`` the device's 1/L2 bytes; 0 for either (no curves, no L2): no bytes, bit for bit
the model without it. The bytes join the op's bytes (they stream at its ``experts`` class, as the family's
``reread / bw``), so every backend built from the placed parts carries them; the GP relaxation drops them (a max,
not a posynomial: left out, it stays a lower bound) and the theory presets have no such ops.
"""

from __future__ import annotations

import sympy as sp

from . import operators as O
from .symbols import ARCH, T, b_w, sym

#: Share of the beyond-first token tiles that re-stream an L2-missing expert (``KernelCurves.moe_reread``; 0: none).
MOE_REREAD = sym("moe_reread")
#: 1 / the device's L2 bytes (0: no L2 known, no re-read priced).
INV_L2 = sym("inv_l2")
#: Tallest token tile of a grouped GEMM (rows; ``kernels.moe.TILE_MAX``).
TILE = 128
#: Steepness of the L2 hit share ``1/(1 + fill^s)`` (``kernels.gemm.L2_STEEPNESS``; share of the L2 1:
#: ``kernels.moe.L2_SHARE``).
L2_STEEPNESS = 4
#: The routed-expert GEMMs and the weight matrices of each expert each streams (gate and up, or up; down).
MATRICES = {"ffn_up": O.n_up, "ffn_down": sp.Integer(1)}


def reread_bytes(op: O.Op) -> sp.Expr:
    """DRAM bytes ``op`` re-reads per layer (module docstring) in its own symbols (``T``, ``E_cov``); 0 for an op
    that is not a routed expert's grouped GEMM."""
    if op.name not in MATRICES or op.gemm is None:
        return sp.Integer(0)
    a, cov = ARCH, O.experts_touched
    per_matrix = a["d_model"] * a["ffn"] * b_w
    fill = (O.n_up + 1) * per_matrix * INV_L2
    miss = 1 - 1 / (1 + fill**L2_STEEPNESS)
    beyond = cov * sp.Max(T * a["top_k"] / (cov * TILE) - sp.Rational(1, 2), 0)
    return MOE_REREAD * O.nonzero(a["moe"]) * beyond * MATRICES[op.name] * per_matrix * miss


def rate_values(share: float, l2_bytes: float | None) -> tuple[float, float]:
    """(``MOE_REREAD``, ``INV_L2``) of curves with ``moe_reread`` = ``share`` on a device of ``l2_bytes`` (0, 0
    where either is missing)."""
    if not share or not l2_bytes:
        return 0.0, 0.0
    return float(share), 1.0 / float(l2_bytes)
