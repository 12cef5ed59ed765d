"""Indices the model reads exactly beyond sums and products by constants (audit helper-103:
each was accepted with constant shapes and wrote outside its buffer, with no error and no
warning): floor division and remainder by a negative constant, shifts by a constant, a
bitwise and with 2**k - 1 (affine, with isl's floor and mod), and the piecewise affine
`T.if_then_else`, `T.truncdiv`, `T.truncmod` (one disjunct per piece). `T.abs` stays
widened: the lowering computes it on its operand narrowed to int32 (helper-106)."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched.polyhedral.in_bounds import OutOfBoundsError


def _floordiv(a, b):
    return a // b                    # Python's // and % round toward minus infinity


def _truncdiv(a, b):
    return int(a / b) if b else 0


INDICES = {   # the index, in Python
    "(vi - 20) // -2 - 2": lambda v: _floordiv(v - 20, -2) - 2,
    "T.floormod(vi, -16) + 15": lambda v: (v % -16) + 15,
    "T.truncdiv(vi - 8, 2) + 4": lambda v: _truncdiv(v - 8, 2) + 4,
    "T.truncmod(vi - 8, 5) + 4": lambda v: (v - 8) - _truncdiv(v - 8, 5) * 5 + 4,
    "T.shift_right(vi, 1) + 1": lambda v: (v >> 1) + 1,
    "T.shift_left(vi, 2) // 4": lambda v: (v << 2) // 4,
    "T.bitwise_and(vi + 3, 15)": lambda v: (v + 3) & 15,
    "T.if_then_else(vi < 8, vi * 2, vi * 2 - 15)": lambda v: v * 2 if v < 8 else v * 2 - 15,
}


def scatter(index: str):
    return sched.parse(f'''
@T.prim_func
def f(A: T.Buffer((16,), "int32"), C: T.Buffer((16,), "int32")):
    for i in range(16):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[{index}] = A[vi]
''')


@pytest.mark.parametrize("index", [
    "(vi - 20) // -2 - 3", "T.floormod(vi, -16) + 16", "T.truncdiv(vi, 1) + 1",
    "T.truncmod(vi, 17) + 1", "T.shift_right(vi, 0) + 1", "T.bitwise_and(vi, 15) + 1",
    "T.if_then_else(vi < 8, vi, vi + 1)"])
def test_an_index_one_past_the_buffer_is_refused_with_the_instance(index):
    with pytest.raises(OutOfBoundsError, match=r"writes C\[(16|-1)\], but C has shape \(16,\)"):
        sched.Schedule(scatter(index))


@pytest.mark.parametrize("index", list(INDICES))
def test_an_index_in_bounds_is_proven_and_its_loop_parallel_where_it_is_one_to_one(index):
    where = [INDICES[index](v) for v in range(16)]
    one_to_one = len(set(where)) == 16
    sch = sched.Schedule(scatter(index))
    assert sch.notes == []                                   # exact, nothing assumed
    loop = sch.get_loops(sch.get_block("C"))[0]
    if one_to_one:
        sch.parallel(loop)
    else:              # two instances write one element: the later one's value stays
        with pytest.raises(sched.ScheduleError, match="carries an output dependence"):
            sch.parallel(loop)
    kernel = sched.build(sch.func, target="c", check_bounds="strict")
    a = np.arange(16, dtype=np.int32) + 100
    c = np.full(16, -1, np.int32)
    kernel(a, c)
    expected = np.full(16, -1, np.int32)
    for v, element in enumerate(where):
        expected[element] = a[v]
    np.testing.assert_array_equal(c, expected)


def test_an_abs_index_is_not_proven_for_its_operand_may_wrap():
    # audit, helper-106: read as exact, abs(vi * 2**31 + 2**30) // 2**26 - 16 was proven in
    # bounds and one to one; the code takes abs of the wrapped int32 sum: both wrote C[0]
    func = sched.parse("""
@T.prim_func
def f(A: T.Buffer((2,), "int32"), C: T.Buffer((64,), "int32")):
    for i in range(2):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[T.abs(vi * 1073741824 + vi * 1073741824 + 1073741824) // 67108864 - 16] = A[vi]
""")
    sch = sched.Schedule(func)
    with pytest.raises(sched.ScheduleError):
        sch.parallel(sch.get_loops(sch.get_block("C"))[0])
    with pytest.raises(OutOfBoundsError, match="cannot be proven"):
        sched.build(func, target="c", check_bounds="strict")
