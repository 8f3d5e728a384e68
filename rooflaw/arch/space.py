"""``Space``: a discrete architecture search space -- fixed value lists per dimension plus validity rules.

Dimensions (every one a fixed list; no range depends on another parameter):

- ``layers``, ``d_model``, ``head_dim``: integers (``heads = d_model / head_dim``);
- ``kv_heads``: integers and/or the token ``"heads"`` (= MHA, kv_heads = heads);
- ``moe``: (experts, top_k) pairs;
- ``r_single``: per-expert FFN ratio; ``ffn = max(ffn_align, round(r_single·d_model / ffn_align)·ffn_align)``
  (``ffn_align`` defaults to 64; the paper space's values are exact multiples of 128, so nothing is rounded there);
- ``vocab``, ``tied``: vocabulary size(s) and tied/untied embeddings;
- ``fixed``: constant columns for every point (``gated``, ``qkv_bias``, ``norms_per_layer``);
- layer patterns (optional): ``global_every`` -- every p-th layer has global attention and the others sliding-window
  attention (p = 1: all global; Gemma 3 is p = 6, a 5:1 local:global ratio), ``window`` -- the sliding windows. A
  pattern point has floor(layers/p) global layers (as Gemma's ``(i + 1) % p == 0`` rule gives).

Rules (a point is valid iff): ``head_dim`` divides ``d_model``; ``kv_heads`` divides ``heads`` (so ≤ heads);
``top_k ≤ experts``. Points that coincide after the rules (``kv_heads = 8`` and ``"heads"`` when heads = 8, two
ratios rounding to the same ffn) are counted once. The valid points are the Cartesian product of four small tables
-- valid widths (d_model, head_dim, heads, kv_heads, ffn), (experts, top_k), layers, (vocab, tied) -- so a point
is a mixed-radix index and any index range is generated in O(chunk) memory.

Built-ins (``rooflaw/arch/spaces/*.toml``): ``paper`` -- the paper's Table 5 with head_dim 128, r_single ∈ {0.5, 1, 2,
3, 4} (the paper does not state its FFN ratios; these cover its reported r < 1 optima up to the usual 4), vocab
32000, untied, gated (SwiGLU) FFN; ``wide`` -- finer widths, more depths/experts/ratios/head dims (> 10⁷ points).
"""

from __future__ import annotations

import copy
import math
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import RooflawError, bad
from .architecture import COLUMNS, Architecture
from .layer_kinds import LAYER_KINDS, kinds
from .space_values import MAX_INT, bool_list, float_list, int_list, kv_list, moe_list

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: Most (d_model, head_dim, kv_heads, r_single) combinations checked when the width table is built.
MAX_WIDTH_COMBINATIONS = 2_000_000
#: Most valid points a space may have (flat indices stay exact in int64 arithmetic).
MAX_POINTS = 10**15

#: Columns describing the width table, in order.
WIDTH_COLUMNS = ("d_model", "head_dim", "heads", "kv_heads", "ffn")
FIXED_KEYS = {"gated": 1, "qkv_bias": 0, "norms_per_layer": 2}
_KEYS = {
    "name",
    "description",
    "layers",
    "d_model",
    "head_dim",
    "kv_heads",
    "moe",
    "r_single",
    "ffn_align",
    "vocab",
    "tied",
    "fixed",
    "global_every",
    "window",
}
#: The layer kind a space's patterns (``global_every``, ``window``) mix in, and the columns they add to its points.
PATTERN_KIND = LAYER_KINDS["local"]
PATTERN_COLUMNS = ("attn_layers", *PATTERN_KIND.stack_columns, "ffn_layers")


def _same(value: Any, shape: tuple[int, ...]) -> np.ndarray:
    """One int64 value for every point: a read-only broadcast view (stride 0, no memory per point)."""
    return np.broadcast_to(np.int64(value), shape)


def _as(col: np.ndarray, dtype: Any) -> np.ndarray:
    """``col`` in ``dtype``; a broadcast column stays a broadcast view of its converted value."""
    if col.ndim and col.size and not any(col.strides):
        return np.broadcast_to(col.flat[0].astype(dtype), col.shape)
    return np.asarray(col).astype(dtype)


