"""sched.build: targets."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched.errors import BuildError
from sched.ir.verify import VerifyError
from sched.script import T
from tests.lower.block_ir import add_2d


def test_cuda_build_of_unbound_softmax_gets_a_default_schedule_of_several_kernels():
    import numpy as np

    from sched import compute as te

    X = te.placeholder((8, 48), name="X")
    softmax = te.create_prim_func([X, te.ops.softmax(X)], name="softmax")
    # each stage bound on its own, one thread per row for the reductions: stages with
    # different launches run as kernels in order (issue 12 item 4)
    with pytest.warns(UserWarning, match="applied the default schedule"):
        kernel = sched.build(softmax, target="cuda-emu")
    x = np.random.default_rng(0).standard_normal((8, 48)).astype(np.float32)
    y = np.zeros_like(x)
    kernel(x, y)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_tvm_target_string_names_the_arch():
    from sched.targets import parse_target

    assert parse_target("cuda -arch=sm_80", None) == ("cuda", "sm_80")
    with pytest.raises(ValueError, match="unknown target option '-mcpu=x'"):
        parse_target("cuda -mcpu=x", None)


def test_unknown_target_lists_the_valid_ones():
    with pytest.raises(ValueError, match=r"unknown target 'llvm': expected one of 'c', 'cuda'"):
        sched.build(add_2d(), target="llvm")


def test_build_takes_a_prim_func():
    with pytest.raises(TypeError, match="expected a PrimFunc"):
        sched.build("not a function")


def test_cuda_emu_is_a_build_target_and_not_a_tuning_one():
    from sched.targets import BUILD_TARGETS, parse_target

    assert parse_target("cuda-emu", None, BUILD_TARGETS) == ("cuda-emu", None)
    with pytest.raises(ValueError, match=r"unknown target 'cuda-emu': expected one of 'c', "
                                         r"'cuda'$"):
        parse_target("cuda-emu", None)
    with pytest.raises(ValueError, match=r"unknown target 'cuda-emu'"):
        sched.tune(add_2d(), target="cuda-emu", trials=1)


def test_sanitize_and_thread_order_are_refused_where_they_do_not_apply():
    with pytest.raises(ValueError, match=r"sanitize applies to the \"cuda-emu\" target only, "
                                         r"not 'c'"):
        sched.build(add_2d(), target="c", sanitize="thread")
    with pytest.raises(ValueError, match=r"thread_order applies to the C target only \(the "
                                         r"emulator runs a block's threads at once"):
        sched.build(add_2d(), target="cuda-emu", thread_order="reverse")


def test_cuda_emu_build_of_an_unbound_function_gets_the_default_schedule():
    import numpy as np

    with pytest.warns(UserWarning, match="applied the default schedule"):
        kernel = sched.build(add_2d(), target="cuda-emu")
    assert "threadIdx" in kernel.source and "EmulatedKernel" in repr(kernel)
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((16, 8)).astype(np.float32) for _ in range(2))
    c = np.zeros((16, 8), np.float32)
    kernel(a, b, c)
    np.testing.assert_array_equal(c, a + b)


@T.prim_func
def racy_parallel_sum(A: T.Buffer((64,), "float32"), B: T.Buffer((1,), "float32")):
    for i in T.parallel(64):
        with T.block("sum"):
            vi = T.axis.remap("R", [i])
            with T.init():
                B[0] = T.float32(0)
            B[0] = B[0] + A[vi]


@T.prim_func
def parallel_rows(A: T.Buffer((8, 64), "float32"), B: T.Buffer((8,), "float32")):
    for i in T.parallel(8):
        for k in range(64):
            with T.block("sum"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A[vi, vk]


@T.prim_func
def racy_threads(A: T.Buffer((64,), "float32"), B: T.Buffer((1,), "float32")):
    for b in T.thread_binding(1, thread="blockIdx.x"):  # noqa: B007
        for t in T.thread_binding(64, thread="threadIdx.x"):
            B[0] = A[t]        # every thread writes one element: the last one wins


def test_a_hand_written_racy_parallel_loop_is_refused_at_build():
    # 64 iterations add into B[0] at the same time: sch.parallel refuses this loop, and a
    # function written with T.parallel gets the same answer when it is built
    with pytest.raises(BuildError, match=r"iterations of loop 'i' .* run at the same time but "
                                         r"depend on each other"):
        sched.build(racy_parallel_sum, target="c")
    sched.build(racy_parallel_sum, target="c", check_races=False)     # on the caller's word


def test_stores_outside_blocks_are_not_checked_for_races():
    """The polyhedral model is made of blocks: a store written outside any block (lowered-IR
    style, as hand-written CUDA-like kernels are) is not one of its statements, so the check
    has nothing to refuse. This pins that limit down (build's docstring states it; giving
    such stores blocks of their own for the checks refused TVM's lowered kernels with
    barriers: audit helper-138)."""
    kernel = sched.build(racy_threads, target="c")
    b = np.zeros(1, np.float32)
    kernel(np.arange(64, dtype=np.float32), b)
    assert b[0] in np.arange(64)


def test_a_hand_written_parallel_loop_without_a_race_builds():
    a = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    b = np.zeros(8, np.float32)
    sched.build(parallel_rows, target="c")(a, b)
    np.testing.assert_allclose(b, a.sum(axis=1), rtol=1e-5, atol=1e-5)


def _sum_combined_outside_the_threads():
    """Row sums: 32 threads each add a chunk into shared partials (rfactor), then the
    combining block runs under the blockIdx loop only, so in every thread."""
    from sched import compute as te

    A = te.placeholder((8, 256), name="A")
    k = te.reduce_axis((0, 256), name="k")
    S = te.compute((8,), lambda i: te.sum(A[i, k], axis=k), name="S")
    sch = sched.Schedule(te.create_prim_func([A, S]))
    _, kk = sch.get_loops(sch.get_block("S"))
    ko, _ = sch.split(kk, factors=[32, None])
    rf = sch.rfactor(ko, factor_axis=0)
    i, ko, _ = sch.get_loops(rf)
    sch.reverse_compute_at(sch.get_block("S"), i)
    sch.set_scope(rf, 0, "shared")
    sch.bind(i, "blockIdx.x")
    sch.bind(ko, "threadIdx.x")
    return sch


@pytest.mark.parametrize("target", ["c", "cuda"])
def test_an_update_every_thread_would_run_at_once_is_refused(target):
    """Each thread's copy of the combining block computes the right sum alone (the C target,
    running the copies in turn, gets it), but on a GPU they run at once and one thread's
    S[i] = 0 lands between another's read and write."""
    sch = _sum_combined_outside_the_threads()
    with pytest.raises(BuildError, match=r"block 'S' runs outside the threadIdx loops of its "
                                         r"kernel \(or of some of its thread axes\), so "
                                         r"several threads of a block run it"):
        sched.build(sch.func, target=target, arch="sm_90" if target == "cuda" else None)


