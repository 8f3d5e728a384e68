"""Scheduling the generated kernels' statements from their syntax trees: what each reads and assigns (the
common-subexpression pairs' free symbols), the loop level each runs at, subexpressions hoisted to outer loops, and
which outputs need each statement. Pure functions of statement text; no numba."""

from __future__ import annotations

import ast
from typing import cast


def names(st: list[str]) -> tuple[set[str], set[str]]:
    """(names read, names assigned) by a statement, from its syntax tree (a subscripted store reads its array)."""
    reads: set[str] = set()
    writes: set[str] = set()
    for n in ast.walk(ast.parse("\n".join(st))):
        if isinstance(n, ast.Name):
            (writes if isinstance(n.ctx, ast.Store) else reads).add(n.id)
    return reads, writes


def levels(stmts: list[list[str]], level: dict[str, int]) -> list[int]:
    """The loop level of each statement: the deepest level of the names it reads (``level``: of the inputs)."""
    out = []
    for st in stmts:
        reads, writes = names(st)
        lv = max((level.get(n, 0) for n in reads), default=0)
        level.update(dict.fromkeys(writes, lv))
        out.append(lv)
    return out


def hoist(stmts: list[list[str]], level: dict[str, int]) -> list[list[str]]:
    """The same statements with each arithmetic subexpression whose inputs are known at an outer loop level than
    its statement's taken out into a statement of its own (``h<k> = …``), so it runs at that level. Only values
    are named: every operation, and its order, stays the same. (LLVM would hoist them itself, but not out of the
    run-time ``need`` branches.)"""
    out: list[list[str]] = []
    lv = lambda n: max((level.get(x.id, 0) for x in ast.walk(n) if isinstance(x, ast.Name)), default=0)  # noqa: E731

    class Hoist(ast.NodeTransformer):
        top = 0  # the statement's level

        def visit(self, n: ast.AST) -> ast.AST:
            if isinstance(n, (ast.BinOp, ast.UnaryOp, ast.Call)) and lv(n) < self.top:
                name = f"h{len(level)}"
                level[name] = lv(n)
                out.append([f"{name} = {ast.unparse(n)}"])
                return ast.Name(name, ast.Load())
            if isinstance(n, ast.Call):
                n.args = [cast(ast.expr, self.visit(a)) for a in n.args]
                return n
            return n if isinstance(n, (ast.IfExp, ast.BoolOp)) else super().visit(n)

    for st in stmts:
        tgt, eq, rhs = st[0].partition(" = ")
        if len(st) == 1 and eq and tgt.isidentifier():
            tree: ast.AST = ast.parse(rhs, mode="eval").body
            h = Hoist()
            h.top = lv(tree)
            if h.top:
                tree = h.visit(tree)
            level[tgt] = h.top
            out.append([f"{tgt} = {ast.unparse(tree)}"])
        else:
            reads, writes = names(st)
            level.update(dict.fromkeys(writes, max((level.get(n, 0) for n in reads), default=0)))
            out.append(st)
    return out


def guards(stmts: list[list[str]], roots: dict[str, int]) -> list[frozenset[int]]:
    """For each statement, the outputs that need it (``roots``: output variable -> its index; -1 for one that
    is always needed): the scan skips a statement at run time when none of its outputs is asked for."""
    rw = [names(st) for st in stmts]
    by = {w: j for j, (_, ws) in enumerate(rw) for w in ws}
    users: list[set[int]] = [set() for _ in stmts]
    for name, k in roots.items():
        todo = [by[name]]
        while todo:
            j = todo.pop()
            if k not in users[j]:
                users[j].add(k)
                todo += [by[n] for n in rw[j][0] if n in by and by[n] != j]
    return [frozenset(u) for u in users]
