"""A reduction recomputed whole by compute_at (under a loop of its consumer that binds none
of its variables): each iteration resets the accumulator and sums every point again, so the
first runs stand for all runs (polyhedral/first_run_flows.py) though no instance's runs are
idempotent one by one. TVM accepts these; steps that would make a run read a partial sum,
or sum twice, stay refused."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched.errors import ScheduleError
from sched.script import T
from tests.conftest import assert_close


@T.prim_func
def row_sum_scaled(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8, 4), "float32"),
                   D: T.Buffer((8, 4), "float32")):
    C = T.alloc_buffer((8,), "float32")
    for i, k in T.grid(8, 16):
        with T.block("C"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                C[vi] = T.float32(0)
            C[vi] = C[vi] + A[vi, vk]
    for i, j in T.grid(8, 4):
        with T.block("D"):
            vi, vj = T.axis.remap("SS", [i, j])
            D[vi, vj] = C[vi] * B[vi, vj]


@T.prim_func
def accumulate_into_input(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8, 4), "float32"),
                          C: T.Buffer((8,), "float32"), D: T.Buffer((8, 4), "float32")):
    for i, k in T.grid(8, 16):
        with T.block("C"):
            vi, vk = T.axis.remap("SR", [i, k])
            C[vi] = C[vi] + A[vi, vk]
    for i, j in T.grid(8, 4):
        with T.block("D"):
            vi, vj = T.axis.remap("SS", [i, j])
            D[vi, vj] = C[vi] * B[vi, vj]


@T.prim_func
def summed_twice(A: T.Buffer((8, 16), "float32"), D: T.Buffer((8,), "float32")):
    C = T.alloc_buffer((8,), "float32")
    for i, _j, k in T.grid(8, 2, 16):
        with T.block("C"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                C[vi] = T.float32(0)
            C[vi] = C[vi] + A[vi, vk]
    for i in range(8):
        with T.block("D"):
            vi = T.axis.spatial(8, i)
            D[vi] = C[vi]


RNG = np.random.default_rng(7)
A = RNG.random((8, 16), dtype=np.float32)
B = RNG.random((8, 4), dtype=np.float32)


def _scaled(sch) -> np.ndarray:
    D = np.zeros((8, 4), "float32")
    sched.build(sch.mod, target="c")(A, B, D)
    return D


def _recomputed(sch):
    sch.compute_at(sch.get_block("C"), sch.get_loops(sch.get_block("D"))[1])
    return sch


def test_compute_at_recomputes_a_reduction_under_a_loop_of_its_consumer():
    sch = _recomputed(sched.Schedule(row_sum_scaled))
    assert_close(_scaled(sch), A.sum(1)[:, None] * B)
    script = sch.mod.script()
    # the whole reduction, init included, runs under j, before D
    assert script.index("for i_1, j in T.grid(8, 4):") < script.index("for ax0 in range(16):") \
        < script.index('with T.block("C"):') < script.index("with T.init():") \
        < script.index('with T.block("D"):')


def test_the_recomputed_reduction_may_be_split_reordered_and_unrolled():
    sch = _recomputed(sched.Schedule(row_sum_scaled))
    k = sch.get_loops(sch.get_block("C"))[-1]
    ko, ki = sch.split(k, [None, 4])
    sch.reorder(ki, ko)
    sch.unroll(ki)
    assert_close(_scaled(sch), A.sum(1)[:, None] * B)


def test_the_recomputed_reduction_may_be_decomposed_under_the_repeating_loop():
    sch = _recomputed(sched.Schedule(row_sum_scaled))
    sch.decompose_reduction(sch.get_block("C"), sch.get_loops(sch.get_block("C"))[-1])
    assert_close(_scaled(sch), A.sum(1)[:, None] * B)
    script = sch.mod.script()
    assert script.index("for i_1, j in T.grid(8, 4):") < script.index('T.block("C_init")') \
        < script.index('T.block("C_update")')


def test_a_recomputed_sum_into_its_input_is_refused():
    sch = sched.Schedule(accumulate_into_input)
    with pytest.raises(ScheduleError, match="more than once.*would not compute what the first"):
        sch.compute_at(sch.get_block("C"), sch.get_loops(sch.get_block("D"))[1])


def test_the_repeating_loop_may_not_run_in_parallel():
    sch = _recomputed(sched.Schedule(row_sum_scaled))
    with pytest.raises(ScheduleError, match="more than once, in different iterations"):
        sch.parallel(sch.get_loops(sch.get_block("D"))[1])


def test_a_decomposed_update_alone_may_not_be_recomputed():
    sch = sched.Schedule(row_sum_scaled)
    sch.decompose_reduction(sch.get_block("C"), sch.get_loops(sch.get_block("C"))[1])
    with pytest.raises(ScheduleError, match="'C_init' also writes 'C'"):
        sch.compute_at(sch.get_block("C_update"), sch.get_loops(sch.get_block("D"))[1])


def _summed(sch) -> np.ndarray:
    D = np.zeros(8, "float32")
    sched.build(sch.mod, target="c")(A, D)
    return D


def test_a_reduction_written_twice_keeps_its_meaning_under_steps():
    sch = sched.Schedule(summed_twice)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.split(k, [4, 4])
    assert_close(_summed(sch), A.sum(1))
    sch = sched.Schedule(summed_twice)
    sch.decompose_reduction(sch.get_block("C"), sch.get_loops(sch.get_block("C"))[2])
    assert_close(_summed(sch), A.sum(1))


def test_interleaving_the_two_sums_is_refused():
    """for k, for j: the second run of each update would add its term twice."""
    sch = sched.Schedule(summed_twice)
    i, j, k = sch.get_loops(sch.get_block("C"))
    with pytest.raises(ScheduleError, match="would not compute what the first did"):
        sch.reorder(k, j)


def test_the_init_may_not_leave_the_repeating_loop():
    sch = sched.Schedule(summed_twice)
    i, j, k = sch.get_loops(sch.get_block("C"))
    with pytest.raises(ScheduleError, match="more than once"):
        sch.decompose_reduction(sch.get_block("C"), j)


@T.prim_func
def neighbour_sums(A: T.Buffer((17, 8), "float32"), D: T.Buffer((16,), "float32")):
    C = T.alloc_buffer((17,), "float32")
    for i, k in T.grid(17, 8):
        with T.block("C"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                C[vi] = T.float32(0)
            C[vi] = C[vi] + A[vi, vk]
    for i in range(16):
        with T.block("D"):
            vi = T.axis.spatial(16, i)
            D[vi] = C[vi] + C[vi + 1]


def test_a_reduction_recomputed_in_overlapping_tiles_may_be_decomposed():
    # each tile of 4 computes C[4t .. 4t + 4]: C[4], C[8], ... twice, each from its init;
    # decompose_reduction was refused as a many-to-one binding (audit helper-134)
    sch = sched.Schedule(neighbour_sums)
    io, _ = sch.split(sch.get_loops(sch.get_block("D"))[0], [None, 4])
    sch.compute_at(sch.get_block("C"), io)
    sch.decompose_reduction(sch.get_block("C"), sch.get_loops(sch.get_block("C"))[-1])
    a = RNG.random((17, 8), dtype=np.float32)
    d = np.zeros(16, np.float32)
    sched.build(sch.mod, target="c")(a, d)
    c = a.sum(1)
    assert_close(d, c[:-1] + c[1:])


@T.prim_func
def row_sum_then_bumped(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8, 4), "float32"),
                        D: T.Buffer((8, 4), "float32"), C: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 16):
        with T.block("C"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                C[vi] = T.float32(0)
            C[vi] = C[vi] + A[vi, vk]
    for i, j in T.grid(8, 4):
        with T.block("D"):
            vi, vj = T.axis.remap("SS", [i, j])
            D[vi, vj] = C[vi] * B[vi, vj]
    for i in range(8):
        with T.block("Q"):
            vi = T.axis.spatial(8, i)
            C[vi] = C[vi] + T.float32(1)


def test_a_later_writer_of_the_buffer_does_not_stop_the_recomputation():
    # Q writes C after every run: compute_at was refused by name, as if Q wrote between runs
    # (audit helper-134)
    sch = _recomputed(sched.Schedule(row_sum_then_bumped))
    d, c = np.zeros((8, 4), np.float32), np.zeros(8, np.float32)
    sched.build(sch.mod, target="c")(A, B, d, c)
    assert_close(d, A.sum(1)[:, None] * B)
    assert_close(c, A.sum(1) + 1)
