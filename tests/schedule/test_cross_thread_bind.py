"""bind of a reduce loop to threadIdx.x: accepted for a cross-thread reduction (one associative
update block, its whole reduction under the loop), refused otherwise with the rule's message."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import ScheduleError
from sched.script import T
from tests.conftest import assert_close


def row_sum(rows: int = 4, cols: int = 64, consumer: bool = False):
    A = te.placeholder((rows, cols), name="A")
    k = te.reduce_axis((0, cols), name="k")
    B = te.compute((rows,), lambda i: te.sum(A[i, k], axis=k), name="B")
    if not consumer:
        return te.create_prim_func([A, B])
    C = te.compute((rows, cols), lambda i, j: A[i, j] / B[i], name="C")
    return te.create_prim_func([A, C])


def test_reduce_loop_on_threadidx_x_is_accepted_and_replays():
    sch = sched.Schedule(row_sum())
    i, k = sch.get_loops(sch.get_block("B"))
    sch.bind(i, "blockIdx.x")
    sch.bind(k, "threadIdx.x")
    assert 'for k in T.thread_binding(64, thread="threadIdx.x"):' in sch.func.script()
    assert sch.trace.apply(row_sum()).func == sch.func


@T.prim_func
def decaying_sum(A: T.Buffer((4, 64), "float32"), B: T.Buffer((4,), "float32")):
    for i, k in T.grid(4, 64):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] * T.float32(0.5) + A[vi, vk]


def test_non_associative_update_on_threads_is_refused():
    # B = B * 0.5 + A: the order of the updates matters, no combine of partials exists
    sch = sched.Schedule(decaying_sum)
    i, k = sch.get_loops(sch.get_block("B"))
    sch.bind(i, "blockIdx.x")
    with pytest.raises(ScheduleError, match="loop 'k' carries a flow dependence of block B "
                                            "through 'B' in global memory"):
        sch.bind(k, "threadIdx.x")


def test_reduce_loop_on_threadidx_y_is_refused():
    # only threadIdx.x reduces across threads (its warps are consecutive threads)
    sch = sched.Schedule(row_sum())
    i, k = sch.get_loops(sch.get_block("B"))
    sch.bind(i, "blockIdx.x")
    with pytest.raises(ScheduleError, match=r"loop 'k' carries a reduction of block B: a "
                                            r"reduce loop reduces across threads only on "
                                            r"threadIdx.x(.|\n)*sch.rfactor\(k, factor_axis=0\)"):
        sch.bind(k, "threadIdx.y")


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_serial_loops_of_the_reduction_around_the_thread_loop_match_numpy(rng, target):
    # TVM's pattern: k_0, k_1 = split(k); bind(k_1, threadIdx.x), k_0 left serial outside it:
    # each thread runs its iterations of k_0 into its partial result, then the block combines
    sch = sched.Schedule(row_sum(rows=3, cols=100))
    i, k = sch.get_loops(sch.get_block("B"))
    _, k_1 = sch.split(k, [None, 48])
    sch.bind(i, "blockIdx.x")
    sch.bind(k_1, "threadIdx.x")
    a = rng.standard_normal((3, 100)).astype("float32")
    out = np.zeros(3, "float32")
    sched.build(sch.func, target=target)(a, out)
    assert_close(out, a.sum(axis=1), rtol=1e-4, atol=1e-4)
    source = sched.build(sch.func, target="cuda", arch="sm_90").source
    thread, serial = source.index("k_1 = (int32_t)threadIdx.x"), source.index("for (int32_t k_0")
    assert thread < serial < source.index("__shfl_down_sync")     # the thread loop moved out


@pytest.mark.parametrize("step", ["bind", "vectorize"])
def test_the_serial_loop_of_a_cross_thread_reduction_cannot_be_made_concurrent(step):
    # k_0 runs in each thread of the reduction on k_1: bound to blockIdx (or vectorized) the
    # reduction would span blocks; the step on k_0 is refused, naming the reduction it breaks
    sch = sched.Schedule(row_sum(rows=4, cols=64))
    i, k = sch.get_loops(sch.get_block("B"))
    k_0, k_1 = sch.split(k, [1, None])
    sch.bind(k_1, "threadIdx.x")
    with pytest.raises(ScheduleError, match="loop 'k_1' is bound to threadIdx.x and reduces "
                                            "across the threads of a block .* which (binding "
                                            "loop 'k_0' to blockIdx.x|making loop 'k_0' "
                                            "vectorized) would break: the reduce axis 'v_k'"):
        if step == "bind":
            sch.bind(k_0, "blockIdx.x")
        else:
            sch.vectorize(k_0)


def test_an_annotation_of_the_serial_loop_keeps_the_cross_thread_reduction_but_a_pipeline_not(
        rng):
    sch = sched.Schedule(row_sum(rows=3, cols=100))
    i, k = sch.get_loops(sch.get_block("B"))
    k_0, k_1 = sch.split(k, [None, 32])
    sch.bind(i, "blockIdx.x")
    sch.bind(k_1, "threadIdx.x")
    sch.annotate(k_0, "note", "kept")
    a = rng.standard_normal((3, 100)).astype("float32")
    out = np.zeros(3, "float32")
    sched.build(sch.func, target="c")(a, out)
    assert_close(out, a.sum(axis=1), rtol=1e-4, atol=1e-4)
    with pytest.raises(ScheduleError, match="which annotating loop 'k_0' with "
                                            "'software_pipeline_stage' would break"):
        sch.annotate(k_0, "software_pipeline_stage", [0])


def test_a_reduce_loop_outside_the_thread_loop_with_a_spatial_loop_between_is_refused():
    # k_0 holds loop i, not only the thread loop: the threads cannot run k_0 on their own
    sch = sched.Schedule(row_sum())
    i, k = sch.get_loops(sch.get_block("B"))
    k_0, k_1 = sch.split(k, [None, 32])
    sch.reorder(k_0, i)
    with pytest.raises(ScheduleError, match="loop 'k_1' carries a reduction of block B: it is "
                                            "not a cross-thread reduction on threadIdx.x: "
                                            "the reduce axis 'v_k' of block 'B' also runs over "
                                            "loops outside loop 'k_1' \\(k_0\\) that are not "
                                            "serial loops holding only it; reorder them inside "
                                            "it \\(sch.reorder\\('k_1', 'k_0'\\)\\)"):
        sch.bind(k_1, "threadIdx.x")


@pytest.mark.parametrize("order", ["rows first", "reduction first"])
@pytest.mark.parametrize("cols", [8, 64, 96])
def test_rows_on_threadidx_y_reduce_apart_on_threadidx_x(order, cols, rng):
    """dlight's GEMV binds threadIdx.y beside a cross-thread reduction (audit helper-42: refused,
    'one-dimensional thread blocks'): each row's threads reduce apart, a warp holding one row
    (64, 96 threads) or whole rows (8) that shuffles of width 8 keep apart."""
    sch = sched.Schedule(row_sum(rows=10, cols=cols))
    i, k = sch.get_loops(sch.get_block("B"))
    i_0, i_1 = sch.split(i, [None, 4])
    sch.bind(i_0, "blockIdx.x")
    bindings = [(i_1, "threadIdx.y"), (k, "threadIdx.x")]
    for loop, tag in (bindings if order == "rows first" else bindings[::-1]):
        sch.bind(loop, tag)
    a = rng.standard_normal((10, cols)).astype(np.float32)
    for target in ("c", "cuda-emu"):
        out = np.full(10, np.nan, np.float32)
        sched.build(sch.func, target=target)(a, out)
        assert_close(out, a.sum(1), rtol=1e-5, atol=1e-5)
    source = sched.build(sch.func, target="cuda", arch="sm_90").source    # NVRTC compiles it
    if cols == 8:
        assert "__shfl_down_sync(0xffffffffu, (float)(B_partial[0]), 4, 8)" in source


def test_a_thread_extent_that_splits_warps_unevenly_beside_threadidx_y_is_refused():
    """24 threads a row: a warp would hold a row and a third of the next, at lanes a shuffle
    cannot keep apart."""
    sch = sched.Schedule(row_sum(rows=8, cols=24))
    i, k = sch.get_loops(sch.get_block("B"))
    i_0, i_1 = sch.split(i, [None, 2])
    sch.bind(i_0, "blockIdx.x")
    sch.bind(i_1, "threadIdx.y")
    # the reason in the headline, not after the IR (audit helper-45)
    with pytest.raises(ScheduleError, match="^bind: loop 'k' carries a reduction of block B: "
                                            "it is not a cross-thread reduction on "
                                            "threadIdx.x: "
                                            "loop 'k' bound to threadIdx.x runs 24 threads "
                                            "beside threadIdx.y: a warp would hold threads of "
                                            "two groups"):
        sch.bind(k, "threadIdx.x")


def test_threadidx_y_in_another_kernel_leaves_the_reduction_alone(rng):
    # stage U (its own kernel: other launch dims) binds threadIdx.y; S reduces on threadIdx.x
    X = te.placeholder((40, 64), name="X")
    U = te.compute((40, 64), lambda i, j: X[i, j] * 2.0, name="U")
    k = te.reduce_axis((0, 64), name="k")
    S = te.compute((40,), lambda i: te.sum(U[i, k], axis=k), name="S")
    sch = sched.Schedule(te.create_prim_func([X, S]))
    i, j = sch.get_loops(sch.get_block("U"))
    i_0, i_1 = sch.split(i, [None, 8])
    j_0, j_1 = sch.split(j, [None, 16])
    sch.reorder(i_0, j_0, i_1, j_1)
    for loop, axis in [(i_0, "blockIdx.y"), (j_0, "blockIdx.x"), (i_1, "threadIdx.y"),
                       (j_1, "threadIdx.x")]:
        sch.bind(loop, axis)
    row, r = sch.get_loops(sch.get_block("S"))
    sch.bind(row, "blockIdx.x")
    sch.bind(r, "threadIdx.x")
    x = rng.standard_normal((40, 64)).astype("float32")
    for target in ("c", "cuda-emu"):
        out = np.zeros(40, "float32")
        sched.build(sch.func, target=target)(x, out)
        assert_close(out, 2 * x.sum(axis=1), rtol=1e-4, atol=1e-4)


def test_a_second_block_moved_under_the_thread_loop_is_refused():
    # a producer computed at the reduce loop: the loop no longer holds one reduction
    A = te.placeholder((4, 64), name="A")
    D = te.compute((4, 64), lambda i, j: A[i, j] * 2.0, name="D")
    k = te.reduce_axis((0, 64), name="k")
    B = te.compute((4,), lambda i: te.sum(D[i, k], axis=k), name="B")
    sch = sched.Schedule(te.create_prim_func([A, B]))
    sch.set_scope(sch.get_block("D"), 0, "local")
    i, k = sch.get_loops(sch.get_block("B"))
    sch.bind(i, "blockIdx.x")
    sch.bind(k, "threadIdx.x")
    with pytest.raises(ScheduleError, match="carries a reduction of block B"):
        sch.compute_at(sch.get_block("D"), k)


def test_consumer_on_other_threads_through_global_memory_is_refused():
    # thread 0 stores B[i]; nothing orders global memory between the threads that read it
    sch = sched.Schedule(row_sum(consumer=True))
    row = sch.get_loops(sch.get_block("B"))[0]
    sch.reverse_compute_at(sch.get_block("C"), row)
    sch.bind(row, "blockIdx.x")
    sch.bind(sch.get_loops(sch.get_block("B"))[-1], "threadIdx.x")
    with pytest.raises(ScheduleError, match="both bound to threadIdx.x, run on the same threads "
                                            "one after the other \\(one kernel\\), and a flow "
                                            "dependence .* through 'B' in global memory, which "
                                            "nothing orders between threads; in shared memory "
                                            "a barrier orders it: sch.set_scope\\(sch.get_block"
                                            "\\('B'\\), 0, 'shared'\\)"):
        sch.bind(sch.get_loops(sch.get_block("C"))[-1], "threadIdx.x")


def test_an_elementwise_producer_read_on_other_threads_through_global_memory_is_refused(rng):
    # audit (helper-27): each iteration writes its own element of B and C reads it on
    # another thread; the refusal said every iteration rewrote the same elements and that
    # no value flowed, and suggested the wrong fix
    def steps(scope):
        A = te.placeholder((4, 64), name="A")
        B = te.compute((4, 64), lambda i, j: A[i, j] * 2.0, name="B")
        C = te.compute((4, 64), lambda i, j: B[i, 63 - j] + 1.0, name="C")
        sch = sched.Schedule(te.create_prim_func([A, C]))
        row = sch.get_loops(sch.get_block("C"))[0]
        sch.compute_at(sch.get_block("B"), row)
        if scope is not None:
            sch.set_scope(sch.get_block("B"), 0, scope)
        sch.bind(row, "blockIdx.x")
        sch.bind(sch.get_loops(sch.get_block("B"))[-1], "threadIdx.x")
        sch.bind(sch.get_loops(sch.get_block("C"))[-1], "threadIdx.x")
        return sch
    with pytest.raises(ScheduleError, match=r"both bound to threadIdx.x, run on the same "
                       r"threads one after the other \(one kernel\), and a flow dependence "
                       r"goes from one thread to another between them through 'B' in global "
                       r"memory.*sch.set_scope\(sch.get_block\('B'\), 0, 'shared'\)") as error:
        steps(None)
    assert "rewrites the same elements" not in str(error.value)
    a = rng.standard_normal((4, 64)).astype("float32")
    for target in ("c", "cuda-emu"):
        out = np.zeros_like(a)
        sched.build(steps("shared").func, target=target)(a, out)
        assert_close(out, 2 * a[:, ::-1] + 1)


def test_consumer_on_other_threads_through_shared_memory_matches_numpy(rng):
    sch = sched.Schedule(row_sum(rows=3, cols=100, consumer=True))
    row = sch.get_loops(sch.get_block("B"))[0]
    sch.reverse_compute_at(sch.get_block("C"), row)
    sch.bind(row, "blockIdx.x")
    sch.set_scope(sch.get_block("B"), 0, "shared")
    _, k_1 = sch.split(sch.get_loops(sch.get_block("B"))[-1], [None, 48])
    sch.reorder(k_1, sch.get_loops(sch.get_block("B"))[-2])
    sch.bind(k_1, "threadIdx.x")
    _, j_1 = sch.split(sch.get_loops(sch.get_block("C"))[-1], [None, 48])
    sch.bind(j_1, "threadIdx.x")
    a = rng.standard_normal((3, 100)).astype("float32")
    out = np.zeros_like(a)
    sched.build(sch.func, target="c", thread_order="shuffle:1")(a, out)
    assert_close(out, a / a.sum(axis=1, keepdims=True), rtol=1e-4, atol=1e-5)


@T.prim_func
def unchecked_reduction_on_two_thread_axes(A: T.Buffer((4, 48), "float32"),
                                           B: T.Buffer((4,), "float32")):
    for i in T.thread_binding(4, thread="threadIdx.y"):
        for k in T.thread_binding(48, thread="threadIdx.x"):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A[vi, vk]


def test_build_refuses_a_reduction_across_threads_it_cannot_combine():
    # written by hand, never checked by a schedule: rows of 48 threads, whose warps would mix
    # two rows, so the threads would race on B[vi]. The build's race check refuses it first;
    # without that check the lowering still does
    with pytest.raises(sched.BuildError, match="iterations of loop 'k' .* run at the same "
                                               "time but depend on each other"):
        sched.build(unchecked_reduction_on_two_thread_axes, target="c")
    with pytest.raises(ScheduleError, match="loop 'k' is bound to threadIdx.x and is a reduce "
                                            "loop of block 'B', but not a cross-thread "
                                            "reduction"):
        sched.build(unchecked_reduction_on_two_thread_axes, target="c", check_races=False)


@T.prim_func
def upper_half_sum(A: T.Buffer((4, 64), "float32"), B: T.Buffer((4,), "float32")):
    for i, k in T.grid(4, 64):
        with T.block("B"):
            vi = T.axis.spatial(4, i)
            vk = T.axis.reduce(32, k - 32)
            T.where(k >= 32)
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk + 32]


def test_reduction_that_thread_0_takes_no_part_in_is_refused():
    # thread 0 stores the combined result: it must run an iteration wherever another does
    sch = sched.Schedule(upper_half_sum)
    i, k = sch.get_loops(sch.get_block("B"))
    sch.bind(i, "blockIdx.x")
    with pytest.raises(ScheduleError, match="loop 'k' carries a reduction of block B"):
        sch.bind(k, "threadIdx.x")


@pytest.mark.parametrize("order", ["forward", "reverse", "shuffle"])
def test_interpreter_runs_the_init_before_the_other_threads(order, rng):
    # the init runs at the reduction's first iteration; on threads, before every other
    # thread's update (an allreduce), so the result is the sum in every thread order
    sch = sched.Schedule(row_sum())
    i, k = sch.get_loops(sch.get_block("B"))
    _, k_1 = sch.split(k, [16, None])
    sch.reorder(k_1, _)
    sch.bind(i, "blockIdx.x")
    sch.bind(k_1, "threadIdx.x")
    a = rng.random((4, 64), dtype=np.float32)
    b = np.full(4, 7.0, np.float32)
    sched.interpret(sch.func, a, b, thread_order=order, seed=5)
    assert_close(b, a.sum(1))
    c = np.full(4, 7.0, np.float32)
    sched.build(sch.func, target="c")(a, c)
    assert_close(c, a.sum(1))


@T.prim_func
def sum_with_late_init(A: T.Buffer((4, 32), "float32"), B: T.Buffer((4,), "float32")):
    for i, t in T.grid(4, 32):
        with T.block("B"):
            vi = T.axis.spatial(4, i)
            vk = T.axis.reduce(32, 31 - t)
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]


def test_init_that_discards_earlier_iterations_is_refused(rng):
    # the init runs at vk = 0, the last iteration of t: it discards the others, so the
    # function computes B = A[:, 0]; an allreduce would keep every iteration
    a = rng.random((4, 32), dtype=np.float32)
    b = np.zeros(4, np.float32)
    sched.build(sum_with_late_init, target="c")(a, b)
    assert_close(b, a[:, 0])
    sch = sched.Schedule(sum_with_late_init)
    i, t = sch.get_loops(sch.get_block("B"))
    sch.bind(i, "blockIdx.x")
    with pytest.raises(ScheduleError, match="the init of block 'B' runs after other iterations "
                                            "of its reduction"):
        sch.bind(t, "threadIdx.x")


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_a_reduction_over_a_symbolic_extent_split_for_the_threads(rng, target):
    # k over m split by 32 (TVM's pattern): the guard k_0 * 32 + k_1 < m holds somewhere iff
    # it holds at k = 0 (0 < m), which then guards the store
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), name="k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    sch = sched.Schedule(te.create_prim_func([A, B]))
    i, r = sch.get_loops(sch.get_block("B"))
    sch.bind(i, "blockIdx.x")
    _, k_1 = sch.split(r, [None, 32])
    sch.bind(k_1, "threadIdx.x")
    kernel = sched.build(sch.func, target=target)
    for columns in (37, 100):
        a = rng.standard_normal((5, columns)).astype("float32")
        out = np.zeros(5, "float32")
        kernel(a, out)
        assert_close(out, a.sum(axis=1), rtol=1e-4, atol=1e-4)


def test_a_consumer_beside_the_reduction_under_threadidx_y_is_refused():
    """The C target's thread phases combined the partials before every thread published
    them when the row's loop held the reduction and a consumer (audit helper-44): the row
    loop must hold the reduction alone."""
    A = te.placeholder((2, 8), name="A")
    k = te.reduce_axis((0, 8), name="k")
    B = te.compute((2,), lambda i: te.sum(A[i, k], axis=k), name="B")
    C = te.compute((2, 8), lambda i, j: A[i, j] - B[i], name="C")
    sch = sched.Schedule(te.create_prim_func([A, C]))
    i, k = sch.get_loops(sch.get_block("B"))
    sch.reverse_compute_at(sch.get_block("C"), i)
    sch.set_scope(sch.get_block("B"), 0, "shared")
    sch.bind(i, "threadIdx.y")
    sch.bind(sch.get_loops(sch.get_block("C"))[-1], "threadIdx.x")
    with pytest.raises(ScheduleError, match="holds more than the loops down to the reduce loop"):
        sch.bind(k, "threadIdx.x")


def _row_sums_of_a_split_reduction():
    """Row sums with the reduce loop split and its inner part blockized (tensorize's shape):
    the inner block's reduce variable is the outer block's `v_k_0 * 32 + k_1`, so the
    reduction of a row is not whole under the thread loop (its init runs at v_k_0 == 0)."""
    X = te.placeholder((3, 64), name="X")
    k = te.reduce_axis((0, 64), name="k")
    S = te.compute((3,), lambda i: te.sum(X[i, k], axis=k), name="S")
    sch = sched.Schedule(te.create_prim_func([X, S]))
    i, loop = sch.get_loops(sch.get_block("S"))
    _, inner = sch.split(loop, [None, 32])
    sch.bind(i, "blockIdx.x")
    return sch, inner


def test_a_thread_loop_under_a_block_of_the_same_reduction_is_refused():
    """Bound after blockize, or blockized after the bind: before, the lowering stored the
    init and the last outer iteration's total (each row summed over its last 32 columns
    only, on c and cuda-emu; audit helper-49). The bindings are read through the blocks
    around the thread loop now."""
    sch, inner = _row_sums_of_a_split_reduction()
    sch.blockize(inner)
    with pytest.raises(ScheduleError, match=r"the reduce axis 'v_k' of block 'S' also runs "
                                            r"over loops outside the block around loop "
                                            r"'k_1' \(k_0\).* or rfactor the loop"):
        sch.bind(inner, "threadIdx.x")
    sch, inner = _row_sums_of_a_split_reduction()
    sch.bind(inner, "threadIdx.x")
    with pytest.raises(ScheduleError, match="blockize: it would make the concurrent loop 'k_1' "
                                            "carry a dependence"):
        sch.blockize(inner)


def test_a_step_that_breaks_a_cross_thread_reduction_says_why():
    """compute_at of a producer under a reduce loop already bound to threadIdx.x gives the
    class's reason, as bind does in the other order (audit helper-49: no reason)."""
    X = te.placeholder((4, 64), name="X")
    P = te.compute((4, 64), lambda i, j: X[i, j] * 2.0, name="P")
    k = te.reduce_axis((0, 64), name="k")
    S = te.compute((4,), lambda i: te.sum(P[i, k], axis=k), name="S")
    sch = sched.Schedule(te.create_prim_func([X, S]))
    i, loop = sch.get_loops(sch.get_block("S"))
    sch.bind(i, "blockIdx.x")
    _, inner = sch.split(loop, [None, 32])
    sch.bind(inner, "threadIdx.x")
    with pytest.raises(ScheduleError, match=r"carries a reduction of block S: it is not a "
                                            r"cross-thread reduction on threadIdx.x: loop "
                                            r"'k_1' holds 2 blocks, not one reduction"):
        sch.compute_at(sch.get_block("P"), inner)


