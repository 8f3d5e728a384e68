"""Layer kinds: every kind of layer block beyond the uniform base, declared once in :data:`LAYER_KINDS`.

The base layer is ``global`` GQA attention (layer-count column ``attn_layers``) plus the model's main FFN
(``ffn_layers``). A :class:`LayerKind` is one departure from it: a token mixer (``slot="mixer"``: sliding-window
attention, MLA, a constant-state conv/SSM/linear-attention mixer) or an FFN (``slot="ffn"``: the first-k dense
FFN layers of an MoE model). One entry says everything the package needs to know about the kind:

- which layers are of the kind (names in ``Architecture.layer_types``, or the first ``first`` layers), the
  layer-count column that counts them and the columns that parametrise it (its *stack columns*);
- its parameters per layer, its cache per token (at the KV-cache width ``b_kv``) and state per sequence (at
  ≥ 16 bits), plain arithmetic over a mapping of columns (ints, numpy arrays or sympy symbols alike);
- how a Hugging Face ``config.json`` names it, which of its columns a layout splits, whether attention TP
  replicates its cache;
- its operators (``ops``: :class:`rooflaw.constraints.operators.Op`), which the cost model attaches (this package
  may not import ``constraints``); a kind registered from outside the package gives them at once.

Architecture, Space, ``complete_columns``, the compiled cost model, the numba kernels and the layouts all read
this registry; none names a kind. Adding a kind: one :func:`register_layer_kind` call (docs/cost-model.md,
"Adding a layer kind").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import bad
from .checks import hf_need as _need

#: Layer-count columns of the base: every layer, the GQA attention layers, the main-FFN layers.
BASE_COUNTS = ("layers", "attn_layers", "ffn_layers")
#: The base token mixer's name in ``Architecture.layer_types`` and how Hugging Face configs call it.
BASE_TYPE = "global"
BASE_HF_TYPES = {"full_attention": "global", "attention": "global"}
SLOTS = ("mixer", "ffn")


@dataclass(frozen=True, eq=False)  # identity: its fields hold functions and mappings
class LayerKind:
    """One kind of layer block (see the module docstring). Callables take a mapping of columns.

    ``name``: registry key (the name compiled models and ``stack_kinds`` use). ``count``: its layer-count column.
    ``slot``: ``mixer`` or ``ffn``. ``layer_types``: its names in ``Architecture.layer_types`` (mixer slot);
    ``first``: the Architecture field giving how many leading layers are of the kind (ffn slot). ``columns``:
    its stack columns in order; ``derived``: those computed from the others (column -> function).
    ``in_base``: its layers stay counted in the base count of their slot (a sliding-window layer is still one of
    the ``attn_layers``); otherwise they replace it. ``window``: the column bounding the context the base
    attention's context-dependent ops see in its layers. ``params``: parameters per layer. ``cache_token``:
    cache elements per token per layer (stored at ``b_kv``); ``cache_state``: state elements per sequence per
    layer (≥ 16-bit). ``full_context``: its layers hold a full-context score block (activation workspace).
    ``split``: columns a layout divides over the devices of its slot's group (attention TP for the mixer slot,
    the whole TP×EP group for the FFN slot). ``cache_replicated``: attention TP never splits its cache.
    ``check``: raises on an Architecture whose fields do not fit the kind. ``hf_types``: Hugging Face
    ``layer_types`` names -> ours; ``hf_fields``: fills the kind's fields from a config (cfg, fields, model_type).
    ``label``: words for tables and notes; ``note``: the pattern text of an Architecture (e.g. the window).
    ``ops``: the kind's operators; ``builtin``: shipped with rooflaw (its columns are in :data:`STACK_COLUMNS`).
    """

    name: str
    count: str
    slot: str
    label: str
    layer_types: tuple[str, ...] = ()
    first: str | None = None
    columns: tuple[str, ...] = ()
    derived: Mapping[str, Callable[[Mapping[str, Any]], Any]] = field(default_factory=dict)
    in_base: bool = False
    window: str | None = None
    params: Callable[[Mapping[str, Any]], Any] | None = None
    cache_token: Callable[[Mapping[str, Any]], Any] | None = None
    cache_state: Callable[[Mapping[str, Any]], Any] | None = None
    full_context: bool = False
    split: tuple[str, ...] = ()
    cache_replicated: bool = False
    check: Callable[[Any], None] | None = None
    hf_types: Mapping[str, str] = field(default_factory=dict)
    hf_fields: Callable[[Mapping[str, Any], dict[str, Any], str], None] | None = None
    note: Callable[[Any], str] | None = None
    ops: tuple[Any, ...] = ()
    builtin: bool = False

    @property
    def base(self) -> str:
        """The base layer-count column of its slot."""
        return "attn_layers" if self.slot == "mixer" else "ffn_layers"

    @property
    def fields(self) -> tuple[str, ...]:
        """Its stack columns an Architecture sets (the others are derived)."""
        return tuple(c for c in self.columns if c not in self.derived)

    @property
    def stack_columns(self) -> tuple[str, ...]:
        return (self.count, *self.columns)


#: The registry, in registration order (built-ins first).
LAYER_KINDS: dict[str, LayerKind] = {}


def register_layer_kind(kind: LayerKind, replace: bool = False) -> LayerKind:
    """Add ``kind`` to :data:`LAYER_KINDS` (``replace``: overwrite the entry of the same name, e.g. to attach ops)."""
    if not isinstance(kind, LayerKind):
        raise bad("layer kind", kind, "must be a LayerKind")
    if kind.slot not in SLOTS:
        raise bad("slot", kind.slot, f"must be one of {', '.join(SLOTS)}")
    if kind.name in LAYER_KINDS and not replace:
        raise bad("layer kind", kind.name, "is already registered (replace=True to overwrite it)")
    if kind.name == "stack" or kind.count in BASE_COUNTS:
        raise bad("layer kind", kind.name, "uses a name or count column the base layer owns")
    taken = {c: k.name for k in LAYER_KINDS.values() if k.name != kind.name for c in k.stack_columns}
    taken.update({t: k.name for k in LAYER_KINDS.values() if k.name != kind.name for t in k.layer_types})
    for c in (*kind.stack_columns, *kind.layer_types):
        if c in taken or c == BASE_TYPE:
            raise bad("layer kind", kind.name, f"reuses {c!r} of kind {taken.get(c, BASE_TYPE)!r}")
    if (kind.slot == "mixer" and kind.first is not None) or (kind.slot == "ffn" and kind.layer_types):
        raise bad("layer kind", kind.name, "a mixer kind names layer_types, an FFN kind a 'first' field")
    if kind.name in LAYER_KINDS and LAYER_KINDS[kind.name].builtin:
        kind = _with_builtin(kind)
    LAYER_KINDS[kind.name] = kind
    return kind


def unregister_layer_kind(name: str) -> None:
    """Remove a kind registered from outside rooflaw (built-in kinds stay)."""
    kind = LAYER_KINDS.get(name)
    if kind is None:
        raise bad("layer kind", name, "is not registered")
    if kind.builtin:
        raise bad("layer kind", name, "is built in")
    del LAYER_KINDS[name]


def _with_builtin(kind: LayerKind) -> LayerKind:
    import dataclasses

    return dataclasses.replace(kind, builtin=True)


def kinds() -> tuple[LayerKind, ...]:
    """The registered kinds, mixer slot first, each slot in registration order."""
    return tuple(k for s in SLOTS for k in LAYER_KINDS.values() if k.slot == s)


def stack_columns(names: Any = None) -> tuple[str, ...]:
    """The layer-stack columns: ``attn_layers``, the mixer kinds' columns, ``ffn_layers``, the FFN kinds'.

    ``names`` None: every registered kind; else the built-in kinds and the registered ones named in ``names``
    (what a compiled model for that set of kinds takes)."""
    keep = [k for k in kinds() if names is None or k.builtin or k.name in names]
    mixer = [c for k in keep if k.slot == "mixer" for c in k.stack_columns]
    ffn = [c for k in keep if k.slot == "ffn" for c in k.stack_columns]
    return ("attn_layers", *mixer, "ffn_layers", *ffn)


def count_columns() -> tuple[str, ...]:
    """The layer-count columns (a pipeline stage scales these): ``layers``, then the stack's counts."""
    counts = {k.count for k in LAYER_KINDS.values()} | {"attn_layers", "ffn_layers"}
    return ("layers", *(c for c in stack_columns() if c in counts))


