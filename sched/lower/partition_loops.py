"""Loop partitioning: a loop whose guards hold for all but its last iterations runs as two
loops, the first without those guards.

A split that does not divide leaves a guard (`T.where(i_0 * 6 + i_1 < 1024)`) around the body of
the tile's loops. Inside a register tile's reduction loop it keeps gcc from holding the tile in
registers (a 6x16 matmul tile ran 2x slower than with a dividing size). For a loop L with
constant bounds, each conjunct of an `if` (without `else`) in its body that is affine in L and
in the variables of the constant-bound loops between L and the `if`, isl finds the values of L
for which it holds for every value of those loops. When they are the first iterations [min, g)
of L, L becomes two loops: [min, g) without those conjuncts (an `if` left with none is replaced
by its body), and [g, end) as before (a conjunct that holds in every iteration is just
removed):

    for i_0 in range(171):                      for i_0 in range(170):
        for k in range(1024):                       for k in range(1024):
            for i_1 in range(6):         ->             for i_1 in range(6):
                if i_0 * 6 + i_1 < 1024:                    C[...] += ...
                    C[...] += ...                   for i_0 in range(170, 171):
                                                        (as before)

Runs on the C target after the thread loops are emulated (a loop bound to a GPU thread is never
split) and before flattening; the two loops use the same variable in sibling scopes.
"""

from __future__ import annotations

import dataclasses

import islpy as isl

from sched.ir.functor import IRMutator, collect, free_vars
from sched.ir.nodes import (
    IMPURE_CALLS,
    AsyncCommit,
    AsyncWait,
    Barrier,
    BinaryOp,
    BufferStore,
    Call,
    Evaluate,
    Expr,
    For,
    IfThenElse,
    IntImm,
    PrimFunc,
    SeqStmt,
    Stmt,
    logical_and,
)
from sched.polyhedral.isl_expr import to_isl_condition
from sched.polyhedral.isl_text import first_point, read_set
from sched.polyhedral.names import isl_name

PARTITIONED_KINDS = ("serial", "parallel", "unrolled", "vectorized")


def partition_guarded_loops(func: PrimFunc) -> PrimFunc:
    """`func` with each loop whose guards fail only in its last iterations split in two (see
    the module doc)."""
    return dataclasses.replace(func, body=_Partitioner().visit(func.body))


class _Partitioner(IRMutator):
    def __init__(self) -> None:
        self.outer: dict = {}        # enclosing loop variable -> its constant bounds or None

    def visit_For(self, loop: For):
        parts = _partition(loop, self.outer) or [loop]
        visited = []
        for part in parts:
            saved = self.outer
            self.outer = {**saved, part.loop_var: _constant_bounds(part)}
            visited.append(self.visit_children(part))
            self.outer = saved
        return visited[0] if len(visited) == 1 else SeqStmt(tuple(visited))


def _constant_bounds(loop: For) -> tuple[int, int] | None:
    if isinstance(loop.min, IntImm) and isinstance(loop.extent, IntImm):
        return loop.min.value, loop.min.value + loop.extent.value
    return None


def _conjuncts(condition: Expr) -> list[Expr]:
    """`a and b and c` as [a, b, c] (the same objects each time)."""
    if isinstance(condition, BinaryOp) and condition.op == "and":
        return _conjuncts(condition.a) + _conjuncts(condition.b)
    return [condition]


def _guards(loop: For, outer: dict) -> list[tuple[IfThenElse, Expr, dict]]:
    """The conjuncts of the conditions of the `if`s without `else` in `loop`'s body that use
    `loop`'s variable and otherwise only variables of constant-bound loops (`outer` ones
    around it, or between it and the `if`), each with its `if` and those loops' bounds
    (`i_0 * 4 + i_1 < 250 and j_0 * 16 + j_1 < 130` gives the first to a loop `i_0` inside
    `j_0`; the second to `j_1` when `j_0` runs one constant value)."""
    found: list[tuple[IfThenElse, Expr, dict]] = []

    def walk(node, inner: dict) -> None:
        if isinstance(node, For):
            inner = {**inner, node.loop_var: _constant_bounds(node)}
            walk(node.body, inner)
            return
        if isinstance(node, IfThenElse) and node.else_body is None:
            for conjunct in _conjuncts(node.condition):
                used = set(free_vars(conjunct))
                if loop.loop_var in used and all(inner.get(v) is not None
                                                 for v in used - {loop.loop_var}):
                    found.append((node, conjunct,
                                  {v: inner[v] for v in used - {loop.loop_var}}))
        if isinstance(node, SeqStmt):
            for stmt in node.stmts:
                walk(stmt, inner)
        elif isinstance(node, IfThenElse):
            walk(node.then_body, inner)
            if node.else_body is not None:
                walk(node.else_body, inner)
        elif hasattr(node, "body") and isinstance(node.body, Stmt):
            walk(node.body, inner)      # let, allocate
    walk(loop.body, {v: b for v, b in outer.items() if v != loop.loop_var})
    return found


