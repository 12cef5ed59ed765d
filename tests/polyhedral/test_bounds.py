"""Regions touched under a loop, as boxes in the outer loops and symbolic dims."""

from __future__ import annotations

import pytest

from sched import compute as te
from sched.ir import (
    TRUE,
    Block,
    BlockRealize,
    Buffer,
    BufferStore,
    For,
    IntImm,
    IterVar,
    PrimFunc,
    Range,
    Var,
    infer_block_regions,
)
from sched.polyhedral import buffer_region


def script(ranges):
    return [(r.min.script(), r.extent.script()) for r in ranges]


def test_matmul_row_of_a_under_the_reduce_loop():
    n = te.var("n")
    A = te.placeholder((n, 64), name="A")
    B = te.placeholder((64, 32), name="B")
    func = te.create_prim_func([A, B, te.ops.matmul(A, B)])
    assert script(buffer_region(func, "C", "A")) == [("0", "n"), ("0", "64")]
    assert script(buffer_region(func, "C", "A", loop="j")) == [("i", "1"), ("0", "64")]
    assert script(buffer_region(func, "C", "B", loop="j")) == [("0", "64"), ("0", "32")]
    assert script(buffer_region(func, "C", "C", loop="k", access="write")) == [("i", "1"),
                                                                              ("j", "1")]


def test_split_loop_tile_region():
    # for io, ii: B[vi] = A[vi + 1] with vi = io * 4 + ii, 0 <= vi < 10 (a guarded tail)
    A = Buffer("A", (IntImm(11),))
    B = Buffer("B", (IntImm(10),))
    vi, io, ii = Var("vi"), Var("io"), Var("ii")
    iter_var = IterVar(vi, Range(IntImm(0), IntImm(10)))
    body = BufferStore(B, A[vi + 1], (vi,))
    reads, writes = infer_block_regions(body, None, (iter_var,))
    realize = BlockRealize((io * 4 + ii,), io * 4 + ii < 10,
                           Block("B", (iter_var,), reads, writes, body))
    nest = For(io, IntImm(0), IntImm(3), "serial", For(ii, IntImm(0), IntImm(4), "serial",
                                                      realize))
    func = PrimFunc("f", (A, B), BlockRealize((), TRUE, Block("root", (), (), (), nest)))
    (region,) = buffer_region(func, "B", "A", loop="ii")
    assert region.min.script() == "io * 4 + 1"
    # the last tile (io = 2) holds two elements only, and the box says so
    assert region.extent.script() == "T.if_then_else(io == 2, 2, 4)"


def test_region_errors_name_the_choices():
    A = te.placeholder((4,), name="A")
    func = te.create_prim_func([A, te.compute((4,), lambda i: A[i] * 2.0, name="B")])
    with pytest.raises(ValueError, match="not under a loop named 'x'; its loops are i"):
        buffer_region(func, "B", "A", loop="x")
    with pytest.raises(ValueError, match="does not access buffer 'Q'"):
        buffer_region(func, "B", "Q")
