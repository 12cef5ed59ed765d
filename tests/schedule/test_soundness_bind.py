"""bind refuses at the step what the build would refuse (fuzz finding F5): a symbolic thread
count. A blockIdx axis may be symbolic (the grid is sized at each call)."""

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import ScheduleError
from sched.script import T


def _scale():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    return te.create_prim_func([A, te.compute((n,), lambda i: A[i] * 2.0, name="B")])


def test_bind_refuses_a_symbolic_extent_on_a_thread_axis():
    sch = sched.Schedule(_scale())
    (i,) = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match="bind: loop 'i' has the symbolic extent n; thread "
                       "counts must be constants: split it"):
        sch.bind(i, "threadIdx.x")


def test_bind_accepts_a_symbolic_extent_on_a_block_axis_and_the_split_runs():
    sch = sched.Schedule(_scale())
    (i,) = sch.get_loops(sch.get_block("B"))
    bx, tx = sch.split(i, [None, 32])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    a = np.arange(70, dtype="float32")
    b = np.zeros(70, "float32")
    sched.build(sch.func, target="c")(a, b)
    np.testing.assert_array_equal(b, a * 2)


def _grid():
    A = te.placeholder((4, 6), name="A")
    return te.create_prim_func([A, te.compute((4, 6), lambda i, j: A[i, j] + 1.0, name="B")])


@pytest.mark.parametrize("inner_first", [True, False])
def test_bind_refuses_nested_loops_of_one_block_axis(inner_first):
    """Fuzz finding: binding j, then i (around it) to blockIdx.y was accepted and refused only
    at build. Both orders are refused at the step, naming both loops."""
    sch = sched.Schedule(_grid())
    i, j = sch.get_loops(sch.get_block("B"))
    first, second = (j, i) if inner_first else (i, j)
    sch.bind(first, "blockIdx.y")
    with pytest.raises(ScheduleError, match="are nested: nested loops of one block axis would "
                       "share one block index.*fuse the two loops"):
        sch.bind(second, "blockIdx.y")
    sch.bind(second, "blockIdx.x")       # another axis is fine
    a = np.arange(24, dtype="float32").reshape(4, 6)
    b = np.zeros((4, 6), "float32")
    sched.build(sch.func, target="c")(a, b)
    np.testing.assert_array_equal(b, a + 1)


def _rotate(shift: int, intermediate: bool = False):
    """X = A + 1 and Y[i] = 2 * X[(i + shift) % 8]: Y reads what X's nest wrote elsewhere."""
    A = te.placeholder((8,), name="A")
    X = te.compute((8,), lambda i: A[i] + 1.0, name="X")
    Y = te.compute((8,), lambda i: X[(i + shift) % 8] * 2.0, name="Y")
    return te.create_prim_func([A, Y] if intermediate else [A, X, Y])


def _bind_blocks_and_threads(sch, names):
    for name in names:
        outer, inner = sch.split(sch.get_loops(sch.get_block(name))[0], factors=[2, 4])
        sch.bind(inner, "threadIdx.x")
        sch.bind(outer, "blockIdx.x")


@pytest.mark.parametrize("order", ["forward", "reverse", "shuffle:2"])
def test_sibling_nests_that_pass_data_between_blocks_become_two_kernels(order):
    # Y's block 0 reads X[4:8], which X's block 1 writes: in one kernel nothing would order
    # the thread blocks (found by the GPU-recipe fuzzer: the C target computed zeros in
    # forward block order); a kernel boundary between the stages orders them
    sch = sched.Schedule(_rotate(4))
    _bind_blocks_and_threads(sch, ["X", "Y"])
    a = np.arange(8, dtype="float32")
    expected = (np.roll(a, -4) + 1) * 2
    for target, options in (("c", {"thread_order": order}), ("cuda-emu", {})):
        x, y = np.zeros(8, "float32"), np.zeros(8, "float32")
        sched.build(sch.func, target=target, **options)(a, x, y)
        np.testing.assert_array_equal(y, expected)
    assert sched.build(sch.func, target="cuda-emu").source.count("__global__") == 2