def kind_of_type(layer_type: str) -> LayerKind | None:
    """The kind a ``layer_types`` entry belongs to (None: the base ``global``); raises on an unknown name."""
    for k in LAYER_KINDS.values():
        if layer_type in k.layer_types:
            return k
    if layer_type == BASE_TYPE:
        return None
    raise bad("layer_types", layer_type, f"unknown layer kind; known: {', '.join(layer_types())}")


def layer_types() -> tuple[str, ...]:
    """Every name ``Architecture.layer_types`` accepts."""
    return (BASE_TYPE, *(t for k in kinds() for t in k.layer_types))


def hf_types() -> dict[str, str]:
    """Hugging Face ``layer_types`` names -> ours."""
    out = dict(BASE_HF_TYPES)
    for k in kinds():
        out.update(k.hf_types)
    return out


def per_layer_counts(types: tuple[str, ...] | list[str], firsts: Mapping[str, int]) -> list[dict[str, int]]:
    """The layer-count columns of each layer (0/1 each) of a pattern: ``types`` per layer, ``firsts`` the value of
    each FFN kind's ``first`` field. Stage counts and an Architecture's counts are sums of these."""
    out = []
    cols = count_columns()
    for i, t in enumerate(types):
        row = dict.fromkeys(cols, 0)
        row["layers"] = 1
        for slot, kind in (("mixer", kind_of_type(t)), ("ffn", _ffn_kind(i, firsts))):
            base = "attn_layers" if slot == "mixer" else "ffn_layers"
            if kind is None or kind.in_base:
                row[base] = 1
            if kind is not None:
                row[kind.count] = 1
        out.append(row)
    return out


