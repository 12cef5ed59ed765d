"""Index arithmetic that may leave int32 computed in int64 (lower/wide_integers.py): loops made
by split and fuse over symbolic dims near 2**31, checked by running them (the counts are
loops gcc folds), the generated C, and the interval analysis alone."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.ir.intervals import interval
from sched.ir.nodes import IntImm, Var
from sched.lower.pipeline import lower
from sched.script import T

INT32_MAX = 2 ** 31 - 1


@T.prim_func
def count(C: T.Buffer((1,), "int64"), n: T.int32):
    for i in range(n):
        with T.block("C"):
            vi = T.axis.reduce(n, i)  # noqa: F841 - the block variable, unused
            with T.init():
                C[0] = T.int64(0)
            C[0] = C[0] + T.int64(1)


@pytest.mark.parametrize("factors", [[None, 64], [3, None], [None, 1 << 20]])
def test_a_split_count_reaches_the_largest_int32(factors):
    # found by an audit: `(n + 63) // 64` wrapped negative at n = 2**31 - 1, the loop ran no
    # iteration and C kept what it held; [3, None] guards `i_0 * ceil(n / 3) + i_1 < n`,
    # whose left side reaches 2**31
    sch = sched.Schedule(count)
    sch.split(sch.get_loops(sch.get_block("C"))[0], factors=factors)
    kernel = sched.build(sch, target="c")
    for n in (1000, 2 ** 31 - 2, INT32_MAX):
        c = np.full(1, -7, np.int64)
        kernel(c, n)
        assert c[0] == n


def _outer_product_sum(dtype="int32"):
    n, m = te.var("n", dtype), te.var("m", dtype)
    A = te.placeholder((n,), "int8", name="A")
    B = te.placeholder((m,), "int8", name="B")
    i, j = te.reduce_axis((0, n), name="i"), te.reduce_axis((0, m), name="j")
    C = te.compute((1,), lambda z: te.sum(A[i].astype("int64") * B[j].astype("int64"),
                                          axis=[i, j]), name="C")
    sch = sched.Schedule(te.create_prim_func([A, B, C]))
    _, i, j = sch.get_loops(sch.get_block("C"))
    sch.fuse(i, j)
    return sch


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_a_fused_loop_of_two_symbolic_dims_counts_in_int64(dtype, rng):
    # found by an audit: `m * n` in int32 wrapped to 0 at 65536^2 and the sum stayed 0; with
    # int64 dims the bound was int64 but the loop variable int32
    kernel = sched.build(_outer_product_sum(dtype), target="c")
    # int32 dims: their product fits int64; int64 dims: it may wrap, so it is written unsigned
    # (C leaves signed overflow undefined: sched/c/int_ranges.py)
    bound = {"int32": "(int64_t)m * (int64_t)n",
             "int64": "(int64_t)((uint64_t)m * (uint64_t)n)"}[dtype]
    assert f"for (int64_t i_j_fused = INT64_C(0); i_j_fused < {bound};" in kernel.source
    a = rng.integers(-5, 5, 7).astype(np.int8)
    b = rng.integers(-5, 5, 5).astype(np.int8)
    c = np.zeros(1, np.int64)
    kernel(a, b, c)
    assert c[0] == int(a.astype(np.int64).sum() * b.astype(np.int64).sum())


def test_the_fused_count_of_46341_squared_is_exact():
    kernel = sched.build(_outer_product_sum(), target="c")
    a, b = np.ones(46341, np.int8), np.ones(46341, np.int8)
    c = np.zeros(1, np.int64)
    kernel(a, b, c)
    assert c[0] == 46341 ** 2                        # > 2**31 - 1


def test_constant_shapes_keep_their_code():
    A = te.placeholder((64, 32), name="A")
    B = te.compute((64, 32), lambda i, j: A[i, j] * 2.0, name="B")
    sch = sched.Schedule(te.create_prim_func([A, B]))
    i, j = sch.get_loops(sch.get_block("B"))
    sch.fuse(i, j)
    text = lower(sch.func).script()
    assert "int64" not in text and "T.Cast" not in text


def test_interval_bounds_index_arithmetic_and_says_when_it_may_leave_int32():
    n, i = Var("n"), Var("i")
    ranges = {n: (0, INT32_MAX), i: (0, 9)}
    assert interval(i * 4 + 3, ranges) == ((3, 39), False)
    assert interval(n + 63, ranges)[1] is True                  # past 2**31 - 1
    assert interval((n + 63) // 64, ranges) == ((0, (INT32_MAX + 63) // 64), True)
    assert interval(n * n, ranges)[1] is True
    assert interval(i % IntImm(4), ranges) == ((0, 3), False)
    assert interval(i + Var("unknown"), ranges) is None          # not in ranges: left alone


def test_buffer_declarations_keep_their_shapes(rng):
    # a declaration is not arithmetic the kernel computes: the pass rewrote `n + 2` in a
    # shape once, and the GPU build's refusal then printed the rewritten shape
    n = te.var("n")
    A = te.placeholder((n + 2,), name="A")
    B = te.compute((n + 2,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((n,), lambda i: B[i] + B[i + 2], name="C")
    func = te.create_prim_func([A, C])
    text = lower(func).script()
    assert "T.Cast" not in "\n".join(line for line in text.splitlines() if "decl_buffer" in line)
    a = rng.standard_normal(9).astype(np.float32)
    c = np.zeros(7, np.float32)
    sched.build(func, target="c")(a, c)
    np.testing.assert_allclose(c, 2 * a[:7] + 2 * a[2:], rtol=1e-6)


# audit of the pass itself (helper-30): each of these was wrong before

@T.prim_func
def narrowed(var_A: T.handle, B: T.Buffer((1,), "int32"), C: T.Buffer((1,), "int64"),
             q: T.int64):
    n = T.int32()
    A = T.match_buffer(var_A, (n,), "int8")  # noqa: F841 - binds n
    B[0] = T.if_then_else(T.Cast("int32", q) < n + 1, 1, 0)
    for _i in range(T.Cast("int32", q) + n):
        C[0] = C[0] + T.int64(1)


def test_a_narrowing_cast_the_program_makes_is_kept():
    # widening saw through `T.Cast("int32", q)`: q = 2**32 + 3 compared and counted as itself
    kernel = sched.build(narrowed, target="c")
    for q in (3, 2 ** 32 + 3):
        b, c = np.full(1, -1, np.int32), np.zeros(1, np.int64)
        kernel(np.zeros(10, np.int8), b, c, q)
        assert (b[0], c[0]) == (1, 13)


@T.prim_func
def negative_divisors(C: T.Buffer((4,), "int64"), p: T.int32, n: T.int32):
    for _i in range(T.floordiv(p, -1)):
        C[0] = C[0] + T.int64(1)
    for _j in range(T.truncdiv(n + 63, 64)):
        C[1] = C[1] + T.int64(1)
    for _k in range(T.shift_right(n + 63, 6)):
        C[2] = C[2] + T.int64(1)
    for i in T.serial(p - 10, p):
        C[3] = C[3] + T.Cast("int64", i)


def test_floordiv_by_a_negative_constant_truncdiv_shifts_and_low_starts_are_bounded():
    # `p // -1` at p = -2**31 is 2**31 (its loop stops at a value past int32); `n + 63` under
    # truncdiv and a shift wrapped; a loop from p - 10 below -2**31 kept an int32 variable
    kernel = sched.build(negative_divisors, target="c")
    p, n = -2 ** 31, INT32_MAX
    c = np.zeros(4, np.int64)
    kernel(c, p, n)
    assert c.tolist() == [2 ** 31, (n + 63) // 64, (n + 63) // 64, sum(range(p - 10, p))]


def test_an_int64_dim_bounds_its_loops_as_int64():
    # int64 dims were taken as at most 2**31 - 1: a reduce loop over one kept int32
    n = te.var("n", "int64")
    A = te.placeholder((n,), "int8", name="A")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((1,), lambda z: te.sum(A[k].astype("int64"), axis=k), name="C")
    kernel = sched.build(te.create_prim_func([A, C]), target="c")
    assert "for (int64_t k = INT64_C(0); k < n; ++k)" in kernel.source
    a = np.arange(-5, 9, dtype=np.int8)
    c = np.zeros(1, np.int64)
    kernel(a, c)
    assert c[0] == a.astype(np.int64).sum()


def test_sibling_loops_of_one_variable_each_get_their_own_width():
    # a loop made int64 leaked its variable into a later sibling loop of the same Var
    import dataclasses

    from sched.ir.functor import substitute
    from sched.ir.nodes import SeqStmt

    @T.prim_func
    def two(C: T.Buffer((2,), "int64"), p: T.int32, q: T.int32):
        for i in range(p + q):
            C[0] = C[0] + T.Cast("int64", i)
        for j in range(q):
            C[1] = C[1] + T.Cast("int64", j)

    first, second = two.body.stmts
    second = dataclasses.replace(second, loop_var=first.loop_var,
                                 body=substitute(second.body, {second.loop_var:
                                                               first.loop_var}))
    func = dataclasses.replace(two, body=SeqStmt((first, second)))
    c = np.zeros(2, np.int64)
    sched.build(func, target="c")(c, 3, 4)
    assert c.tolist() == [sum(range(7)), sum(range(4))]


def _lower_triangle_count():
    """C[0] = the number of (i, j) with j <= i: block variables used as data."""
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n,), name="A", dtype="int8")
    B = te.placeholder((m,), name="B", dtype="int8")
    i = te.reduce_axis((0, n), name="i")
    j = te.reduce_axis((0, m), name="j")
    C = te.compute((1,), lambda _: te.sum(te.if_then_else(
        j <= i, te.const(1, "int64"), te.const(0, "int64")), axis=[i, j]), name="C")
    sch = sched.Schedule(te.create_prim_func([A, B, C]))
    _, ri, rj = sch.get_loops(sch.get_block("C"))
    sch.fuse(ri, rj)
    return sch.func


def test_block_variables_of_a_fused_int64_loop_used_as_data_are_exact():
    # audit, helper-103: a mask `j <= i` over a fused loop of n * m > 2**31 values compared
    # floormod((int32)f, m) <= floordiv((int32)f, m): the fused variable lost its high bits
    # before the bindings recovered i and j (wrong in the last rows)
    kernel = sched.build(_lower_triangle_count(), target="c")
    assert "(int32_t)sched_floormod_i64(i_j_fused, (int64_t)m) <= " in kernel.source
    assert "(int32_t)i_j_fused" not in kernel.source
    for size in (5, 46341):                     # 46341^2 > 2**31 - 1
        c = np.zeros(1, np.int64)
        kernel(np.zeros(size, np.int8), np.zeros(size, np.int8), c)
        assert c[0] == size * (size + 1) // 2


@pytest.mark.parametrize("symbolic", [False, True])
def test_a_split_whose_outer_factors_multiply_past_int32_stays_in_bounds(symbolic, rng):
    # audit, helper-104: split [65536, 65536, None] bound the block variable to
    # T.Cast("int64", i_0 * 65536 + i_1) * ..., computed in int32 before the cast: past
    # i_0 = 32768 it wrapped negative, passed the guard and stored before C (a segfault)
    n = te.var("n") if symbolic else 5
    A = te.placeholder((n,), "float32", name="A")
    C = te.compute((n,), lambda i: A[i] * 3, name="C")
    sch = sched.Schedule(te.create_prim_func([A, C]))
    sch.split(sch.get_loops(sch.get_block("C"))[0], [65536, 65536, None])
    kernel = sched.build(sch.func, target="c")
    assert "C[(int64_t)i_0 * 65536 + (int64_t)i_1] = " in kernel.source
    a = rng.standard_normal(5).astype(np.float32)
    c = np.zeros(5, np.float32)
    kernel(a, c)
    np.testing.assert_array_equal(c, a * 3)


def _triangle_count_fused_and_split(size):
    A = te.placeholder((size,), name="A", dtype="int8")
    i = te.reduce_axis((0, size), name="i")
    j = te.reduce_axis((0, size), name="j")
    C = te.compute((1,), lambda _: te.sum(te.if_then_else(
        j <= i, te.const(1, "int64"), te.const(0, "int64")), axis=[i, j]), name="C")
    sch = sched.Schedule(te.create_prim_func([A, C]))
    _, ri, rj = sch.get_loops(sch.get_block("C"))
    sch.split(sch.fuse(ri, rj), [None, 256])
    return sch.func


def test_bindings_used_as_data_past_int32_over_int32_loops_are_exact():
    # audit, helper-107: after a split, no loop counts past int32, but the bindings
    # `(f_0 * 256 + f_1) % 46341` did, in the stored value's int32 arithmetic
    kernel = sched.build(_triangle_count_fused_and_split(46341), target="c")
    assert "(int32_t)(((int64_t)i_j_fused_0 * 256 + (int64_t)i_j_fused_1) % 46341) <= " \
        in kernel.source
    kernel = sched.build(_triangle_count_fused_and_split(300), target="c")
    c = np.zeros(1, np.int64)
    kernel(np.zeros(300, np.int8), c)
    assert c[0] == 300 * 301 // 2


@pytest.mark.filterwarnings("ignore:build")
def test_bindings_of_thread_loops_used_as_data_past_int32_are_exact():
    # audit, helpers 103 and 107: blockIdx.x * 256 + threadIdx.x over a fused n * m passes
    # int32; the mask j <= i computed it in int32 (indices and guards were right)
    n, m = te.var("n"), te.var("m")
    M = te.compute((n, m), lambda i, j: te.if_then_else(
        j <= i, te.const(1, "int8"), te.const(0, "int8")), name="M")
    sch = sched.Schedule(te.create_prim_func([M]))
    bx, tx = sch.split(sch.fuse(*sch.get_loops(sch.get_block("M"))), [None, 256])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    kernel = sched.build(sch.func, target="cuda-emu")
    store = next(line for line in kernel.source.splitlines() if "M[" in line and " = " in line)
    assert "(int64_t)i_j_fused_0 * 256 + (int64_t)i_j_fused_1" in store.split(" = ", 1)[1]
    out = np.full((7, 5), -1, np.int8)
    kernel(out)
    np.testing.assert_array_equal(out, np.tril(np.ones((7, 5), np.int8)))


def test_bindings_of_a_blockized_block_used_as_data_past_int32_are_exact():
    # audit, helper-109: the inner block's binding used the outer block's variable, which
    # had no range, so it was taken as safe and wrapped in int32
    func = _triangle_count_fused_and_split(46341)
    sch = sched.Schedule(func)
    sch.blockize(sch.get_loops(sch.get_block("C"))[-1])
    kernel = sched.build(sch.func, target="c")
    assert "(int32_t)(((int64_t)i_j_fused_0 * 256 + (int64_t)i_j_fused_1) % 46341) <= " \
        in kernel.source
