"""Parallel layouts: how one model replica is spread over devices, and the per-device shapes that implies.

A layout string is comma-separated ``key=value`` items:

- ``tp=T``: tensor parallelism -- attention heads and FFN columns (every expert's, and the vocabulary of
  the embedding and LM head) split T ways; two all-reduces per layer. Beyond T = kv_heads each device keeps
  one whole KV head: the KV cache is **replicated** T/kv_heads times (MLA's latent is never split).
- ``ep=E`` (with ``dp_attn=A``, default A = E): expert parallelism -- each device holds experts/E experts;
  attention is data-parallel over A groups (each device serves batch/A sequences; attention TP = E·T/A
  inside a group); tokens reach their experts by an all-to-all (dispatch and combine). Uniform routing gives
  per-expert GEMM M = tokens·top_k/experts; the FFN runs at the busiest EP rank, whose expected routed pairs
  under uniform routing exceed the mean (:mod:`.routing`); ``imbalance=f`` (default 1.0: uniform routing) makes
  the busiest device process f times its share of routed tokens on top of that.
- ``pp=P``: pipeline parallelism -- contiguous layer stages; prefill is chunked (``chunk=N`` tokens per
  chunk, default 1024) and flows through the stages (bubble (P−1)/(chunks+P−1)); decode runs P micro-batches.
- ``dp=D``: D independent replicas (batch is per replica).
- ``helix=kvpK,tpepN``: Helix -- N devices; attention shards the KV cache along the sequence K ways and the
  heads N/K ways (N/K ≤ kv_heads); the same N devices then run the FFN as TP (dense) or EP (MoE) over N.

Devices = dp · pp · tp · ep (Helix: dp · pp · N).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ...errors import bad

KEYS = ("tp", "ep", "dp_attn", "pp", "dp", "helix", "chunk", "imbalance")


@dataclass(frozen=True)
class Layout:
    """Degrees of parallelism of one layout (see the module docstring)."""

    tp: int = 1
    ep: int = 1
    dp_attn: int = 0  # 0: default (= ep)
    pp: int = 1
    dp: int = 1
    kvp: int = 1  # Helix KV parallelism (sequence shards)
    helix: int = 0  # Helix group size N (0: not Helix)
    chunk: int = 1024  # prefill chunk (tokens) under pp
    imbalance: float = 1.0
    text: str = ""

    @property
    def attn_dp(self) -> int:
        """Data-parallel attention groups inside one TP/EP group."""
        if self.helix:
            return 1
        return self.dp_attn or self.ep

    @property
    def group(self) -> int:
        """Devices of one pipeline stage (the TP×EP or Helix group)."""
        return self.helix or self.tp * self.ep

    @property
    def tp_attn(self) -> int:
        """Ways the attention heads are split (Helix: N/kvp)."""
        return self.group // self.kvp // self.attn_dp if self.helix else self.group // self.attn_dp

    @property
    def devices(self) -> int:
        return self.dp * self.pp * self.group

    @property
    def trivial(self) -> bool:
        return self.devices == 1

    def describe(self) -> str:
        return self.text or "tp=1"


def _int(key: str, val: str, text: str) -> int:
    if not val.isdigit() or int(val) <= 0:
        raise bad("layout", text, f"{key}={val!r} must be a positive integer")
    return int(val)


def parse_layout(text: str) -> Layout:
    """``tp=8`` · ``ep=8,dp_attn=8`` · ``pp=4,tp=2`` · ``helix=kvp4,tpep8`` (+ ``dp=``, ``chunk=``, ``imbalance=``)."""
    text = str(text).strip()
    if not text:
        raise bad("layout", text, "is empty; e.g. tp=8, ep=8,dp_attn=8, pp=4,tp=2, helix=kvp4,tpep8")
    items: dict[str, str] = {}
    parts = [p.strip() for p in text.split(",")]
    i = 0
    while i < len(parts):
        key, eq, val = parts[i].partition("=")
        if not eq:
            raise bad("layout", text, f"item {parts[i]!r} is not key=value")
        if key == "helix" and i + 1 < len(parts) and "=" not in parts[i + 1]:
            val, i = f"{val},{parts[i + 1]}", i + 1  # helix=kvp4,tpep8
        if key not in KEYS:
            raise bad("layout", text, f"unknown key {key!r}; known: {', '.join(KEYS)}")
        if key in items:
            raise bad("layout", text, f"{key} given twice")
        items[key] = val.strip()
        i += 1
    kw: dict[str, object] = {}
    for key, val in items.items():
        if key == "imbalance":
            try:
                f = float(val)
            except ValueError:
                f = float("nan")
            if not (math.isfinite(f) and f >= 1.0):
                raise bad("layout", text, f"imbalance={val!r} must be a number >= 1 (1 = uniform routing)")
            kw["imbalance"] = f
        elif key == "helix":
            kvp, n = _helix(val, text)
            kw.update(kvp=kvp, helix=n)
        else:
            kw[key] = _int(key, val, text)
    lay = Layout(**kw, text=text)  # type: ignore[arg-type]
    if lay.helix and (lay.tp > 1 or lay.ep > 1 or lay.dp_attn):
        raise bad("layout", text, "helix sets its own TP/EP group (tpepN); do not combine it with tp, ep or dp_attn")
    if lay.dp_attn and lay.ep == 1:
        raise bad("layout", text, "dp_attn needs ep (data-parallel attention feeds the expert all-to-all)")
    if lay.dp_attn and lay.group % lay.dp_attn:
        raise bad("layout", text, f"dp_attn={lay.dp_attn} must divide the TP×EP group of {lay.group} devices")
    if "chunk" in items and lay.pp == 1:
        raise bad("layout", text, "chunk is the pipeline's prefill chunk; it needs pp > 1")
    return lay


def _helix(val: str, text: str) -> tuple[int, int]:
    a, _, b = val.partition(",")
    a, b = a.strip(), b.strip()
    if not (a.startswith("kvp") and b.startswith("tpep")):
        raise bad("layout", text, "helix takes kvpK,tpepN (e.g. helix=kvp4,tpep8)")
    kvp, n = _int("kvp", a[3:], text), _int("tpep", b[4:], text)
    if n % kvp:
        raise bad("layout", text, f"kvp={kvp} must divide tpep={n} (attention uses kvp × N/kvp devices)")
    return kvp, n


def with_degree(layout: Layout, **changes: int) -> Layout:
    return replace(layout, **changes, text="")


__all__ = ["KEYS", "Layout", "parse_layout", "with_degree"]