def _ffn_kind(i: int, firsts: Mapping[str, int]) -> LayerKind | None:
    for k in kinds():
        if k.slot == "ffn" and k.first is not None and i < firsts.get(k.first, 0):
            return k
    return None


# ---- the built-in kinds ---------------------------------------------------------------------------
def _check_local(a: Any) -> None:
    if a.kind_layers("local") and a.window <= 0:
        raise bad("window", a.window, "sliding-window layers need a positive window")


def _window_from_hf(cfg: Mapping[str, Any], f: dict[str, Any], mt: str) -> None:
    f["window"] = int(_need(cfg, "sliding_window", mt))


def _check_mla(a: Any) -> None:
    if a.kind_layers("mla") and (a.kv_lora_rank <= 0 or a.v_head_dim <= 0 or a.rope_dim >= a.head_dim):
        raise bad("kv_lora_rank", a.kv_lora_rank, "MLA layers need kv_lora_rank, v_head_dim > 0 and "
                  "rope_dim < head_dim (head_dim = qk nope + rope dims)")  # fmt: skip


def _mla_from_hf(cfg: Mapping[str, Any], f: dict[str, Any], mt: str) -> None:
    """DeepSeek-style MLA fields: head_dim = qk nope + rope dims, one KV head per query head (the latent)."""
    nope, rope = int(_need(cfg, "qk_nope_head_dim", mt)), int(_need(cfg, "qk_rope_head_dim", mt))
    f.update(head_dim=nope + rope, rope_dim=rope, v_head_dim=int(_need(cfg, "v_head_dim", mt)))
    f.update(kv_lora_rank=int(_need(cfg, "kv_lora_rank", mt)), q_lora_rank=int(cfg.get("q_lora_rank") or 0))
    f["kv_heads"] = f["heads"]


def _mla_params(c: Mapping[str, Any]) -> Any:
    """q (direct, or q_a + norm + q_b), kv_a (latent + rope key), kv norm, kv_b, o."""
    d, hd, q_lora, kv_lora = c["d_model"], c["head_dim"], c["q_lora_rank"], c["kv_lora_rank"]
    q_out = c["heads"] * hd
    return (
        q_lora * (d + 1 + q_out)
        + (1 - c["q_lora_on"]) * d * q_out
        + d * (kv_lora + c["rope_dim"])
        + kv_lora
        + kv_lora * c["heads"] * (hd - c["rope_dim"] + c["v_head_dim"])
        + c["heads"] * c["v_head_dim"] * d
    )


def _check_mixer(a: Any) -> None:
    if a.kind_layers("mixer") and (a.mixer_in <= 0 or a.mixer_inner <= 0):
        raise bad("mixer_in", a.mixer_in, "conv/ssm/linear layers need mixer_in and mixer_inner > 0")


def _check_dense(a: Any) -> None:
    if a.first_dense > a.layers:
        raise bad("first_dense", a.first_dense, f"exceeds layers={a.layers}")
    if a.first_dense and a.dense_ffn <= 0:
        raise bad("dense_ffn", a.dense_ffn, "first_dense layers need a positive dense_ffn")


_MIXER = ("mixer_in", "mixer_inner", "mixer_state", "mixer_params", "mixer_flops")

for _kind in (
    LayerKind(
        "local", "local_layers", "mixer", "sliding-window attention", layer_types=("local",), columns=("window",),
        in_base=True, window="window", check=_check_local, hf_types={"sliding_attention": "local"},
        hf_fields=_window_from_hf, note=lambda a: f"(window {a.window})",
    ),
    LayerKind(
        "mla", "mla_layers", "mixer", "MLA", layer_types=("mla",),
        columns=("q_lora_rank", "q_lora_on", "kv_lora_rank", "rope_dim", "v_head_dim"),
        derived={"q_lora_on": lambda c: c["q_lora_rank"] > 0}, params=_mla_params,
        cache_token=lambda c: c["kv_lora_rank"] + c["rope_dim"], full_context=True, cache_replicated=True,
        check=_check_mla, hf_fields=_mla_from_hf,
    ),
    LayerKind(
        "mixer", "mixer_layers", "mixer", "conv/SSM", layer_types=("conv", "ssm", "linear"), columns=_MIXER,
        params=lambda c: c["d_model"] * c["mixer_in"] + c["mixer_inner"] * c["d_model"] + c["mixer_params"],
        cache_state=lambda c: c["mixer_state"], split=_MIXER, check=_check_mixer,
        hf_types={"conv": "conv", "mamba": "ssm", "linear_attention": "ssm"},
    ),
    LayerKind(
        "dense", "dense_layers", "ffn", "dense FFN", first="first_dense", columns=("dense_ffn",),
        params=lambda c: (2 + c["gated"]) * c["d_model"] * c["dense_ffn"], split=("dense_ffn",), check=_check_dense,
    ),
):  # fmt: skip
    register_layer_kind(_with_builtin(_kind))

#: The built-in kinds' stack columns (per-kind layer counts and kind parameters), in column order.
STACK_COLUMNS = stack_columns()
