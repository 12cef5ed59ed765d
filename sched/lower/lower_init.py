"""Reduction init lowering: a block's `init` becomes a guarded statement before its body.

Runs first, on block IR, so that every later pass sees blocks with a plain body only.
"""

from __future__ import annotations

import dataclasses

from sched.ir.functor import IRMutator
from sched.ir.nodes import Block, IfThenElse, PrimFunc, equal, logical_and, seq


class _InitLowerer(IRMutator):
    def visit_Block(self, block: Block) -> Block:
        block = self.visit_children(block)
        if block.init is None:
            return block
        first_iteration = [equal(iv.var, iv.dom.min)
                           for iv in block.iter_vars if iv.kind == "reduce"]
        init = (IfThenElse(logical_and(*first_iteration), block.init)
                if first_iteration else block.init)
        return dataclasses.replace(block, body=seq(init, block.body), init=None)


def lower_reduction_init(func: PrimFunc) -> PrimFunc:
    """`func` with no block `init`s.

    Takes block IR. A block with an init gets the body

        if v_k == k_min and v_l == l_min:     # every reduce iteration variable at its start
            <init>
        <body>

    (the init alone, unguarded, when the block has no reduce iteration variable). Reads and
    writes are kept: the init writes what the body writes. Later passes may rely on every
    block's `init` being None.
    """
    body = _InitLowerer().visit(func.body)
    return func if body is func.body else dataclasses.replace(func, body=body)
