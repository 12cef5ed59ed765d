"""Loop partitioning: a loop whose guards hold for all but its last iterations runs as two
loops, the first without those guards.

A split that does not divide leaves a guard (`T.where(i_0 * 6 + i_1 < 1024)`) around the body of
the tile's loops. Inside a register tile's reduction loop it keeps gcc from holding the tile in
registers (a 6x16 matmul tile ran 2x slower than with a dividing size). For a loop L with
constant bounds, each `if` (without `else`) in its body whose condition is affine in L and in
the variables of the constant-bound loops between L and the `if`, isl finds the values of L for
which the condition holds for every value of those loops. When they are the first iterations
[min, g) of L, L becomes two loops: [min, g) with those `if`s replaced by their bodies, and
[g, end) as before (a condition that holds in every iteration is just removed):

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

from sched.ir.functor import IRMutator, free_vars
from sched.ir.nodes import For, IfThenElse, IntImm, PrimFunc, SeqStmt, Stmt
from sched.polyhedral.isl_expr import to_isl_condition
from sched.polyhedral.names import isl_name

PARTITIONED_KINDS = ("serial", "parallel", "unrolled")


def partition_guarded_loops(func: PrimFunc) -> PrimFunc:
    """`func` with each loop whose guards fail only in its last iterations split in two (see
    the module doc)."""
    return dataclasses.replace(func, body=_Partitioner().visit(func.body))


class _Partitioner(IRMutator):
    def visit_For(self, loop: For):
        parts = _partition(loop)
        if parts is None:
            return self.visit_children(loop)
        if len(parts) == 1:
            return self.visit_children(parts[0])
        return SeqStmt(tuple(self.visit_children(part) for part in parts))


def _constant_bounds(loop: For) -> tuple[int, int] | None:
    if isinstance(loop.min, IntImm) and isinstance(loop.extent, IntImm):
        return loop.min.value, loop.min.value + loop.extent.value
    return None


def _guards(loop: For) -> list[tuple[IfThenElse, dict]]:
    """The `if`s without `else` in `loop`'s body whose condition uses `loop`'s variable and
    otherwise only variables of constant-bound loops between (each with those loops' bounds)."""
    found: list[tuple[IfThenElse, dict]] = []

    def walk(node, inner: dict) -> None:
        if isinstance(node, For):
            bounds = _constant_bounds(node)
            inner = {**inner, node.loop_var: bounds} if bounds is not None \
                else {**inner, node.loop_var: None}
            walk(node.body, inner)
            return
        if isinstance(node, IfThenElse) and node.else_body is None:
            used = set(free_vars(node.condition))
            if loop.loop_var in used and all(inner.get(v) is not None
                                             for v in used - {loop.loop_var}):
                found.append((node, {v: inner[v] for v in used - {loop.loop_var}}))
        if isinstance(node, SeqStmt):
            for stmt in node.stmts:
                walk(stmt, inner)
        elif isinstance(node, IfThenElse):
            walk(node.then_body, inner)
            if node.else_body is not None:
                walk(node.else_body, inner)
        elif hasattr(node, "body") and isinstance(node.body, Stmt):
            walk(node.body, inner)      # let, allocate
    walk(loop.body, {})
    return found


def _first_failure(loop: For, bounds: tuple[int, int], guard: IfThenElse,
                   inner: dict) -> int | None:
    """The first value g of the loop's variable for which the guard's condition fails for some
    values of the loops between: below g it holds for all (g = the end when it always holds);
    None when the condition is not affine."""
    condition = to_isl_condition(guard.condition)
    if condition is None:
        return None
    variable = isl_name(loop.loop_var)
    names = [variable] + [isl_name(v) for v in inner]
    ranges = [f"{bounds[0]} <= {variable} < {bounds[1]}"]
    ranges += [f"{low} <= {isl_name(v)} < {high}" for v, (low, high) in inner.items()]
    space = f"{{ [{', '.join(names)}] : {' and '.join(ranges)} }}"
    try:
        everything = isl.Set(space)
        holds = everything.intersect(isl.Set(
            f"{{ [{', '.join(names)}] : {condition} }}"))
        failing = everything.subtract(holds).project_out(isl.dim_type.set, 1, len(inner))
    except isl.Error:
        return None
    if failing.is_empty():
        return bounds[1]
    point = failing.lexmin().sample_point()
    return point.get_coordinate_val(isl.dim_type.set, 0).to_python()


def _partition(loop: For) -> list[For] | None:
    """The loops `loop` becomes (one: its always-true guards removed; two: the first part
    without the guards that hold there, then the rest as before), or None."""
    bounds = _constant_bounds(loop)
    if loop.kind not in PARTITIONED_KINDS or bounds is None or bounds[1] - bounds[0] < 2:
        return None
    firsts = []
    for guard, inner in _guards(loop):
        g = _first_failure(loop, bounds, guard, inner)
        if g is not None and g > bounds[0]:
            firsts.append((g, guard))
    if not firsts:
        return None
    split = min(g for g, _ in firsts)
    if split - bounds[0] < bounds[1] - split:
        return None          # most iterations need a guard: two loops would not pay
    removed = {id(guard) for _, guard in firsts}
    main = dataclasses.replace(loop, extent=IntImm(split - bounds[0], loop.extent.dtype),
                               body=_Unguarded(removed).visit(loop.body))
    if split == bounds[1]:
        return [main]
    rest = dataclasses.replace(loop, min=IntImm(split, loop.min.dtype),
                               extent=IntImm(bounds[1] - split, loop.extent.dtype))
    return [main, rest]


class _Unguarded(IRMutator):
    """Each `if` of `removed` (by identity) replaced by its body."""

    def __init__(self, removed: set[int]) -> None:
        self.removed = removed

    def visit_IfThenElse(self, node: IfThenElse):
        if id(node) in self.removed:
            return self.visit(node.then_body)
        return self.visit_children(node)
