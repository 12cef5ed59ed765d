"""Reads the flow analysis must not miss (audit helper-55): an opaque block's declared writes
are may-writes, a load in a loop bound between blocks is no statement's read, and a GPU
kernel run on the C target gives copies per thread block and thread, not per iteration of a
CPU loop. Each was accepted (or built unscheduled) with wrong numbers on the C target."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched.errors import BuildError, ScheduleError
from sched.script import T
from tests.conftest import assert_close

MAYBE_SET = "void maybe_set(const float* a, float* s) { if (*a > 0.0f) s[1] = *a; }\n"


@T.prim_func
def last_positive(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    with T.block("root"):
        S = T.alloc_buffer((2,), "float32")
        for i in range(64):
            with T.block("E"):
                vi = T.axis.spatial(64, i)
                T.reads(A[vi], S[0])
                T.writes(S[1])
                T.evaluate(T.call_extern("int32", "maybe_set", T.address_of(A[vi]),
                                         T.address_of(S[0])))
            with T.block("R"):
                vi = T.axis.spatial(64, i)
                B[vi] = S[1]


def _last_positive(a):
    expected, last = np.empty_like(a), None
    for i, value in enumerate(a):
        last = value if value > 0 else last
        expected[i] = last
    return expected


def test_an_opaque_blocks_declared_write_may_not_happen(rng):
    # E writes S[1] only where A is positive: R reads an earlier iteration's value, so S is
    # not private to an iteration of i (it was: S declared inside the omp parallel for)
    sch = sched.Schedule(last_positive)
    with pytest.raises(ScheduleError, match="loop 'i' carries a flow dependence of block R"):
        sch.parallel(sch.get_loops(sch.get_block("E"))[0])
    a = rng.standard_normal(64).astype(np.float32)
    a[0] = abs(a[0]) + 1
    b = np.full(64, -7.0, np.float32)
    sched.build(last_positive, target="c", extern_c=MAYBE_SET)(a, b)
    assert_close(b, _last_positive(a))


@T.prim_func
def count_from_row_0(A: T.Buffer((16, 4), "int32"), B: T.Buffer((16, 4), "int32")):
    with T.block("root"):
        L = T.alloc_buffer((16,), "int32")
        for i in range(16):
            with T.block("L"):
                vi = T.axis.remap("S", [i])
                L[vi] = A[vi, 0] % 4 + 1
            for j in range(L[0]):
                with T.block("B"):
                    vi = T.axis.spatial(16, i)
                    vj = T.axis.spatial(4, j)
                    B[vi, vj] = A[vi, vj] * 2


def test_a_load_in_a_loop_bound_between_blocks_keeps_its_buffer(rng):
    # every row runs row 0's count: L stays one buffer for all rows (allocated in the loop,
    # row i read its own uninitialised copy), and parallel(i) is refused with why
    sch = sched.Schedule(count_from_row_0)
    with pytest.raises(ScheduleError, match=r"a loop bound, condition, let, predicate or "
                       r"binding under loop 'i' reads 'L', which blocks under the loop write"):
        sch.parallel(sch.get_loops(sch.get_block("L"))[0])
    a = rng.integers(0, 100, (16, 4)).astype(np.int32)
    b = np.full((16, 4), -1, np.int32)
    sched.build(count_from_row_0, target="c")(a, b)
    expected = np.full((16, 4), -1, np.int32)
    n = a[0, 0] % 4 + 1
    expected[:, :n] = a[:, :n] * 2
    np.testing.assert_array_equal(b, expected)


@T.prim_func
def scale(A: T.Buffer((2, 256), "float32"), B: T.Buffer((2, 256), "float32")):
    with T.block("root"):
        S = T.alloc_buffer((2, 256), "float32")
        for b, i in T.grid(2, 256):
            with T.block("S"):
                vb, vi = T.axis.remap("SS", [b, i])
                S[vb, vi] = A[vb, vi] * T.float32(2)
        for b, i in T.grid(2, 256):
            with T.block("B"):
                vb, vi = T.axis.remap("SS", [b, i])
                B[vb, vi] = S[vb, vi] + T.float32(1)


def _scratch_under_threads(kind: str) -> sched.Schedule:
    sch = sched.Schedule(scale)
    b, i = sch.get_loops(sch.get_block("B"))
    t, p = sch.split(i, [32, 8])
    sch.compute_at(sch.get_block("S"), p)
    sch.bind(b, "blockIdx.x")
    sch.bind(t, "threadIdx.x")
    getattr(sch, kind)(p)
    return sch


def test_a_parallel_loop_in_a_gpu_kernel_is_refused_on_the_c_target_too():
    # the C target's emulation gives copies per thread block and thread: the iterations of
    # the omp parallel for shared S (wrong numbers), as CUDA refuses the loop kind; the step
    # is refused (a function written so is refused by the build: test_build.py)
    with pytest.raises(ScheduleError, match="loop 'i_1_1' would be parallel .* bound to GPU "
                                            "threads in one function"):
        _scratch_under_threads("parallel")


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_a_vectorized_loop_allocating_in_a_gpu_kernel_runs_right(rng, target):
    sch = _scratch_under_threads("vectorize")
    a = rng.standard_normal((2, 256)).astype(np.float32)
    out = np.full((2, 256), np.nan, np.float32)
    sched.build(sch.func, target=target)(a, out)
    assert_close(out, a * 2 + 1)


@T.prim_func
def counts_then_rows(A: T.Buffer((16, 4), "int32"), B: T.Buffer((16, 4), "int32")):
    with T.block("root"):
        L = T.alloc_buffer((16, 2), "int32")
        for i, k in T.grid(16, 2):
            with T.block("L"):
                vi, vk = T.axis.remap("SS", [i, k])
                L[vi, vk] = A[vi, vk] % 4 + 1
        for i2 in range(16):
            for j in range(L[i2, 1]):
                with T.block("B"):
                    vi = T.axis.spatial(16, i2)
                    vj = T.axis.spatial(4, j)
                    B[vi, vj] = A[vi, vj] * 2


def test_a_step_moving_a_block_whose_writes_a_loop_bound_reads_is_refused(rng):
    # no statement holds the read of L in j's extent, so no dependence could order a moved
    # writer before it: a step that moves blocks or loops is refused, saying why
    sch = sched.Schedule(counts_then_rows)
    i, k = sch.get_loops(sch.get_block("L"))
    with pytest.raises(ScheduleError, match=r"a loop bound, condition, let, predicate or "
                       r"binding loads 'L', which block 'L' writes; the analysis sees no such "
                       r"read, so it cannot check a step that moves blocks or loops"):
        sch.reorder(k, i)
    a = rng.integers(0, 100, (16, 4)).astype(np.int32)
    b = np.full((16, 4), -1, np.int32)
    sched.build(counts_then_rows, target="c")(a, b)
    expected = np.full((16, 4), -1, np.int32)
    for row in range(16):
        n = a[row, 1] % 4 + 1
        expected[row, :n] = a[row, :n] * 2
    np.testing.assert_array_equal(b, expected)


@T.prim_func
def count_in_upper_half(A: T.Buffer((16,), "int32"), B: T.Buffer((16,), "int32")):
    with T.block("root"):
        L = T.alloc_buffer((8,), "int32")
        for k in range(4):
            with T.block("W"):
                vk = T.axis.remap("S", [k])
                L[vk + 4] = A[vk] % 8 + 1
        for j in range(16):
            with T.block("B"):
                vj = T.axis.spatial(16, j)
                T.where(j < L[5])
                B[vj] = A[vj] * 2


@T.prim_func
def count_in_upper_half_bound(A: T.Buffer((16,), "int32"), B: T.Buffer((16,), "int32")):
    with T.block("root"):
        L = T.alloc_buffer((8,), "int32")
        for k in range(4):
            with T.block("W"):
                vk = T.axis.remap("S", [k])
                L[vk + 4] = A[vk] % 8 + 1
        for j in range(L[5]):
            with T.block("B"):
                vj = T.axis.spatial(16, j)
                B[vj] = A[vj] * 2


@pytest.mark.parametrize("func", [count_in_upper_half, count_in_upper_half_bound],
                         ids=["predicate", "loop bound"])
def test_a_buffer_read_by_a_predicate_or_bound_is_not_compacted(rng, func):
    # blocks touch L[4:8] only: compact_buffers made L 4 long and rebased the blocks, not
    # the read of L[5] in the predicate or the loop bound (audit helper-57: past the end)
    a = rng.integers(0, 100, 16).astype(np.int32)
    b = np.full(16, -1, np.int32)
    sched.build(func, target="c")(a, b)
    expected = np.full(16, -1, np.int32)
    n = a[1] % 8 + 1
    expected[:n] = a[:n] * 2
    np.testing.assert_array_equal(b, expected)


@T.prim_func
def data_dependent_grid(A: T.Buffer((256,), "int32"), B: T.Buffer((256,), "int32")):
    with T.block("root"):
        T.reads(A[1])
        for j in T.thread_binding(A[1] % 8 + 1, thread="blockIdx.x"):
            with T.block("B"):
                vj = T.axis.spatial(256, j)
                B[vj] = A[vj] * 2


def test_a_grid_extent_read_from_a_buffer_is_refused_at_build():
    # the launch's grid is computed from the arguments' shapes before the kernel runs: it was
    # a bare TypeError at every call (audit helper-57)
    for target in ("cuda-emu", "cuda"):
        with pytest.raises(ScheduleError, match=r"the loop bound to blockIdx.x has the extent "
                           r".*which reads buffer 'A': a launch's grid comes from the "
                           r"arguments' shapes and scalars"):
            sched.build(data_dependent_grid, target=target)


def test_no_default_gpu_schedule_for_a_loop_bound_read_from_a_buffer_says_so():
    # the default schedule's samples split the data-dependent loop over the grid; their
    # second kernel read the workspace L in a bound and a predicate it did not declare, and
    # the build died in lower()'s well-formedness check (audit helper-57)
    with pytest.raises(ScheduleError, match="no default cuda schedule applies to "
                                            "'count_in_upper_half_bound'"):
        sched.build(count_in_upper_half_bound, target="cuda-emu")


SIBLING_NESTS = """
@T.prim_func
def main(A: T.Buffer((8, 4), "int32"), B: T.Buffer((8, 4), "int32")):
    with T.block("root"):
        L = T.alloc_buffer((8, 4), "int32")
        for o in range(1):
            for i in {outer_l}:
                for t in {inner_l}:
                    with T.block("L"):
                        vi, vt = T.axis.remap("SS", [i, t])
                        L[vi, vt] = A[vi, vt] % 4 + 1
            for i2 in {outer_b}:
                for r in {inner_b}:
                    with T.block("B"):
                        vi = T.axis.spatial(8, i2)
                        vj = T.axis.spatial(4, r)
                        T.where(r < L[7 - i2, 3])
                        B[vi, vj] = A[vi, vj] * 2