def test_a_thread_loop_outside_the_split_of_a_symbolic_extent_says_how_to_split_it():
    # k_0 * ((n + 31) // 32) + k_1 < n is not affine: the refusal blamed the predicate alone
    # and said to split so the first iteration is in range (audit helper-127)
    n = te.var("n")
    A = te.placeholder((3, n), name="A")
    k = te.reduce_axis((0, n), name="k")
    sch = sched.Schedule(te.create_prim_func([A, te.compute((3,), lambda i: te.sum(
        A[i, k], axis=k), name="C")]))
    i, kk = sch.get_loops(sch.get_block("C"))
    outer, _ = sch.split(kk, [32, None])
    sch.bind(i, "blockIdx.x")
    with pytest.raises(sched.ScheduleError, match=r"it is not affine, .* split the reduce loop "
                                                  r"with the thread loop inside, "
                                                  r"sch.split\(k, \[None, threads\]\)"):
        sch.bind(outer, "threadIdx.x")


@T.prim_func
def _time_steps_of_a_stencil(X: T.Buffer((5, 64), "float32")):
    for t, i in T.grid(4, 64):
        with T.block("S"):
            vt, vi = T.axis.remap("SS", [t, i])
            X[vt + 1, vi] = X[vt, (vi + 63) % 64] + X[vt, vi] + X[vt, (vi + 1) % 64]


def test_a_block_loop_under_a_serial_loop_that_carries_a_dependence_between_blocks_is_refused():
    # every thread block runs the time loop on its own: block 0 read step t's edge column
    # of block 1 before block 1 wrote it (cuda-emu off by 19.7; audit helper-128); the
    # same loop bound to threadIdx was refused
    sch = sched.Schedule(_time_steps_of_a_stencil)
    _, i = sch.get_loops(sch.get_block("S"))
    outer, _ = sch.split(i, [4, 16])
    with pytest.raises(ScheduleError, match=r"bind: loop 'i_0' carries a flow dependence of "
                                            r"block S"):
        sch.bind(outer, "blockIdx.x")
