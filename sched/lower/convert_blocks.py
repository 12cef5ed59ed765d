"""Block conversion: from block IR to loop IR, with no BlockRealize or Block left.

Runs after `lower_reduction_init` (it requires blocks without init) and before
`flatten_buffers` (which turns the `Allocate`s it makes into one-dimensional arrays).
"""

from __future__ import annotations

import dataclasses

from sched.ir.functor import IRMutator, substitute
from sched.ir.nodes import Allocate, BlockRealize, IfThenElse, IntImm, PrimFunc, Stmt


def _is_true(expr) -> bool:
    return isinstance(expr, IntImm) and expr.dtype == "bool" and expr.value == 1


class _BlockConverter(IRMutator):
    def visit_BlockRealize(self, realize: BlockRealize) -> Stmt:
        block = realize.block
        assert block.init is None, (
            f"convert_blocks_to_loops: block '{block.name}' still has an init; "
            f"run lower_reduction_init first")
        body: Stmt = self.visit(block.body)
        for buffer in reversed(block.alloc_buffers):
            body = Allocate(buffer, body)
        values = zip(block.iter_vars, realize.iter_values, strict=True)
        binding = {iv.var: value for iv, value in values}
        body = substitute(body, binding)
        if not _is_true(realize.predicate):
            body = IfThenElse(realize.predicate, body)
        return body


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
    body = _BlockConverter().visit(func.body)
    return func if body is func.body else dataclasses.replace(func, body=body)
