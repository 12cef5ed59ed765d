"""Loops bound to threadIdx that start past 0 (`T.thread_binding(8, 16, ...)`): the thread
index is the loop variable less its min. Two passes took the thread variable as starting at
0 (audit helper-182): a barrier was dropped between threads that share elements, and a
nested loop of one axis ran the other elements."""

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
