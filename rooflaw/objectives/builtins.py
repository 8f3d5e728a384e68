"""Built-in loss laws with their published coefficients.

Each entry is a :class:`Builtin`: its name, variables, source and validity read without sympy (``rooflaw laws
list`` stays light); :func:`get_law` builds the sympy law on first use.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import RooflawError

if TYPE_CHECKING:
    from .law import LossLaw


@dataclass(frozen=True)
class Builtin:
    """A built-in law as data: ``text`` (or ``build``, for a law written as a sympy expression) and its numbers."""

    name: str
    text: str | None
    values: Mapping[str, float]
    variables: tuple[str, ...]
    source: str
    validity: str
    #: the ranges the law was fitted on (variable -> (low, high)); outside, it extrapolates
    domain: Mapping[str, tuple[float, float]] | None = None
    build: Callable[[Builtin], LossLaw] | None = None

    def __call__(self) -> LossLaw:
        if self.build is not None:
            return self.build(self)
        return _law(self.name, self.text, self.values, self.variables, self.source, self.validity, self.domain)


def _law(name, text, values, variables, source, validity, domain) -> LossLaw:
    from .law import LossLaw, parse_law

    law = parse_law(text, name=name, variables=variables, params=[p for p in values if p not in variables])
    if set(law.params) != set(values):
        raise AssertionError(f"built-in {name}: params {sorted(law.params)} != {sorted(values)}")
    return LossLaw(
        name=name,
        expr=law.expr,
        params={k: float(values[k]) for k in law.params},
        variables=law.variables,
        source=source,
        validity=validity,
        domain=dict(domain or {}),
    )


def _paper(spec: Builtin) -> LossLaw:
    from .law import LossLaw, param_symbol
    from .variables import symbol

    l, d, r, rho, d_m = (symbol(v) for v in spec.variables)
    p = {k: param_symbol(k) for k in spec.values}
    expr = (
        p["kappa_l"] / l ** p["alpha_l"]
        + p["kappa_rho"] * rho ** p["alpha_rho"] / (r ** p["alpha_r"] * d ** p["beta_1"])
        + p["kappa_d"] / (r ** p["alpha_r"] * d ** p["beta_2"])
        + p["kappa_m"] / d_m ** p["alpha_m"]
        + p["L_inf"]
    )
    return LossLaw(
        name=spec.name,
        expr=expr,
        params=dict(spec.values),
        variables=spec.variables,
        source=spec.source,
        validity=spec.validity,
        domain=dict(spec.domain or {}),
    )


_CHIN = "E + A/N**alpha + B/D**beta"

#: The ranges each built-in law was fitted on (reference/paper-2602.10377.md §6 Table 5 and
#: reference/scaling-laws.md); frontier, search and solve keep to them unless told to extrapolate.
PAPER_DOMAIN = {"l": (4.0, 32.0), "d": (768.0, 3072.0), "E": (1.0, 16.0), "K": (1.0, 2.0)}
CHINCHILLA_DOMAIN = {"N": (7e7, 1.6e10), "D": (5e9, 5e11)}

_BUILDERS: dict[str, Builtin] = {
    "paper-2602.10377": Builtin(
        "paper-2602.10377",
        None,
        {
            "kappa_l": 9.96,
            "alpha_l": 1.63,
            "kappa_rho": 0.031,
            "alpha_rho": 1.09,
            "alpha_r": 0.17,
            "beta_1": -0.33,
            "kappa_d": 500.0,
            "beta_2": 0.97,
            "kappa_m": 0.20,
            "alpha_m": 0.05,
            "L_inf": 2.53,
        },
        ("l", "d", "r", "rho", "d_m"),
        "Sun et al. 2026, arXiv:2602.10377, Eq. 15 / App. C Table 6 (nonlinear least squares)",
        "fixed 10B-token budget (no N or D term); fitted on 170 models with l 4-32, d 768-3072, "
        "MoE E<=16, K<=2 (rho 1/16..1), GQA n_kv in {1,2,4,8,n_h}; d_m = d/gqa",
        domain=PAPER_DOMAIN,
        build=_paper,
    ),
    "chinchilla-hoffmann": Builtin(
        "chinchilla-hoffmann",
        _CHIN,
        {"E": 1.6934, "A": 406.4, "B": 410.7, "alpha": 0.33917, "beta": 0.28491},
        ("N", "D"),
        "Hoffmann et al. 2022 (Chinchilla), approach 3",
        "dense decoder LMs, N 70M-16B parameters (embeddings included), D 5B-500B tokens, MassiveText",
        CHINCHILLA_DOMAIN,
    ),
    "chinchilla-epoch": Builtin(
        "chinchilla-epoch",
        _CHIN,
        {"E": 1.81686, "A": 482.006, "B": 2085.434, "alpha": 0.34781, "beta": 0.36585},
        ("N", "D"),
        "Besiroglu et al. 2024 (Epoch AI), arXiv:2404.10102, MLE refit of Hoffmann's approach 3",
        "same runs as Chinchilla: dense decoder LMs, N 70M-16B, D 5B-500B tokens",
        CHINCHILLA_DOMAIN,
    ),
    "kaplan": Builtin(
        "kaplan",
        "((N_c/N_nonembed)**(alpha_N/alpha_D) + D_c/D)**alpha_D",
        {"N_c": 8.8e13, "alpha_N": 0.076, "D_c": 5.4e13, "alpha_D": 0.095},
        ("N_nonembed", "D"),
        "Kaplan et al. 2020, arXiv:2001.08361, Eq. 1.5 (non-embedding N)",
        "dense decoder LMs, N_nonembed 768-1.5B, D up to 23B tokens, WebText2 tokens; no irreducible term",
        {"N_nonembed": (768.0, 1.5e9), "D": (2.1e7, 2.3e10)},  # D: Kaplan et al. §3, 21M-23B tokens
    ),
    "krajewski-moe": Builtin(
        "krajewski-moe",
        "c + (g/G**gamma + a)/N_active_nonembed**alpha + b/D**beta",
        {"a": 18.1, "alpha": 0.115, "b": 30.8, "beta": 0.147, "g": 2.1, "gamma": 0.58, "c": 0.47},
        ("G", "N_active_nonembed", "D"),
        "Krajewski et al. 2024, arXiv:2402.07871 (fine-grained MoE, Huber delta 0.1 + BFGS)",
        "fine-grained MoE at expansion rate 64, granularity G 1-16, N up to ~1B, C4; N read as "
        "active non-embedding parameters, G = 4*d_model/ffn",
        {"G": (1.0, 16.0), "N_active_nonembed": (0.0, 1e9)},
    ),
    "krajewski-dense": Builtin(
        "krajewski-dense",
        "c + a/N_active_nonembed**alpha + b/D**beta",
        {"a": 16.3, "alpha": 0.126, "b": 26.7, "beta": 0.127, "c": 0.47},
        ("N_active_nonembed", "D"),
        "Krajewski et al. 2024, arXiv:2402.07871 (dense baseline)",
        "dense decoder LMs, N up to ~1B non-embedding, C4",
        {"N_active_nonembed": (0.0, 1e9)},
    ),
}


def _chinchilla_precision(spec: Builtin) -> LossLaw:
    import dataclasses

    from .precision_law import precision_aware

    return dataclasses.replace(precision_aware(get_law("chinchilla-hoffmann")), name=spec.name)


_BUILDERS["chinchilla-precision"] = Builtin(
    "chinchilla-precision",
    None,
    dict(_BUILDERS["chinchilla-hoffmann"].values) | {"gamma_w": 2.6745, "gamma_a": 2.2102, "gamma_kv": 0.9578},
    ("N", "D", "P_w", "P_a", "P_kv"),
    "precision(chinchilla-hoffmann): Hoffmann et al. 2022 approach 3 with N_eff = N·Π(1 − e^(−P_x/γ_x)) of "
    "Kumar et al. 2024 (arXiv:2411.04330); γ values not checked against the paper's table here",
    "as chinchilla-hoffmann; precision bits 3-16, models trained (or QAT) in that precision",
    CHINCHILLA_DOMAIN | {"P_w": (3.0, 16.0), "P_a": (3.0, 16.0), "P_kv": (3.0, 16.0)},
    build=_chinchilla_precision,
)

_CACHE: dict[str, LossLaw] = {}


def list_laws() -> list[str]:
    """Names of the built-in laws."""
    return list(_BUILDERS)


def builtin_laws() -> list[Builtin]:
    """The built-in laws as data (name, variables, source, validity, numbers), without building them."""
    return list(_BUILDERS.values())


_WRAP = re.compile(r"precision(?:-(w|wa|wakv))?\(\s*([A-Za-z0-9_.\-]+)\s*\)")


def parse_wrapper(text: str) -> LossLaw | None:
    """``precision(<law name>)`` (also ``precision-w(…)``, ``precision-wa(…)``) as a law; None for other text.
    Read with a regular expression, never evaluated; the inner name must be a built-in law."""
    m = _WRAP.fullmatch(text.strip())
    if m is None:
        return None
    from .precision_law import precision_aware

    parts = {None: ("w", "a", "kv"), "w": ("w",), "wa": ("w", "a"), "wakv": ("w", "a", "kv")}[m.group(1)]
    return precision_aware(get_law(m.group(2)), parts)


def get_law(name_or_expr: str, **kwargs) -> LossLaw:
    """A built-in law by name, or a user law from an expression (see ``parse_law`` for kwargs).

    Example::

        >>> import rooflaw as rl
        >>> law = rl.get_law("paper-2602.10377")
        >>> law.variables
        ('l', 'd', 'r', 'rho', 'd_m')
        >>> round(law.loss(rl.load_architecture("layers=4,d_model=512,heads=8,kv_heads=2,ffn=1536")), 4)
        4.9051
    """
    if not isinstance(name_or_expr, str):
        raise RooflawError(f"law={name_or_expr!r}: expected a name or an expression string")
    key = name_or_expr.strip()
    if key.startswith("precision") and "(" in key and not kwargs:
        wrapped = parse_wrapper(key)
        if wrapped is not None:
            return wrapped
    if key in _BUILDERS and not kwargs:
        if key not in _CACHE:
            _CACHE[key] = _BUILDERS[key]()
        return _CACHE[key]
    looks_like_name = key.replace("-", "").replace(".", "").replace("_", "").isalnum() and "-" in key
    if looks_like_name:
        raise RooflawError(f"law={key!r}: no such built-in law; built-ins: {', '.join(_BUILDERS)}")
    from .law import parse_law

    return parse_law(key, **kwargs)
