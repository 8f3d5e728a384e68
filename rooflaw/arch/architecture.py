"""``Architecture``: one decoder-only model as a stack of layer blocks, with exact parameter counts.

Each layer has a token mixer -- ``global`` attention, ``local`` (sliding-window ``window``) attention,
``mla`` (multi-head latent attention, DeepSeek-V2/V3) or a constant-state mixer (``conv``, ``ssm``,
``linear``: short convolution, Mamba-style SSM, linear attention) -- and an FFN: the model's main FFN
(dense, or MoE with shared experts) except the first ``first_dense`` layers, which are dense with
width ``dense_ffn``. ``layer_types`` keeps the ordered per-layer pattern; the cost model needs only how
many layers of each kind there are (:data:`STACK_COLUMNS`). A model without ``layer_types`` is uniform.

Parameter counts are written once as plain arithmetic over a mapping of fields, so the same
function counts a single ``Architecture`` (ints), a table of candidates (numpy arrays) and the
symbolic model (sympy symbols) -- see :func:`param_counts`.
"""

from __future__ import annotations

import dataclasses
import math
from collections import ChainMap
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import bad
from .layer_kinds import LAYER_KINDS, kind_of_type, kinds, layer_types
from .layer_kinds import STACK_COLUMNS as STACK_COLUMNS  # re-exported: the built-in stack columns

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
    layer_types: tuple[str, ...] = ()
    window: int = 0
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    rope_dim: int = 0
    v_head_dim: int = 0
    first_dense: int = 0
    dense_ffn: int = 0
    mixer_in: int = 0
    mixer_inner: int = 0
    mixer_state: int = 0
    mixer_params: int = 0
    mixer_flops: int = 0
    kind_fields: Mapping[str, int] | tuple[tuple[str, int], ...] = ()
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
        if self.heads % _filled(self.kv_heads):
            raise bad("kv_heads", self.kv_heads, f"does not divide heads={self.heads}")
        if self.top_k > self.experts:
            raise bad("top_k", self.top_k, f"exceeds experts={self.experts}")
        if self.norm not in NORMS:
            raise bad("norm", self.norm, f"must be one of {', '.join(NORMS)}")
        if self.qk_norm not in QK_NORMS:
            raise bad("qk_norm", self.qk_norm, f"must be one of {', '.join(QK_NORMS)}")
        self._check_stack()

    def _check_stack(self) -> None:
        extra = self.kind_fields
        pairs = sorted(extra.items()) if isinstance(extra, Mapping) else sorted(tuple(p) for p in extra)
        own = {c for k in kinds() for c in (*k.fields, k.first or "") if c and not _is_field(c)}
        for key, _ in pairs:
            if key not in own:
                raise bad("kind_fields", key, "is not a field of a registered layer kind")
        object.__setattr__(self, "kind_fields", tuple(pairs))
        for key in (*(f for k in kinds() for f in k.fields), *(k.first for k in kinds() if k.first)):
            v = self.value(key)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise bad(key, v, "must be a non-negative integer")
        types = tuple(self.layer_types)
        object.__setattr__(self, "layer_types", types)
        if types and len(types) != self.layers:
            raise bad("layer_types", len(types), f"has {len(types)} entries for layers={self.layers}")
        for kind in types:
            kind_of_type(kind)  # raises on an unknown name
        for k in kinds():
            if k.check is not None:
                k.check(self)

    def value(self, key: str) -> int:
        """The field ``key`` of a layer kind (a dataclass field, or one of ``kind_fields``; 0 when unset)."""
        if _is_field(key):
            return getattr(self, key)
        return dict(self.kind_fields).get(key, 0)

    def count(self, kind: str) -> int:
        """Number of layers of type ``kind`` (a ``layer_types`` name; a uniform model is all ``global``)."""
        return sum(k == kind for k in self.layer_types) if self.layer_types else self.layers * (kind == "global")

    def kind_layers(self, name: str) -> int:
        """Number of layers of the registered layer kind ``name`` (:data:`~rooflaw.arch.layer_kinds.LAYER_KINDS`)."""
        kind = LAYER_KINDS[name]
        if kind.first is not None:
            return min(self.value(kind.first), self.layers)
        return sum(self.count(t) for t in kind.layer_types)

    # ---- the paper's variables -------------------------------------------------------------
    @property
    def r(self) -> float:
        """Active FFN expansion ratio r = top_k·ffn/d_model (the paper's r = K·r_single)."""
        return self.top_k * _filled(self.ffn) / self.d_model

    @property
    def rho(self) -> float:
        """Expert activation rate ρ = top_k/experts."""
        return self.top_k / self.experts

    @property
    def gqa(self) -> float:
        """GQA ratio heads/kv_heads."""
        return self.heads / _filled(self.kv_heads)

    @property
    def d_m(self) -> int:
        """KV dimension d_m = kv_heads·head_dim."""
        return _filled(self.kv_heads) * _filled(self.head_dim)

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
        kv, hd = _filled(self.kv_heads), _filled(self.head_dim)
        qk = {"none": 0, "head": 2 * hd, "full": (self.heads + kv) * hd}
        return {
            "layers": self.layers,
            "d_model": self.d_model,
            "heads": self.heads,
            "kv_heads": kv,
            "head_dim": hd,
            "ffn": _filled(self.ffn),
            "experts": self.experts,
            "top_k": self.top_k,
            "shared_experts": self.shared_experts,
            "shared_ffn": _filled(self.shared_ffn),
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
            **self.stack_columns(),
        }

    def stack_columns(self) -> dict[str, int]:
        """The per-kind layer counts and kind parameters of the layer-stack columns (each registered kind's count
        and columns, 0 for a kind without layers; ``attn_layers``/``ffn_layers``: the layers left to the base)."""
        out = {"attn_layers": self.layers, "ffn_layers": self.layers}
        for k in kinds():
            n = self.kind_layers(k.name)
            vals = {c: self.value(c) if n else 0 for c in k.fields}
            vals.update({c: int(bool(n and f(vals))) for c, f in k.derived.items()})
            out[k.count] = n
            out.update(vals)
            if not k.in_base:
                out[k.base] -= n
        return {c: out[c] for c in _stack_columns()}

    @property
    def pattern(self) -> str:
        """The layer stack in words, e.g. ``22 local (window 512) + 4 global`` (``26 global`` if uniform)."""
        parts = []
        for t in layer_types():
            n = self.count(t)
            kind = kind_of_type(t)
            if n:
                parts.append(f"{n} {t}" + (f" {kind.note(self)}" if kind is not None and kind.note else ""))
        for k in kinds():
            if k.first is not None and self.kind_layers(k.name):
                parts.append(f"first {self.kind_layers(k.name)} {k.label}")
        return " + ".join(parts)

    @property
    def uniform(self) -> bool:
        """True for a one-block stack (every layer global attention + the main FFN)."""
        return not any(self.kind_layers(k.name) for k in kinds() if k.first) and all(
            k == "global" for k in self.layer_types
        )

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        if not d["name"]:
            d.pop("name")
        for f in dataclasses.fields(self):  # stack fields only when set: uniform models print as before
            if f.name in _stack_fields() and d.get(f.name) == f.default:
                d.pop(f.name)
        d.pop("kind_fields")
        d.update(self.kind_fields)
        if "layer_types" in d:
            d["layer_types"] = list(d["layer_types"])
        return d

    def spec(self) -> str:
        """The CLI spec string that rebuilds this architecture."""
        parts = []
        for k, v in self.to_dict().items():
            if k == "name":
                continue
            if k == "layer_types":
                v = "+".join(v)
            parts.append(f"{k}={str(v).lower() if isinstance(v, bool) else v}")
        return ",".join(parts)

    def replace(self, **changes: Any) -> Architecture:
        return dataclasses.replace(self, **changes)