def test_an_update_in_a_nest_with_no_thread_loop_of_its_own_is_refused(rng):
    """The function is one kernel: a nest bound to blockIdx only still runs in each of the
    threads another nest's threadIdx loop gives the kernel (found by the GPU-recipe fuzzer:
    the accumulation into shared X ran once per thread, 8 times too often on the C target)."""
    from sched import compute as te

    A = te.placeholder((16, 4), name="A")
    k = te.reduce_axis((0, 4), name="k")
    X = te.compute((16,), lambda i: te.sum(A[i, k], axis=k), name="X")
    Y = te.compute((16,), lambda i: X[i] * 2.0, name="Y")
    sch = sched.Schedule(te.create_prim_func([A, Y]))
    xo, _ = sch.split(sch.get_loops(sch.get_block("X"))[0], factors=[2, None])
    sch.bind(xo, "blockIdx.x")
    yo, yi = sch.split(sch.get_loops(sch.get_block("Y"))[0], factors=[2, None])
    sch.bind(yo, "blockIdx.x")
    sch.bind(yi, "threadIdx.x")
    sch.set_scope(sch.get_block("X"), 0, "shared")
    with pytest.raises(BuildError, match=r"block 'X' runs outside the threadIdx loops of its "
                                         r"kernel"):
        sched.build(sch.func, target="c")
    # bound to the threads too, it builds and computes the sums
    sch.bind(sch.get_loops(sch.get_block("X"))[1], "threadIdx.x")
    a = rng.random((16, 4), dtype=np.float32)
    y = np.zeros(16, np.float32)
    sched.build(sch.func, target="c")(a, y)
    np.testing.assert_allclose(y, a.sum(1) * 2, rtol=1e-5)


@T.prim_func
def _update_outside_the_block_loop(Z: T.Buffer((4,), "float32"), B: T.Buffer((2, 4), "float32")):
    for x in range(4):
        for t in T.thread_binding(1, thread="threadIdx.x"):  # noqa: B007
            with T.block("P"):
                vx = T.axis.spatial(4, x)
                Z[vx] = Z[vx] + T.float32(1)
        for j in T.thread_binding(2, thread="blockIdx.x"):
            for t in T.thread_binding(1, thread="threadIdx.x"):  # noqa: B007
                with T.block("Q"):
                    vx, vj = T.axis.remap("SS", [x, j])
                    B[vj, vx] = Z[vx]


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_an_update_every_thread_block_would_run_is_refused(target):
    # P is under a thread loop but no blockIdx loop of a kernel of 2 blocks: each block runs
    # it, each adding 1 (the C target runs it once)
    with pytest.raises(BuildError, match=r"block 'P' runs outside a blockIdx loop of its "
                                         r"kernel, so every thread block along it runs it, and "
                                         r"it reads Z, which the kernel writes \(P\)"):
        sched.build(_update_outside_the_block_loop, target=target)


