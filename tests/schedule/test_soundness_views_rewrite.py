"""Steps that rewrite or remove a buffer refuse while another view reaches its storage: the
view would keep reading the old layout (storage_align), another scope (set_scope), or a
storage nobody writes any more (compute_inline). Found by the program fuzzer."""

import numpy as np
import pytest

import sched
from sched.errors import ScheduleError

# W is written as (9, 3) rows and read back through the flat view W_flat
ROWS_READ_FLAT = """
@T.prim_func
def main(X: T.Buffer((9,), "float32"), Y: T.Buffer((9,), "float32")):
    W_flat = T.Buffer((27,), "float32", data=W.data)
    with T.block("root"):
        W = T.alloc_buffer((9, 3), "float32")
        for t, i in T.grid(9, 3):
            with T.block("T"):
                vj, vx = T.axis.remap("SS", [t, i])
                W[vj, vx] = X[vj] + T.float32(vx)
        for j in range(9):
            with T.block("main"):
                vi = T.axis.remap("S", [j])
                Y[vi] = W_flat[vi * 3 + 1]
"""


def _run(func):
    x = np.arange(9, dtype="float32")
    y = np.zeros(9, "float32")
    sched.build(func, target="c")(x, y)
    return y


def test_storage_align_refuses_a_buffer_read_through_a_view():
    # padding W's rows to a stride of 4 would move the elements W_flat reads
    sch = sched.Schedule(sched.parse(ROWS_READ_FLAT))
    with pytest.raises(ScheduleError, match="also accessed through 'W_flat'"):
        sch.storage_align(sch.get_block("T"), 0, 0, 4, 1)
    np.testing.assert_array_equal(_run(sch.func), np.arange(9) + 1)


def test_set_scope_refuses_a_buffer_read_through_a_view():
    sch = sched.Schedule(sched.parse(ROWS_READ_FLAT))
    with pytest.raises(ScheduleError, match="also accessed through 'W_flat'"):
        sch.set_scope(sch.get_block("T"), 0, "shared")


def test_compute_inline_refuses_a_producer_read_through_a_view():
    # inlining T would remove every write of W while main still loads W_flat
    sch = sched.Schedule(sched.parse(ROWS_READ_FLAT))
    with pytest.raises(ScheduleError, match="compute_inline.*also accessed through 'W_flat'"):
        sch.compute_inline(sch.get_block("T"))
    np.testing.assert_array_equal(_run(sch.func), np.arange(9) + 1)


# B is written as (4, 2) and read by C through the flat view B_flat (fuzz finding F4)
PRODUCER_READ_FLAT = """
@T.prim_func
def main(A: T.Buffer((4, 2), "float32"), C: T.Buffer((4, 2), "float32")):
    B_flat = T.Buffer((8,), "float32", data=B.data)
    with T.block("root"):
        B = T.alloc_buffer((4, 2), "float32")
        for i, j in T.grid(4, 2):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] + T.float32(1)
        for y, t in T.grid(4, 2):
            with T.block("C"):
                vy, vx = T.axis.remap("SS", [y, t])
                C[vy, vx] = B_flat[vy * 2 + vx]
"""


def test_compute_at_refuses_a_producer_read_through_a_view():
    func = sched.parse(PRODUCER_READ_FLAT)
    sch = sched.Schedule(func)
    with pytest.raises(ScheduleError, match="compute_at: 'B' is also accessed through 'B_flat'"):
        sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("C"))[0])
    a = np.arange(8, dtype="float32").reshape(4, 2)
    c = np.zeros((4, 2), "float32")
    sched.build(sch.func, target="c")(a, c)
    np.testing.assert_array_equal(c, a + 1)


def test_reverse_compute_at_refuses_a_consumer_reading_through_a_view():
    sch = sched.Schedule(sched.parse(PRODUCER_READ_FLAT))
    with pytest.raises(ScheduleError, match="reverse_compute_at: 'B_flat' is also accessed "
                       "through 'B'"):
        sch.reverse_compute_at(sch.get_block("C"), sch.get_loops(sch.get_block("B"))[0])