"""


def test_sibling_block_loops_of_one_kernel_with_a_predicate_reading_the_others_output():
    # audit, helper-102: the two nests share the serial loop o, so one kernel; B's predicate
    # reads row 7 - i of L, which another thread block writes, unordered (cuda-emu: 10 of 32
    # wrong). Each loop's own unseen loads were checked, not those of its siblings
    serial = sched.parse(SIBLING_NESTS.format(outer_l="range(8)", inner_l="range(4)",
                                              outer_b="range(8)", inner_b="range(4)"))
    sch = sched.Schedule(serial)
    for block in ("L", "B"):
        _, x, y = sch.get_loops(sch.get_block(block))
        if block == "B":
            with pytest.raises(ScheduleError, match="loops 'i2' and 'i', bound to blockIdx.x and "
                               "blockIdx.x, run on the same thread blocks one after the other"):
                sch.bind(x, "blockIdx.x")
        else:
            sch.bind(x, "blockIdx.x")
            sch.bind(y, "threadIdx.x")
    bound = sched.parse(SIBLING_NESTS.format(
        outer_l='T.thread_binding(8, thread="blockIdx.x")',
        inner_l='T.thread_binding(4, thread="threadIdx.x")',
        outer_b='T.thread_binding(8, thread="blockIdx.x")',
        inner_b='T.thread_binding(4, thread="threadIdx.x")'))
    with pytest.raises(BuildError, match="reads 'L', which blocks under the other write"):
        sched.build(bound, target="cuda-emu")
    # serial, the C target runs it in order
    a = np.random.default_rng(1).integers(0, 100, (8, 4)).astype(np.int32)
    b = np.full((8, 4), -1, np.int32)
    sched.build(serial, target="c")(a, b)
    expected = np.full((8, 4), -1, np.int32)
    for i in range(8):
        count = (a % 4 + 1)[7 - i, 3]
        expected[i, :count] = a[i, :count] * 2
    np.testing.assert_array_equal(b, expected)


def test_nests_on_two_block_axes_of_one_kernel_are_siblings_too():
    # audit, helper-108: a nest on blockIdx.y reading in its predicate what a nest on
    # blockIdx.x writes shares the kernel's thread blocks: 16 of 32 wrong on cuda-emu
    func = sched.parse("""
@T.prim_func
def main(A: T.Buffer((8, 4), "int32"), L: T.Buffer((8, 4), "int32"),
         B: T.Buffer((8, 4), "int32")):
    for o in range(1):
        for i in T.thread_binding(8, thread="blockIdx.y"):
            for t in range(4):
                with T.block("B"):
                    vi, vt = T.axis.remap("SS", [i, t])
                    T.where(t < L[7 - i, 0])
                    B[vi, vt] = A[vi, vt] * 2
        for i2 in T.thread_binding(8, thread="blockIdx.x"):
            for t2 in range(4):
                with T.block("L"):
                    vi, vt = T.axis.remap("SS", [i2, t2])
                    L[vi, vt] = A[vi, vt] % 4
""")
    with pytest.raises(BuildError, match="bound to blockIdx.y and blockIdx.x, run on the same "
                                         "thread blocks"):
        sched.build(func, target="cuda-emu")