def _blocks_beside_a_blockidx_x_nest(params: str, q_store: str):
    """P copies A into X and Q stores `q_store` under blockIdx.y alone, beside a nest bound to
    blockIdx.x (4 blocks) that fills C: every x block runs P and Q."""
    return sched.parse(f'''
@T.prim_func
def f({params}C: T.Buffer((2, 128), "float32")):
    X = T.alloc_buffer((2,), "float32")
    for by in T.thread_binding(2, thread="blockIdx.y"):
        with T.block("P"):
            vy = T.axis.spatial(2, by)
            X[vy] = A[vy]
        with T.block("Q"):
            vy = T.axis.spatial(2, by)
            {q_store} = X[vy] + T.float32(1)
        for bx in T.thread_binding(4, thread="blockIdx.x"):
            for tx in T.thread_binding(32, thread="threadIdx.x"):
                with T.block("R"):
                    vy = T.axis.spatial(2, by)
                    vx = T.axis.spatial(128, bx * 32 + tx)
                    C[vy, vx] = T.float32(2)
''')


_update_split_across_blocks = _blocks_beside_a_blockidx_x_nest(
    'A: T.Buffer((2,), "float32"), ', "A[vy]")
_copy_then_read_in_every_block = _blocks_beside_a_blockidx_x_nest(
    'A: T.Buffer((2,), "float32"), B: T.Buffer((2,), "float32"), ', "B[vy]")


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_an_update_split_over_two_blocks_under_blockidx_y_alone_is_refused(target):
    # P and Q run under blockIdx.y but not blockIdx.x: each of the 4 x blocks ran them, A
    # went up by 4 on cuda-emu (audit helper-120); neither block alone reads what it writes
    with pytest.raises(BuildError, match=r"block 'P' runs outside a blockIdx loop of its "
                                         r"kernel, .* it reads A, which the kernel writes "
                                         r"\(Q\)"):
        sched.build(_update_split_across_blocks, target=target)


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_copies_in_every_block_that_store_the_same_values_build(target):
    # every x block's copy of P stores A[y] into X[y], the same value: harmless, as in TVM
    # (refused by the first form of the rule above: audit helper-121)
    a, b = np.array([1.0, 10.0], np.float32), np.zeros(2, np.float32)
    c = np.zeros((2, 128), np.float32)
    sched.build(_copy_then_read_in_every_block, target=target)(a, b, c)
    np.testing.assert_array_equal(b, a + 1)
    np.testing.assert_array_equal(c, 2)


def _copied_blocks(p_store: str, q_store: str, r_store: str = "C[vy, vx] = T.float32(2)"):
    """P and Q under blockIdx.y alone (so every one of the 4 blockIdx.x blocks runs them)
    storing `p_store` and `q_store`, beside a nest bound to blockIdx.x storing `r_store`."""
    return sched.parse(f'''
@T.prim_func
def f(A: T.Buffer((2,), "float32"), X: T.Buffer((2,), "float32"),
      C: T.Buffer((2, 128), "float32")):
    for by in T.thread_binding(2, thread="blockIdx.y"):
        with T.block("P"):
            vy = T.axis.spatial(2, by)
            {p_store}
        with T.block("Q"):
            vy = T.axis.spatial(2, by)
            {q_store}
        for bx in T.thread_binding(4, thread="blockIdx.x"):
            for tx in T.thread_binding(32, thread="threadIdx.x"):
                with T.block("R"):
                    vy = T.axis.spatial(2, by)
                    vx = T.axis.spatial(128, bx * 32 + tx)
                    {r_store}
''')


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_a_copy_before_an_overwrite_in_every_block_is_refused(target):
    # P copies A into X, then Q zeroes A: the x blocks after the first copied Q's zero into X
    # (audit helper-122: X = [0, 0] on cuda-emu, the C target runs P and Q once)
    with pytest.raises(BuildError, match=r"block 'P' runs outside a blockIdx loop of its "
                                         r"kernel, .* it reads A, which the kernel writes "
                                         r"\(Q\): one thread block's copy would read what "
                                         r"another thread block already changed"):
        sched.build(_copied_blocks("X[vy] = A[vy]", "A[vy] = T.float32(0)"), target=target)


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_two_copied_stores_to_one_buffer_are_refused(target):
    # X = A then X = A + 1 in every x block: another block's first store may land after this
    # block's second, and the nest bound to blockIdx.x reads X meanwhile
    with pytest.raises(BuildError, match=r"block 'P' runs outside a blockIdx loop of its "
                                         r"kernel, .* blocks 'P', 'Q' write the same elements "
                                         r"of X: which copy's store lands last depends on "
                                         r"the order"):
        sched.build(_copied_blocks("X[vy] = A[vy]", "X[vy] = A[vy] + T.float32(1)",
                                   "C[vy, vx] = X[vy]"), target=target)


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_a_copied_read_of_what_the_bound_nest_writes_is_refused(target):
    # R (one x block each) overwrites A, which P in every x block copies: a later x block's P
    # would copy what an earlier block's R stored
    with pytest.raises(BuildError, match=r"block 'P' runs outside a blockIdx loop of its "
                                         r"kernel, .* it reads A, which the kernel writes "
                                         r"\(R\)"):
        sched.build(_copied_blocks("X[vy] = A[vy]", "C[vy, 0] = X[vy]",
                                   "A[vy] = T.float32(vx)"), target=target)


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_a_copied_store_into_what_the_bound_nest_writes_is_refused(target):
    # Q in every x block stores column 0 of C, which R of x block 0 also stores: which lands
    # last depends on the order the x blocks run in
    with pytest.raises(BuildError, match=r"block 'Q' runs outside a blockIdx loop of its "
                                         r"kernel, .* blocks 'Q', 'R' write the same elements "
                                         r"of C"):
        sched.build(_copied_blocks("X[vy] = A[vy]", "C[vy, 0] = X[vy]"), target=target)


