"""A widening cast of int32 arithmetic casts the wrapped value (the kernel and the interpreter
compute the int32 operand first; only index arithmetic outside a cast is computed wide), and
the model reads it so, modulo 2**32 (audit helper-110: `T.Cast("int64", vi * 2**30) // 2**30`
was read as vi, so stores to C[-2] were proven in bounds, a guard that holds was "never true",
and a step reordering a dependence carried through the wrapped index was accepted)."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched.errors import ScheduleError
from sched.ir.nodes import Cast, IntImm, Var
from sched.polyhedral.in_bounds import OutOfBoundsError
from sched.polyhedral.isl_expr import to_isl


def _wrap32(value: int) -> int:
    return (value + 2**31) % 2**32 - 2**31


def function(body: str, n: int = 4):
    return sched.parse(f'''
@T.prim_func
def f(A: T.Buffer(({n},), "int32"), C: T.Buffer(({n},), "int32")):
    for i in range({n}):
        with T.block("C"):
            vi = T.axis.spatial({n}, i)
{body}
''')


def test_an_index_through_a_wrapped_cast_is_refused_with_the_element_it_reaches():
    f = function('            C[T.Cast("int64", vi * 1073741824) // T.int64(1073741824)] = A[vi]')
    with pytest.raises(OutOfBoundsError, match=r"C\[vi=2\] writes C\[-2\]"):
        sched.Schedule(f)
    assert [_wrap32(v * 2**30) // 2**30 for v in range(4)] == [0, 1, -2, -1]


def test_a_guard_on_a_wrapped_cast_is_read_as_the_kernel_computes_it():
    f = function('            if T.Cast("int64", vi * 1073741824) < T.int64(0):\n'
                 '                C[vi + 100] = A[vi]')
    with pytest.raises(OutOfBoundsError, match=r"C\[vi=2\] writes C\[102\]"):
        sched.Schedule(f)


def test_a_block_binding_through_a_wrapped_cast_leaves_its_domain():
    f = sched.parse('''
@T.prim_func
def f(A: T.Buffer((4,), "int32"), C: T.Buffer((4,), "int32")):
    for i in range(4):
        with T.block("C"):
            vi = T.axis.spatial(T.int64(4), T.Cast("int64", i * 1073741824) // 1073741824)
            C[vi] = A[vi]
''')
    with pytest.raises(OutOfBoundsError, match="binding of 'vi' is outside its domain"):
        sched.Schedule(f)


def test_a_dependence_through_a_wrapped_index_is_seen():
    # C[vi] reads C[max(wrap(vi * 2**29) // 2**29, 0)]: vi = 4..7 read C[0] (4 * 2**29 wraps
    # to -2**31), written by vi = 0; reversing the order would read it before
    body = ('            C[vi] = C[T.max(T.Cast("int64", vi * 536870912) // '
            'T.int64(536870912), T.int64(0))] + A[vi]')
    f = function(body, n=8)
    sch = sched.Schedule(f)
    with pytest.raises(ScheduleError, match=r"flow dependence on 'C': C\[vi=4\] reads C\[0\]"):
        sch.transform_block_layout(sch.get_block("C"), lambda v: (7 - v,))
    a, c = np.arange(8, dtype=np.int32), np.arange(8, dtype=np.int32) * 10
    expected = c.copy()
    for v in range(8):
        expected[v] = expected[max(_wrap32(v * 2**29) // 2**29, 0)] + a[v]
    sched.build(sch.func, target="c")(a, c)
    np.testing.assert_array_equal(c, expected)


def test_a_cast_of_a_variable_or_of_arithmetic_that_fits_stays_plain_where_it_fits():
    i = Var("i")
    assert to_isl(Cast("int64", i)) == "i"                    # a variable cannot wrap
    text = to_isl(Cast("int64", i * IntImm(4, "int32")))
    assert "mod 4294967296" in text
    f = function('            C[T.Cast("int64", vi * 2 + 1) // T.int64(2)] = A[vi]')
    sch = sched.Schedule(f)                                   # in bounds: isl drops the wrap
    sch.parallel(sch.get_loops(sch.get_block("C"))[0])
    a, c = np.arange(4, dtype=np.int32) + 1, np.zeros(4, np.int32)
    sched.build(sch.func, target="c")(a, c)
    np.testing.assert_array_equal(c, a)


def _agree(func, arrays, expected):
    """The interpreter, the C kernel and the emulated CUDA (where bound) compute `expected`."""
    for run in (lambda *a: sched.interpret(func, *a), sched.build(func, target="c")):
        got = [a.copy() for a in arrays]
        run(*got)
        for g, e in zip(got, expected):
            np.testing.assert_array_equal(g, e)


def test_a_let_of_index_arithmetic_past_int32_is_exact_as_the_model_reads_it():
    # the kernel and the interpreter narrowed x = vi * 2**30 to int32, the model read it
    # exactly: C[x // 2**30] was proven in bounds and wrote C[-2] (audit helper-113). The let
    # holds the exact value (an int64 variable in the kernel); data takes it narrowed
    f = sched.parse('''
@T.prim_func
def f(A: T.Buffer((4,), "int32"), C: T.Buffer((4,), "int32"), D: T.Buffer((4,), "int32")):
    for i in range(4):
        with T.block("C"):
            vi = T.axis.spatial(4, i)
            x: T.int32 = vi * 1073741824 + 5
            C[x // 1073741824] = A[vi] + x
            D[vi] = T.Cast("int32", x < 0)
''')
    sched.Schedule(f)
    a = np.arange(4, dtype=np.int32) + 1
    x = [_wrap32(v * 2**30 + 5) for v in range(4)]
    expected_c = np.array([a[v] + x[v] for v in range(4)], np.int64)
    _agree(f, [a, np.zeros(4, np.int32), np.zeros(4, np.int32)],
           [a, _wrap_array(expected_c), np.array([int(v < 0) for v in x], np.int32)])


def _wrap_array(values):
    return np.array([_wrap32(int(v)) for v in values], np.int32)


def test_an_int64_variable_bound_to_int32_arithmetic_takes_its_exact_value():
    # the kernel widened the wrapped int32 product (C[-2], C[-1] written: helper-113)
    f = sched.parse('''
@T.prim_func
def f(A: T.Buffer((8,), "int32"), C: T.Buffer((8,), "int32")):
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(T.int64(8589934592), i * 1073741824)
            C[vi // T.int64(1073741824)] = A[vi // T.int64(1073741824)] + 1
''')
    sched.Schedule(f)
    a = np.arange(8, dtype=np.int32)
    _agree(f, [a, np.zeros(8, np.int32)], [a, a + 1])


def test_a_cast_to_its_own_type_is_no_cast_anywhere():
    # the model and the interpreter wrapped T.Cast("int32", <int32 arithmetic>), the kernel
    # dropped it; an accepted reversal then changed the kernel's numbers (helper-113)
    body = ('            C[T.Cast("int32", vi * 536870912) // 536870912 + 8] = '
            'C[T.min(vi + 12, 15)] + A[vi]')
    f = sched.parse(f'''
@T.prim_func
def f(A: T.Buffer((8,), "int32"), C: T.Buffer((16,), "int32")):
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
{body}
''')
    sch = sched.Schedule(f)
    with pytest.raises(ScheduleError, match="anti dependence on 'C'"):
        sch.transform_block_layout(sch.get_block("C"), lambda v: (7 - v,))
    a, c = np.arange(8, dtype=np.int32), np.arange(16, dtype=np.int32) * 100
    expected = c.copy()
    for v in range(8):
        expected[v + 8] = expected[min(v + 12, 15)] + a[v]
    _agree(f, [a, c], [a, expected])


def test_a_widening_cast_of_a_select_wraps_each_branch_in_the_kernel_too():
    # simplify_indices read the cast through the select as exact (helper-113)
    f = sched.parse('''
@T.prim_func
def f(D: T.Buffer((8,), "int32")):
    for i in range(8):
        with T.block("D"):
            vi = T.axis.spatial(8, i)
            D[T.max(T.min(T.Cast("int64", T.Select(vi >= 0, vi * 1073741824, 0)),
                          T.int64(7)), T.int64(0))] = vi + 1
''')
    expected = np.zeros(8, np.int32)
    for v in range(8):
        expected[max(min(_wrap32(v * 2**30), 7), 0)] = v + 1
    _agree(f, [np.zeros(8, np.int32)], [expected])


def test_a_let_under_a_widening_cast_is_its_int32_value_everywhere():
    # the model read T.Cast("int64", x) of x = vi * 2**30 as the cast of the wrapped value,
    # the kernel as the exact let: cache_read copied other elements (audit helper-117). A
    # cast of an int32 let widens its int32 value, in the kernel and the interpreter too
    f = sched.parse('''
@T.prim_func
def f(A: T.Buffer((8,), "int32"), C: T.Buffer((4,), "int32")):
    for i in range(4):
        with T.block("C"):
            vi = T.axis.spatial(4, i)
            x: T.int32 = vi * 1073741824
            C[vi] = A[T.Cast("int64", x) // T.int64(1073741824) + T.int64(2)]
''')
    a = np.arange(8, dtype=np.int32) * 10 + 1
    expected = a[[_wrap32(v * 2**30) // 2**30 + 2 for v in range(4)]]
    _agree(f, [a, np.zeros(4, np.int32)], [a, expected])
    sch = sched.Schedule(f)
    sch.cache_read(sch.get_block("C"), 0, "global")
    _agree(sch.func, [a, np.zeros(4, np.int32)], [a, expected])


def test_an_int64_binding_keeps_the_programs_narrowing_cast():
    # widening the binding dropped T.Cast("int32", ...): C[i + 2**32] (helper-117)
    f = sched.parse('''
@T.prim_func
def f(A: T.Buffer((8,), "int32"), C: T.Buffer((8,), "int32")):
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(T.int64(8),
                                T.Cast("int32", T.Cast("int64", i) + T.int64(4294967296)))
            C[vi] = A[vi] + 1
''')
    a = np.arange(8, dtype=np.int32)
    _agree(f, [a, np.zeros(8, np.int32)], [a, a + 1])


def test_stored_values_take_a_wide_let_narrowed_under_min_and_remainder():
    # the kernel computed T.min(x, 7) and x % 3 of the exact x (helper-117)
    f = sched.parse('''
@T.prim_func
def f(G: T.Buffer((4,), "int32"), H: T.Buffer((4,), "int32")):
    for i in range(4):
        with T.block("G"):
            vi = T.axis.spatial(4, i)
            x: T.int32 = vi * 1073741824 + 1
            G[vi] = T.min(x, 7)
            H[vi] = x % 3
''')
    x = [_wrap32(v * 2**30 + 1) for v in range(4)]
    _agree(f, [np.zeros(4, np.int32)] * 2,
           [np.array([min(v, 7) for v in x], np.int32), np.array([v % 3 for v in x], np.int32)])


# -- conditions in what a store writes: data arithmetic, computed modulo 2**32 -------------------
# (audit helper-143: the model read them exactly, as index arithmetic)

@pytest.mark.parametrize("condition", [
    "vi * 1073741824 < 0",
    "T.shift_right(vi * 1073741824, 30) < 0",         # under a call (audit helper-147)
])
def test_a_select_in_a_stored_value_is_read_with_its_int32_arithmetic_wrapping(condition):
    f = function(f'            C[vi] = T.if_then_else({condition}, A[vi + 100000000], A[vi])')
    with pytest.raises(OutOfBoundsError, match=r"C\[vi=2\] reads A\[100000002\]"):
        sched.Schedule(f)


def test_a_let_in_a_stored_condition_wraps_there_too():
    f = function('            x: T.int32 = vi * 1073741824\n'
                 '            C[vi] = T.if_then_else(x < 0, A[vi + 100000000], A[vi])')
    with pytest.raises(OutOfBoundsError, match=r"A\[100000002\]"):
        sched.Schedule(f)


def test_a_dependence_under_a_wrapping_stored_condition_is_seen():
    f = function('            C[vi] = T.if_then_else(vi * 1073741824 < 0, C[vi - 1] + 1, A[vi])',
                 n=8)
    sch = sched.Schedule(f)
    with pytest.raises(ScheduleError, match="flow dependence on 'C'"):
        sch.bind(sch.get_loops("C")[0], "threadIdx.x")


def test_an_index_under_a_stored_select_stays_exact_and_padding_stays_proven():
    # the select's condition is data; the indices of the loads in it are index arithmetic
    f = sched.parse('''
@T.prim_func
def f(A: T.Buffer((6,), "int32"), C: T.Buffer((8,), "int32")):
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            C[vi] = T.if_then_else(1 <= vi and vi - 1 < 6, A[vi - 1], 0) + \\
                A[(vi * 1073741824) // 1073741824 % 6]
''')
    sched.Schedule(f)
    kernel = sched.build(f, target="c", check_bounds="strict")
    a, c = np.arange(1, 7, dtype="int32"), np.zeros(8, "int32")
    kernel(a, c)
    padded = [a[v - 1] if 1 <= v < 7 else 0 for v in range(8)]
    np.testing.assert_array_equal(c, np.array(padded) + a[np.arange(8) % 6])
