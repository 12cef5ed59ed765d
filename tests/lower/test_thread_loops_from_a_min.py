"""Loops bound to threadIdx that start past 0 (`T.thread_binding(8, 16, ...)`): the thread
index is the loop variable less its min. Three passes took the thread variable as starting
at 0 (audit helpers 182, 183): a barrier was dropped between threads that share elements, a
nested loop of one axis ran the other elements, and the C target's per-thread copies were
indexed past their end. And a nested loop of one axis must not be longer than the outer
one."""

from __future__ import annotations

import numpy as np
import pytest

import sched


def _shared_across_threads():
    return sched.parse("""
@T.prim_func
def f(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    S = T.alloc_buffer((8,), "float32", scope="shared")
    for tx in T.thread_binding(8, 16, thread="threadIdx.x"):
        with T.block("S"):
            vi = T.axis.spatial(16, tx)
            S[vi - 8] = A[vi] * T.float32(2)
    for tx in T.thread_binding(8, 16, thread="threadIdx.x"):
        with T.block("B"):
            vi = T.axis.spatial(16, tx)
            B[vi] = S[15 - vi]
""")


@pytest.mark.parametrize("target, options", [("c", {"thread_order": "forward"}),
                                             ("c", {"thread_order": "reverse"}),
                                             ("cuda-emu", {})])
def test_threads_from_a_min_sharing_elements_are_ordered_by_a_barrier(target, options):
    # thread 8 writes S[0], thread 15 reads it: over 0 .. 7 the two indices never met
    a = np.arange(16, dtype=np.float32)
    b = np.zeros(16, np.float32)
    sched.build(_shared_across_threads(), target=target, **options)(a, b)
    np.testing.assert_array_equal(b[8:], [2 * a[23 - t] for t in range(8, 16)])
    source = sched.build(_shared_across_threads(), target="cuda", arch="sm_90").source
    assert "__syncthreads" in source


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_a_nested_loop_of_one_thread_axis_from_a_min(target):
    func = sched.parse("""
@T.prim_func
def f(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for tx in T.thread_binding(16, thread="threadIdx.x"):
        for ty in T.thread_binding(8, 16, thread="threadIdx.x"):
            with T.block("B"):
                vi = T.axis.spatial(16, ty)
                B[vi] = A[vi] * T.float32(2)
""")
    a = np.arange(16, dtype=np.float32)
    b = np.zeros(16, np.float32)
    sched.build(func, target=target)(a, b)
    expected = np.zeros(16, np.float32)
    expected[8:] = a[8:] * 2
    np.testing.assert_array_equal(b, expected)


def _softmax_on_threads_from_one():
    return sched.parse("""
@T.prim_func
def f(A: T.Buffer((2, 33), "float32"), C: T.Buffer((2, 33), "float32")):
    M = T.alloc_buffer((2,), "float32", scope="local")
    S = T.alloc_buffer((2,), "float32", scope="local")
    for bx in T.thread_binding(2, thread="blockIdx.x"):
        for tx in T.thread_binding(1, 34, thread="threadIdx.x"):
            with T.block("M"):
                vi = T.axis.spatial(2, bx)
                vk = T.axis.reduce(33, tx - 1)
                with T.init():
                    M[vi] = T.float32(-1e30)
                M[vi] = T.max(M[vi], A[vi, vk])
        for tx in T.thread_binding(1, 34, thread="threadIdx.x"):
            with T.block("S"):
                vi = T.axis.spatial(2, bx)
                vk = T.axis.reduce(33, tx - 1)
                with T.init():
                    S[vi] = T.float32(0)
                S[vi] = S[vi] + T.exp(A[vi, vk] - M[vi])
        for tx in T.thread_binding(1, 34, thread="threadIdx.x"):
            with T.block("C"):
                vi = T.axis.spatial(2, bx)
                vj = T.axis.spatial(33, tx - 1)
                C[vi, vj] = T.exp(A[vi, vj] - M[vi]) / S[vi]
""")


@pytest.mark.parametrize("target, options", [("c", {"thread_order": "forward"}),
                                             ("c", {"thread_order": "reverse"}),
                                             ("cuda-emu", {})])
def test_local_copies_of_threads_from_a_min(target, options):
    # the C target's per-thread copies of M and S were indexed by the loop variable, 1 .. 33:
    # `float M[33]` written at M[33], wrong numbers (audit helper-183)
    a = np.random.default_rng(1).standard_normal((2, 33)).astype(np.float32) * 3
    c = np.zeros((2, 33), np.float32)
    sched.build(_softmax_on_threads_from_one(), target=target, **options)(a, c)
    e = np.exp(a - a.max(1, keepdims=True))
    np.testing.assert_allclose(c, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_a_nested_loop_of_one_thread_axis_longer_than_the_outer_one_is_refused():
    # an extent n (16 at the call) inside 8 threads ran only elements 0 .. 7 (audit
    # helper-183); T.min(8, n) is at most 8 and runs
    def nested(extent: str):
        return sched.parse(f"""
@T.prim_func
def f(a: T.handle, b: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for tx in T.thread_binding(8, thread="threadIdx.x"):
        for ty in T.thread_binding({extent}, thread="threadIdx.x"):
            with T.block("B"):
                vi = T.axis.spatial(n, ty)
                B[vi] = A[vi] * T.float32(2)
""")

    with pytest.raises(sched.ScheduleError, match="cannot use more threads than the outer one"):
        sched.build(nested("n"), target="c")
    # (and so is a min of it and `n * 4 + 4`, which may wrap: it was refused, helper-186)
    for extent in ("T.min(8, n)", "T.min(T.min(8, n), n * 4 + 4)"):
        a = np.arange(6, dtype=np.float32)
        b = np.zeros(6, np.float32)
        sched.build(nested(extent), target="c")(a, b)
        np.testing.assert_array_equal(b, a * 2)


@pytest.mark.parametrize("bounds", ["tx, tx + 2", "T.min(tx, 4)"])
def test_a_nested_loop_of_one_thread_axis_bounded_by_the_outer_index_is_refused(bounds):
    # the outer index in the inner loop's min or extent: one index stood for both loops and
    # the kernel ran the wrong iterations, or none (audit helper-184)
    func = sched.parse(f"""
@T.prim_func
def f(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for tx in T.thread_binding(8, thread="threadIdx.x"):
        for ty in T.thread_binding({bounds}, thread="threadIdx.x"):
            with T.block("B"):
                vi = T.axis.spatial(16, ty)
                B[vi] = A[vi] * T.float32(2)
""")
    with pytest.raises(sched.ScheduleError, match="its bounds use 'tx': one thread index "
                                                  "cannot stand for both loops"):
        sched.build(func, target="c")