def _first_failure(loop: For, bounds: tuple[int, int], conjunct: Expr,
                   others: dict) -> tuple[int, bool] | None:
    """The first value g of the loop's variable for which `conjunct` fails for some values of
    the other loops it uses (`others`: their constant bounds): below g it holds for all of
    them (g = the end when it always holds); and whether from g on it holds for none (the `if`
    never runs there). None when it is not affine."""
    condition = to_isl_condition(conjunct)
    if condition is None:
        return None
    variable = isl_name(loop.loop_var)
    names = [variable] + [isl_name(v) for v in others]
    ranges = [f"{bounds[0]} <= {variable} < {bounds[1]}"]
    ranges += [f"{low} <= {isl_name(v)} < {high}" for v, (low, high) in others.items()]
    space = f"{{ [{', '.join(names)}] : {' and '.join(ranges)} }}"
    try:
        everything = isl.Set(space)
        holds = everything.intersect(isl.Set(
            f"{{ [{', '.join(names)}] : {condition} }}"))
        failing = everything.subtract(holds).project_out(isl.dim_type.set, 1, len(others))
        somewhere = holds.project_out(isl.dim_type.set, 1, len(others))
    except isl.Error:
        return None
    if failing.is_empty():
        return bounds[1], False
    point = first_point(failing)
    g = point.get_coordinate_val(isl.dim_type.set, 0).to_python()
    tail = read_set(f"{{ [{variable}] : {g} <= {variable} < {bounds[1]} }}")
    return g, somewhere.intersect(tail).is_empty()


# statements whose running matters, and opaque calls wherever they are (a let's value too:
# the rest of a loop whose extern calls were left out dropped them, audit helpers 150, 152)
_EFFECTS = (BufferStore, Barrier, Evaluate, AsyncCommit, AsyncWait)


def _partition(loop: For, outer: dict) -> list[For] | None:
    """The loops `loop` becomes (the first part without the conjuncts that hold there, then
    the rest as before, unless no guarded statement runs in it), or None."""
    bounds = _constant_bounds(loop)
    if loop.kind not in PARTITIONED_KINDS or bounds is None or bounds[1] - bounds[0] < 2:
        return None
    firsts = []
    for guard, conjunct, others in _guards(loop, outer):
        found = _first_failure(loop, bounds, conjunct, others)
        if found is not None and found[0] > bounds[0]:
            firsts.append((*found, guard, conjunct))
    if not firsts:
        return None
    split = min(g for g, _, _, _ in firsts)
    removed: dict[int, list[Expr]] = {}
    for _, _, guard, conjunct in firsts:
        removed.setdefault(id(guard), []).append(conjunct)
    main = dataclasses.replace(loop, extent=IntImm(split - bounds[0], loop.extent.dtype),
                               body=_Unguarded(removed).visit(loop.body))
    if split == bounds[1]:
        return [main]
    dead = {id(guard) for g, never, guard, _ in firsts if never and g == split}
    rest_body = _WithoutIfs(dead).visit(loop.body)
    if not any(collect(rest_body, kind) for kind in _EFFECTS) and not any(
            call.op in IMPURE_CALLS for call in collect(rest_body, Call)):
        return [main]        # nothing runs in the rest
    if split - bounds[0] < bounds[1] - split:
        return None          # most iterations need a guard: two loops would not pay
    rest = dataclasses.replace(loop, min=IntImm(split, loop.min.dtype),
                               extent=IntImm(bounds[1] - split, loop.extent.dtype))
    return [main, rest]


class _WithoutIfs(IRMutator):
    """Each `if` in `dead` (by identity, one that never runs) removed."""

    def __init__(self, dead: set[int]) -> None:
        self.dead = dead

    def visit_IfThenElse(self, node: IfThenElse):
        return SeqStmt(()) if id(node) in self.dead else self.visit_children(node)


class _Unguarded(IRMutator):
    """Each `if` in `removed` (by identity) without the conjuncts listed for it (replaced by
    its body when none is left)."""

    def __init__(self, removed: dict[int, list[Expr]]) -> None:
        self.removed = removed

    def visit_IfThenElse(self, node: IfThenElse):
        if id(node) not in self.removed:
            return self.visit_children(node)
        gone = self.removed[id(node)]
        kept = [c for c in _conjuncts(node.condition) if not any(c is g for g in gone)]
        body = self.visit(node.then_body)
        return IfThenElse(logical_and(*kept), body) if kept else body