def _stack_fields() -> set[str]:
    """Architecture fields of the layer stack (printed only when set)."""
    return {"layer_types", *(f for k in kinds() for f in k.fields), *(k.first for k in kinds() if k.first)}


def _is_field(name: str) -> bool:
    return name in Architecture.__dataclass_fields__


def _stack_columns() -> tuple[str, ...]:
    from .layer_kinds import stack_columns

    return stack_columns()


def _filled(size: int | None) -> int:
    """A size that ``Architecture.__post_init__`` derives when it is not given (``kv_heads``, ``head_dim``,
    ``ffn``, ``shared_ffn``): an int on every constructed instance, typed ``int | None`` for the constructor."""
    if size is None:  # pragma: no cover - __post_init__ fills all four
        raise AssertionError("an Architecture size was left unset by __post_init__")
    return size


def _positive_int(key: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise bad(key, value, "must be a positive integer")


def param_counts(c: Mapping[str, Any]) -> dict[str, Any]:
    """Exact parameter counts from architecture columns (ints, numpy arrays or sympy symbols).

    Returns ``attn`` (per GQA attention layer), ``expert`` (one routed expert), ``shared`` (all shared experts,
    incl. a Qwen-MoE shared-expert gate), ``router``, ``norms`` (per layer), ``layer_dense`` (per uniform layer
    without routed experts), per layer of each layer kind with parameters (``mla``, ``mixer``, ``dense``: its
    registry name, :data:`~rooflaw.arch.layer_kinds.LAYER_KINDS`), ``embed``, ``lm_head`` (0 if tied),
    ``final_norm``, ``total`` and ``active``. The layer-stack columns default to a uniform stack when absent.
    """
    d, hd = c["d_model"], c["head_dim"]
    s = {k: c.get(k, 0) for k in _stack_columns()}
    attn_l, ffn_l = c.get("attn_layers", c["layers"]), c.get("ffn_layers", c["layers"])
    q_out, kv_out = c["heads"] * hd, c["kv_heads"] * hd
    n_mat = 2 + c["gated"]
    norm_size = d * (1 + c["layernorm"])  # LayerNorm has a bias
    attn = d * q_out + 2 * d * kv_out + q_out * d + c["qkv_bias"] * (q_out + 2 * kv_out) + c["qk_norm_size"]
    expert = n_mat * d * c["ffn"]
    shared = c["shared_experts"] * n_mat * d * c["shared_ffn"] + c["shared_gate"] * d
    router = d * c["experts"] * c["moe"]
    norms = c["norms_per_layer"] * norm_size
    layer_dense = attn + shared + router + norms
    cols = ChainMap(s, c)  # type: ignore[arg-type]
    per_kind = {k.name: k.params(cols) for k in kinds() if k.params is not None}
    embed = c["vocab"] * d
    lm_head = (1 - c["tied"]) * c["vocab"] * d
    final_norm = norm_size
    outer = embed + lm_head + final_norm
    stack = sum(s[LAYER_KINDS[name].count] * n for name, n in per_kind.items())
    if "attn_layers" in c or "ffn_layers" in c:
        base = attn_l * attn + ffn_l * (shared + router) + c["layers"] * norms + stack
        total = base + ffn_l * c["experts"] * expert + outer
        active = base + ffn_l * c["top_k"] * expert + outer
    else:  # a uniform table: one multiplication per layer (the form the symbolic model is written in)
        total = c["layers"] * (layer_dense + c["experts"] * expert) + outer
        active = c["layers"] * (layer_dense + c["top_k"] * expert) + outer
    return {
        "attn": attn,
        "expert": expert,
        "shared": shared,
        "router": router,
        "norms": norms,
        "layer_dense": layer_dense,
        **per_kind,
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