@T.prim_func
def _copied_read_ahead_of_the_copy(A: T.Buffer((2, 5), "float32"), X: T.Buffer((2, 5), "float32"),
                                   B: T.Buffer((2, 4), "float32"),
                                   C: T.Buffer((2, 128), "float32")):
    for by in T.thread_binding(2, thread="blockIdx.y"):
        for i in range(4):
            with T.block("P"):
                vy, vi = T.axis.remap("SS", [by, i])
                X[vy, vi] = A[vy, vi]
            with T.block("Q"):
                vy, vi = T.axis.remap("SS", [by, i])
                B[vy, vi] = X[vy, vi + 1]
        for bx in T.thread_binding(4, thread="blockIdx.x"):
            for tx in T.thread_binding(32, thread="threadIdx.x"):
                with T.block("R"):
                    vy = T.axis.spatial(2, by)
                    vx = T.axis.spatial(128, bx * 32 + tx)
                    C[vy, vx] = T.float32(2)


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_a_copied_read_ahead_of_its_copys_store_is_refused(target):
    # Q reads X[y, i + 1] before P (same serial loop) stores it: another x block's P stored
    # it first (B = A[:, 1:] on cuda-emu, the old X on the C target; audit helper-124)
    with pytest.raises(BuildError, match=r"block 'Q' runs outside a blockIdx loop of its "
                                         r"kernel, .* it reads X, which the kernel writes "
                                         r"\(P\)"):
        sched.build(_copied_read_ahead_of_the_copy, target=target)


@T.prim_func
def _copied_read_of_the_same_iterations_store(A: T.Buffer((2, 4), "float32"),
                                              X: T.Buffer((2, 4), "float32"),
                                              B: T.Buffer((2, 4), "float32"),
                                              C: T.Buffer((2, 128), "float32")):
    for by in T.thread_binding(2, thread="blockIdx.y"):
        for i in range(4):
            with T.block("P"):
                vy, vi = T.axis.remap("SS", [by, i])
                X[vy, vi] = A[vy, vi]
            with T.block("Q"):
                vy, vi = T.axis.remap("SS", [by, i])
                B[vy, vi] = X[vy, vi] + T.float32(1)
        for bx in T.thread_binding(4, thread="blockIdx.x"):
            for tx in T.thread_binding(32, thread="threadIdx.x"):
                with T.block("R"):
                    vy = T.axis.spatial(2, by)
                    vx = T.axis.spatial(128, bx * 32 + tx)
                    T.where(bx * 32 + tx >= 1)
                    C[vy, vx] = T.float32(2)
        with T.block("S"):
            vy = T.axis.spatial(2, by)
            C[vy, 0] = T.float32(3)


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_copied_reads_of_their_own_stores_and_stores_of_other_elements_build(target):
    # Q reads the X[y, i] its copy of P stored in the same iteration (every copy stores the
    # same value), and the copied S stores C[y, 0], which the bound R does not: refused when
    # the rule compared loops and buffers instead of elements (audit helpers 124, 126)
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    x, b, c = np.zeros((2, 4), np.float32), np.zeros((2, 4), np.float32), \
        np.zeros((2, 128), np.float32)
    sched.build(_copied_read_of_the_same_iterations_store, target=target)(a, x, b, c)
    np.testing.assert_array_equal(b, a + 1)
    np.testing.assert_array_equal(c[:, 0], 3)
    np.testing.assert_array_equal(c[:, 1:], 2)


