"""Local memory is each GPU thread's own: a value stored there is read back only by the thread
that stored it (kernel_stages.local_read_by_another_thread, asked at build). A row sum in
registers on threadIdx.y read by an epilogue on threadIdx.x was accepted and read other
threads' garbage on every target (audit helper-49)."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import BuildError
from tests.conftest import assert_close

ROWS, COLS, K = 3, 4, 6


def row_sum_then_epilogue():
    X = te.placeholder((ROWS, K), name="X")
    k = te.reduce_axis((0, K), name="k")
    S = te.compute((ROWS,), lambda i: te.sum(X[i, k], axis=k), name="S")
    E = te.compute((ROWS, COLS), lambda i, j: S[i] * 2.0 - 1.0, name="E")
    sch = sched.Schedule(te.create_prim_func([X, E]))
    sch.set_scope(sch.get_block("S"), 0, "local")
    return sch


def expected(x):
    return np.repeat(x.sum(1)[:, None] * 2 - 1, COLS, axis=1)


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
@pytest.mark.parametrize("writer, reader", [("threadIdx.y", "threadIdx.x"),
                                            ("threadIdx.x", "threadIdx.y")])
def test_a_local_value_read_on_another_thread_axis_is_refused(writer, reader, target):
    sch = row_sum_then_epilogue()
    sch.bind(sch.get_loops(sch.get_block("S"))[0], writer)
    sch.bind(sch.get_loops(sch.get_block("E"))[1], reader)
    with pytest.raises(BuildError, match="block E reads 'S' in local memory .* on threads "
                                         "that did not store what it reads there"):
        sched.build(sch.func, target=target)


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_a_local_value_every_thread_along_the_reader_axis_stored(target):
    """The row sum under threadIdx.y only (each x thread computes its row's sum for
    itself), the epilogue under both axes at the row: every thread reads its own copy."""
    sch = row_sum_then_epilogue()
    row = sch.get_loops(sch.get_block("S"))[0]
    sch.bind(row, "threadIdx.y")
    sch.reverse_compute_at(sch.get_block("E"), row)
    sch.bind(sch.get_loops(sch.get_block("E"))[1], "threadIdx.x")
    x = np.random.default_rng(0).standard_normal((ROWS, K)).astype(np.float32)
    out = np.zeros((ROWS, COLS), np.float32)
    sched.build(sch.func, target=target)(x, out)
    assert_close(out, expected(x))


@pytest.mark.parametrize("threads", [16, 7, 64, 100])
def test_a_cross_thread_accumulator_cached_in_local_memory_is_in_every_thread(threads):
    """cache_write to local of a cross-thread reduction, written back under blockIdx in every
    thread (TVM's usual schedule): the allreduce stores the total in every thread's copy.
    It was refused at build (the total was stored on thread 0 only: audit helper-177)."""
    X = te.placeholder((4, 50), name="X")
    k = te.reduce_axis((0, 50), name="k")
    func = te.create_prim_func([X, te.compute((4,), lambda i: te.sum(X[i, k], axis=k),
                                              name="S")])
    sch = sched.Schedule(func)
    block = sch.get_block("S")
    i, loop = sch.get_loops(block)
    sch.bind(i, "blockIdx.x")
    sch.bind(sch.split(loop, [None, threads])[1], "threadIdx.x")
    cache = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(cache, i)
    x = np.random.default_rng(1).standard_normal((4, 50)).astype(np.float32)
    for target in ("c", "cuda-emu"):
        out = np.zeros(4, np.float32)
        sched.build(sch.func, target=target)(x, out)
        assert_close(out, x.sum(1), rtol=1e-5)
    source = sched.build(sch.func, target="cuda", arch="sm_90").source
    assert "S_total" in source and "__syncthreads" in source


@pytest.mark.parametrize("threads", [32, 7, 70])
def test_a_row_total_in_local_memory_is_read_by_the_next_loop_on_the_threads(threads):
    """A softmax-like row: its sum a cross-thread reduction into local memory, the
    normalization on the same threads in a sibling loop bound to threadIdx.x: every thread
    reads its own copy of the total (refused at bind as a flow between threads: audit
    helper-177)."""
    A = te.placeholder((8, 70), name="A")
    k = te.reduce_axis((0, 70), name="k")
    B = te.compute((8,), lambda i: te.sum(A[i, k], axis=k), name="B")
    C = te.compute((8, 70), lambda i, j: A[i, j] / B[i], name="C")
    sch = sched.Schedule(te.create_prim_func([A, C]))
    sch.set_scope(sch.get_block("B"), 0, "local")
    i, j = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "blockIdx.x")
    sch.bind(sch.split(j, [None, threads])[1], "threadIdx.x")
    sch.compute_at(sch.get_block("B"), i)
    sch.bind(sch.split(sch.get_loops(sch.get_block("B"))[-1], [None, threads])[1],
             "threadIdx.x")
    a = np.random.default_rng(2).random((8, 70)).astype(np.float32)
    for target in ("c", "cuda-emu"):
        out = np.zeros((8, 70), np.float32)
        sched.build(sch.func, target=target)(a, out)
        assert_close(out, a / a.sum(1, keepdims=True), rtol=1e-5)


@pytest.mark.parametrize("threads", [64, 16])
def test_a_decomposed_local_total_in_a_kernel_of_one_thread_block(threads):
    """Rows serial in one thread block (no blockIdx loop), each row's total a cross-thread
    reduction into local memory, its init decomposed outside the thread loops: every thread
    zeroes its own copy. It was refused as a store every GPU thread would run (audit
    helper-179); with the rows on blockIdx.x it built."""
    A = te.placeholder((6, 64), name="A")
    k = te.reduce_axis((0, 64), name="k")
    S = te.compute((6,), lambda i: te.sum(A[i, k], axis=k), name="S")
    C = te.compute((6, 64), lambda i, j: A[i, j] / S[i], name="C")
    sch = sched.Schedule(te.create_prim_func([A, C]))
    sch.set_scope(sch.get_block("S"), 0, "local")
    i, j = sch.get_loops(sch.get_block("C"))
    sch.bind(sch.split(j, [None, threads])[1], "threadIdx.x")
    sch.compute_at(sch.get_block("S"), i)
    outer, inner = sch.split(sch.get_loops(sch.get_block("S"))[-1], [None, threads])
    sch.bind(inner, "threadIdx.x")
    sch.decompose_reduction(sch.get_block("S"), outer)
    a = np.random.default_rng(4).random((6, 64)).astype(np.float32)
    for target in ("c", "cuda-emu"):
        out = np.zeros((6, 64), np.float32)
        sched.build(sch.func, target=target)(a, out)
        assert_close(out, a / a.sum(1, keepdims=True), rtol=1e-5)


def test_a_local_total_read_on_another_row_of_threads_is_refused():
    """Rows on threadIdx.y, each reduced across threadIdx.x into local memory: only the
    threads of the reducing row hold its total, so an epilogue on threadIdx.y that reads
    another row's total is refused."""
    X = te.placeholder((4, 32), name="X")
    k = te.reduce_axis((0, 32), name="k")
    S = te.compute((4,), lambda i: te.sum(X[i, k], axis=k), name="S")
    E = te.compute((4, 32), lambda i, j: X[i, j] / S[3 - i], name="E")
    sch = sched.Schedule(te.create_prim_func([X, E]))
    sch.set_scope(sch.get_block("S"), 0, "local")
    i, j = sch.get_loops(sch.get_block("S"))
    sch.bind(i, "threadIdx.y")
    sch.bind(j, "threadIdx.x")
    with pytest.raises(sched.ScheduleError, match="a flow dependence goes from one thread to "
                                                  "another between them through 'S' in local"):
        sch.bind(sch.get_loops(sch.get_block("E"))[0], "threadIdx.y")


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_a_register_prefetch_chain_under_nested_thread_loops(target):
    """global -> local -> shared, the local copy computed at the cooperative copy's own
    threadIdx.x loop, under the tile's thread loops: nested loops of one axis share a thread
    index, and each thread reads back what it stored (audit helper-52 saw it refused)."""
    A = te.placeholder((64, 64), name="A")
    B = te.placeholder((64, 64), name="B")
    sch = sched.Schedule(te.create_prim_func([A, B, te.ops.matmul(A, B)]))
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    bi, ti = sch.split(i, [None, 16])
    bj, tj = sch.split(j, [None, 16])
    ko, _ = sch.split(k, [None, 8])
    sch.reorder(bi, bj, ti, tj, ko)
    for loop, axis in ((bi, "blockIdx.y"), (bj, "blockIdx.x"), (ti, "threadIdx.y"),
                       (tj, "threadIdx.x")):
        sch.bind(loop, axis)
    shared = sch.cache_read(block, "A", "shared")
    sch.compute_at(shared, ko)
    local = sch.cache_read(shared, "A", "local")
    _, ty, tx = sch.split(sch.fuse(*sch.get_loops(shared)[-2:]), [None, 16, 16])
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    sch.compute_at(local, tx)
    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal((64, 64)).astype(np.float32) for _ in range(2))
    c = np.zeros((64, 64), np.float32)
    sched.build(sch.func, target=target)(a, b, c)
    assert_close(c, a @ b, rtol=1e-4, atol=1e-4)
