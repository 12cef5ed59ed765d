"""Index arithmetic that may leave int32 computed in int64 (lower/wide_integers.py): loops made
by split and fuse over symbolic dims near 2**31, checked by running them (the counts are
loops gcc folds), the generated C, and the interval analysis alone."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.ir.nodes import IntImm, Var
from sched.lower.pipeline import lower
from sched.lower.wide_integers import interval
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
    assert "for (int64_t i_j_fused = INT64_C(0); i_j_fused < (int64_t)m * (int64_t)n;" in \
        kernel.source or "for (int64_t i_j_fused = INT64_C(0); i_j_fused < m * n;" in \
        kernel.source
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
