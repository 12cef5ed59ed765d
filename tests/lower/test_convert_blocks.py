"""convert_blocks_to_loops: blocks become their bodies, bound, guarded and allocated."""

from __future__ import annotations

from sched.ir import (
    Allocate,
    BlockRealize,
    Buffer,
    BufferStore,
    For,
    IfThenElse,
    IntImm,
    Var,
    collect,
    const,
    equal,
    seq,
)
from sched.ir.verify import verify
from sched.lower import convert_blocks_to_loops, lower_reduction_init
from tests.lower.block_ir import add_2d, matmul, scale_split, two_stage


def test_iteration_variables_become_their_bound_values():
    func = add_2d(rows=4, cols=2)
    A, B, C = func.buffers
    i, j = Var("i"), Var("j")
    expected = For(i, IntImm(0), IntImm(4), "serial", For(
        j, IntImm(0), IntImm(2), "serial", BufferStore(C, A[i, j] + B[i, j], (i, j))))
    assert convert_blocks_to_loops(func).body == expected


def test_predicate_becomes_an_if():
    func = convert_blocks_to_loops(scale_split(extent=100, factor=32))
    A, B = func.buffers
    io, ii = Var("io"), Var("ii")
    index = io * 32 + ii
    (guard,) = collect(func.body, IfThenElse)
    assert guard == IfThenElse(index < 100, BufferStore(B, A[index] * const(2.0, "float32"),
                                                        (index,)))


def test_root_alloc_buffers_become_allocates_around_the_body():
    func = convert_blocks_to_loops(two_stage())
    assert isinstance(func.body, Allocate)
    assert func.body.buffer == Buffer("T", (IntImm(10),))
    assert isinstance(func.body.body.stmts[0], For)
    verify(func)


def test_reduction_keeps_its_lowered_init():
    func = convert_blocks_to_loops(lower_reduction_init(matmul()))
    assert not collect(func.body, BlockRealize)
    A, B, C = func.buffers
    i, j, k = Var("i"), Var("j"), Var("k")
    innermost = collect(func.body, For)[-1].body
    assert innermost == seq(
        IfThenElse(equal(k, 0), BufferStore(C, const(0.0, "float32"), (i, j))),
        BufferStore(C, C[i, j] + A[i, k] * B[k, j], (i, j)))
    verify(func)
