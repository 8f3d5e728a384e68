"""Parsing and checking the values a space file lists for each dimension (integers, floats, kv_heads,
MoE pairs, booleans), with the size limits of :mod:`.space`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..errors import bad

#: Most values one dimension may list (a range is sized before it is expanded).
MAX_VALUES = 100_000
#: Largest integer a dimension may hold (d_model, layers, vocab, ...; also ffn = r_single·d_model).
MAX_INT = 2**31 - 1


def int_list(key: str, value: Any) -> list[int]:
    if isinstance(value, Mapping):  # {start, stop, step}, stop inclusive
        try:
            start, stop, step = int(value["start"]), int(value["stop"]), int(value.get("step", 1))
        except (KeyError, TypeError, ValueError):
            raise bad(key, dict(value), "a range needs integer start, stop (inclusive) and optional step") from None
        if step <= 0:
            raise bad(key, dict(value), "step must be positive")
        n = max(0, (stop - start) // step + 1)
        if n > MAX_VALUES:
            raise bad(key, dict(value), f"range has {n:,} values; at most {MAX_VALUES:,} per dimension")
        value = list(range(start, stop + 1, step))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value:
        raise bad(key, value, "must be a non-empty list of positive integers")
    if len(value) > MAX_VALUES:
        raise bad(key, f"<{len(value):,} values>", f"at most {MAX_VALUES:,} values per dimension")
    out = []
    for v in value:
        if (
            isinstance(v, bool) or not isinstance(v, (int, float)) or not (0 < v <= MAX_INT)
            or not math.isfinite(v) or float(v) != int(v)
        ):  # fmt: skip
            raise bad(key, v, f"must be a positive integer ≤ {MAX_INT}")
        out.append(int(v))
    return sorted(set(out))


def float_list(key: str, value: Any) -> list[float]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value:
        raise bad(key, value, "must be a non-empty list of positive numbers")
    out = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (v > 0 and math.isfinite(v)):
            raise bad(key, v, "must be a positive number")
        out.append(float(v))
    return sorted(set(out))


def kv_list(value: Any) -> list[int | str]:
    if isinstance(value, (int, str)) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value:
        raise bad("kv_heads", value, 'must be a non-empty list of positive integers and/or "heads"')
    ints, mha = [], False
    for v in value:
        if v == "heads":
            mha = True
        elif isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise bad("kv_heads", v, 'must be a positive integer or "heads"')
        else:
            ints.append(v)
    return [*sorted(set(ints)), *(["heads"] if mha else [])]


def moe_list(value: Any) -> list[tuple[int, int]]:
    if not isinstance(value, (list, tuple)) or not value:
        raise bad("moe", value, "must be a non-empty list of [experts, top_k] pairs")
    out = []
    for p in value:
        if (
            not isinstance(p, (list, tuple))
            or len(p) != 2
            or any(isinstance(x, bool) or not isinstance(x, int) or not 0 < x <= MAX_INT for x in p)
        ):
            raise bad("moe", p, f"each entry must be [experts, top_k] with positive integers ≤ {MAX_INT}")
        out.append((int(p[0]), int(p[1])))
    return sorted(set(out))


def bool_list(key: str, value: Any) -> list[bool]:
    if isinstance(value, bool):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value or any(not isinstance(v, bool) for v in value):
        raise bad(key, value, "must be true/false or a list of them")
    return sorted(set(value))
