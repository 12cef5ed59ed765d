"""Instances that run more than once (issue 9, item 18): a binding like `vr = p % 4` over
`p < 8` runs each instance twice, and compute_at may recompute a producer. The model stands an
instance for its first run, which is exact only when the runs are idempotent; steps that would
change how often a non-idempotent block runs, or create non-idempotent runs, are refused."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import ScheduleError
from sched.script import T
from tests.conftest import assert_close


@T.prim_func
def accumulate_twice(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32"),
                     D: T.Buffer((4,), "float32")):
    for p in range(8):
        with T.block("P"):
            vr = T.axis.spatial(4, p % 4)
            B[vr] = B[vr] + A[vr]
    for j in range(4):
        with T.block("D"):
            vj = T.axis.spatial(4, j)
            D[vj] = B[vj] * T.float32(2)


@T.prim_func
def copy_twice(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32"),
               D: T.Buffer((4,), "float32")):
    for p in range(8):
        with T.block("P"):
            vr = T.axis.spatial(4, p % 4)
            B[vr] = A[vr] * T.float32(3)
    for j in range(4):
        with T.block("D"):
            vj = T.axis.spatial(4, j)
            D[vj] = B[vj] * T.float32(2)


@T.prim_func
def consumer_twice(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32"),
                   D: T.Buffer((4,), "float32")):
    with T.block("root"):
        for i in range(4):
            with T.block("B"):
                vi = T.axis.spatial(4, i)
                B[vi] = A[vi] * T.float32(2)
        for p in range(8):
            with T.block("D"):
                vr = T.axis.spatial(4, p % 4)
                D[vr] = D[vr] + B[vr]


@T.prim_func
def input_bumped_per_column(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32"),
                            D: T.Buffer((4, 2), "float32")):
    with T.block("root"):
        for i in range(4):
            with T.block("P"):
                vi = T.axis.spatial(4, i)
                B[vi] = A[vi] * T.float32(2)
        for i2, j in T.grid(4, 2):
            with T.block("D"):
                vi, vj = T.axis.remap("SS", [i2, j])
                D[vi, vj] = B[vi] + T.float32(1)
            with T.block("E"):
                vi, vj = T.axis.remap("SS", [i2, j])
                A[vi] = A[vi] + T.float32(1)


def _run(func, *arrays):
    copies = [np.array(a, copy=True) for a in arrays]
    sched.build(func, target="c")(*copies)
    return copies


def _arrays(func):
    shapes = [tuple(int(d.value) for d in b.shape) for b in func.buffers]
    rng = np.random.default_rng(3)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def test_compute_at_of_a_block_that_accumulates_twice_is_refused():
    sch = sched.Schedule(accumulate_twice)
    (j,) = sch.get_loops(sch.get_block("D"))
    with pytest.raises(ScheduleError, match=r"runs some instances more than once \(P\[vr=0\] "
                       r"among them\) and its runs are not idempotent"):
        sch.compute_at(sch.get_block("P"), j)


def test_reverse_compute_at_of_a_consumer_that_accumulates_twice_is_refused():
    sch = sched.Schedule(consumer_twice)
    (i,) = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match="block 'D' runs some instances more than once"):
        sch.reverse_compute_at(sch.get_block("D"), i)


def test_idempotent_runs_may_become_one():
    # P computes the same values in both runs: computing it once under j is the same
    sch = sched.Schedule(copy_twice)
    (j,) = sch.get_loops(sch.get_block("D"))
    sch.compute_at(sch.get_block("P"), j)
    arrays = _arrays(copy_twice)
    assert_close(_run(sch.func, *arrays)[2], _run(copy_twice, *arrays)[2])


def test_a_recomputed_producer_whose_input_changes_between_runs_is_refused():
    # under j, P would run for j = 0 and j = 1, and E bumps its input A in between
    sch = sched.Schedule(input_bumped_per_column)
    j = sch.get_loops(sch.get_block("D"))[1]
    with pytest.raises(ScheduleError, match="more than once .* a later run would not compute "
                       "what the first did"):
        sch.compute_at(sch.get_block("P"), j)
    arrays = _arrays(input_bumped_per_column)
    assert_close(_run(sch.func, *arrays)[2], _run(input_bumped_per_column, *arrays)[2])


def test_a_block_that_accumulates_twice_keeps_its_loops():
    # the model has each instance's first run only, so it cannot order the runs against each
    # other: a reorder of such a block's loops is refused (conservative), with the reason
    @T.prim_func
    def nest(A: T.Buffer((4,), "float32"), B: T.Buffer((4, 3), "float32")):
        for p, q in T.grid(8, 3):
            with T.block("P"):
                vr = T.axis.spatial(4, p % 4)
                vq = T.axis.spatial(3, q)
                B[vr, vq] = B[vr, vq] + A[vr]

    sch = sched.Schedule(nest)
    p, q = sch.get_loops(sch.get_block("P"))
    with pytest.raises(ScheduleError, match="must not move it or change its loops"):
        sch.reorder(q, p)
    sch.split(p, [2, 4])         # split keeps the order of every run: still legal
    arrays = _arrays(nest)
    assert_close(_run(sch.func, *arrays)[1], _run(nest, *arrays)[1])


@T.prim_func
def read_after_both_runs(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32"),
                         E: T.Buffer((8,), "float32"), D: T.Buffer((8,), "float32"),
                         F: T.Buffer((2,), "float32")):
    with T.block("root"):
        for p in range(8):
            with T.block("P"):
                vr = T.axis.spatial(4, p % 4)
                B[vr] = B[vr] + A[vr]
            with T.block("Y"):
                vp = T.axis.spatial(8, p)
                E[vp] = A[vp % 4]
        for q in range(8):
            with T.block("R"):
                vq = T.axis.spatial(8, q)
                D[vq] = B[vq % 4]
        for z in range(2):
            with T.block("Z"):
                vz = T.axis.spatial(2, z)
                F[vz] = T.float32(0)


@T.prim_func
def read_between_runs(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32"),
                      E: T.Buffer((8,), "float32"), D: T.Buffer((8,), "float32"),
                      F: T.Buffer((2,), "float32")):
    with T.block("root"):
        for p in range(8):
            with T.block("P"):
                vr = T.axis.spatial(4, p % 4)
                B[vr] = B[vr] + A[vr]
            with T.block("Y"):
                vp = T.axis.spatial(8, p)
                E[vp] = A[vp % 4]
            with T.block("R"):
                vq = T.axis.spatial(8, p)
                D[vq] = B[vq % 4]
        for z in range(2):
            with T.block("Z"):
                vz = T.axis.spatial(2, z)
                F[vz] = T.float32(0)


def test_another_block_may_not_move_between_the_runs_of_a_block_run_twice():
    # P's runs keep their times, but R, which read B after both runs of each P instance,
    # would read it between them: the first-run model alone does not see it
    from sched.polyhedral import check_order

    violation = check_order(read_after_both_runs, read_between_runs)
    assert violation is not None
    assert "must stay on the same side of each of its runs" in violation.reason


def test_a_halo_recomputed_per_thread_splits_in_seconds():
    """A 3-D stencil's local input recomputed under threadIdx.x (each thread its own 2x2x3
    halo tile), its loops fused and split by factors that overshoot: every P instance runs on
    up to 8 threads and no loop point maps one to one to an instance, so the domain's
    existentials stayed (the lexmin proof ran out of operations) and the split's legality
    check ran isl for over 20 minutes; the domain is proven a box point by point now
    (domain_boxes.box_by_points). The numbers stay right on the C target and through the CUDA."""
    Z, Y, X = 4, 4, 16
    A = te.placeholder((Z + 1, Y + 1, X + 1), name="A")
    P = te.compute(A.shape, lambda z, y, x: A[z, y, x] * 2.0 + 1.0, name="P")
    C = te.compute((Z, Y, X), lambda z, y, x: P[z, y, x] + P[z, y, x + 1]
                   + P[z, y + 1, x] + P[z + 1, y, x], name="C")
    sch = sched.Schedule(te.create_prim_func([A, C]))
    z, y, x = sch.get_loops(sch.get_block("C"))
    bz, tz = sch.split(z, [None, 2])
    by, ty = sch.split(y, [None, 2])
    bx, tx, xi = sch.split(x, [None, 4, 2])
    sch.reorder(bz, by, bx, tz, ty, tx, xi)
    sch.bind(sch.fuse(bz, by, bx), "blockIdx.x")
    for loop, axis in ((tz, "threadIdx.z"), (ty, "threadIdx.y"), (tx, "threadIdx.x")):
        sch.bind(loop, axis)
    producer = sch.get_block("P")
    sch.set_scope(producer, 0, "local")
    sch.compute_at(producer, tx)
    sch.split(sch.fuse(*sch.get_loops(producer)[4:]), [None, 2, 2, 4])
    assert "T.grid(1, 2, 2, 4)" in sch.func.script()
    a = np.random.default_rng(0).standard_normal((Z + 1, Y + 1, X + 1), np.float32)
    p = a * 2 + 1
    expected = p[:-1, :-1, :-1] + p[:-1, :-1, 1:] + p[:-1, 1:, :-1] + p[1:, :-1, :-1]
    for target in ("c", "cuda-emu"):
        out = np.zeros((Z, Y, X), np.float32)
        sched.build(sch.func, target=target)(a, out)
        assert_close(out, expected)