@T.prim_func
def _copied_update_with_no_thread_loop(Z: T.Buffer((2,), "float32"),
                                       C: T.Buffer((2, 4), "float32")):
    for by in T.thread_binding(2, thread="blockIdx.y"):
        with T.block("P"):
            vy = T.axis.spatial(2, by)
            Z[vy] = Z[vy] + T.float32(1)
        for bx in T.thread_binding(4, thread="blockIdx.x"):
            with T.block("R"):
                vy, vx = T.axis.remap("SS", [by, bx])
                C[vy, vx] = T.float32(2)


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_a_copied_update_in_a_kernel_of_one_thread_per_block_is_refused(target):
    # the rule was asked only of kernels with a threadIdx loop: Z = 4 on cuda-emu, 1 on the
    # C target (audit helper-124)
    with pytest.raises(BuildError, match=r"block 'P' runs outside a blockIdx loop of its "
                                         r"kernel, .* it reads Z, which the kernel writes"):
        sched.build(_copied_update_with_no_thread_loop, target=target)


@T.prim_func
def _opaque_call_in_every_block(X: T.Buffer((2, 2), "float32"),
                                C: T.Buffer((2, 4, 2), "float32")):
    for by in T.thread_binding(2, thread="blockIdx.y"):
        for t in T.thread_binding(2, thread="threadIdx.x"):
            with T.block("P"):
                vy, vt = T.axis.remap("SS", [by, t])
                T.reads()
                T.writes(X[vy, vt])
                T.evaluate(T.call_extern("int32", "bump", T.address_of(X[vy, vt])))
        for bx in T.thread_binding(4, thread="blockIdx.x"):
            for tx in T.thread_binding(2, thread="threadIdx.x"):
                with T.block("R"):
                    vy, vx, vt = T.axis.remap("SSS", [by, bx, tx])
                    C[vy, vx, vt] = T.float32(2)


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_an_opaque_call_every_thread_block_runs_is_refused(target):
    # `bump` adds 1 to X but declares no read of it: each of the 4 x blocks called it
    # (audit helper-122: X = 4 on cuda-emu, 1 on the C target)
    with pytest.raises(BuildError, match=r"block 'P' runs outside a blockIdx loop of its "
                                         r"kernel, .* makes an opaque call that may write X"):
        sched.build(_opaque_call_in_every_block, target=target,
                    extern_c="int bump(float* p) { *p += 1.0f; return 0; }")


@pytest.mark.parametrize("target", ["c", "cuda"])
def test_a_local_buffer_written_by_threads_and_read_by_every_thread_is_refused(target):
    """X in "local" memory is each thread's own: its threads write one element each, then a
    nest every thread runs (bound to blockIdx only) reads them all, so each thread but one
    reads a copy nobody wrote (found by the fuzzer: the C target computed garbage)."""
    from sched import compute as te

    A = te.placeholder((16,), name="A")
    X = te.compute((16,), lambda i: A[i] * 2.0, name="X")
    Y = te.compute((16,), lambda i: X[i] + 1.0, name="Y")
    sch = sched.Schedule(te.create_prim_func([A, Y]))
    xo, xi = sch.split(sch.get_loops(sch.get_block("X"))[0], factors=[2, None])
    sch.bind(xo, "blockIdx.x")
    sch.bind(xi, "threadIdx.x")
    yo, _ = sch.split(sch.get_loops(sch.get_block("Y"))[0], factors=[2, None])
    sch.bind(yo, "blockIdx.x")
    sch.set_scope(sch.get_block("X"), 0, "local")
    with pytest.raises(BuildError, match=r"block 'Y' runs in every thread along threadIdx.x "
                                         r"\(no loop of it is bound there\), and it reads 'X' "
                                         r"\(local: each thread's own copy\), which block 'X' "
                                         r"writes under a loop bound to threadIdx.x"):
        sched.build(sch.func, target=target, arch="sm_90" if target == "cuda" else None)


WHERE_ON_A_BLOCK_VARIABLE = """
@T.prim_func
def w(A: T.Buffer((4, 6), "float32"), C: T.Buffer((4, 6), "float32")):
    for i, j in T.grid(4, 6):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.where(vj % 3 != 0)
            C[vi, vj] = A[vi, vj] - T.float32(1)
"""


@pytest.mark.parametrize("target", ["c", "cuda"])
def test_a_function_the_verifier_refuses_is_refused_by_build_with_its_reason(target):
    # audit (helper-29): a block's own variable in its T.where reached isl as a syntax error;
    # the parser refuses that script now (helper-186), a function built in Python still
    # reaches build
    import dataclasses

    from sched.errors import ScriptError
    from sched.ir import BlockRealize, collect
    from sched.ir.functor import substitute
    from sched.schedule.state import replace

    with pytest.raises(ScriptError, match="uses the block's own axis 'vj'"):
        sched.parse(WHERE_ON_A_BLOCK_VARIABLE)
    func = sched.parse(WHERE_ON_A_BLOCK_VARIABLE.replace("T.where(vj % 3", "T.where(j % 3"))
    realize = next(r for r in collect(func.body, BlockRealize) if r.block.name == "C")
    j, vj = realize.iter_values[1], realize.block.iter_vars[1].var
    func = replace(func, realize, dataclasses.replace(
        realize, predicate=substitute(realize.predicate, {j: vj})))
    with pytest.raises(VerifyError, match="variable 'vj' is used outside its "
                                                       "scope \\(in block 'C'\\)"):
        sched.build(func, target=target, arch="sm_80" if target == "cuda" else None)


