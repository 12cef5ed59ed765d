"""Loop partitioning (lower/partition_loops.py): the guards of a non-dividing split leave the
first iterations, which compute what they did; everything else is kept."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched import compute as te
from sched import hand_schedules
from sched.ir import For, IfThenElse, IntImm, collect
from sched.lower.partition_loops import partition_guarded_loops
from sched.script import T
from tests.lower.block_ir import scale_split


def _loops(func, name):
    return [lp for lp in collect(func.body, For) if lp.loop_var.name == name]


def test_a_split_guard_leaves_all_but_the_last_iteration_and_shortens_that_one():
    from sched.lower.convert_blocks import convert_blocks_to_loops

    lowered = convert_blocks_to_loops(scale_split(100, 32))      # io in [0, 4), guarded
    parted = partition_guarded_loops(lowered)
    first, rest = _loops(parted, "io")
    assert (first.min, first.extent) == (IntImm(0), IntImm(3))
    assert (rest.min, rest.extent) == (IntImm(3), IntImm(1))
    assert not collect(first, IfThenElse)
    # in the last iteration the inner loop runs only the 100 - 96 elements left, unguarded
    (inner,) = [lp for lp in collect(rest, For) if lp.loop_var.name == "ii"]
    assert inner.extent == IntImm(4) and not collect(rest, IfThenElse)


@pytest.mark.parametrize("rows, tile", [(1024, 6), (37, 8), (16, 5), (9, 4)])
def test_matmul_tiles_that_do_not_divide_match_numpy(rows, tile, rng):
    sch = hand_schedules.cpu_matmul(rows, 24, 20, row_tile=tile, col_tile=8)
    kernel = sched.build(sch.func, target="c")
    a = rng.standard_normal((rows, 20)).astype(np.float32)
    b = rng.standard_normal((20, 24)).astype(np.float32)
    out = np.full((rows, 24), np.nan, np.float32)
    kernel(a, b, out)
    np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)
    outer = [lp for lp in collect(kernel.lowered.body, For) if lp.loop_var.name == "i_0"]
    if rows % tile:
        assert len(outer) == 2 and not collect(outer[0], IfThenElse)   # full tiles: no guard


@T.prim_func
def skip_middle(A: T.Buffer((10, 4), "float32"), B: T.Buffer((10, 4), "float32")):
    for i, j in T.grid(10, 4):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.where(i != 7)
            B[vi, vj] = A[vi, vj] + T.float32(1)


@T.prim_func
def always(A: T.Buffer((10, 4), "float32"), B: T.Buffer((10, 4), "float32")):
    for i, j in T.grid(10, 4):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.where(i + j < 20)
            B[vi, vj] = A[vi, vj] + T.float32(1)


@T.prim_func
def early_failure(A: T.Buffer((10, 4), "float32"), B: T.Buffer((10, 4), "float32")):
    for i, j in T.grid(10, 4):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.where(i >= 2)
            B[vi, vj] = A[vi, vj] + T.float32(1)


@pytest.mark.parametrize("func, loops, guarded_first", [
    (skip_middle, [(0, 7), (7, 3)], False),       # holds below 7; the rest keeps its guard
    (always, [(0, 10)], False),                   # holds everywhere: removed, one loop
    (early_failure, [(0, 10)], True),             # fails first: nothing to partition
])
def test_guards_inside_the_loop_nest(func, loops, guarded_first, rng):
    kernel = sched.build(func, target="c")
    found = [(lp.min.value, lp.extent.value) for lp in collect(kernel.lowered.body, For)
             if lp.loop_var.name == "i"]
    assert found == loops
    first = next(lp for lp in collect(kernel.lowered.body, For) if lp.loop_var.name == "i")
    assert bool(collect(first, IfThenElse)) == guarded_first
    a = rng.standard_normal((10, 4)).astype(np.float32)
    out = np.zeros((10, 4), np.float32)
    expected = np.zeros((10, 4), np.float32)
    sched.interpret(func, a, expected)
    kernel(a, out)
    np.testing.assert_array_equal(out, expected)


def test_a_guard_on_a_symbolic_bound_is_kept(rng):
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    sch = sched.Schedule(te.create_prim_func([A, te.compute((n,), lambda i: A[i] * 2.0,
                                                            name="B")]))
    sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 8])
    kernel = sched.build(sch.func, target="c")
    assert collect(kernel.lowered.body, IfThenElse)
    a = rng.standard_normal(13).astype(np.float32)
    out = np.zeros(13, np.float32)
    kernel(a, out)
    np.testing.assert_array_equal(out, a * 2)


def test_a_guard_that_always_holds_goes_and_a_function_without_guards_stays():
    from sched.lower.convert_blocks import convert_blocks_to_loops

    lowered = convert_blocks_to_loops(scale_split(96, 32))      # 32 divides 96: always true
    parted = partition_guarded_loops(lowered)
    assert len(_loops(parted, "io")) == 1 and not collect(parted.body, IfThenElse)
    assert partition_guarded_loops(parted) == parted


@pytest.mark.parametrize("call", [
    'T.evaluate(T.call_extern("int32", "store_one", T.address_of(C[vi]), A[vi]))',
    # in a let's value (audit helper-152)
    'r: T.int32 = T.call_extern("int32", "store_one", T.address_of(C[vi]), A[vi])\n'
    '            T.assume(r == 0)',
])
def test_the_rest_of_a_loop_with_only_an_extern_call_left_still_runs(call):
    # iterations 6-9 ran only the opaque call: the partition dropped them (audit helper-150)
    f = sched.parse(f'''
@T.prim_func
def f(A: T.Buffer((10,), "float32"), B: T.Buffer((10,), "float32"),
      C: T.Buffer((10,), "float32")):
    for i in range(10):
        with T.block("B"):
            vi = T.axis.spatial(10, i)
            T.where(i < 6)
            B[vi] = A[vi] * T.float32(2)
        with T.block("E"):
            vi = T.axis.spatial(10, i)
            T.reads(A[vi])
            T.writes(C[vi])
            {call}
''')

    kernel = sched.build(f, target="c", extern_c="static int store_one(float* p, float v) "
                                                  "{ *p = v + 1.0f; return 0; }")
    a, b, c = np.arange(10, dtype=np.float32), np.zeros(10, np.float32), np.zeros(10, np.float32)
    kernel(a, b, c)
    np.testing.assert_array_equal(c, a + 1)
    np.testing.assert_array_equal(b[:6], a[:6] * 2)
