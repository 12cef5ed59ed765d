"""GPU lowering: barriers where threads share memory, one loop per thread axis, the launch
configuration, and the C target's per-thread phases that compute what the GPU would."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import sched
from sched.errors import ScheduleError
from sched.ir import Barrier, collect
from sched.lower import lower
from sched.lower.gpu_threads import launch_config
from sched.script import T
from tests.conftest import assert_close


@T.prim_func
def block_sum(A: T.Buffer((8, 64), "float32"), B: T.Buffer((8,), "float32")):
    for b in T.thread_binding(8, thread="blockIdx.x"):
        X = T.decl_buffer((64,), "float32", scope="shared")
        for t in T.thread_binding(64, thread="threadIdx.x"):
            X[t] = A[b, t]
            if t == 0:
                B[b] = T.float32(0)
                for r in range(64):
                    B[b] = B[b] + X[r]


@T.prim_func
def tiled_matmul(A: T.Buffer((64, 48), "float32"), B: T.Buffer((48, 32), "float32"),
                 C: T.Buffer((64, 32), "float32")):
    for by in T.thread_binding(4, thread="blockIdx.y"):
        for bx in T.thread_binding(2, thread="blockIdx.x"):
            As = T.decl_buffer((16, 16), "float32", scope="shared")
            Bs = T.decl_buffer((16, 16), "float32", scope="shared")
            acc = T.decl_buffer((1,), "float32", scope="local")
            for ty in T.thread_binding(16, thread="threadIdx.y"):
                for tx in T.thread_binding(16, thread="threadIdx.x"):
                    acc[0] = T.float32(0)
                    for ko in range(3):
                        As[ty, tx] = A[by * 16 + ty, ko * 16 + tx]
                        Bs[ty, tx] = B[ko * 16 + ty, bx * 16 + tx]
                        for ki in range(16):
                            acc[0] = acc[0] + As[ty, ki] * Bs[ki, tx]
                    C[by * 16 + ty, bx * 16 + tx] = acc[0]


@T.prim_func
def elementwise_no_shared(A: T.Buffer((256,), "float32"), B: T.Buffer((256,), "float32")):
    for b in T.thread_binding(2, thread="blockIdx.x"):
        for t in T.thread_binding(128, thread="threadIdx.x"):
            B[b * 128 + t] = A[b * 128 + t] * T.float32(2)


def test_barrier_between_a_shared_write_and_the_read_of_another_thread():
    text = lower(block_sum, target="cuda").script()
    assert 'X[t] = A_flat[b * 64 + t]\n            T.tvm_storage_sync("shared")\n' \
           '            if t == 0:' in text


@T.prim_func
def block_sum_through_a_let(A: T.Buffer((8, 64), "float32"), B: T.Buffer((8,), "float32")):
    for b in T.thread_binding(8, thread="blockIdx.x"):
        X = T.decl_buffer((64,), "float32", scope="shared")
        for t in T.thread_binding(64, thread="threadIdx.x"):
            X[t] = A[b, t]
            if t == 0:
                B[b] = T.float32(0)
                for r in range(64):
                    v: T.float32 = X[r]
                    B[b] = B[b] + v


@T.prim_func
def condition_on_shared(A: T.Buffer((8, 64), "float32"), B: T.Buffer((8, 64), "float32")):
    for b in T.thread_binding(8, thread="blockIdx.x"):
        X = T.decl_buffer((64,), "float32", scope="shared")
        for t in T.thread_binding(64, thread="threadIdx.x"):
            X[t] = A[b, t]
            if X[63 - t] > T.float32(0):
                B[b, t] = T.float32(1)


# the shared reads of a let's value (argmax's `v_idx: T.int32 = ...`) and of an if's condition
# are reads too: without the barrier, thread 0 read X[r] before thread r wrote it
@pytest.mark.parametrize("func", [block_sum_through_a_let, condition_on_shared])
def test_a_shared_read_in_a_let_value_or_a_condition_waits_for_the_barrier(func):
    text = lower(func, target="cuda").script()
    assert 'X[t] = A_flat[b * 64 + t]\n            T.tvm_storage_sync("shared")\n' in text


def test_tiled_matmul_gets_a_barrier_before_compute_and_at_the_end_of_the_k_loop():
    text = lower(tiled_matmul, target="cuda").script()
    ko_body = text[text.index("for ko in range(3):"):]
    assert ko_body.count('T.tvm_storage_sync("shared")') == 2
    fetch_then_sync = 'Bs[ty * 16 + tx] = B_flat[ko * 512 + ty * 32 + bx * 16 + tx]\n' \
                      '                        T.tvm_storage_sync("shared")'
    assert fetch_then_sync in text
    assert ko_body.rstrip().splitlines()[-2].strip() == 'T.tvm_storage_sync("shared")'


@T.prim_func
def overwritten_by_other_threads(X: T.Buffer((32,), "float32"), Y: T.Buffer((32,), "float32"),
                                 Out: T.Buffer((32,), "float32")):
    S = T.alloc_buffer((32,), "float32", scope="shared")
    for i in range(32):
        with T.block("first"):
            vi = T.axis.remap("S", [i])
            S[vi] = X[vi]
    for i in range(32):
        with T.block("second"):
            vi = T.axis.remap("S", [i])
            S[31 - vi] = Y[vi]
    for i in range(32):
        with T.block("read"):
            vi = T.axis.remap("S", [i])
            Out[vi] = S[vi]


@pytest.mark.parametrize("order", ["forward", "reverse", "shuffle"])
def test_a_write_after_another_threads_write_waits_for_a_barrier(order):
    """Thread t writes S[t], then S[31 - t]: the second write must come after every thread's
    first, or thread 31's first write can land after thread 0's second and leave X[31] in
    S[31]. The three binds are accepted (the concurrency rule orders the pair by a barrier),
    so the lowering must put that barrier between the writes (it once tracked only read after
    write and write after read, and this schedule computed a wrong O)."""
    sch = sched.Schedule(overwritten_by_other_threads)
    for name in ("first", "second", "read"):
        (loop,) = sch.get_loops(sch.get_block(name))
        sch.bind(loop, "threadIdx.x")
    x = np.arange(32, dtype=np.float32)
    y = 100 + np.arange(32, dtype=np.float32)
    out = np.zeros(32, np.float32)
    sched.build(sch.func, target="c", thread_order=order)(x, y, out)
    np.testing.assert_array_equal(out, y[::-1])
    source = sched.build(sch.func, target="cuda", arch="sm_90").source
    first, second = source.index("S[i] = X[i];"), source.index("S[31 - i_1] = Y[i_1];")
    assert "__syncthreads();" in source[first:second]


def test_no_shared_memory_no_barrier():
    assert not collect(lower(elementwise_no_shared, target="cuda").body, Barrier)


def test_launch_config_comes_from_the_bound_loops():
    config = launch_config(lower(tiled_matmul, target="cuda"))
    assert [g.value for g in config.grid] == [2, 4, 1]
    assert config.block == (16, 16, 1) and config.threads_per_block == 256


def test_unbound_store_is_refused_for_the_gpu():
    @T.prim_func
    def unbound(A: T.Buffer((4,), "float32")):
        for i in range(4):
            A[i] = T.float32(1)
    with pytest.raises(ScheduleError, match="the store to 'A' is not under any loop bound to "
                                            "blockIdx or threadIdx"):
        launch_config(lower(unbound, target="cuda"))


def test_too_many_threads_are_refused():
    @T.prim_func
    def big(A: T.Buffer((2048,), "float32")):
        for t in T.thread_binding(2048, thread="threadIdx.x"):
            A[t] = T.float32(1)
    with pytest.raises(ScheduleError, match="2048 threads per block .* exceed 1024"):
        launch_config(lower(big, target="cuda"))


@pytest.mark.parametrize("kernel, inputs, reference", [
    (block_sum, [(8, 64)], lambda a: a.sum(axis=1)),
    (tiled_matmul, [(64, 48), (48, 32)], lambda a, b: a @ b),
    (elementwise_no_shared, [(256,)], lambda a: a * 2),
], ids=["block_sum", "tiled_matmul", "elementwise"])
def test_c_target_runs_gpu_kernels_phase_by_phase(rng, kernel, inputs, reference):
    arrays = [rng.standard_normal(shape, np.float32) for shape in inputs]
    expected = reference(*[a.astype(np.float64) for a in arrays])
    out = np.zeros(expected.shape, np.float32)
    sched.build(kernel, target="c")(*arrays, out)
    assert_close(out, expected)


def test_c_phases_split_thread_loops_at_barriers_and_expand_local_buffers():
    text = lower(tiled_matmul, target="c").script()
    assert "T.tvm_storage_sync" not in text
    assert 'acc = T.decl_buffer((256,), "float32", scope="local")' in text   # 16 x 16 threads
    assert text.count('for tx in T.thread_binding(16, thread="threadIdx.x"):') == 4


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")
def test_cuda_source_compiles_with_nvcc(tmp_path):
    from sched.cuda.codegen import generate_cuda

    lowered = lower(tiled_matmul, target="cuda")
    source, name, _ = generate_cuda(lowered, launch_config(lowered))
    assert "__syncthreads();" in source and "__shared__ __align__(16) float As[256];" in source
    path = tmp_path / "kernel.cu"
    path.write_text(source)
    result = subprocess.run(["nvcc", "-cubin", "-arch=sm_90", "-Xptxas", "-v", str(path), "-o",
                             str(tmp_path / "kernel.cubin")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "0 bytes spill stores" in result.stderr


@T.prim_func
def redundant_then_per_thread(A: T.Buffer((64,), "float32"), Y: T.Buffer((64,), "float32")):
    for b in T.thread_binding(1, thread="blockIdx.x"):  # noqa: B007
        for t in T.thread_binding(64, thread="threadIdx.x"):
            for i in range(64):              # every thread stores all of Y (the same values)
                Y[i] = A[i]
            Y[63 - t] = Y[63 - t] * T.float32(2)


def test_barrier_between_a_redundant_global_store_and_another_threads_update():
    """Global memory needs the barrier too: without it one thread may still be storing
    Y[58] from A after the thread that doubles Y[58] has done so, undoing it (found by the
    fuzzer on cuda-emu: a producer computed under the consumer's blockIdx loop). The pass
    cannot tell the copy loop's iterations apart by thread, so it also closes each of them."""
    text = lower(redundant_then_per_thread, target="cuda").script()
    copy, update = text.index("Y[i] = A[i]"), text.index("Y[63 - t] = Y[63 - t]")
    assert copy < text.index("T.tvm_storage_sync", copy) < update


@T.prim_func
def one_thread_sums(A: T.Buffer((8, 64), "float32"), B: T.Buffer((8,), "float32")):
    for b in T.thread_binding(8, thread="blockIdx.x"):
        for t in T.thread_binding(64, thread="threadIdx.x"):
            if t == 0:
                B[b] = T.float32(0)
                for r in range(64):
                    B[b] = B[b] + A[b, r]


def test_accesses_of_one_pinned_thread_need_no_barrier():
    """Under `if t == 0` one thread makes every access, in its own order."""
    assert not collect(lower(one_thread_sums, target="cuda").body, Barrier)


# the fuzzer's program, reduced: C runs in every thread of T's block (computed under its
# blockIdx loop, not bound to threads) and stores Y, which T's threads then update
REDUNDANT_PRODUCER = """
@T.prim_func
def fuzz(W: T.Buffer((9,), "float32"), v0: T.Buffer((9, 4), "float32"),
         Y: T.Buffer((9,), "float32")):
    for y in range(9):
        with T.block("C"):
            vx = T.axis.spatial(9, 9 - 1 - y)
            T.reads(W[0:9], v0[vx, vx % 4])
            T.writes(Y[vx])
            if vx % 2 == 0:
                Y[vx] = T.max(W[vx], W[vx // 2]) + v0[vx, vx % 4]
    for t in range(9):
        with T.block("T"):
            vi = T.axis.remap("S", [t])
            T.reads(W[vi // 2], Y[vi])
            T.writes(Y[vi])
            Y[vi] = Y[vi] * T.float32(2.0) + W[vi // 2]
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="cuda-emu needs g++")
def test_a_producer_run_by_every_thread_is_ordered_before_the_threads_update():
    func = sched.parse(REDUNDANT_PRODUCER)
    sch = sched.Schedule(func)
    sch.split(sch.get_loops(sch.get_block("T"))[0], factors=[2, None, 2])
    sch.bind(sch.get_loops(sch.get_block("T"))[2], "threadIdx.x")
    sch.bind(sch.get_loops(sch.get_block("T"))[0], "blockIdx.x")
    sch.compute_at(sch.get_block("C"), sch.get_loops(sch.get_block("T"))[0])
    rng = np.random.default_rng(0)
    for _ in range(3):
        arrays = [rng.integers(-3, 4, s).astype(np.float32) for s in ((9,), (9, 4), (9,))]
        expected = [a.copy() for a in arrays]
        sched.interpret(func, *expected)
        sched.build(sch.func, target="cuda-emu")(*arrays)
        np.testing.assert_array_equal(arrays[2], expected[2])


@T.prim_func
def _half_index(A: T.Buffer((2, 4), "float32"), Y: T.Buffer((8,), "float32")):
    for _b in T.thread_binding(1, thread="blockIdx.x"):
        S = T.decl_buffer((4,), "float32", scope="shared")
        for tx in T.thread_binding(8, thread="threadIdx.x"):
            S[tx // 2] = A[0, tx // 2]
            Y[tx] = S[tx // 2]
            S[tx // 2] = A[1, tx // 2]


def test_an_index_two_threads_share_is_not_one_threads_own():
    # S[tx // 2] names the element of threads 2m and 2m + 1: a barrier between the read and
    # the next store
    lowered = lower(_half_index, target="cuda")
    assert collect(lowered.body, Barrier)


def test_an_index_of_every_thread_axis_is_one_threads_own():
    @T.prim_func
    def own(A: T.Buffer((8,), "float32"), Y: T.Buffer((8,), "float32")):
        for _b in T.thread_binding(1, thread="blockIdx.x"):
            S = T.decl_buffer((8,), "float32", scope="shared")
            for tx in T.thread_binding(8, thread="threadIdx.x"):
                S[tx] = A[tx]
                Y[tx] = S[tx] * T.float32(2)
    assert not collect(lower(own, target="cuda").body, Barrier)


def test_an_update_under_one_thread_axis_of_a_two_axis_block_is_refused():
    # S[i] += ... under threadIdx.y alone: every thread along x of the row runs it at once
    @T.prim_func
    def row_update(A: T.Buffer((4, 16), "float32"), Y: T.Buffer((4, 16), "float32")):
        for _b in T.thread_binding(1, thread="blockIdx.x"):
            with T.block("root_b"):
                S = T.alloc_buffer((4,), "float32", scope="shared")
                for ty in T.thread_binding(4, thread="threadIdx.y"):
                    for k in range(16):
                        with T.block("S"):
                            vi, vk = T.axis.remap("SR", [ty, k])
                            with T.init():
                                S[vi] = T.float32(0)
                            S[vi] = S[vi] + A[vi, vk]
                for ty in T.thread_binding(4, thread="threadIdx.y"):
                    for tx in T.thread_binding(16, thread="threadIdx.x"):
                        with T.block("Y"):
                            vi, vj = T.axis.remap("SS", [ty, tx])
                            Y[vi, vj] = A[vi, vj] / S[vi]
    with pytest.raises(sched.BuildError, match="block 'S' runs outside the threadIdx loops of "
                                               "its kernel \\(or of some of its thread axes\\)"):
        sched.build(row_update, target="c")


def test_a_private_buffer_read_along_a_thread_axis_its_reader_lacks_is_refused():
    # P (local) written by threads (y, x); Q under threadIdx.y alone reads other x-threads' P
    from sched import compute as te

    X = te.placeholder((8, 16), name="X")
    P = te.compute((8, 16), lambda i, j: X[i, j] * 2.0, name="P")
    Q = te.compute((8, 16), lambda i, j: P[i, (j + 1) % 16] + 1.0, name="Q")
    sch = sched.Schedule(te.create_prim_func([X, Q]))
    i, _ = sch.get_loops(sch.get_block("Q"))
    i_0, i_1 = sch.split(i, [None, 4])
    sch.bind(i_0, "blockIdx.x")
    sch.compute_at(sch.get_block("P"), i_0)
    sch.set_scope(sch.get_block("P"), 0, "local")
    p_i, p_j = sch.get_loops(sch.get_block("P"))[1:]
    sch.bind(p_i, "threadIdx.y")
    sch.bind(p_j, "threadIdx.x")
    sch.bind(i_1, "threadIdx.y")
    with pytest.raises(sched.BuildError, match="block 'Q' runs in every thread along "
                                               "threadIdx.x .* reads 'P' \\(local"):
        sched.build(sch.func, target="c")


@T.prim_func
def barrier_in_a_loop_that_may_not_run(a: T.handle, b: T.handle, c: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (64,), "float32")
    B = T.match_buffer(b, (n, 64), "float32")
    C = T.match_buffer(c, (64,), "float32")
    X = T.decl_buffer((64,), "float32", scope="shared")
    Y = T.decl_buffer((64,), "float32", scope="shared")
    for t in T.thread_binding(64, thread="threadIdx.x"):
        X[t] = A[t]
        for k in range(T.min(n - 1, 4)):
            Y[t] = B[k, t]
            T.tvm_storage_sync("shared")
            B[k, t] = Y[63 - t]
        C[t] = X[63 - t]


@T.prim_func
def barrier_in_one_branch(a: T.handle, b: T.handle, c: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (64,), "float32")
    B = T.match_buffer(b, (n, 64), "float32")
    C = T.match_buffer(c, (64,), "float32")
    X = T.decl_buffer((64,), "float32", scope="shared")
    Y = T.decl_buffer((64,), "float32", scope="shared")
    for t in T.thread_binding(64, thread="threadIdx.x"):
        X[t] = A[t]
        if n > 1:
            Y[t] = B[0, t]
            T.tvm_storage_sync("shared")
            C[t] = Y[63 - t]
        C[t] = C[t] + X[63 - t]


@pytest.mark.parametrize("func, n", [(barrier_in_a_loop_that_may_not_run, 1),
                                     (barrier_in_one_branch, 1)])
def test_a_barrier_that_may_not_run_does_not_order_what_is_around_it(func, n):
    """X[t] is written before a loop (or branch) holding a barrier and read by another
    thread after it: when the loop runs no iteration (n = 1), only a barrier after it orders
    the two; taken as a barrier, the loop let the read race with the write (audit helper-63:
    NaN on cuda-emu, and a race under the thread sanitizer)."""
    text = lower(func, target="cuda").script()
    assert text.rstrip().count('T.tvm_storage_sync("shared")') >= 2, text
    a = np.arange(64, dtype="float32") + 1
    c = np.zeros(64, "float32")
    sched.build(func, target="cuda-emu", sanitize="thread")(a, np.ones((n, 64), "float32"), c)
    assert_close(c, a[::-1])


@T.prim_func
def count_in_shared_memory(N: T.Buffer((1,), "int32"), A: T.Buffer((32, 8), "float32"),
                           B: T.Buffer((32,), "float32")):
    S = T.decl_buffer((1,), "int32", scope="shared")
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        if tx == 0:
            S[0] = N[0]
        B[tx] = T.float32(0)
        for k in range(S[0]):
            B[tx] = B[tx] + A[tx, k]


@T.prim_func
def two_views_of_one_storage(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32")):
    S = T.decl_buffer((4, 16), "float32", scope="shared")
    V = T.decl_buffer((8, 8), "float32", scope="shared", data=S.data)
    for ty in T.thread_binding(4, thread="threadIdx.y"):
        for tx in T.thread_binding(8, thread="threadIdx.x"):
            S[ty, tx] = A[ty, tx]
            B[ty, tx] = V[ty, tx]


@T.prim_func
def sibling_loops_of_one_name(A: T.Buffer((32,), "float32"), B: T.Buffer((32,), "float32")):
    S = T.decl_buffer((33,), "float32", scope="shared")
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        for j in range(1, 2):
            S[tx + j] = A[tx]
        for j in range(1):
            B[tx] = S[tx + j]


@T.prim_func
def shifted_by_the_serial_loop(A: T.Buffer((32, 4), "float32"), B: T.Buffer((32, 4), "float32")):
    S = T.decl_buffer((36,), "float32", scope="shared")
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        for k in range(4):
            S[tx + k] = A[tx, k]
            B[tx, k] = S[tx + k]


@pytest.mark.parametrize("func, args, expected", [
    # a shared read in a loop bound waits for thread 0's write
    (count_in_shared_memory,
     lambda: [np.array([5], "int32"), np.arange(256, dtype="float32").reshape(32, 8),
              np.zeros(32, "float32")],
     lambda a: a[1][:, :5].sum(1)),
    # V[1, tx] is S's flat element 8 + tx, which thread (0, 8 + tx) does not write: S[0, 8:]
    # is written by no thread; V[2, tx] = S[1, tx] is written by thread (1, tx)
    (two_views_of_one_storage,
     lambda: [np.arange(32, dtype="float32").reshape(4, 8) + 1, np.zeros((4, 8), "float32")],
     None),
    (sibling_loops_of_one_name,
     lambda: [np.arange(32, dtype="float32") + 1, np.zeros(32, "float32")], None),
    (shifted_by_the_serial_loop,
     lambda: [np.arange(128, dtype="float32").reshape(32, 4) + 1, np.zeros((32, 4), "float32")],
     lambda a: a[0]),
])
def test_accesses_that_only_look_like_one_threads_own_get_a_barrier(func, args, expected):
    """Found by audit helper-64 in hand-written lowered code: a shared read in a loop bound
    was not tracked; two views of one storage, two sibling loops binding a variable of one
    name, and two iterations of a serial loop make equal index expressions that name other
    threads' elements, taken as one thread's own. Each got no barrier and raced."""
    text = lower(func, target="cuda").script()
    assert 'T.tvm_storage_sync("shared")' in text, text
    for target, options in (("cuda-emu", {"sanitize": "thread"}),
                            ("c", {"thread_order": "reverse"})):
        arrays = args()
        sched.build(func, target=target, **options)(*arrays)
        if expected is not None:
            assert_close(arrays[-1], expected(arrays))
    if func is two_views_of_one_storage:
        np.testing.assert_array_equal(arrays[1][2], arrays[0][1])
    if func is sibling_loops_of_one_name:
        np.testing.assert_array_equal(arrays[1][1:], arrays[0][:-1])


@T.prim_func
def trip_count_of_the_thread_through_a_let(A: T.Buffer((32,), "float32"),
                                           B: T.Buffer((32,), "float32")):
    S = T.decl_buffer((32,), "float32", scope="shared")
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        B[tx] = T.float32(0)
        v: T.int32 = tx % 2 + 1
        for k in range(v):  # noqa: B007
            S[tx] = A[tx] + T.float32(1)
            B[tx] = B[tx] + S[31 - tx]


def test_a_barrier_under_a_trip_count_of_the_thread_through_a_let_is_refused():
    """v = tx % 2 + 1: odd threads run the loop twice and wait at a barrier the others never
    reach (cuda-emu reported a deadlock; helper-64)."""
    with pytest.raises(ScheduleError, match="loop 'k' holds a barrier"):
        sched.build(trip_count_of_the_thread_through_a_let, target="cuda-emu")