@pytest.mark.parametrize("step, message", [
    ("parallel", "loop 'i' is parallel, a CPU loop kind no GPU schedule keeps"),
    ("annotate", "loop 'i' has the CPU annotation 'pragma_auto_unroll_max_step'")])
def test_a_cpu_step_that_keeps_the_default_gpu_schedule_out_is_named(step, message):
    # audit, helper-105: the build said only "no default cuda schedule applies"
    from sched import compute as te

    A = te.placeholder((3, 97), name="A")
    B = te.compute((3, 97), lambda i, j: A[i, j] * 2.0, name="B")
    sch = sched.Schedule(te.create_prim_func([A, B]))
    i, _ = sch.get_loops(sch.get_block("B"))
    if step == "parallel":
        sch.parallel(i)
    else:
        sch.annotate(i, "pragma_auto_unroll_max_step", 16)
    with pytest.raises(sched.ScheduleError, match=message):
        sched.build(sch, target="cuda-emu")


def test_blocks_left_unbound_beside_bound_ones_get_the_default_gpu_schedule(rng):
    # audit, helper-105: only a function with no thread binding at all got the default
    # schedule; beside a bound block, an unscheduled reduction made the build refuse
    from sched import compute as te

    A = te.placeholder((3, 97), name="A")
    k = te.reduce_axis((0, 97), name="k")
    S = te.compute((3,), lambda i: te.sum(A[i, k], axis=k), name="S")
    C = te.compute((3, 97), lambda i, j: A[i, j] - S[i], name="C")
    sch = sched.Schedule(te.create_prim_func([A, C]))
    i, j = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    with pytest.warns(UserWarning, match="has blocks no thread binding covers"):
        kernel = sched.build(sch, target="cuda-emu")
    a = rng.standard_normal((3, 97)).astype(np.float32)
    c = np.zeros((3, 97), np.float32)
    kernel(a, c)
    np.testing.assert_allclose(c, a - a.sum(axis=1, keepdims=True), rtol=1e-4, atol=1e-4)


def test_no_default_cpu_schedule_for_symbolic_shapes_advises_what_works():
    # the refusal said "tune it with sched.tune", which refuses symbolic shapes and sent the
    # user back (audit helper-118)
    from sched import compute as te
    from sched.autoscheduler.default import default_schedule

    n = te.var("n")
    A = te.placeholder((n, 16), name="A")
    B = te.placeholder((16, 16), name="B")
    func = te.create_prim_func([A, B, te.ops.matmul(A, B)])
    with pytest.raises(sched.ScheduleError) as refusal:
        default_schedule(func, "c")
    assert "sched.tune" not in str(refusal.value)
    assert "build it as written (sched.build(func, target='c') runs it unscheduled)" in \
        str(refusal.value)
    with pytest.raises(ValueError, match="on the CPU as written"):
        sched.tune(func, target="c", trials=1)


@T.prim_func
def _update_beside_inner_threads(X: T.Buffer((2,), "float32"), C: T.Buffer((2, 32), "float32")):
    for bx in T.thread_binding(2, thread="blockIdx.x"):
        with T.block("outer"):
            vb = T.axis.spatial(2, bx)
            T.reads(X[vb])
            T.writes(X[vb], C[vb, 0:32])
            X[vb] = X[vb] + T.float32(1)
            for tx in T.thread_binding(32, thread="threadIdx.x"):
                with T.block("inner"):
                    vx = T.axis.spatial(32, tx)
                    T.reads()
                    T.writes(C[vb, vx])
                    C[vb, vx] = T.float32(2)


@T.prim_func
def _update_beside_inner_blocks(X: T.Buffer((2,), "float32"), C: T.Buffer((2, 4), "float32")):
    for by in T.thread_binding(2, thread="blockIdx.y"):
        with T.block("outer"):
            vy = T.axis.spatial(2, by)
            T.reads(X[vy])
            T.writes(X[vy], C[vy, 0:4])
            X[vy] = X[vy] + T.float32(1)
            for bx in T.thread_binding(4, thread="blockIdx.x"):
                with T.block("inner"):
                    vx = T.axis.spatial(4, bx)
                    T.reads()
                    T.writes(C[vy, vx])
                    C[vy, vx] = T.float32(2)


