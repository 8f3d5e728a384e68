"""``Architecture``: one decoder-only transformer shape, with exact parameter counts.

Parameter counts are written once as plain arithmetic over a mapping of fields, so the same
function counts a single ``Architecture`` (ints), a table of candidates (numpy arrays) and the
symbolic model (sympy symbols) -- see :func:`param_counts`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import bad

NORMS = ("rmsnorm", "layernorm")
QK_NORMS = ("none", "head", "full")

#: Numeric columns that describe an architecture in vectorised tables (booleans as 0/1).
COLUMNS = (
    "layers",
    "d_model",
    "heads",
    "kv_heads",
    "head_dim",
    "ffn",
    "experts",
    "top_k",
    "shared_experts",
    "shared_ffn",
    "vocab",
    "tied",
    "gated",
    "qkv_bias",
    "layernorm",
    "qk_norm_size",
    "norms_per_layer",
    "shared_gate",
    "moe",
    "qk_norm_on",
)


@dataclass(frozen=True)
class Architecture:
    """A decoder-only transformer. Sizes are element counts; ``ffn`` is the per-expert intermediate size.

    ``head_dim`` defaults to ``d_model // heads``; ``shared_ffn`` to ``ffn``. ``qk_norm`` is
    ``"none"``, ``"head"`` (Qwen3/Gemma3: one RMSNorm of size head_dim for q and one for k) or
    ``"full"`` (OLMoE: q_norm over heads·head_dim, k_norm over kv_heads·head_dim).
    """

    layers: int
    d_model: int
    heads: int
    kv_heads: int | None = None
    head_dim: int | None = None
    ffn: int | None = None
    experts: int = 1
    top_k: int = 1
    shared_experts: int = 0
    shared_ffn: int | None = None
    vocab: int = 32000
    tied: bool = False
    gated: bool = True
    qkv_bias: bool = False
    norm: str = "rmsnorm"
    qk_norm: str = "none"
    norms_per_layer: int = 2
    shared_gate: bool = False
    name: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        for key in ("layers", "d_model", "heads", "experts", "top_k", "vocab", "norms_per_layer"):
            _positive_int(key, getattr(self, key))
        if self.kv_heads is None:
            set_("kv_heads", self.heads)
        _positive_int("kv_heads", self.kv_heads)
        if self.head_dim is None:
            if self.d_model % self.heads:
                raise bad("heads", self.heads, f"does not divide d_model={self.d_model}; give head_dim explicitly")
            set_("head_dim", self.d_model // self.heads)
        _positive_int("head_dim", self.head_dim)
        if self.ffn is None:
            set_("ffn", 4 * self.d_model)
        _positive_int("ffn", self.ffn)
        if self.shared_ffn is None:
            set_("shared_ffn", self.ffn)
        _positive_int("shared_ffn", self.shared_ffn)
        if not isinstance(self.shared_experts, int) or self.shared_experts < 0:
            raise bad("shared_experts", self.shared_experts, "must be a non-negative integer")
        if self.heads % self.kv_heads:
            raise bad("kv_heads", self.kv_heads, f"does not divide heads={self.heads}")
        if self.top_k > self.experts:
            raise bad("top_k", self.top_k, f"exceeds experts={self.experts}")
        if self.norm not in NORMS:
            raise bad("norm", self.norm, f"must be one of {', '.join(NORMS)}")
        if self.qk_norm not in QK_NORMS:
            raise bad("qk_norm", self.qk_norm, f"must be one of {', '.join(QK_NORMS)}")

    # ---- the paper's variables -------------------------------------------------------------
    @property
    def r(self) -> float:
        """Active FFN expansion ratio r = top_k·ffn/d_model (the paper's r = K·r_single)."""
        return self.top_k * self.ffn / self.d_model

    @property
    def rho(self) -> float:
        """Expert activation rate ρ = top_k/experts."""
        return self.top_k / self.experts

    @property
    def gqa(self) -> float:
        """GQA ratio heads/kv_heads."""
        return self.heads / self.kv_heads

    @property
    def d_m(self) -> int:
        """KV dimension d_m = kv_heads·head_dim."""
        return self.kv_heads * self.head_dim

    @property
    def is_moe(self) -> bool:
        return self.experts > 1

    # ---- parameter counts --------------------------------------------------------------------
    @property
    def params_total(self) -> int:
        """Exact parameter count (all experts, embeddings, LM head if untied)."""
        return int(param_counts(self.columns())["total"])

    @property
    def params_active(self) -> int:
        """Parameters touched per token (top_k routed + shared experts, embeddings included)."""
        return int(param_counts(self.columns())["active"])

    def columns(self) -> dict[str, int]:
        """The numeric columns of :data:`COLUMNS` (booleans as 0/1)."""
        qk = {"none": 0, "head": 2 * self.head_dim, "full": (self.heads + self.kv_heads) * self.head_dim}
        return {
            "layers": self.layers,
            "d_model": self.d_model,
            "heads": self.heads,
            "kv_heads": self.kv_heads,
            "head_dim": self.head_dim,
            "ffn": self.ffn,
            "experts": self.experts,
            "top_k": self.top_k,
            "shared_experts": self.shared_experts,
            "shared_ffn": self.shared_ffn,
            "vocab": self.vocab,
            "tied": int(self.tied),
            "gated": int(self.gated),
            "qkv_bias": int(self.qkv_bias),
            "layernorm": int(self.norm == "layernorm"),
            "qk_norm_size": qk[self.qk_norm],
            "norms_per_layer": self.norms_per_layer,
            "shared_gate": int(self.shared_gate),
            "moe": int(self.experts > 1),
            "qk_norm_on": int(self.qk_norm != "none"),
        }

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        if not d["name"]:
            d.pop("name")
        return d

    def spec(self) -> str:
        """The CLI spec string that rebuilds this architecture."""
        parts = []
        for k, v in self.to_dict().items():
            if k == "name":
                continue
            parts.append(f"{k}={str(v).lower() if isinstance(v, bool) else v}")
        return ",".join(parts)

    def replace(self, **changes: Any) -> Architecture:
        return dataclasses.replace(self, **changes)


def _positive_int(key: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise bad(key, value, "must be a positive integer")


def param_counts(c: Mapping[str, Any]) -> dict[str, Any]:
    """Exact parameter counts from architecture columns (ints, numpy arrays or sympy symbols).

    Returns ``attn`` (per layer), ``expert`` (one routed expert), ``shared`` (all shared experts,
    incl. a Qwen-MoE shared-expert gate), ``router``, ``norms`` (per layer), ``layer_dense``
    (per layer without routed experts), ``embed``, ``lm_head`` (0 if tied), ``final_norm``,
    ``total`` and ``active``.
    """
    d, hd = c["d_model"], c["head_dim"]
    q_out, kv_out = c["heads"] * hd, c["kv_heads"] * hd
    n_mat = 2 + c["gated"]
    norm_size = d * (1 + c["layernorm"])  # LayerNorm has a bias
    attn = d * q_out + 2 * d * kv_out + q_out * d + c["qkv_bias"] * (q_out + 2 * kv_out) + c["qk_norm_size"]
    expert = n_mat * d * c["ffn"]
    shared = c["shared_experts"] * n_mat * d * c["shared_ffn"] + c["shared_gate"] * d
    router = d * c["experts"] * c["moe"]
    norms = c["norms_per_layer"] * norm_size
    layer_dense = attn + shared + router + norms
    embed = c["vocab"] * d
    lm_head = (1 - c["tied"]) * c["vocab"] * d
    final_norm = norm_size
    outer = embed + lm_head + final_norm
    total = c["layers"] * (layer_dense + c["experts"] * expert) + outer
    active = c["layers"] * (layer_dense + c["top_k"] * expert) + outer
    return {
        "attn": attn,
        "expert": expert,
        "shared": shared,
        "router": router,
        "norms": norms,
        "layer_dense": layer_dense,
        "embed": embed,
        "lm_head": lm_head,
        "final_norm": final_norm,
        "total": total,
        "active": active,
    }


def human_params(n: float) -> str:
    if n <= 0:
        return "0"
    exp = int(math.log10(n)) // 3 * 3
    return f"{n / 10**exp:.3g}{ {0: '', 3: 'K', 6: 'M', 9: 'B', 12: 'T'}.get(exp, 'e' + str(exp)) }"
