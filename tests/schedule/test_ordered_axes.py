"""Scan and opaque iteration variables keep their order under every schedule
(sched/schedule/ordered_axes.py), and loops bound to virtual threads are serial."""

import numpy as np
import pytest

import sched
from sched.errors import ScheduleError
from sched.script import T


@T.prim_func
def row_sums(A: T.Buffer((8, 4), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        for k in range(4):
            with T.block("acc"):
                T.reads(A[i, k], B[i])
                T.writes(B[i])
                B[i] = T.if_then_else(k == 0, T.float32(0), B[i]) + A[i, k]


@T.prim_func
def prefix_sums(A: T.Buffer((4, 16), "float32"), B: T.Buffer((4, 16), "float32"),
                C: T.Buffer((4, 16), "float32")):
    for r, t in T.grid(4, 16):
        with T.block("scan"):
            vr = T.axis.spatial(4, r)
            vt = T.axis.scan(16, t)
            B[vr, vt] = T.if_then_else(vt == 0, A[vr, vt], B[vr, vt - 1] + A[vr, vt])
    for r, t in T.grid(4, 16):
        with T.block("C"):
            vr, vt = T.axis.remap("SS", [r, t])
            C[vr, vt] = B[vr, vt] * T.float32(2)


def test_reorder_of_loops_bound_to_opaque_axes_is_refused():
    # the block used i and k without binding them: their order is the block's meaning
    sch = sched.Schedule(row_sums)
    i, k = sch.get_loops(sch.get_block("acc"))
    with pytest.raises(ScheduleError, match=r"reorder: loop 'k' is bound to the opaque "
                                            r"iteration variable 'v_k' of block 'acc', whose "
                                            r"order is part of its meaning: it cannot be "
                                            r"reordered"):
        sch.reorder(k, i)
    assert sch.func == row_sums


def test_concurrent_loop_bound_to_a_scan_axis_is_refused():
    sch = sched.Schedule(prefix_sums)
    r, t = sch.get_loops(sch.get_block("scan"))
    with pytest.raises(ScheduleError, match=r"parallel: loop 't' is bound to the scan "
                                            r"iteration variable 'vt' of block 'scan'.*cannot be "
                                            r"run concurrently"):
        sch.parallel(t)
    with pytest.raises(ScheduleError, match=r"bind: loop 't' is bound to the scan"):
        sch.bind(t, "threadIdx.x")


def test_moving_a_block_with_a_scan_axis_is_refused():
    sch = sched.Schedule(prefix_sums)
    r, t = sch.get_loops(sch.get_block("C"))
    # compute_at would rebuild the scan's instances from the region its consumer reads
    with pytest.raises(ScheduleError, match=r"compute_at: block 'scan' has iteration variables "
                                            r"whose order is part of its meaning: 'vt' \(scan\)"):
        sch.compute_at(sch.get_block("scan"), r)


def test_split_fuse_and_parallel_spatial_loops_of_a_scan_still_run():
    sch = sched.Schedule(prefix_sums)
    r, t = sch.get_loops(sch.get_block("scan"))
    t0, t1 = sch.split(t, [None, 4])          # a split keeps the order of t
    sch.parallel(r)                            # r is spatial
    a = np.random.default_rng(0).random((4, 16), dtype=np.float32)
    b, c = np.zeros((4, 16), np.float32), np.zeros((4, 16), np.float32)
    sched.build(sch.func, target="c")(a, b, c)
    np.testing.assert_allclose(b, np.cumsum(a, axis=1), rtol=1e-5)
    np.testing.assert_allclose(c, 2 * np.cumsum(a, axis=1), rtol=1e-5)


def test_bind_to_a_virtual_thread_is_a_serial_loop():
    sch = sched.Schedule(prefix_sums)
    r, t = sch.get_loops(sch.get_block("C"))
    sch.bind(r, "vthread.x")
    assert 'T.thread_binding(4, thread="vthread.x")' in sch.func.script()
    assert sched.parse(sch.func.script()) == sch.func
    a = np.random.default_rng(1).random((4, 16), dtype=np.float32)
    b, c = np.zeros((4, 16), np.float32), np.zeros((4, 16), np.float32)
    sched.build(sch.func, target="c")(a, b, c)
    np.testing.assert_allclose(c, 2 * np.cumsum(a, axis=1), rtol=1e-5)


@T.prim_func
def column_prefix_sums(A: T.Buffer((32, 8), "float32"), B: T.Buffer((32, 8), "float32")):
    for t, c in T.grid(32, 8):
        with T.block("scan"):
            vt = T.axis.scan(32, t)
            vc = T.axis.spatial(8, c)
            B[vt, vc] = T.if_then_else(vt == 0, A[vt, vc], B[T.max(vt - 1, 0), vc] + A[vt, vc])


def test_a_loop_of_one_iteration_over_a_scan_axis_may_be_bound():
    # audit, helper-92: the default GPU schedule runs such a scan on one thread by binding the
    # unit loops of a split; the bind was refused, and the schedule built had no thread loop
    from sched.autoscheduler.default import default_schedule

    sch = sched.Schedule(column_prefix_sums)
    block_loop, thread_loop, rest = sch.split(sch.get_loops(sch.get_block("scan"))[0],
                                              factors=[1, 1, None])
    sch.bind(block_loop, "blockIdx.x")
    sch.bind(thread_loop, "threadIdx.x")
    with pytest.raises(ScheduleError, match="bound to GPU threads in one function"):
        sch.parallel(rest)                      # (a CPU loop in a GPU kernel)
    a = np.random.default_rng(1).random((32, 8), dtype=np.float32)
    for func in (sch.func, default_schedule(column_prefix_sums, "cuda", "sm_90").func):
        for target in ("c", "cuda-emu"):
            b = np.full_like(a, np.nan)
            sched.build(func, target=target)(a, b)
            np.testing.assert_allclose(b, np.cumsum(a, axis=0), rtol=1e-5, err_msg=target)


def test_the_scan_axis_may_not_run_in_parallel():
    sch = sched.Schedule(column_prefix_sums)
    _, rest = sch.split(sch.get_loops(sch.get_block("scan"))[0], factors=[1, None])
    with pytest.raises(ScheduleError, match="cannot be run concurrently"):
        sch.parallel(rest)
