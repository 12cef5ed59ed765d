"""Races without a GPU: the C target runs a GPU kernel's blocks and each phase's threads
forward, in reverse or shuffled (SCHED_THREAD_ORDER, or `thread_order=`). Every GPU hand
schedule, and random GPU schedules, compute what numpy does in every order."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

from sched import env
from sched import hand_schedules as hs
from sched.c.kernel import build_c
from sched.errors import ScheduleError
from sched.lower import lower
from sched.script import T
from tests.conftest import assert_close
from tests.test_hand_schedules import GPU_CASES, inputs_for

ORDERS = ("forward", "reverse", "shuffle")


@T.prim_func
def racy(A: T.Buffer((64,), "float32"), B: T.Buffer((1,), "float32")):
    for b in T.thread_binding(1, thread="blockIdx.x"):  # noqa: B007
        for t in T.thread_binding(64, thread="threadIdx.x"):
            B[0] = A[t]        # every thread writes one element: the last one wins


def _run_racy(**options):
    a = np.arange(64, dtype=np.float32)
    b = np.zeros(1, np.float32)
    build_c(racy, **options)(a, b)
    return b[0]


def test_the_order_decides_a_racy_result():
    assert _run_racy(thread_order="forward") == 63
    assert _run_racy(thread_order="reverse") == 0
    assert _run_racy(thread_order="shuffle") not in (0, 63) or \
        _run_racy(thread_order="shuffle:1") not in (0, 63)


def test_the_order_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("SCHED_THREAD_ORDER", "reverse")
    assert env.THREAD_ORDER.value() == ("reverse", 0)
    assert _run_racy() == 0
    monkeypatch.setenv("SCHED_THREAD_ORDER", "sideways")
    with pytest.raises(ValueError, match="SCHED_THREAD_ORDER='sideways'"):
        env.THREAD_ORDER.value()


@pytest.mark.parametrize("order", ["shuffle:abc", "shuffle:1:2"])
def test_a_seed_that_is_no_integer_is_refused_naming_the_argument(order):
    # (a raw int() error: audit helper-150)
    with pytest.raises(ValueError, match=f"thread_order='{order}': shuffle's seed is an "
                                         f"integer"):
        _run_racy(thread_order=order)


def test_a_shuffle_visits_every_thread_once():
    text = lower(racy, thread_order="shuffle:3").script()
    assert "sched_threads_" in text and "% 64" in text


@T.prim_func
def rows_from_eight(A: T.Buffer((20, 4), "float32"), B: T.Buffer((20, 4), "float32")):
    for i in T.thread_binding(8, 20, thread="blockIdx.x"):
        for j in T.thread_binding(4, thread="threadIdx.x"):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] + T.float32(1)


@pytest.mark.parametrize("order", ORDERS)
def test_a_block_loop_that_starts_above_zero_visits_its_own_range(order):
    """`T.thread_binding(8, 20)` (loop_partition's second part, bound): the reordered block
    index counts from 8 (in reverse it ran 19 - i, rows 0..11; audit helper-69)."""
    a = np.arange(80, dtype=np.float32).reshape(20, 4)
    b = np.zeros((20, 4), np.float32)
    build_c(rows_from_eight, thread_order=order)(a, b)
    np.testing.assert_array_equal(b[8:], a[8:] + 1)
    np.testing.assert_array_equal(b[:8], 0)


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("name", sorted(GPU_CASES))
def test_every_gpu_hand_schedule_matches_numpy_in_every_order(name, order):
    schedule, shapes, reference, _ = GPU_CASES[name]
    arrays = inputs_for(shapes)
    expected = reference(*[a.astype(np.float64) for a in arrays])
    out = np.zeros(expected.shape, np.float32)
    build_c(schedule().func, thread_order=order)(*arrays, out)
    assert_close(out, expected, rtol=1e-4, atol=1e-4)


# -- random GPU schedules: the hand schedules' recipes at random sizes and tiles ---------------


@st.composite
def gpu_schedules(draw):
    """(schedule, input shapes, reference) of a hand schedule's recipe at random sizes; sizes
    the recipe cannot schedule (a loop of extent 1 it wants to unroll) are rejected."""
    try:
        return _gpu_schedule(draw)
    except (ScheduleError, ValueError):
        assume(False)


def _gpu_schedule(draw):
    kind = draw(st.sampled_from(["matmul", "softmax", "elementwise", "conv2d"]))
    if kind == "matmul":
        threads = (draw(st.sampled_from([2, 4, 8])), draw(st.sampled_from([2, 4, 8])))
        tile = (draw(st.sampled_from([2, 4])), draw(st.sampled_from([2, 4])))
        m, n, k = (draw(st.integers(2, 24)) for _ in range(3))
        sch = hs.gpu_matmul(m, n, k, block_tile=(threads[0] * tile[0], threads[1] * tile[1]),
                            thread_tile=tile, k_tile=draw(st.sampled_from([2, 4, 8])))
        return sch, [(m, k), (k, n)], lambda a, b: a @ b
    if kind == "softmax":
        rows, cols = draw(st.integers(2, 4)), draw(st.integers(2, 70))
        sch = hs.gpu_softmax(rows, cols, threads=draw(st.sampled_from([8, 16, 32])))
        from tests.test_hand_schedules import softmax_reference
        return sch, [(rows, cols)], softmax_reference
    if kind == "elementwise":
        shape = tuple(draw(st.lists(st.integers(1, 9), min_size=1, max_size=3)))
        sch = hs.gpu_elementwise(shape, threads=draw(st.sampled_from([4, 16, 32])))
        return sch, [shape, shape], lambda x, y: np.maximum(x * 2 + y, 0)
    c, h, w, k = (draw(st.integers(2, 5)) for _ in range(4))
    sch = hs.gpu_conv2d(1, c, h, w, k, threads=draw(st.sampled_from([8, 32])))
    from tests.test_hand_schedules import conv_reference
    return sch, [(1, c, h, w), (k, c, 3, 3)], conv_reference


# each example schedules a GPU recipe (seconds of legality checks): few examples, no shrinking
@settings(max_examples=3, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(gpu_schedules(), st.integers(0, 1000))
def test_random_gpu_schedules_match_numpy_in_every_order(case, seed):
    sch, shapes, reference = case
    arrays = inputs_for(shapes, seed)
    expected = reference(*[a.astype(np.float64) for a in arrays])
    for order in ("forward", "reverse", f"shuffle:{seed}"):
        out = np.zeros(expected.shape, np.float32)
        build_c(sch.func, thread_order=order)(*arrays, out)
        assert_close(out, expected, rtol=1e-4, atol=1e-4)


@T.prim_func
def sibling_loops(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32"),
                  C: T.Buffer((64,), "float32")):
    for b in T.thread_binding(1, thread="blockIdx.x"):  # noqa: B007
        for t in T.thread_binding(64, thread="threadIdx.x"):
            B[t] = A[t] + T.float32(1)
        for t2 in T.thread_binding(64, thread="threadIdx.x"):
            C[t2] = B[63 - t2]        # another thread's B: no barrier orders global memory


@pytest.mark.parametrize("order", ORDERS)
def test_sibling_thread_loops_are_ordered_by_a_barrier_on_global_memory(order):
    """On the GPU both loops run in the same threads, one after the other in each thread, so
    C[t2] = B[63 - t2] reads another thread's B: the lowering puts a barrier between them
    (it orders global memory within a block too, since stop 21), and every thread order of
    the C target computes the ordered result. Before, the C target showed the race."""
    assert "T.tvm_storage_sync" in lower(sibling_loops, target="cuda").script()
    a = np.arange(64, dtype=np.float32)
    b, c = np.zeros(64, np.float32), np.zeros(64, np.float32)
    build_c(sibling_loops, thread_order=order)(a, b, c)
    np.testing.assert_array_equal(c, (a + 1)[::-1])


@T.prim_func
def sibling_blocks(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32"),
                   C: T.Buffer((8,), "float32")):
    for b in T.thread_binding(8, thread="blockIdx.x"):
        B[b] = A[b] * T.float32(2)
    for b2 in T.thread_binding(8, thread="blockIdx.x"):
        C[b2] = B[7 - b2]             # another block's B: blocks are never ordered


def test_sibling_block_loops_are_one_grid():
    text = lower(sibling_blocks).script()
    assert text.count('thread="blockIdx.x"') == 1
    a = np.arange(8, dtype=np.float32)
    b, c = np.zeros(8, np.float32), np.zeros(8, np.float32)
    build_c(sibling_blocks, thread_order="forward")(a, b, c)
    assert not np.array_equal(c, (a * 2)[::-1])


def _accumulator_per_warp_stored_by_lanes():
    """A local accumulator per (threadIdx.z, threadIdx.y), computed outside threadIdx.x after
    a barrier (the shared tile of A), then stored by the 32 lanes of threadIdx.x: on the GPU
    every lane computes its own copy of the accumulator."""
    import sched
    from sched import compute as te

    A = te.placeholder((64, 32), name="A")
    B = te.placeholder((32, 64), name="B")
    k = te.reduce_axis((0, 32), name="k")
    C = te.compute((64, 64), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    sch = sched.Schedule(te.create_prim_func([A, B, C], name="mm"))
    block = sch.get_block("C")
    i, j, r = sch.get_loops(block)
    bi, wi, fi = sch.split(i, [None, 2, 16])
    bj, wj, fj = sch.split(j, [None, 2, 16])
    ko, ki = sch.split(r, [None, 16])
    sch.reorder(bi, bj, wi, wj, ko, fi, fj, ki)
    for loop, tag in ((bi, "blockIdx.y"), (bj, "blockIdx.x"), (wi, "threadIdx.z"),
                      (wj, "threadIdx.y")):
        sch.bind(loop, tag)
    accumulator = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(accumulator, wj)
    shared = sch.cache_read(block, 0, "shared")
    sch.compute_at(shared, ko)
    fused = sch.fuse(*sch.get_loops(shared)[-2:])
    for loop, tag in zip(sch.split(fused, [None, 2, 2, 32])[1:],
                         ("threadIdx.z", "threadIdx.y", "threadIdx.x")):
        sch.bind(loop, tag)
    _, lanes = sch.split(sch.fuse(*sch.get_loops(accumulator)[-2:]), [None, 32])
    sch.bind(lanes, "threadIdx.x")
    return sch.func


@pytest.mark.parametrize("order", ["forward", "shuffle:3"])
def test_private_copies_filled_outside_a_thread_axis_are_filled_for_each_of_its_threads(
        order):
    # before the fix, only lane 0's copy of the accumulator was computed (the phase ran once
    # for all lanes), and lanes 1..31 stored uninitialized values
    func = _accumulator_per_warp_stored_by_lanes()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 32)).astype(np.float32)
    b = rng.standard_normal((32, 64)).astype(np.float32)
    c = np.zeros((64, 64), np.float32)
    build_c(func, thread_order=order)(a, b, c)
    assert_close(c, a @ b)


@T.prim_func
def _rows_three_back(A: T.Buffer((8,), "float32"), W: T.Buffer((8,), "float32")):
    for i0 in range(4):
        for t in T.thread_binding(2, thread="threadIdx.x"):
            with T.block("W"):
                vi = T.axis.spatial(8, i0 * 2 + t)
                W[vi] = T.if_then_else(vi > 2, W[vi - 3], T.float32(0)) + A[vi]


@T.prim_func
def _rows_two_back(A: T.Buffer((8,), "float32"), W: T.Buffer((8,), "float32")):
    for i0 in range(4):
        for t in T.thread_binding(2, thread="threadIdx.x"):
            with T.block("W"):
                vi = T.axis.spatial(8, i0 * 2 + t)
                W[vi] = T.if_then_else(vi > 1, W[vi - 2], T.float32(0)) + A[vi]


def _prefix(a, step):
    out = a.copy()
    for i in range(step, len(a)):
        out[i] += out[i - step]
    return out


@pytest.mark.parametrize("order", ["forward", "reverse"])
def test_threads_run_the_serial_loop_around_them_on_their_own(order):
    # W[i] reads W[i - 3], the other thread's, an iteration or two before: the race check
    # refuses the function (built here without it). The lowering closes each i0 iteration
    # with a barrier (global memory is ordered within a block since stop 21), so the threads
    # stay in step and each order gives the prefix sums; the C target runs each thread's
    # whole i0 loop in turn between barriers, as the GPU would
    a = np.arange(8, dtype=np.float32)
    w = np.zeros(8, np.float32)
    _build(_rows_three_back, order)(a, w)
    np.testing.assert_array_equal(w, _prefix(a, 3))
    # each thread reading only what it wrote itself: the same in every order
    w = np.zeros(8, np.float32)
    _build(_rows_two_back, order)(a, w)
    np.testing.assert_array_equal(w, _prefix(a, 2))


def _build(func, order):
    import sched

    return sched.build(func, target="c", thread_order=order, check_races=False)


@pytest.mark.parametrize("order", ORDERS)
def test_thread_nests_inside_thread_nests_get_their_own_variables(order):
    # found by the tensor-core fuzzer: warps on threadIdx.z/y (extent 1) around fragments
    # (a private copy per thread) and a shared tile fetched on threadIdx.x under them: the
    # x nests run inside the z/y nest, and in reverse order both nests' loop variables were
    # named sched_threads_0 (the inner one hid the outer one: not well formed)
    from sched import compute as te
    from sched.schedule import Schedule

    A = te.placeholder((16, 16), "float16", name="A")
    B = te.placeholder((16, 16), "float16", name="B")
    k = te.reduce_axis((0, 16), name="k")
    C = te.compute((16, 16), lambda i, j: te.sum(te.cast(A[i, k], "float32")
                                                 * te.cast(B[k, j], "float32"), axis=k),
                   name="C")
    sch = Schedule(te.create_prim_func([A, B, C]))
    block = sch.get_block("C")
    i, j, r = sch.get_loops(block)
    bi, wi, ii = sch.split(i, [None, 1, 8])
    bj, wj, jj = sch.split(j, [None, 1, 8])
    ko, ki, kk = sch.split(r, [None, 1, 8])
    sch.reorder(bi, bj, wi, wj, ko, ki, ii, jj, kk)
    sch.bind(bi, "blockIdx.y")
    sch.bind(bj, "blockIdx.x")
    sch.bind(wi, "threadIdx.z")
    sch.bind(wj, "threadIdx.y")
    accumulator = sch.cache_write(block, 0, "wmma.accumulator")
    sch.reverse_compute_at(accumulator, wj)
    for index, scope in ((0, "wmma.matrix_a"), (1, "wmma.matrix_b")):   # reads: A, B, C
        shared = sch.cache_read(block, index, "shared")
        fragment = sch.cache_read(block, index, scope)
        sch.compute_at(fragment, ki)
        sch.compute_at(shared, ko)
        fused = sch.fuse(*sch.get_loops(shared)[-2:])
        _, tz, ty, tx = sch.split(fused, [None, 1, 1, 32])
        sch.bind(tz, "threadIdx.z")
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
    rng = np.random.default_rng(0)
    a, b = (rng.integers(-3, 4, (16, 16)).astype(np.float16) for _ in range(2))
    c = np.zeros((16, 16), np.float32)
    build_c(sch.func, thread_order=order)(a, b, c)
    np.testing.assert_array_equal(c, a.astype(np.float32) @ b.astype(np.float32))


@T.prim_func
def per_thread_global_rows(A: T.Buffer((8, 2), "float32"), B: T.Buffer((8, 2), "float32")):
    with T.block("root"):
        R = T.alloc_buffer((8, 2), "float32")
        for b in T.thread_binding(2, thread="blockIdx.x"):
            for t in T.thread_binding(4, thread="threadIdx.x"):
                for j in range(2):
                    with T.block("R"):
                        vi = T.axis.spatial(8, b * 4 + t)
                        vj = T.axis.spatial(2, j)
                        R[vi, 1 - vj] = A[vi, vj] * T.float32(2)
                for j in range(2):
                    with T.block("B"):
                        vi = T.axis.spatial(8, b * 4 + t)
                        vj = T.axis.spatial(2, j)
                        B[vi, vj] = R[vi, 1 - vj] + T.float32(1)


@pytest.mark.parametrize("order", ORDERS)
def test_a_global_intermediate_placed_in_a_thread_loop_is_one_copy_per_thread(order):
    # no value of R goes from one thread to another: plan_buffer_allocation allocates it
    # inside the thread loop (a row per thread, compacted); the emulation hoists the
    # allocation out of the thread loops, and must keep one copy per thread (found by the
    # fuzzer: the copies were shared, and each thread read another's row)
    a = np.arange(16, dtype=np.float32).reshape(8, 2)
    b = np.zeros((8, 2), np.float32)
    kernel = build_c(per_thread_global_rows, thread_order=order)
    kernel(a, b)
    assert_close(b, a * 2 + 1)
    assert 'R = T.decl_buffer((8,), "float32")' in kernel.lowered.script()   # 4 threads x 2


@T.prim_func
def block_loop_inside_a_thread_loop(A: T.Buffer((7, 5), "float32"), B: T.Buffer((7,), "float32"),
                                    Idx: T.Buffer((16,), "int32")):
    with T.block("root"):
        W = T.alloc_buffer((7, 5), "float32")
        for j in range(5):
            for i_2 in T.thread_binding(3, thread="threadIdx.x"):
                for i_0 in T.thread_binding(3, thread="blockIdx.x"):
                    for i_1 in range(1):
                        with T.block("W"):
                            vx = T.axis.spatial(7, (i_0 + i_1) * 3 + i_2)
                            vi = T.axis.spatial(5, j)
                            T.where((i_0 + i_1) * 3 + i_2 < 7)
                            T.reads(A[vx // 2, vi], B[Idx[vx % 16] % 7], Idx[vx % 16])
                            T.writes(W[vx, vi])
                            W[vx, vi] = T.min(A[vx // 2, vi], B[Idx[vx % 16] % 7])


@pytest.mark.parametrize("order", ORDERS)
def test_block_loops_inside_thread_loops_run_as_the_kernels_blocks(order):
    # loops bound to a kernel's axes run at the same time, in any nesting; the emulation
    # moves the blockIdx loops outside (it had hoisted the allocation into the blockIdx
    # loop, inside the thread loop, and crashed splitting the threads into phases: found by
    # the fuzzer)
    # (W is never read: the kernel must build and run; a barrier the lowering puts after
    # each iteration of i_1 sits inside the block loop, inside the thread loop)
    a = np.arange(35, dtype=np.float32).reshape(7, 5)
    b, idx = np.ones(7, np.float32), np.arange(16, dtype=np.int32)
    kernel = build_c(block_loop_inside_a_thread_loop, thread_order=order)
    kernel(a, b, idx)
    assert_close(b, np.ones(7, np.float32))            # an input, untouched
    lowered = kernel.lowered.script()       # the threads run inside the blocks' loop
    threads = [lowered.find(m) for m in ('thread="threadIdx.x"', "sched_threads") if m in lowered]
    assert threads and lowered.index('thread="blockIdx.x"') < min(threads)
