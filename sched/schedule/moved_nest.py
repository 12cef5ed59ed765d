"""The new loops of a block compute_at or reverse_compute_at moves (compute_at.py): one
loop per iteration variable over the range `_iteration_ranges` found, the binding `min + ax`,
and the guards that keep the new loops to the block's instances: its domain, the range of the
old loop that bound a variable (`for ax0 in range(9): v0 = ax0` over a domain of 17), and the
block's own predicate.

    for ax0 in range(9):                       for i_0 in range(5):
        A_global[ax0] = A[ax0]                     for ax0_1 in range(2):
    for i_0, i_1 in T.grid(5, 4):      ->              T.where(i_0 * 4 // 2 + ax0_1 < 9)
        C[...] = A_global[vi // 2]                     A_global[...] = A[...]
                                                   for i_1 in range(4): C[...] = ...
"""

from __future__ import annotations

import dataclasses

from sched.ir.functor import free_vars, substitute
from sched.ir.nodes import (
    TRUE,
    BinaryOp,
    BlockRealize,
    Cast,
    Expr,
    For,
    IntImm,
    PrimFunc,
    Range,
    Stmt,
    Var,
    is_constant,
    logical_and,
)
from sched.ir.simplify import simplify
from sched.schedule.needed_region import guards
from sched.schedule.state import enclosing_loops, fresh_name


def _as_dtype(value: Expr, dtype: str) -> Expr:
    """`value` as an expression of the integer type `dtype` (a constant of it, or a cast)."""
    if value.dtype == dtype:
        return value
    if isinstance(value, IntImm):
        return IntImm(value.value, dtype)
    return Cast(dtype, value)


def new_nest(func: PrimFunc, realize: BlockRealize, loop: For, ranges,
              preserve_unit_loops: bool) -> Stmt:
    """The moved block's new loops (`ax0`, `ax1`...) and bindings `min + ax`, guarded where
    a range may leave the iteration domain."""
    outer = [*enclosing_loops(func, loop), loop]
    new_loops: list[tuple[Var, Expr]] = []
    values, conditions, taken = [], [], set()
    for iv, (low, extent, boxed) in zip(realize.block.iter_vars, ranges):
        if is_constant(extent, 1) and not preserve_unit_loops:
            value = _as_dtype(low, iv.var.dtype)     # T.int64(0) for an int64 variable
        else:
            # the loop's variable in its extent's dtype (an int64 one over T.min(T.int64(5),
            # n) was int32: a loop TVM refuses, printed as one that reads back int64: helper-115)
            var = Var(fresh_name(func, f"ax{len(new_loops)}", taken), extent.dtype)
            new_loops.append((var, extent))
            value = var if is_constant(low, 0) else simplify(low + var)
        values.append(value)
        if boxed:
            conditions += guards(value, low, extent, iv.dom, outer)
            bound_by = _loop_binding(func, realize, iv)
            if bound_by is not None:
                conditions += guards(value, low, extent, bound_by, outer)
    carried = _carried_predicate(func, realize, values)
    if carried is not None:
        conditions.append(carried)
    predicate = logical_and(*conditions) if conditions else TRUE
    stmt: Stmt = dataclasses.replace(realize, iter_values=tuple(values), predicate=predicate)
    for var, extent in reversed(new_loops):
        stmt = For(var, IntImm(0, extent.dtype), extent, "serial", stmt)
    return stmt


def _loop_binding(func: PrimFunc, realize: BlockRealize, iv) -> Range | None:
    """The range of the loop that binds `iv` as is or shifted (`v0 = ax0 + 3`), where it
    runs less than the variable's domain and its bounds are constants or symbolic dims: the
    block's instances, which its new loops keep (a cache_read of the 9 elements of A that
    `A[vi // 2]` reads over 17 runs `for ax0 in range(9)` over a domain of 17: a tile reading
    A[8] and its box A[8:10] would run the copy of A[9], an instance it never ran, and the
    move was refused: audit helper-110)."""
    value = realize.iter_values[realize.block.iter_vars.index(iv)]
    allowed = set(func.symbolic_vars) | {p for p in func.params if isinstance(p, Var)}
    for loop in enclosing_loops(func, realize):
        # `v0 = ax0` or `v0 = ax0 + 3` (a copy of rows 3 to 11: audit helper-117)
        offset = _offset(value, loop.loop_var)
        if offset is None or not set(free_vars(offset)) <= allowed:
            continue
        bound = Range(simplify(loop.min + offset), loop.extent)
        if bound == iv.dom or not set(free_vars(bound.min)) | set(
                free_vars(bound.extent)) <= allowed:
            return None
        return bound
    return None


def _offset(value: Expr, var: Var) -> Expr | None:
    """`c` where `value` is `var + c` (`var`, `c + var`, `var - c`), else None."""
    if value is var:
        return IntImm(0, var.dtype)
    if isinstance(value, BinaryOp) and value.op in ("add", "sub") and value.a is var:
        return value.b if value.op == "add" else simplify(-value.b)
    if isinstance(value, BinaryOp) and value.op == "add" and value.b is var:
        return value.a
    return None


def _carried_predicate(func: PrimFunc, realize: BlockRealize, values: list[Expr]):
    """The block's own predicate (`T.where`, e.g. the guard of a split that does not divide)
    for its new loops, or None: every loop variable it uses must be bound to an iteration
    variable as is (`vk = k`), and is replaced by that variable's new value; symbolic dims and
    scalar parameters stay. (The moved block runs the instances its consumers need; without
    its predicate it would run some its domain excludes, and the move would be refused.)"""
    if realize.predicate == TRUE:
        return None
    new_value = {value: values[k] for k, value in enumerate(realize.iter_values)
                 if isinstance(value, Var)}
    allowed = set(func.symbolic_vars) | {p for p in func.params if isinstance(p, Var)}
    mapping = {}
    for var in free_vars(realize.predicate):
        if var in new_value:
            mapping[var] = new_value[var]
        elif var not in allowed:
            return None
    return substitute(realize.predicate, mapping)
