"""lower_reduction_init: a block's init becomes `if <first reduce iteration>: init`."""

from __future__ import annotations

import dataclasses

from sched.ir import Block, IfThenElse, IntImm, IterVar, Range, Var, equal, seq
from sched.ir.functor import used_blocks
from sched.ir.verify import verify
from sched.lower import lower_reduction_init
from tests.lower.block_ir import add_2d, matmul, matmul_parts


def test_init_is_guarded_by_the_first_reduce_iteration():
    func = matmul()
    lowered = lower_reduction_init(func)
    (_, realize) = used_blocks(lowered.body)
    _, _, _, iter_vars, init, update = matmul_parts()
    vk = iter_vars[2].var
    assert realize.block.init is None
    assert realize.block.body == seq(IfThenElse(equal(vk, IntImm(0)), init), update)
    verify(lowered)


def test_init_of_a_reduce_axis_not_starting_at_zero_compares_with_its_start():
    func = matmul()
    realize = used_blocks(func.body)[1]
    vk = Var("vk")
    iter_vars = (*realize.block.iter_vars[:2], IterVar(vk, Range(IntImm(3), IntImm(5)),
                                                        "reduce"))
    shifted = dataclasses.replace(func, body=_replace_block(
        func.body, dataclasses.replace(realize.block, iter_vars=iter_vars)))
    block = used_blocks(lower_reduction_init(shifted).body)[1].block
    assert block.body.stmts[0].condition == equal(vk, IntImm(3))


def test_function_without_init_is_returned_unchanged():
    func = add_2d()
    assert lower_reduction_init(func) is func


def _replace_block(body, new_block: Block):
    from sched.ir import IRMutator

    class Replace(IRMutator):
        def visit_Block(self, block):
            return new_block if block.name == new_block.name else self.visit_children(block)

    return Replace().visit(body)
