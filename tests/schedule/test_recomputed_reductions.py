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


@T.prim_func
def row_sum_kept(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8, 4), "float32"),
                 C: T.Buffer((8,), "float32"), D: T.Buffer((8, 4), "float32")):
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


def test_the_repeating_loop_may_run_in_parallel_on_a_copy_per_iteration_only():
    # C allocated by the function and used under the loop only: each iteration sums into
    # its own copy (the lowering allocates it in the loop)
    sch = _recomputed(sched.Schedule(row_sum_scaled))
    sch.parallel(sch.get_loops(sch.get_block("D"))[1])
    assert_close(_scaled(sch), A.sum(1)[:, None] * B)
    assert "float C[1];" in sched.build(sch.mod, target="c").source
    # C an output: one copy, which the iterations' inits and sums would race on
    sch = _recomputed(sched.Schedule(row_sum_kept))
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
    with pytest.raises(ScheduleError, match="loop '_j' around block 'C' binds none"):
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


def test_an_argmax_may_be_recomputed_like_a_sum():
    # its update reads the running value under a data condition (T.if_then_else of the
    # comparison), which made the block's writes count as may-writes (audit helper-142)
    from sched import compute as te

    x = te.placeholder((6, 16), name="X")
    w = te.placeholder((6, 5), name="W")

    def combine(a, b):
        keep = te.any(a[1] >= b[1], te.not_equal(a[1], a[1]))
        return te.if_then_else(keep, a[0], b[0]), te.if_then_else(keep, a[1], b[1])
    argmax = te.comm_reducer(combine, lambda t0, t1: (-1, te.min_value(t1)), name="argmax")
    k = te.reduce_axis((0, 16), name="k")
    index, value = te.compute((6,), lambda i: argmax((k, x[i, k]), axis=k), name="M")
    y = te.compute((6, 5), lambda i, j: value[i] * w[i, j] + index[i].astype("float32"),
                   name="Y")
    sch = sched.Schedule(te.create_prim_func([x, w, y]))
    sch.compute_at(sch.get_block("M"), sch.get_loops(sch.get_block("Y"))[1])
    a = np.random.default_rng(0).integers(0, 4, (6, 16)).astype("float32")
    b = np.random.default_rng(1).random((6, 5)).astype("float32")
    out = np.zeros((6, 5), "float32")
    sched.build(sch.mod, target="c")(a, b, out)
    assert_close(out, a.max(1)[:, None] * b + a.argmax(1)[:, None])


def _overlapping_tiles(scope: str):
    """neighbour_sums with C recomputed per tile of 4 (from its init) in `scope`."""
    sch = sched.Schedule(neighbour_sums)
    io, ii = sch.split(sch.get_loops(sch.get_block("D"))[0], [None, 4])
    sch.compute_at(sch.get_block("C"), io)
    sch.set_scope(sch.get_block("C"), 0, scope)
    return sch, io, ii


def _neighbour_sums_checked(sch, target: str) -> None:
    a = RNG.random((17, 8), dtype=np.float32)
    d = np.zeros(16, np.float32)
    sched.build(sch.mod, target=target)(a, d)
    c = a.sum(1)
    assert_close(d, c[:-1] + c[1:])


def test_tiles_recomputing_a_reduction_in_their_own_copy_may_run_in_parallel():
    # each iteration of the tile loop reruns C's init and sums on its own local copy: no
    # race (refused as "each run changes what the next one reads": audit helper-142)
    sch, io, _ = _overlapping_tiles("local")
    sch.parallel(io)
    _neighbour_sums_checked(sch, "c")


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_threads_recomputing_a_reduction_in_local_memory_may_be_bound(target):
    sch, io, ii = _overlapping_tiles("local")
    # C per thread: computed at the thread loop, each thread sums its two rows
    sch.compute_at(sch.get_block("C"), ii)
    sch.bind(io, "blockIdx.x")
    sch.bind(ii, "threadIdx.x")
    _neighbour_sums_checked(sch, target)


def test_a_shared_copy_recomputed_by_every_thread_is_still_refused():
    sch, io, ii = _overlapping_tiles("shared")
    sch.compute_at(sch.get_block("C"), ii)
    sch.bind(io, "blockIdx.x")
    with pytest.raises(ScheduleError, match="more than once, in different iterations"):
        sch.bind(ii, "threadIdx.x")


@pytest.mark.parametrize("step", ["rfactor", "decompose_reduction"])
def test_a_step_refused_on_a_recomputed_reduction_names_the_repeating_loop(step):
    # (it blamed "a many-to-one binding" of vk: audit helper-142)
    sch = _recomputed(sched.Schedule(row_sum_scaled))
    block = sch.get_block("C")
    loop = sch.get_loops(block)[-1] if step == "rfactor" else sch.get_loops(block)[0]
    with pytest.raises(ScheduleError, match=f"{step}: loop 'j' around block 'C' binds none of "
                                            f"its iteration variables"):
        if step == "rfactor":
            sch.rfactor(loop, 0)
        else:
            sch.decompose_reduction(block, loop)