def test_sibling_nests_that_pass_shared_data_between_blocks_are_refused():
    # through shared memory the stages must share a launch, and the blocks may not exchange
    sch = sched.Schedule(_rotate(4, intermediate=True))
    _bind_blocks_and_threads(sch, ["X", "Y"])
    with pytest.raises(ScheduleError, match=r"(?s)set_scope: it would make the concurrent loop "
                                            r"'i_0' carry a dependence.*violated dependence: "
                                            r"flow dependence on 'X': Y\[v_i=4\] reads X\[0\]"):
        sch.set_scope(sch.get_block("X"), 0, "shared")


@pytest.mark.parametrize("order", ["forward", "reverse", "shuffle:2"])
def test_sibling_nests_on_one_block_axis_that_stay_in_their_block_run(order):
    # Y[i] reads X[i], which the same thread of the same block wrote: legal in one kernel
    sch = sched.Schedule(_rotate(0))
    _bind_blocks_and_threads(sch, ["X", "Y"])
    a = np.arange(8, dtype="float32")
    x, y = np.zeros(8, "float32"), np.zeros(8, "float32")
    sched.build(sch.func, target="c", thread_order=order)(a, x, y)
    np.testing.assert_array_equal(y, (a + 1) * 2)


@T.prim_func
def _rows_of_blocks(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32")):
    for i in range(4):
        with T.block("outer"):
            vi = T.axis.spatial(4, i)
            for j in range(4):
                with T.block("inner"):
                    vj = T.axis.spatial(4, j)
                    B[vi, vj] = A[vi, vj] * T.float32(2)


def test_bind_refuses_a_thread_loop_nested_in_its_own_axis_that_uses_the_outer_index():
    # one threadIdx.x index cannot stand for i and j at once (only the diagonal would run);
    # the inner block sees i through the outer block's variable vi. The build refused it:
    # now the step does (found by the GPU-recipe fuzzer, a schedule every step accepted)
    sch = sched.Schedule(_rows_of_blocks)
    sch.bind(sch.get_loops(sch.get_block("inner"))[-1], "threadIdx.x")
    with pytest.raises(ScheduleError, match="bind: loop 'j' is bound to threadIdx.x inside loop "
                                            "'i' bound to threadIdx.x too, and its body uses "
                                            "'i': one thread index cannot stand for both loops"):
        sch.bind(sch.get_loops(sch.get_block("outer"))[0], "threadIdx.x")
    sch.bind(sch.get_loops(sch.get_block("outer"))[0], "threadIdx.y")
    a = np.arange(32, dtype="float32").reshape(4, 8)
    b = np.zeros((4, 8), "float32")
    sched.build(sch.func, target="c")(a, b)
    np.testing.assert_array_equal(b[:, :4], a[:, :4] * 2)


@T.prim_func
def _chain_of_rows(A: T.Buffer((8,), "float32"), W: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("W"):
            vi = T.axis.spatial(8, i)
            W[vi] = T.if_then_else(vi > 2, W[vi - 3], T.float32(0)) + A[vi]


def test_threads_do_not_run_the_serial_loops_around_them_in_step():
    # i = i_0 * 2 + t: W[i] reads W[i - 3], written by the other thread one or two iterations
    # of i_0 before, never in the same one. Each thread runs the i_0 loop on its own, so
    # nothing makes one finish i_0 = 0 before the other reads in i_0 = 1 (the rule compared
    # only runs in one iteration of i_0 and accepted; the C target, which runs the threads in
    # step at each i_0, agreed; the emulator's host threads did not: found by the GPU-recipe
    # fuzzer)
    sch = sched.Schedule(_chain_of_rows)
    _, t = sch.split(sch.get_loops(sch.get_block("W"))[0], factors=[None, 2])
    with pytest.raises(ScheduleError, match=r"bind: loop 'i_1' carries a flow dependence of block "
                                            r"W through 'W' in global memory"):
        sch.bind(t, "threadIdx.x")


@T.prim_func
def _every_other_row(A: T.Buffer((8,), "float32"), W: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("W"):
            vi = T.axis.spatial(8, i)
            W[vi] = T.if_then_else(vi > 1, W[vi - 2], T.float32(0)) + A[vi]


def test_threads_that_only_read_their_own_earlier_rows_may_run_the_loop_on_their_own():
    # W[i] reads W[i - 2]: with 2 threads, each thread reads only what it wrote itself in its
    # previous iteration of i_0, in its own program order
    sch = sched.Schedule(_every_other_row)
    _, t = sch.split(sch.get_loops(sch.get_block("W"))[0], factors=[None, 2])
    sch.bind(t, "threadIdx.x")
    a = np.arange(8, dtype="float32")
    for target in ("c", "cuda-emu"):
        w = np.zeros(8, "float32")
        sched.build(sch.func, target=target)(a, w)
        expected = a.copy()
        for i in range(2, 8):
            expected[i] += expected[i - 2]
        np.testing.assert_array_equal(w, expected)


@pytest.mark.parametrize("inner_first", [True, False])
def test_bind_refuses_a_block_axis_inside_a_thread_loop(inner_first):
    # thread blocks hold threads: a blockIdx loop inside a threadIdx loop (through a nested
    # block here) is no kernel; the C target's thread emulation crashed on one after every
    # step had accepted it (found by the GPU-recipe fuzzer)
    sch = sched.Schedule(_rows_of_blocks)
    inner = sch.get_loops(sch.get_block("inner"))[-1]
    outer = sch.get_loops(sch.get_block("outer"))[0]
    first, second = ((inner, "blockIdx.x"), (outer, "threadIdx.x")) if inner_first else \
        ((outer, "threadIdx.x"), (inner, "blockIdx.x"))
    sch.bind(*first)
    with pytest.raises(ScheduleError, match=r"bind: loop 'j' is bound to blockIdx.x inside "
                                            r"loop 'i' bound to threadIdx.x: a kernel's thread "
                                            r"blocks hold its threads"):
        sch.bind(*second)


def test_a_block_axis_bound_inside_a_kernel_beside_code_outside_it_is_refused():
    # the shared copy's loop on blockIdx.y, its consumer beside it under blockIdx.x only: on
    # the GPU the consumer runs in every block along y and reads what one block copied
    # (found by the fuzz hunt: NaN on cuda-emu, right on the C target which runs it once)
    A = te.placeholder((16, 8), name="A")
    C = te.compute((16, 8), lambda i, j: A[i, 7 - j] * 2.0, name="C")
    sch = sched.Schedule(te.create_prim_func([A, C]))
    i, j = sch.get_loops(sch.get_block("C"))
    i_0, _ = sch.split(i, [None, 4])
    sch.bind(i_0, "blockIdx.x")
    cache = sch.cache_read(sch.get_block("C"), 0, "shared")
    sch.compute_at(cache, i_0)
    copy_rows = sch.get_loops(cache)[1]
    with pytest.raises(ScheduleError, match="is bound to blockIdx.y, and block C beside it in "
                                            "the same kernel, outside every loop bound to "
                                            "blockIdx.y, runs in each of its thread blocks"):
        sch.bind(copy_rows, "blockIdx.y")


def test_a_parallel_loop_and_gpu_bindings_in_one_function_are_refused_at_the_step():
    # every step accepted it and the build refused (found by the fuzz hunt, 10 times)
    A = te.placeholder((16, 8), name="A")
    C = te.compute((16, 8), lambda i, j: A[i, j] * 2.0, name="C")
    for first, second in (("parallel", "bind"), ("bind", "parallel")):
        sch = sched.Schedule(te.create_prim_func([A, C]))
        i, j = sch.get_loops(sch.get_block("C"))
        def mark(kind: str, loop, sch=sch) -> None:
            if kind == "parallel":
                sch.parallel(loop)
            else:
                sch.bind(loop, "threadIdx.x")
        mark(first, i)
        with pytest.raises(ScheduleError, match=r"would be parallel \(CPU threads\) and loop "
                                                r"'.*' bound to GPU threads in one function"):
            mark(second, j)


def test_two_extents_on_one_thread_axis_are_refused_with_advice_that_fits():
    # a loop of extent 1 was advised to be split by 36 (audit helper-181)
    A = te.placeholder((72, 36), name="A")
    B = te.compute((72, 36), lambda i, j: A[i, j] * 2.0, name="B")
    sch = sched.Schedule(te.create_prim_func([A, B]))
    block = sch.get_block("B")
    i, j = sch.get_loops(block)
    sch.bind(j, "threadIdx.x")
    unit = sch.add_unit_loop(block)
    with pytest.raises(ScheduleError, match="bind a loop of extent 36 instead, or leave loop "
                                            "'u' unbound"):
        sch.bind(unit, "threadIdx.x")
    with pytest.raises(ScheduleError, match=r"split them alike \(e.g. sch.split\(i, \[None, "
                                            r"36\]\)"):
        sch.bind(i, "threadIdx.x")