@dataclass
class Space:
    """A discrete architecture space. See the module docstring for dimensions and rules."""

    name: str
    layers: list[int]
    d_model: list[int]
    head_dim: list[int]
    kv_heads: list[int | str]
    moe: list[tuple[int, int]]
    r_single: list[float]
    ffn_align: int = 64
    vocab: list[int] = field(default_factory=lambda: [32000])
    tied: list[bool] = field(default_factory=lambda: [False])
    fixed: dict[str, int] = field(default_factory=dict)
    description: str = ""
    global_every: list[int] = field(default_factory=lambda: [1])
    window: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.layers = int_list("layers", self.layers)
        self.d_model = int_list("d_model", self.d_model)
        self.head_dim = int_list("head_dim", self.head_dim)
        self.kv_heads = kv_list(self.kv_heads)
        self.moe = moe_list(self.moe)
        self.r_single = float_list("r_single", self.r_single)
        self.vocab = int_list("vocab", self.vocab)
        self.tied = bool_list("tied", self.tied)
        self.global_every = int_list("global_every", self.global_every)
        self.window = int_list("window", self.window) if self.window else []
        if max(self.global_every) > 1 and not self.window:
            raise bad("window", self.window, "global_every > 1 needs a list of sliding windows")
        if isinstance(self.ffn_align, bool) or not isinstance(self.ffn_align, int) or not 0 < self.ffn_align <= MAX_INT:
            raise bad("ffn_align", self.ffn_align, f"must be a positive integer ≤ {MAX_INT}")
        fixed = dict(FIXED_KEYS)
        for k, v in (self.fixed or {}).items():
            if k not in FIXED_KEYS:
                raise bad("fixed", k, f"unknown fixed column; known: {', '.join(FIXED_KEYS)}")
            if isinstance(v, bool):
                v = int(v)
            if not isinstance(v, int) or v < 0:
                raise bad(f"fixed.{k}", v, "must be a non-negative integer or a boolean")
            fixed[k] = v
        self.fixed = fixed
        ffn_max = max(self.r_single) * max(self.d_model)
        if ffn_max > MAX_INT:
            why = f"gives ffn ≈ {ffn_max:.3g} at d_model {max(self.d_model)}, above {MAX_INT}"
            raise bad("r_single", max(self.r_single), why)
        combos = len(self.d_model) * len(self.head_dim) * len(self.kv_heads) * len(self.r_single)
        if combos > MAX_WIDTH_COMBINATIONS:
            raise bad("space", self.name, f"has {combos:,} width combinations; at most {MAX_WIDTH_COMBINATIONS:,}")
        self._build()
        if self.size > MAX_POINTS:
            raise bad("space", self.name, f"has {self.size:,} points; at most {MAX_POINTS:,}")

    # ---- construction ----------------------------------------------------------------------
    def ffn_for(self, d_model: Any, r_single: Any) -> Any:
        """Per-expert FFN size for a width and ratio (rounded to ``ffn_align``, at least ``ffn_align``)."""
        a = self.ffn_align
        return np.maximum(a, np.rint(np.asarray(r_single, dtype=float) * np.asarray(d_model) / a).astype(np.int64) * a)

    def kv_options(self, heads: int) -> list[int]:
        """Valid kv_heads values (resolved) for a head count, ascending."""
        vals = {heads if isinstance(k, str) else k for k in self.kv_heads}  # the one str is "heads" (kv_list)
        return sorted(v for v in vals if heads % v == 0)

    def _build(self) -> None:
        rows = set()
        for d in self.d_model:
            for hd in self.head_dim:
                if d % hd:
                    continue
                h = d // hd
                for kv in self.kv_options(h):
                    for r in self.r_single:
                        rows.add((d, hd, h, kv, int(self.ffn_for(d, r))))
        width = np.array(sorted(rows), dtype=np.int64).reshape(-1, len(WIDTH_COLUMNS))
        moe = np.array([p for p in self.moe if p[1] <= p[0]], dtype=np.int64).reshape(-1, 2)
        vt = np.array([(v, int(t)) for v in self.vocab for t in self.tied], dtype=np.int64).reshape(-1, 2)
        self._width, self._moe, self._layers, self._vt = width, moe, np.array(self.layers, dtype=np.int64), vt
        pat = [(p, w) for p in self.global_every for w in (self.window if p > 1 else [0])]
        self._pat = np.array(pat, dtype=np.int64).reshape(-1, 2)
        self._radix = (len(width), len(moe), len(self._layers), len(vt), len(pat))
        self._width_index = {tuple(int(x) for x in row): i for i, row in enumerate(width)}
        if self.size == 0:
            why = []
            if not len(width):
                why.append(
                    "no (d_model, head_dim, kv_heads) combination passes head_dim | d_model and kv_heads | heads"
                )
            if not len(moe):
                why.append("no (experts, top_k) pair has top_k ≤ experts")
            raise RooflawError(f"space {self.name!r} is empty after its rules: {'; '.join(why)}")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], name: str = "") -> Space:
        unknown = set(data) - _KEYS
        if unknown:
            raise bad("space", sorted(unknown)[0], f"unknown key; known: {', '.join(sorted(_KEYS))}")
        missing = [k for k in ("layers", "d_model", "head_dim", "kv_heads", "moe", "r_single") if k not in data]
        if missing:
            raise bad("space", missing[0], "missing required key")
        kw = {k: data[k] for k in data if k not in ("name",)}
        return cls(name=str(data.get("name", name) or name or "space"), **kw)

    @classmethod
    def from_toml(cls, path: str | Path) -> Space:
        from ..safe_io import exists

        p = Path(path)
        if not exists(p):
            raise bad("space", str(path), "no such built-in space or file; built-ins: " + ", ".join(list_spaces()))
        from ..safe_io import load

        data = load(p, "space", ".toml")
        return cls.from_mapping(data, name=p.stem)

    # ---- size and enumeration --------------------------------------------------------------
    @property
    def size(self) -> int:
        """Number of valid points."""
        return math.prod(int(n) for n in self._radix)  # Python ints: no int64 overflow

    def __len__(self) -> int:
        return self.size

    def columns_at(self, index: Any, dtype: Any = np.int64) -> dict[str, np.ndarray]:
        """Architecture columns (all of :data:`~rooflaw.arch.COLUMNS`, int64 by default) of points by flat index.

        Columns the space holds fixed (one value for every point) are read-only broadcast views of that value
        (stride 0: no memory per point, and the numba row kernel reads them once)."""
        idx = np.asarray(index, dtype=np.int64)
        nw, nm, nl, nv, npat = self._radix
        idx, ip = np.divmod(idx, npat)
        rest, iv = np.divmod(idx, nv)
        rest, il = np.divmod(rest, nl)
        iw, im = np.divmod(rest, nm)
        w = self._width[iw]
        n = idx.shape
        cols: dict[str, np.ndarray] = {"layers": self._layers[il]}
        for j, k in enumerate(WIDTH_COLUMNS):
            cols[k] = w[:, j] if w.ndim == 2 else w[j]
        cols["experts"] = self._moe[im, 0]
        cols["top_k"] = self._moe[im, 1]
        for j, k in enumerate(("vocab", "tied")):  # one value in the space: a constant column
            vt = self._vt[:, j]
            cols[k] = _same(vt[0], n) if (vt == vt[0]).all() else vt[iv]
        cols["shared_experts"] = _same(0, n)
        cols["shared_ffn"] = cols["ffn"]
        for k, v in self.fixed.items():
            cols[k] = _same(v, n)
        for k in ("layernorm", "qk_norm_size", "shared_gate", "qk_norm_on"):
            cols[k] = _same(0, n)
        cols["moe"] = (cols["experts"] > 1).astype(np.int64)
        keys: tuple[str, ...] = COLUMNS
        if self.has_patterns:
            every, cols["window"] = self._pat[ip, 0], self._pat[ip, 1]
            cols["local_layers"] = cols["layers"] - cols["layers"] // every
            cols["attn_layers"] = cols["ffn_layers"] = cols["layers"]
            keys = COLUMNS + PATTERN_COLUMNS
        if dtype is not np.int64:
            return {k: _as(cols[k], dtype) for k in keys}
        return {k: cols[k] for k in keys}

    def index_tables(self, dtype: Any = np.float64) -> list[dict[str, np.ndarray]]:
        """The columns of the points along each axis of the flat index (a mixed radix, slowest axis first: width
        rows, (experts, top_k) pairs, layer counts, (vocab, tied) pairs, layer patterns), every other axis at its
        first value: ``len(tables[a]["layers"])`` is axis ``a``'s size, and a column that varies along one axis
        only is, at any point, that axis's table row at the point's digit."""
        strides = [math.prod(self._radix[a + 1 :]) for a in range(len(self._radix))]
        return [self.columns_at(np.arange(n) * st, dtype) for n, st in zip(self._radix, strides, strict=True)]

    @property
    def has_patterns(self) -> bool:
        """Whether the space searches layer patterns (some points have sliding-window layers)."""
        return bool(np.any(self._pat[:, 0] > 1))

    def iter_chunks(
        self, chunk: int = 1 << 18, start: int = 0, stop: int | None = None, dtype: Any = np.int64
    ) -> Iterator[dict[str, np.ndarray]]:
        """Columns of the points ``start … stop-1`` (default: all), ``chunk`` points at a time."""
        stop = self.size if stop is None else min(stop, self.size)
        if chunk <= 0:
            raise bad("chunk", chunk, "must be positive")
        for s in range(start, stop, chunk):
            yield self.columns_at(np.arange(s, min(s + chunk, stop), dtype=np.int64), dtype)

    def to_frame(self, max_size: int = 5_000_000) -> pd.DataFrame:
        """Every point as a DataFrame (architecture columns + r, rho, gqa). For small spaces only."""
        if self.size > max_size:
            raise bad("space", self.name, f"has {self.size:,} points; to_frame is for ≤ {max_size:,} (use iter_chunks)")
        df = pd.DataFrame(self.columns_at(np.arange(self.size)))
        return add_paper_variables(df)

    def values(self, dim: str) -> list[Any]:
        """The declared values of a dimension (``moe`` gives (E, K) pairs; ``heads`` the valid head counts)."""
        if dim in ("layers", "d_model", "head_dim", "kv_heads", "moe", "r_single", "vocab", "tied", "global_every",
                   "window"):  # fmt: skip
            return list(getattr(self, dim))
        if dim in ("experts", "top_k"):
            return sorted({int(x) for x in self._moe[:, 0 if dim == "experts" else 1]})
        if dim in ("heads", "ffn"):
            return sorted({int(x) for x in self._width[:, WIDTH_COLUMNS.index(dim)]})
        raise bad(
            "dim",
            dim,
            "unknown dimension; known: layers, d_model, head_dim, kv_heads, moe, experts, top_k, "
            "r_single, ffn, heads, vocab, tied",
        )

    def bounds(self) -> dict[str, tuple[float, float]]:
        """Continuous bounds of the paper's variables over the valid points: l, d, r, rho, gqa."""
        w, m = self._width.astype(float), self._moe.astype(float)
        ratio = w[:, 4] / w[:, 0]
        gqa = w[:, 2] / w[:, 3]
        k, rho = m[:, 1], m[:, 1] / m[:, 0]
        return {
            "l": (float(self._layers.min()), float(self._layers.max())),
            "d": (float(w[:, 0].min()), float(w[:, 0].max())),
            "r": (float(ratio.min() * k.min()), float(ratio.max() * k.max())),
            "rho": (float(rho.min()), float(rho.max())),
            "gqa": (float(gqa.min()), float(gqa.max())),
        }

    def contains(self, arch: Architecture) -> bool:
        """Whether ``arch`` is one of the space's points."""
        c = arch.columns()
        if c["layers"] not in self.layers or (c["experts"], c["top_k"]) not in {tuple(p) for p in self._moe.tolist()}:
            return False
        if (c["vocab"], c["tied"]) not in {tuple(p) for p in self._vt.tolist()}:
            return False
        if tuple(c[k] for k in WIDTH_COLUMNS) not in self._width_index:
            return False
        never = any(c[k.count] for k in kinds() if k.name != PATTERN_KIND.name)  # a kind no point holds
        if never or c["shared_experts"] or c["layernorm"] or c["qk_norm_size"] or c["shared_gate"]:
            return False
        local = c["local_layers"]
        ok = [
            (p, w)
            for p, w in self._pat.tolist()
            if c["layers"] - c["layers"] // p == local and (not local or w == c["window"])
        ]
        if not ok:
            return False
        return all(c[k] == v for k, v in self.fixed.items())

    def architecture(self, row: Mapping[str, Any], name: str = "") -> Architecture:
        """An ``Architecture`` from one row of columns (a dict, Series or DataFrame row)."""
        g = lambda k: int(row[k])  # noqa: E731
        pattern: dict[str, Any] = {}
        if "local_layers" in row and g("local_layers") > 0:
            layers, n_global = g("layers"), g("layers") - g("local_layers")
            every = layers // n_global if n_global else layers + 1  # a representative order with these counts
            pattern = {"layer_types": tuple("global" if (i + 1) % every == 0 else "local" for i in range(layers)),
                       "window": g("window")}  # fmt: skip
        return Architecture(
            layers=g("layers"),
            d_model=g("d_model"),
            heads=g("heads"),
            kv_heads=g("kv_heads"),
            head_dim=g("head_dim"),
            ffn=g("ffn"),
            experts=g("experts"),
            top_k=g("top_k"),
            vocab=g("vocab") if "vocab" in row else self.vocab[0],
            tied=bool(g("tied")) if "tied" in row else self.tied[0],
            gated=bool(self.fixed["gated"]),
            qkv_bias=bool(self.fixed["qkv_bias"]),
            norms_per_layer=self.fixed["norms_per_layer"],
            name=name,
            **pattern,
        )

    # ---- search parametrisation -------------------------------------------------------------
    def choices(self) -> dict[str, list[Any]]:
        """Fixed per-dimension choices a sampler draws from (see :meth:`point`)."""
        ds = sorted({int(x) for x in self._width[:, 0]})
        return {
            "layers": list(self.layers),
            "d_model": ds,
            "head_dim": sorted({int(x) for x in self._width[:, 1]}),
            "kv_heads": list(self.kv_heads),
            "moe": [tuple(int(x) for x in p) for p in self._moe.tolist()],
            "r_single": list(self.r_single),
            "vocab_tied": [tuple(int(x) for x in p) for p in self._vt.tolist()],
            "pattern": [tuple(int(x) for x in p) for p in self._pat.tolist()],
        }

    def point(self, choice: Mapping[str, Any]) -> dict[str, int]:
        """The valid point nearest to a per-dimension choice (values from :meth:`choices`).

        Repairs an invalid combination deterministically: a head_dim that does not divide d_model becomes the
        nearest (in log scale) one that does; a kv_heads that does not divide heads becomes the nearest valid one
        (ties: fewer kv heads). Returns the point's columns and its flat ``index``.
        """
        d, hd = int(choice["d_model"]), int(choice["head_dim"])
        hds = [h for h in self.head_dim if d % h == 0 and self.kv_options(d // h)]
        if not hds:
            raise bad("d_model", d, f"no head_dim of {self.head_dim} gives a valid width")
        if hd not in hds:
            hd = min(hds, key=lambda h: (abs(math.log(h / hd)), h))
        heads = d // hd
        kv = choice["kv_heads"]
        kv = heads if kv == "heads" else int(kv)
        opts = self.kv_options(heads)
        if kv not in opts:
            kv = min(opts, key=lambda v: (abs(math.log(v / kv)), v))
        ffn = int(self.ffn_for(d, float(choice["r_single"])))
        e, k = (int(x) for x in choice["moe"])
        v, t = (int(x) for x in choice.get("vocab_tied", tuple(self._vt[0])))
        iw = self._width_index.get((d, hd, heads, kv, ffn))
        if iw is None:  # an aligned space (see aligned) lacks this ffn: the nearest one it has (ties: smaller)
            w = self._width
            rows = np.flatnonzero((w[:, 0] == d) & (w[:, 1] == hd) & (w[:, 3] == kv))
            iw = int(min(rows, key=lambda i: (abs(math.log(w[i, 4] / ffn)), w[i, 4])))
        im = int(np.flatnonzero((self._moe[:, 0] == e) & (self._moe[:, 1] == k))[0])
        il = int(np.flatnonzero(self._layers == int(choice["layers"]))[0])
        iv = int(np.flatnonzero((self._vt[:, 0] == v) & (self._vt[:, 1] == t))[0])
        pe, pw = (int(x) for x in choice.get("pattern", tuple(self._pat[0])))
        ip = int(np.flatnonzero((self._pat[:, 0] == pe) & (self._pat[:, 1] == pw))[0])
        nw, nm, nl, nv, npat = self._radix
        index = (((iw * nm + im) * nl + il) * nv + iv) * npat + ip
        cols = {k2: int(v2[0]) for k2, v2 in self.columns_at(np.array([index])).items()}
        cols["index"] = int(index)
        return cols

    def aligned(self, align: int) -> Space:
        """The points whose ``d_model`` and ``ffn`` are multiples of ``align`` (hardware alignment), as a space of
        its own with the same name and rules; ``self`` when every point already is. Raises ``RooflawError`` naming
        ``align`` when no point is."""
        w = self._width
        keep = aligned_mask(w[:, 0], w[:, 4], align)
        if keep.all():
            return self
        if not keep.any():
            ffn = sorted({int(x) for x in w[:, 4]})
            ffn_text = ", ".join(map(str, ffn[:8])) + (", …" if len(ffn) > 8 else "")
            raise bad("align", align, f"no point of space {self.name!r} has d_model and ffn multiples of it "
                      f"(d_model {self.d_model}, ffn [{ffn_text}])")  # fmt: skip
        out = copy.copy(self)
        out._width = w[keep]
        out._radix = (len(out._width), *self._radix[1:])
        out._width_index = {tuple(int(x) for x in row): i for i, row in enumerate(out._width)}
        kept = {int(x) for x in out._width[:, 0]}
        out.d_model = [d for d in self.d_model if d in kept]
        return out

    def describe(self) -> str:
        kv = ", ".join(str(k) for k in self.kv_heads)
        return (
            f"space {self.name!r}: {self.size:,} valid points; layers {self.layers[0]}…{self.layers[-1]} "
            f"({len(self.layers)}), d_model {self.d_model[0]}…{self.d_model[-1]} ({len(self.d_model)}), head_dim "
            f"{self.head_dim}, kv_heads {{{kv}}}, (E,K) {self.moe}, r_single {self.r_single}, ffn_align "
            f"{self.ffn_align}, vocab {self.vocab}, tied {self.tied}"
            + (f", global every {self.global_every} layers, window {self.window}" if self.has_patterns else "")
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "size": self.size,
            "layers": self.layers,
            "d_model": self.d_model,
            "head_dim": self.head_dim,
            "kv_heads": self.kv_heads,
            "moe": [list(p) for p in self.moe],
            "r_single": self.r_single,
            "ffn_align": self.ffn_align,
            "vocab": self.vocab,
            "tied": self.tied,
            "fixed": self.fixed,
            "description": self.description,
            **({"global_every": self.global_every, "window": self.window} if self.has_patterns else {}),
        }


def aligned_mask(d_model: Any, ffn: Any, align: int) -> np.ndarray:
    """Which (d_model, ffn) pairs are both multiples of ``align``."""
    return (np.mod(d_model, align) == 0) & (np.mod(ffn, align) == 0)


def add_paper_variables(df: pd.DataFrame) -> pd.DataFrame:
    """Add the paper's r = top_k·ffn/d_model, rho = top_k/experts and gqa = heads/kv_heads to a table."""
    df["r"] = df["top_k"] * df["ffn"] / df["d_model"]
    df["rho"] = df["top_k"] / df["experts"]
    df["gqa"] = df["heads"] / df["kv_heads"]
    return df


def list_spaces() -> list[str]:
    """Names of the built-in spaces."""
    base = resources.files("rooflaw.arch") / "spaces"
    return sorted(p.name[:-5] for p in base.iterdir() if p.name.endswith(".toml"))


_CACHE: dict[str, Space] = {}


def get_space(name_or_path: str | Path | Space) -> Space:
    """A built-in space by name (``paper``, ``wide``), or a space TOML file."""
    if isinstance(name_or_path, Space):
        return name_or_path
    key = str(name_or_path)
    if key in list_spaces():
        if key not in _CACHE:
            res = resources.files("rooflaw.arch") / "spaces" / f"{key}.toml"
            _CACHE[key] = Space.from_mapping(tomllib.loads(res.read_text(encoding="utf-8")), name=key)
        return _CACHE[key]
    return Space.from_toml(key)
