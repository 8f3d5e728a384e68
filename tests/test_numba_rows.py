"""The row kernel's statement order (demand order): same values as the generated order, shorter live ranges."""

from __future__ import annotations

import math

import numpy as np

from rooflaw.constraints.numba_rows import _assigned, _read, demand_order


def _program(rng: np.random.Generator, n: int) -> list[list[str]]:
    """A straight-line program like the generated cost model: temporaries first, then outputs that read them,
    with a reassigned name, an if/else block and an output read back by a later output."""
    st = [[f"t{j} = (a{j % 3} * {j + 1}.0) + b"] for j in range(n)]
    for j in range(n):
        terms = " + ".join(f"t{int(k)}" for k in rng.choice(n, size=3, replace=False))
        st.append([f"o{j} = ({terms}) * a{j % 3}"])
    st.append(["e = o0 + t1"])
    st.append(["if b > 0.5:", "    e = e * 2.0", "else:", "    e = e - t2"])
    st.append(["e = e + o1"])
    st.append([f"o{n} = e / (1.0 + o2)"])
    return st


def _run(stmts: list[list[str]], env: dict) -> dict:
    env = dict(env)
    exec("\n".join(ln for st in stmts for ln in st), {"math": math}, env)  # our own test program, not user input
    return env


def _max_live(stmts: list[list[str]]) -> int:
    """The most values defined and still to be read at any point of the program (stores end a value's life)."""
    last = {}
    for j, st in enumerate(stmts):
        for name in _read(st):
            last[name] = j
    live, most = set(), 0
    for j, st in enumerate(stmts):
        live |= _assigned(st)
        live = {v for v in live if last.get(v, -1) > j}
        most = max(most, len(live))
    return most


def test_demand_order_computes_the_same_values_with_fewer_live_temporaries():
    rng = np.random.default_rng(0)
    n = 40
    prog = _program(rng, n)
    stores = [[f"out{j} = o{j}"] for j in range(n + 1)]
    stmts = prog + stores
    order = demand_order(stmts, list(range(len(prog), len(stmts))))
    assert sorted(map(tuple, order)) == sorted(map(tuple, stmts))  # a permutation of whole statements
    for seed in range(5):
        env = dict(zip(("a0", "a1", "a2", "b"), np.random.default_rng(seed).random(4), strict=True))
        ref, got = _run(stmts, env), _run(order, env)
        assert all(ref[f"out{j}"] == got[f"out{j}"] for j in range(n + 1))
        assert ref["e"] == got["e"]
    # here 30 live values at most instead of 53: outputs no longer wait for the stores at the end
    assert _max_live(order) < 0.7 * _max_live(stmts)


def test_demand_order_keeps_write_after_read_order():
    # x is read by y before being reassigned: the reassignment must stay after the read, whatever the roots
    stmts = [["x = a + 1.0"], ["y = x * 2.0"], ["x = a - 1.0"], ["z = x * 3.0"], ["r = y + z"]]
    order = demand_order(stmts, [4])
    env = _run(order, {"a": 0.25})
    assert (env["y"], env["z"], env["r"]) == (2.5, -2.25, 0.25)
    assert order.index(["y = x * 2.0"]) < order.index(["x = a - 1.0"])
