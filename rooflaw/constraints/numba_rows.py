"""The vectorizable row kernel: every output of every row in one SIMD loop, for large tables.

The general row kernel (:func:`backend_numba._rows_source`) reads each column through a runtime stride and keeps
the ``x ** y`` memo of :mod:`.numba_printer` inside its loop, so LLVM cannot vectorize it. This variant is
generated for one *set of constant columns*: those are read once (their statements run once, before the loops),
the others are contiguous arrays. Rows go in blocks of :data:`BLOCK`: the memoised powers of a block are computed
in a first, scalar pass into a cache-resident scratch row; the main loop then has no stores but the outputs and no
calls, and LLVM vectorizes it across rows. Its statements are in demand order (:func:`demand_order`: each value
computed just before its first use, each output stored as soon as it is known): about the same instructions,
scheduled so that the kernel runs ~14 % faster. It performs the same scalar operations per row (``fastmath`` stays
off), so the values are bit-identical.

LLVM gives up vectorizing a loop whose arrays would need more than 8 run-time overlap checks (the kernel reads
tens of columns and writes 16 outputs), so :func:`allow_alias_checks` raises that limit once per process (an
LLVM option: more loops may get a vectorized version guarded by run-time checks; results do not change).
"""

from __future__ import annotations

import re
from collections.abc import Callable

_MEMO = re.compile(r"^(?:(t_pw\d+)_[xymh] =|if (t_pw\d+)_x == )")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DONE: list[bool] = []
#: Rows per block of the two passes: the first pass's memo values (8 bytes per row and site) and the block's
#: column reads stay in the L1/L2 cache until the main loop reads them again.
BLOCK = 1024


def allow_alias_checks() -> None:
    """Let LLVM's loop vectorizer emit enough run-time overlap checks for the row kernel (once per process)."""
    if _DONE:
        return
    import llvmlite.binding as llb

    llb.set_option("rooflaw", "-runtime-memory-check-threshold=4096")
    llb.set_option("rooflaw", "-vectorize-memory-check-threshold=8192")
    _DONE.append(True)


_TARGET = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=(?!=)")


def _assigned(st: list[str]) -> set[str]:
    """Names a statement assigns."""
    return {m.group(1) for ln in st if (m := _TARGET.match(ln))}


def _read(st: list[str]) -> set[str]:
    """Names a statement reads: every name but the target of an assignment line."""
    out: set[str] = set()
    for ln in st:
        m = _TARGET.match(ln)
        out.update(_NAME.findall(ln[m.end() :] if m else ln))
    return out


def demand_order(stmts: list[list[str]], roots: list[int]) -> list[list[str]]:
    """The same statements, each emitted just before the first statement that needs it (the ``roots`` in order,
    then anything left), so values are used soon after they are computed. Only the order of independent
    statements changes (every read-after-write, write-after-read and write-after-write order is kept), so each
    value is computed by the same operations."""
    writes = [_assigned(st) for st in stmts]
    reads = [_read(st) for st in stmts]
    deps: list[list[int]] = []
    for j in range(len(stmts)):
        deps.append([i for i in range(j) if writes[i] & (reads[j] | writes[j]) or reads[i] & writes[j]])
    done: set[int] = set()
    out: list[list[str]] = []

    def emit(j: int) -> None:
        stack = [(j, False)]
        while stack:
            k, ready = stack.pop()
            if k in done:
                continue
            if ready:
                done.add(k)
                out.append(stmts[k])
                continue
            stack.append((k, True))
            stack += [(d, False) for d in reversed(deps[k]) if d not in done]

    for r in roots:
        emit(r)
    for j in range(len(stmts)):
        emit(j)
    return out


