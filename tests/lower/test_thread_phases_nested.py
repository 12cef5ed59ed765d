"""The C target's emulation of GPU threads (sched/lower/thread_phases.py) against numpy, where
the thread loops are not one perfect nest (audit helper-45, both wrong on `c`, right on
`cuda-emu`):

- a threadIdx.x loop holding barriers beside another statement in a threadIdx.y loop's body:
  its phases must run over both axes' threads (it was run as a serial loop around the
  threadIdx.y phases, each barrier waiting only for the threads of one threadIdx.x);
- a "global" intermediate allocated in the threadIdx.y loop, written under threadIdx.x and
  read by an epilogue outside it: one copy per threadIdx.y iteration, shared by the threads
  along x (it was one copy per thread, the epilogue reading thread 0's)."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.lower.pipeline import lower
from tests.conftest import assert_close

ORDERS = ("forward", "reverse", "shuffle:3")


def tiled_matmul(M: int, N: int, K: int):
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    sch = sched.Schedule(te.create_prim_func([A, B, te.ops.matmul(A, B)], name="mm"))
    i, j, k = sch.get_loops(sch.get_block("C"))
    bi, ty = sch.split(i, [None, 4])
    bj, tx = sch.split(j, [None, 4])
    ko, ki = sch.split(k, [None, 4])
    sch.reorder(bi, bj, ty, tx, ko, ki)
    sch.bind(bi, "blockIdx.y")
    sch.bind(bj, "blockIdx.x")
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    return sch, ty, ko


def b_copied_per_row_a_fetched_cooperatively(M, N, K):
    sch, ty, ko = tiled_matmul(M, N, K)
    block = sch.get_block("C")
    b_shared = sch.cache_read(block, 1, "shared")
    sch.compute_at(b_shared, ty)                 # its loops left serial, beside the x loop
    a_shared = sch.cache_read(block, 0, "shared")
    sch.compute_at(a_shared, ko)
    _, y, x = sch.split(sch.fuse(*sch.get_loops(a_shared)[-2:]), [None, 4, 4])
    sch.bind(y, "threadIdx.y")
    sch.bind(x, "threadIdx.x")
    return sch


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("shape", [(8, 8, 8), (12, 8, 16)])
def test_a_thread_loop_with_barriers_beside_a_statement_runs_over_both_axes(rng, order, shape):
    M, N, K = shape
    sch = b_copied_per_row_a_fetched_cooperatively(M, N, K)
    a = rng.standard_normal((M, K)).astype("float32")
    b = rng.standard_normal((K, N)).astype("float32")
    for target, options in (("c", {"thread_order": order}), ("cuda-emu", {})):
        c = np.full((M, N), np.nan, "float32")
        sched.build(sch.func, target=target, **options)(a, b, c)
        assert_close(c, a @ b, rtol=1e-4, atol=1e-4)


def test_the_inner_thread_loops_phases_are_thread_nests_of_both_axes():
    script = lower(b_copied_per_row_a_fetched_cooperatively(8, 8, 8).func, target="c").script()
    # each phase of the K loop (fetch A, then compute) loops over the y and the x threads
    phase = ('                for i_1 in T.thread_binding(4, thread="threadIdx.y"):\n'
             '                    for j_1 in T.thread_binding(4, thread="threadIdx.x"):\n')
    assert f"            for k_0 in range(2):\n{phase}" in script
    assert script.count(phase) == 2


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("shape", [(8, 8, 8), (10, 9, 7)])
def test_a_global_intermediate_in_a_thread_loop_is_shared_along_the_axes_inside(rng, order,
                                                                                shape):
    M, N, K = shape
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    C = te.ops.matmul(A, B)
    D = te.compute((M, N), lambda i, j: te.max(C[i, j], 0.0), name="D")
    sch = sched.Schedule(te.create_prim_func([A, B, D], name="mm_relu"))
    i, j, k = sch.get_loops(sch.get_block("C"))
    bi, ty = sch.split(i, [None, 4])
    bj, tx = sch.split(j, [None, 4])
    sch.reorder(bi, bj, ty, tx, k)
    sch.bind(bi, "blockIdx.y")
    sch.bind(bj, "blockIdx.x")
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    sch.reverse_compute_at(sch.get_block("D"), ty)     # its loop serial: every x thread
    a = rng.standard_normal((M, K)).astype("float32")
    b = rng.standard_normal((K, N)).astype("float32")
    for target, options in (("c", {"thread_order": order}), ("cuda-emu", {})):
        d = np.full((M, N), np.nan, "float32")
        sched.build(sch.func, target=target, **options)(a, b, d)
        assert_close(d, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)
    # one copy of the compacted row (4) per threadIdx.y iteration (4), none per x thread
    script = lower(sch.func, target="c").script()
    assert 'C = T.decl_buffer((16,), "float32")' in script
    assert "T.max(C[i_1_1 * 4 + ax0], T.float32(0.0))" in script


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_a_fragment_fill_decomposed_at_the_warp_loop(target):
    """A wmma matmul's accumulator fill decomposed at the warp loop (threadIdx.y), so that it
    runs in a nest of its own beside the cooperative copies under threadIdx.x: the C target's
    thread emulation wrapped the fill per thread and then again in the block's threadIdx.x
    loop, an internal error ("sched_threadIdx_x is defined twice": audit helper-180)."""
    from sched.hand_schedules.gpu import _fragment_loops

    M, N, K = 32, 64, 32
    A = te.placeholder((M, K), "float16", name="A")
    B = te.placeholder((K, N), "float16", name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(
        te.cast(A[i, k], "float32") * te.cast(B[k, j], "float32"), axis=k), name="C")
    sch = sched.Schedule(te.create_prim_func([A, B, C]))
    block = sch.get_block("C")
    i, j, r = sch.get_loops(block)
    bi, ii = sch.split(i, [None, 16])
    bj, wj, jj = sch.split(j, [None, 2, 16])
    ko, kk = sch.split(r, [None, 16])
    sch.reorder(bi, bj, wj, ko, ii, jj, kk)
    for loop, axis in ((bi, "blockIdx.y"), (bj, "blockIdx.x"), (wj, "threadIdx.y")):
        sch.bind(loop, axis)
    accumulator = sch.cache_write(block, 0, "wmma.accumulator")
    sch.reverse_compute_at(accumulator, wj)
    fragments = []
    for index, scope in ((0, "wmma.matrix_a"), (1, "wmma.matrix_b")):
        shared = sch.cache_read(block, index, "shared")
        fragments.append(sch.cache_read(block, index, scope))
        sch.compute_at(fragments[-1], ko)
        sch.compute_at(shared, ko)
        _, ty, tx = sch.split(sch.fuse(*sch.get_loops(shared)[-2:]), [None, 2, 32])
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
    init = sch.decompose_reduction(block, wj)
    sch.tensorize(_fragment_loops(sch, fragments[0]), "wmma_load_16x16x16_f16_a")
    sch.tensorize(_fragment_loops(sch, fragments[1]), "wmma_load_16x16x16_f16_b")
    sch.tensorize(sch.get_loops(init)[-2], "wmma_fill_16x16x16_f32")
    sch.tensorize(sch.get_loops(block)[-3], "wmma_sync_16x16x16_f16f16f32")
    sch.tensorize(_fragment_loops(sch, accumulator), "wmma_store_16x16x16_f32_global")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.zeros((M, N), np.float32)
    sched.build(sch.func, target=target)(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-4,
                               atol=1e-3)
