"""flatten_buffers: n-D accesses become row-major accesses to 1-D views and allocations."""

from __future__ import annotations

from sched.ir import Allocate, Buffer, BufferLoad, BufferStore, For, IntImm, Var, collect
from sched.ir.verify import verify
from sched.lower import convert_blocks_to_loops, flatten_buffers
from sched.lower.flatten_buffers import linear_index, widen
from tests.lower.block_ir import add_2d, scale_split, two_stage


def test_parameter_access_becomes_a_view_access():
    func = flatten_buffers(convert_blocks_to_loops(add_2d(rows=4, cols=8)))
    A, B, C = func.buffers
    i, j = Var("i"), Var("j")
    view = {b.name: Buffer(f"{b.name}_flat", (IntImm(32),), data=b.name) for b in (A, B, C)}
    index = i * 8 + j
    expected = For(i, IntImm(0), IntImm(4), "serial", For(
        j, IntImm(0), IntImm(8), "serial",
        BufferStore(view["C"], view["A"][index] + view["B"][index], (index,))))
    assert func.body == expected
    verify(func)


def test_parameters_keep_their_shapes():
    func = add_2d(rows=4, cols=8)
    assert flatten_buffers(convert_blocks_to_loops(func)).params == func.params


def test_one_dimensional_buffers_are_kept():
    func = convert_blocks_to_loops(scale_split())
    assert flatten_buffers(func) is func


def test_allocated_buffer_becomes_one_dimensional_itself():
    n = Var("n")
    T = Buffer("T", (n, IntImm(3)))
    i, j = Var("i"), Var("j")
    A = Buffer("A", (n, IntImm(3)))
    body = Allocate(T, For(i, IntImm(0), n, "serial", For(
        j, IntImm(0), IntImm(3), "serial", BufferStore(T, A[i, j], (i, j)))))
    from sched.ir import PrimFunc

    func = flatten_buffers(PrimFunc("f", (A,), body))
    # a symbolic dim has no bound: sizes and indices are int64 (widen)
    flat_t = Buffer("T", (widen(n * 3),))
    assert func.body.buffer == flat_t
    (store,) = collect(func.body, BufferStore)
    assert store.buffer == flat_t and store.indices == (widen(i * 3 + j),)
    (load,) = collect(func.body, BufferLoad)
    assert load.buffer == Buffer("A_flat", (widen(n * 3),), data="A")
    verify(func)


def test_intermediate_of_two_stages_stays_one_dimensional():
    func = flatten_buffers(convert_blocks_to_loops(two_stage()))
    assert func.body.buffer == Buffer("T", (IntImm(10),))


def test_linear_index_is_row_major():
    i, j, k = Var("i"), Var("j"), Var("k")
    shape = (IntImm(2), IntImm(3), IntImm(4))
    assert linear_index((i, j, k), shape) == (i * 3 + j) * 4 + k
    assert linear_index((), ()) == IntImm(0)