def rows_vec_source(
    per_row: tuple[str, ...],
    const: tuple[str, ...],
    scalars: tuple[str, ...],
    body: list[str],
    init: list[str],
    n_out: int,
    params: tuple[str, ...],
    var: Callable[[str], str],
) -> tuple[list[str], int]:
    """(source, rows of ``tmp``) of ``rows(x, cx, w, p, out, mw, tmp)``: ``x`` the contiguous varying columns
    (``per_row`` minus ``const``, in order), ``cx`` the constant columns' values, ``w`` the scalars, ``p`` the
    energy parameters, ``mw`` the memo tables (see :func:`backend_numba._no_alloc`), ``tmp`` one row per memo
    site, filled by the first pass one block of ``tmp.shape[1]`` rows at a time (:data:`BLOCK`)."""
    from .backend_numba import _levels, _statements
    from .numba_printer import hash_only

    vary = tuple(a for a in per_row if a not in const)
    stmts = _statements(body)
    levels = _levels(stmts, {f"c_{a}": 1 for a in vary})
    memo = {}  # statement index -> memo site (t_pwK), for the memoised powers computed per row
    for j, (st, lv) in enumerate(zip(stmts, levels, strict=True)):
        m = _MEMO.match(st[0])
        if lv and m:
            memo[j] = m.group(1) or m.group(2)
    # the first pass: the memo statements and the per-row statements they read
    defs = {n: j for j, st in enumerate(stmts) if levels[j] for n in _assigned(st)}
    need, todo = set(), list(memo)
    while todo:
        j = todo.pop()
        if j in need:
            continue
        need.add(j)
        for ln in stmts[j]:
            for n in _NAME.findall(ln):
                if n in defs and defs[n] != j:
                    todo.append(defs[n])
    sites = sorted({t for j, t in memo.items() if stmts[j][0].startswith("if ")}, key=lambda t: int(t[4:]))
    once = [ln for st, lv in zip(stmts, levels, strict=True) if lv == 0 for ln in st]
    # the first pass in two variants, chosen block by block from how often the previous block's rows repeated
    # the first site's base: with the memo's last-value check (rows in order: ~3 ns/row for two sites), or the
    # table lookup alone (rows in no order, where the last-value branch mispredicts: ~7 instead of ~11 ns/row)
    first: list[str] = []
    for j, st in enumerate(stmts):
        if j in need:
            first += st
            if sites and f"{sites[0]}_x" in _assigned(st):  # count the rows that repeat the previous base
                first += [f"hit += 1 if {sites[0]}_x == px else 0", f"px = {sites[0]}_x"]
    first_hash = [ln for st in _statements(first) for ln in hash_only(st)]
    main = []
    for j, st in enumerate(stmts):
        if not levels[j]:
            continue
        if j in memo:
            if st[0].startswith("if "):  # the memo lookup itself: read the first pass's value
                main.append(f"{memo[j]} = {memo[j]}_a[j]")
            continue
        main += st
    load = [f"c_{a} = x{k}[i]" for k, a in enumerate(vary)]
    ind = lambda lines, n: [" " * n + ln for ln in lines]  # noqa: E731
    src = [
        "def rows(x, cx, w, p, out, mw, tmp):",
        f"    {', '.join(params)} = {', '.join(f'p[{k}]' for k in range(len(params)))}",
        *(f"    {var(a)} = w[{k}]" for k, a in enumerate(scalars)),
        *(f"    c_{a} = cx[{k}]" for k, a in enumerate(const)),
        *(f"    x{k} = x[{k}]" for k in range(len(vary))),
        *ind(init + once, 4),
        "    n = out.shape[1]",
        *(f"    {t}_a = tmp[{j}]" for j, t in enumerate(sites)),
    ]
    # block by block, so the first pass's memo values stay in cache (rows of ``tmp``) until the main loop reads
    # them; the row index is unsigned so that numba emits no negative-index wraparound, which would stop LLVM
    # vectorizing. The main loop's statements (column loads, cost model, output stores) are in demand order.
    src += [
        "    blk = tmp.shape[1]",
        *(["    hit = blk", "    px = math.nan"] if sites else []),  # the first block checks the last value
        "    for b0 in range(0, n, blk):",
        "        m = min(blk, n - b0)",
        "        u0 = np.uint64(b0)",
    ]
    if sites:
        keep = [f"{t}_a[j] = {t}" for t in sites]
        src += [
            "        if 2 * hit >= m:  # most rows repeated the previous base: check the last value first",
            "            hit = 0",
            "            for j in range(m):",
            "                i = u0 + np.uint64(j)",
            *ind(load + first + keep, 16),
            "        else:",
            "            hit = 0",
            "            for j in range(m):",
            "                i = u0 + np.uint64(j)",
            *ind(load + first_hash + keep, 16),
        ]
    stmts = _statements(load + main) + [[f"out[{k}, i] = o{k}"] for k in range(n_out)]
    order = demand_order(stmts, list(range(len(stmts) - n_out, len(stmts))))
    body_lines = [ln for st in order for ln in st]
    src += ["        for j in range(m):", "            i = u0 + np.uint64(j)", *ind(body_lines, 12)]
    return src, len(sites)