@T.prim_func
def _row_sum_declared_as_tvm_prints_it(A: T.Buffer((4, 33), "float32"),
                                       B: T.Buffer((4, 33), "float32")):
    S = T.alloc_buffer((4,))
    for i, k in T.grid(4, 33):
        with T.block("S"):
            vi, vk = T.axis.remap("SR", [i, k])
            T.reads(A[vi, vk])
            T.writes(S[vi])
            with T.init():
                S[vi] = T.float32(0)
            S[vi] = S[vi] + A[vi, vk]
    for i, j in T.grid(4, 33):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] / S[vi]


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_an_update_outside_the_thread_loops_is_refused_whatever_its_declared_reads(target):
    # TVM prints a reduction's T.reads without its accumulator: judged by them, every thread
    # ran the row sum (S 32 times too large on both targets, audit helper-151)
    sch = sched.Schedule(_row_sum_declared_as_tvm_prints_it)
    i, j = sch.get_loops(sch.get_block("B"))
    sch.bind(i, "blockIdx.x")
    sch.bind(sch.split(j, factors=[None, 32])[1], "threadIdx.x")
    sch.compute_at(sch.get_block("S"), i)
    with pytest.raises(BuildError, match=r"block 'S' runs outside the threadIdx loops .* it "
                                         r"reads what it writes \(S\)"):
        sched.build(sch.func, target=target)


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_an_update_beside_the_inner_blocks_of_a_block_is_judged_as_a_block(target):
    # the store of a block that holds the thread (or block) loops runs outside them: X + 32
    # on both targets, X + 4 on cuda-emu, were built (only leaf blocks were asked; audit
    # helper-130)
    with pytest.raises(BuildError, match=r"block 'outer' runs outside the threadIdx loops .* "
                                         r"it reads what it writes \(X\)"):
        sched.build(_update_beside_inner_threads, target=target)
    with pytest.raises(BuildError, match=r"block 'outer' runs outside a blockIdx loop .* it "
                                         r"reads X, which the kernel writes \(outer\)"):
        sched.build(_update_beside_inner_blocks, target=target)


@T.prim_func
def _stencil_steps_on_a_vthread(X: T.Buffer((4, 64), "float32")):
    for t in T.thread_binding(3, thread="vthread.x"):
        for bx in T.thread_binding(4, thread="blockIdx.x"):
            for tx in T.thread_binding(16, thread="threadIdx.x"):
                with T.block("S"):
                    vt = T.axis.spatial(3, t)
                    vi = T.axis.spatial(64, bx * 16 + tx)
                    X[vt + 1, vi] = X[vt, (vi + 63) % 64] + X[vt, vi] + X[vt, (vi + 1) % 64]


def test_a_vthread_around_a_blockidx_loop_is_a_serial_loop_each_block_runs():
    # every thread block runs the steps on its own: block 0 read block 1's column of the step
    # before it was written (cuda-emu off by 6.6; a vthread counted as a block axis: audit
    # helper-130)
    with pytest.raises(BuildError, match=r"loop 'bx' .* run at the same time but depend on "
                                         r"each other: flow dependence on 'X'"):
        sched.build(_stencil_steps_on_a_vthread, target="cuda-emu")


def _row_cache_at_blockidx_y(scope: str):
    """C[y, x] = A[y, x % 8] + B[y, x], x split over blockIdx.x (4 blocks) under y on
    blockIdx.y, A's row cached in `scope` at y: every x block makes the copy."""
    from sched import compute as te

    A = te.placeholder((4, 8), "float32", name="A")
    B = te.placeholder((4, 128), "float32", name="B")
    C = te.compute((4, 128), lambda y, x: A[y, x % 8] + B[y, x], name="C")
    sch = sched.Schedule(te.create_prim_func([A, B, C]))
    block = sch.get_block("C")
    y, x = sch.get_loops(block)
    xo, xi = sch.split(x, [None, 32])
    sch.bind(y, "blockIdx.y")
    sch.bind(xo, "blockIdx.x")
    sch.bind(xi, "threadIdx.x")
    sch.compute_at(sch.cache_read(block, 0, scope), y)
    return sch


@pytest.mark.parametrize("scope", ["shared", "global"])
@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_a_cache_every_block_copies_alike_is_kept(scope, target):
    # each x block fills its own shared copy (or stores the same values to the global one);
    # compute_at at the blockIdx.y loop was refused as a dependence between blocks (helper-130)
    sch = _row_cache_at_blockidx_y(scope)
    rng = np.random.default_rng(5)
    a, b = rng.random((4, 8), dtype=np.float32), rng.random((4, 128), dtype=np.float32)
    c = np.zeros((4, 128), np.float32)
    sched.build(sch.mod, target=target)(a, b, c)
    np.testing.assert_allclose(c, a[:, np.arange(128) % 8] + b, rtol=1e-6)


