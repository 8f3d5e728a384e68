"""A precision-aware wrapper over any loss law with a parameter-count variable (Kumar et al. 2024).

"Scaling Laws for Precision" (Kumar, Ankner, Spector, Bordelon, Muennighoff, Paul, Pehlevan, Ré, Raghunathan;
arXiv:2411.04330, ICLR 2025) models training in low precision as a loss of *effective* parameters:

    N_eff = N · (1 − e^(−P_w/γ_w)) · (1 − e^(−P_a/γ_a)) · (1 − e^(−P_kv/γ_kv))

with P_x the bits of weights, activations and KV cache, and N_eff inserted in place of N in a Chinchilla-form
law. :func:`precision_aware` applies that substitution to every parameter-count variable (``N``, ``N_active``,
``N_nonembed``, ``N_active_nonembed``) of any base law; the bits become law variables ``P_w``, ``P_a``, ``P_kv``
that a :class:`~rooflaw.solver.problem.Problem` fills from its precision (:func:`bind_precision`: bits per
element *including scale overhead*, so NVFP4 is 4.5 bits, MXFP4 4.25, INT4 g128 4.125).

Assumptions, stated: the law describes models *trained* (or quantisation-aware trained) in that precision, as in
the paper's quantised-training fits (integer fake quantisation, 30M-220M parameters, 3-16 bits, Dolma); the γ
constants are the paper's, the base law's coefficients are the base law's own (the paper fitted its own A, B, E,
α, β on its data). Outside 3-16 bits the wrapper extrapolates and a problem refuses it unless told to extrapolate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sympy

from ..devices.precision import Precision
from ..errors import RooflawError, bad
from .law import LossLaw, param_symbol
from .variables import symbol

#: Parameter-count variables the wrapper scales to effective parameters.
N_VARIABLES = ("N", "N_active", "N_nonembed", "N_active_nonembed")
#: Precision part -> (bits variable, γ parameter name).
PARTS = {"w": ("P_w", "gamma_w"), "a": ("P_a", "gamma_a"), "kv": ("P_kv", "gamma_kv")}
#: γ_w, γ_a, γ_kv of Kumar et al. 2024 (quantised training, joint fit over weights, activations and KV cache).
KUMAR_GAMMA = {"gamma_w": 2.6745, "gamma_a": 2.2102, "gamma_kv": 0.9578}
KUMAR_SOURCE = (
    "Kumar et al. 2024, 'Scaling Laws for Precision', arXiv:2411.04330 (ICLR 2025): N_eff = N·Π(1 − e^(−P_x/γ_x)) "
    "over weights/activations/KV bits, γ_w 2.6745, γ_a 2.2102, γ_kv 0.9578 (quantised-training fit). These three "
    "values were transcribed for this wrapper without the paper's table at hand (the offline references here do "
    "not hold it): check them against the paper before relying on absolute numbers"
)
#: Bits the paper trained at (3-16): outside, the wrapper extrapolates.
BITS_DOMAIN = (3.0, 16.0)


def precision_aware(base: LossLaw, parts: tuple[str, ...] = ("w", "a", "kv"),
                    gammas: Mapping[str, float] | None = None) -> LossLaw:  # fmt: skip
    """``base`` with every parameter-count variable N replaced by N·Π_{x∈parts}(1 − e^(−P_x/γ_x)).

    ``parts``: which precisions count (``w`` weights, ``a`` activations, ``kv`` KV cache); ``gammas``: γ values
    (default :data:`KUMAR_GAMMA`). The result has the base's variables plus ``P_w``/``P_a``/``P_kv`` and the base's
    parameters plus the γ's. Raises :class:`RooflawError` when ``base`` has no parameter-count variable.
    """
    if not isinstance(base, LossLaw):
        raise bad("law", base, "expected a LossLaw to make precision-aware")
    ns = [v for v in base.variables if v in N_VARIABLES]
    if not ns:
        raise bad("law", base.name, f"has no parameter-count variable ({', '.join(N_VARIABLES)}) to make "
                  "precision-aware; the precision wrapper scales N to effective parameters")  # fmt: skip
    bad_parts = [p for p in parts if p not in PARTS]
    if not parts or bad_parts or len(set(parts)) != len(parts):
        raise bad("parts", ",".join(parts), f"must be distinct ones of {', '.join(PARTS)}")
    if any(PARTS[p][0] in base.variables for p in parts):
        raise bad("law", base.name, "already uses precision bits (P_w, P_a, P_kv)")
    g = dict(KUMAR_GAMMA if gammas is None else gammas)
    factor = sympy.Integer(1)
    for p in parts:
        var, gname = PARTS[p]
        if gname not in g or not g[gname] > 0:
            raise bad(gname, g.get(gname), "must be a positive number of bits")
        factor *= 1 - sympy.exp(-symbol(var) / param_symbol(gname))
    expr = base.expr.xreplace({symbol(n): symbol(n) * factor for n in ns})
    params = dict(base.params) | {PARTS[p][1]: float(g[PARTS[p][1]]) for p in parts}
    domain = dict(base.domain) | {PARTS[p][0]: BITS_DOMAIN for p in parts}
    tag = "" if tuple(parts) == ("w", "a", "kv") else "-" + "".join(parts)
    return LossLaw(
        name=f"precision{tag}({base.name})",
        expr=expr,
        params=params,
        variables=base.variables + tuple(PARTS[p][0] for p in parts),
        source=f"{base.source}; with effective parameters from {KUMAR_SOURCE}",
        validity=f"{base.validity}; precision bits {BITS_DOMAIN[0]:g}-{BITS_DOMAIN[1]:g} (trained in that precision)",
        domain=domain,
    )


def precision_bits(precision: Any) -> dict[str, float]:
    """``P_w``, ``P_a``, ``P_kv``: bits per element of a precision's formats, scale overhead included."""
    return Precision.parse(precision).bits


def bind_precision(law: LossLaw, precision: Any, allow_extrapolation: bool = False) -> LossLaw:
    """``law`` with its precision bits (``P_w``/``P_a``/``P_kv``) set from ``precision``; a law without them as is.

    The bound law remembers the unbound one (``law.unbound``), so a problem at another precision binds again.
    Bits outside the law's fitted range raise :class:`RooflawError` unless ``allow_extrapolation``.
    """
    law = law.unbound or law
    used = [v for v in law.variables if v in ("P_w", "P_a", "P_kv")]
    if not used:
        return law
    bits = precision_bits(precision)
    if not allow_extrapolation:
        out = law.outside({v: bits[v] for v in used})
        if out:
            raise bad("precision", getattr(precision, "name", precision),
                      f"outside the bits law {law.name} was fitted on: {out[0]}; "
                      "allow_extrapolation (--allow-extrapolation) to use it anyway")  # fmt: skip
    expr = law.expr.xreplace({symbol(v): sympy.Float(bits[v]) for v in used})
    if expr.free_symbols & {symbol(v) for v in used}:
        raise RooflawError(f"law {law.name}: precision bits did not bind")  # pragma: no cover - sympy invariant
    label = ", ".join(f"{v} {bits[v]:g}" for v in used)
    return LossLaw(
        name=f"{law.name} [{label}]",
        expr=expr,
        params=dict(law.params),
        variables=tuple(v for v in law.variables if v not in used),
        stderr=None if law.stderr is None else dict(law.stderr),
        source=law.source,
        validity=law.validity,
        domain={k: v for k, v in law.domain.items() if k not in used},
        unbound=law,
    )
