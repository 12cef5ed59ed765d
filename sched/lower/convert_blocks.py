"""Block conversion: from block IR to loop IR, with no BlockRealize or Block left.

Runs after `lower_reduction_init` (it requires blocks without init) and before
`flatten_buffers` (which turns the `Allocate`s it makes into one-dimensional arrays).
"""

from __future__ import annotations

import dataclasses

from sched.ir.builders import widen
from sched.ir.dtype import bits, is_int
from sched.ir.functor import IRMutator, substitute
from sched.ir.intervals import interval, loop_values, parameter_ranges
from sched.ir.nodes import (
    Allocate,
    BlockRealize,
    BufferLoad,
    BufferStore,
    Cast,
    Evaluate,
    Expr,
    For,
    IfThenElse,
    IntImm,
    PrimFunc,
    Stmt,
    Var,
)


def _is_true(expr) -> bool:
    return isinstance(expr, IntImm) and expr.dtype == "bool" and expr.value == 1


class _BlockConverter(IRMutator):
    def __init__(self, func: PrimFunc) -> None:
        # the values of the loop variables, symbolic dims and scalar parameters, for
        # `interval` (as lower/wide_integers.py bounds them)
        self.ranges = parameter_ranges(func)

    def visit_For(self, node: For) -> Stmt:
        found = loop_values(node.min, node.extent, self.ranges)
        saved = self.ranges.get(node.loop_var)
        if found is not None:
            self.ranges[node.loop_var] = found[0]
        else:
            self.ranges.pop(node.loop_var, None)
        body = self.visit(node.body)
        if saved is None:
            self.ranges.pop(node.loop_var, None)
        else:
            self.ranges[node.loop_var] = saved
        return node if body is node.body else dataclasses.replace(node, body=body)

    def visit_BlockRealize(self, realize: BlockRealize) -> Stmt:
        block = realize.block
        assert block.init is None, (
            f"convert_blocks_to_loops: block '{block.name}' still has an init; "
            f"run lower_reduction_init first")
        # the bindings of blocks inside use this block's variables: their domains bound them
        # (audit helper-109: a blockized block's `(v_o * 256 + f_1) // 46341` had no range)
        saved = dict(self.ranges)
        for iv in block.iter_vars:
            found = loop_values(iv.dom.min, iv.dom.extent, self.ranges)
            if found is not None:
                self.ranges[iv.var] = found[0]
        body: Stmt = self.visit(block.body)
        self.ranges = saved
        for buffer in reversed(block.alloc_buffers):
            body = Allocate(buffer, body)
        values = zip(block.iter_vars, realize.iter_values, strict=True)
        # an int64 variable bound to int32 index arithmetic takes its exact value, as the
        # model reads it (audit helper-113: `vi = T.axis.spatial(T.int64(2**33), i * 2**30)`
        # was the int32 product widened, and wrote C[-2])
        binding = {iv.var: widen(value, iv.var.dtype, keep_casts=True)
                   if _widening(value, iv.var) else value for iv, value in values}
        # a binding whose arithmetic may pass int32 (`f_0 * 256 + f_1` over more than 2**31
        # iterations) is exact where indices, bounds and conditions use it (the lowering
        # widens index arithmetic), but stored values keep int32 arithmetic: there the block
        # variable is its value computed in 64 bits (audit helpers 103 and 107: a mask
        # `j <= i` wrong past row 46340)
        data = {var: Cast(var.dtype, widen(value)) for var, value in binding.items()
                if var.dtype == "int32" and _may_overflow(value, self.ranges)}
        if data:
            body = _DataSubstituter(data).visit(body)
        body = substitute(body, binding)
        if not _is_true(realize.predicate):
            body = IfThenElse(realize.predicate, body)
        return body


def _widening(value: Expr, var: Var) -> bool:
    """Whether integer `value` binds a wider integer variable (int32 arithmetic to int64)."""
    return is_int(value.dtype) and is_int(var.dtype) and bits(var.dtype) > bits(value.dtype)


def _may_overflow(value, ranges: dict) -> bool:
    """Whether the int32 arithmetic of binding `value` may leave int32, as far as `interval`
    can tell: an unbounded binding may (its 64-bit value is the same where it fits)."""
    found = interval(value, ranges)
    return found is None or found[1]


class _DataSubstituter(IRMutator):
    """Substitutes block variables in what stores write and calls are passed, not in the
    indices of the loads there."""

    def __init__(self, mapping: dict) -> None:
        self.mapping = mapping
        self.data = False

    def visit_BufferStore(self, node: BufferStore) -> Stmt:
        saved, self.data = self.data, True
        value = self.visit(node.value)
        self.data = saved
        return node if value is node.value else dataclasses.replace(node, value=value)

    def visit_Evaluate(self, node: Evaluate) -> Stmt:
        saved, self.data = self.data, True
        value = self.visit(node.value)
        self.data = saved
        return node if value is node.value else dataclasses.replace(node, value=value)

    def visit_BufferLoad(self, node: BufferLoad):
        saved, self.data = self.data, False
        indices = tuple(self.visit(i) for i in node.indices)
        self.data = saved
        return node if indices == node.indices else dataclasses.replace(node, indices=indices)

    def visit_Var(self, node: Var):
        return self.mapping.get(node, node) if self.data else node


def convert_blocks_to_loops(func: PrimFunc) -> PrimFunc:
    """`func` as plain loops: each block replaced by its body.

    Requires: no block has an `init` (run `lower_reduction_init` first).

    Each `BlockRealize` becomes its block's body with the iteration variables replaced by
    their bound values, inside `Allocate(buffer, ...)` for each buffer the block allocates
    (the root block's intermediate buffers, cache buffers of scheduled blocks; the first
    allocated buffer is the outermost), and inside `if predicate:` when the predicate is not
    `True`. Block names, regions and annotations are dropped.

    Later passes may rely on: no `BlockRealize`/`Block` node; every buffer that is not a
    parameter is allocated by an enclosing `Allocate`; every variable is a loop variable,
    a let variable, a scalar parameter or a symbolic dim.
    """
    body = _BlockConverter(func).visit(func.body)
    return func if body is func.body else dataclasses.replace(func, body=body)