@T.prim_func
def _own_store_under_its_thread_loop(A: T.Buffer((4, 32), "float32"),
                                     B: T.Buffer((4, 32), "float32"),
                                     C: T.Buffer((4, 32), "float32")):
    for bx in T.thread_binding(4, thread="blockIdx.x"):
        with T.block("outer"):
            vb = T.axis.spatial(4, bx)
            T.reads(A[vb, 0:32], C[vb, 0:32])
            T.writes(B[vb, 0:32], C[vb, 0:32])
            for tx in T.thread_binding(32, thread="threadIdx.x"):
                C[vb, tx] = C[vb, tx] + T.float32(1)
                with T.block("inner"):
                    vt = T.axis.spatial(32, tx)
                    B[vb, vt] = A[vb, vt] * T.float32(2)


@T.prim_func
def _shared_row_reloaded_per_step(A: T.Buffer((4, 3, 8), "float32"),
                                  C: T.Buffer((4, 3, 128), "float32")):
    S = T.alloc_buffer((8,), "float32", scope="shared")
    for y in T.thread_binding(4, thread="blockIdx.y"):
        for k in range(3):
            for j in range(8):
                with T.block("S"):
                    vy, vk, vj = T.axis.remap("SSS", [y, k, j])
                    S[vj] = A[vy, vk, vj]
            for bx in T.thread_binding(4, thread="blockIdx.x"):
                for tx in T.thread_binding(32, thread="threadIdx.x"):
                    with T.block("C"):
                        vy, vk = T.axis.remap("SS", [y, k])
                        vx = T.axis.spatial(128, bx * 32 + tx)
                        C[vy, vk, vx] = S[vx % 8]


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_own_stores_under_their_thread_loop_and_per_block_reloads_build(target):
    # a block's own store under its own threadIdx loop was judged as if outside it; a shared
    # row reloaded each step by every x block was refused on its write after read, which
    # stays in one block (both refused: audit helper-136)
    rng = np.random.default_rng(6)
    a = rng.random((4, 32), dtype=np.float32)
    b, c = np.zeros((4, 32), np.float32), rng.random((4, 32), dtype=np.float32)
    expected_c = c + 1
    sched.build(_own_store_under_its_thread_loop, target=target)(a, b, c)
    np.testing.assert_allclose(b, 2 * a)
    np.testing.assert_allclose(c, expected_c)
    a3 = rng.random((4, 3, 8), dtype=np.float32)
    c3 = np.zeros((4, 3, 128), np.float32)
    sched.build(_shared_row_reloaded_per_step, target=target)(a3, c3)
    np.testing.assert_allclose(c3, a3[:, :, np.arange(128) % 8])


@T.prim_func
def _buffer_past_the_address_space(A: T.Buffer((16,), "float32"),
                                   G: T.Buffer((16,), "int32"),
                                   B: T.Buffer((16,), "float32")):
    X = T.alloc_buffer((T.int64(2**60 + 1), T.int64(16)), "float32")
    for i in range(16):
        with T.block("X"):
            vi = T.axis.spatial(16, i)
            X[G[vi] * 1000, G[vi]] = A[vi]
    for i in range(16):
        with T.block("B"):
            vi = T.axis.spatial(16, i)
            B[vi] = X[G[vi] * 1000, G[vi]]


def test_a_buffer_of_more_bytes_than_the_address_space_is_refused():
    # its byte count wrapped to 64: the kernel wrote 240k elements past it (helper-137)
    with pytest.raises(BuildError, match=r"buffer 'X' holds 18446744073709551632 elements of "
                                         r"float32, more bytes than a 64-bit address space"):
        sched.build(_buffer_past_the_address_space, target="c")


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
@pytest.mark.parametrize("scope", ["shared", "local"])
def test_a_scratch_buffer_a_block_outside_the_thread_loops_updates(target, scope):
    # a shared scratch is one per thread block, which every thread runs the block's update
    # on: 32 times the sum (audit helper-154); a local one is each thread's own
    f = sched.parse(f"""
@T.prim_func
def f(A: T.Buffer((4, 8), "float32"), S: T.Buffer((4,), "float32"),
      B: T.Buffer((4, 32), "float32")):
    for bx in T.thread_binding(4, thread="blockIdx.x"):
        for k in range(8):
            with T.block("S"):
                vb, vk = T.axis.remap("SR", [bx, k])
                T.reads(A[vb, vk])
                T.writes(S[vb])
                tmp = T.alloc_buffer((1,), scope="{scope}")
                tmp[0] = T.float32(0)
                tmp[0] = tmp[0] + A[vb, vk]
                S[vb] = tmp[0]
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            with T.block("B"):
                vb, vt = T.axis.remap("SS", [bx, tx])
                B[vb, vt] = T.float32(1)
""")
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    s, b = np.zeros(4, np.float32), np.zeros((4, 32), np.float32)
    if scope == "shared":
        with pytest.raises(BuildError, match=r"block 'S' runs outside the threadIdx loops .* "
                                             r"it reads what it writes \(tmp\)"):
            sched.build(f, target=target)
        return
    sched.build(f, target=target)(a, s, b)
    np.testing.assert_array_equal(s, a[:, -1])
