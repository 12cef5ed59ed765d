"""What the emulator catches: barriers not every thread reaches (at once, with the line),
a block that never finishes (the watchdog), data races under ThreadSanitizer, reads of
shared memory no thread wrote (NaN)."""

from __future__ import annotations

import functools
import subprocess

import numpy as np
import pytest

from sched.errors import EmulationError
from tests.cuda.emu.kernels import (
    ATOMIC_SUM,
    DIVERGENT_BARRIERS,
    EARLY_RETURN,
    GLOBAL_RACE,
    MISSING_BARRIER,
    SHUFFLE_WITHOUT_LANES,
    SPIN,
    emulate,
)


@functools.cache
def has_tsan() -> bool:
    """Whether g++ links -fsanitize=thread programs here (libtsan installed)."""
    try:
        result = subprocess.run(["g++", "-fsanitize=thread", "-x", "c++", "-", "-o",
                                 "/dev/null"], input="int main() {}", capture_output=True,
                                text=True)
    except OSError:
        return False
    return result.returncode == 0


needs_tsan = pytest.mark.skipif(not has_tsan(), reason="g++ here cannot link "
                                "-fsanitize=thread (libtsan missing)")


def run(source, name, block=(64, 1, 1), grid=(1, 1, 1), **options):
    a = np.arange(64, dtype=np.float32)
    b = np.zeros(64, np.float32)
    emulate(source, name, [(64,), (64,)], block=block, grid=grid, **options)(a, b)
    return b


def test_barrier_some_threads_returned_before_is_a_deadlock_with_its_line():
    # threads 32..63 return, so threads 0..31 wait at line 6 forever on a GPU
    with pytest.raises(EmulationError, match=r"(?s)kernel 'early_return' \(cuda-emu\): deadlock "
                       r"in block \(0, 0, 0\) of kernel 'early_return'.*"
                       r"threads 0-31 wait at __syncthreads\(\) on line 6\n"
                       r"  threads 32-63 returned from the kernel.*"
                       r"source lines:\n      6 |     __syncthreads\(\);"):
        run(EARLY_RETURN, "early_return")


def test_threads_at_different_barriers_are_reported():
    # odd threads wait at line 4, even ones at line 6: undefined behaviour in CUDA
    with pytest.raises(EmulationError, match=r"divergent barriers in block \(0, 0, 0\) of "
                       r"kernel 'divergent': thread \d+ reached __syncthreads\(\) on line "
                       r"[46] while others wait at the one on line [46]"):
        run(DIVERGENT_BARRIERS, "divergent")


def test_shuffle_some_lanes_of_the_mask_never_reach_is_a_deadlock():
    with pytest.raises(EmulationError, match=r"(?s)deadlock.*threads 0-15 wait at "
                       r"__shfl_down_sync on line 5\n  threads 16-31 returned"):
        run(SHUFFLE_WITHOUT_LANES, "partial_warp", block=(32, 1, 1))


def test_watchdog_reports_a_block_that_never_finishes(monkeypatch):
    # thread 0 spins forever: nobody waits for nothing, so only the watchdog can tell
    monkeypatch.setenv("SCHED_EMU_TIMEOUT", "0.5")
    with pytest.raises(EmulationError, match=r"(?s)watchdog: block \(0, 0, 0\) of kernel "
                       r"'spin' has run for 0.5 s \(SCHED_EMU_TIMEOUT\).*thread 0 still "
                       r"running.*threads 1-63 wait at __syncthreads\(\) on line 8"):
        run(SPIN, "spin")


def test_shared_memory_no_thread_of_the_block_wrote_reads_as_nan():
    # the emulator fills each block's shared memory with NaN before it starts (the second
    # block does not see what the first wrote)
    from tests.cuda.emu.kernels import UNWRITTEN_SHARED

    a, b = np.arange(128, dtype=np.float32), np.zeros(128, np.float32)
    emulate(UNWRITTEN_SHARED, "unwritten", [(128,), (128,)], block=(64, 1, 1),
            grid=(2, 1, 1))(a, b)
    expected = np.roll(a.reshape(2, 64), -1, axis=1)
    expected[:, 62] = np.nan
    np.testing.assert_array_equal(b.reshape(2, 64), expected)


@needs_tsan
def test_missing_barrier_is_a_race_on_shared_memory_under_tsan():
    with pytest.raises(EmulationError, match=r"(?s)ThreadSanitizer reports a data race.*"
                       r"source lines:\n      4 |     tile\[threadIdx.x\] = a\[threadIdx.x\];\n"
                       r"      5 |     b\[threadIdx.x\] = tile\[\(threadIdx.x \+ 1\) % 64\];.*"
                       r"(Write|Read) of size 4 .* by thread T\d+:\n    #0 shift kernel.cu:[45].*"
                       r"Previous (write|read) of size 4 .* by thread T\d+:\n"
                       r"    #0 shift kernel.cu:[45]"):
        run(MISSING_BARRIER, "shift", sanitize="thread")


@needs_tsan
def test_unsynchronized_update_of_global_memory_is_a_race_under_tsan():
    with pytest.raises(EmulationError, match=r"(?s)data race.*global_sum kernel.cu:3.*"
                       r"global_sum kernel.cu:3"):
        run(GLOBAL_RACE, "global_sum", block=(32, 1, 1), sanitize="thread")


@needs_tsan
def test_blocks_updating_the_same_element_race_under_tsan():
    # one thread per block, two blocks: the GPU runs them at once, so the emulator orders
    # nothing between blocks for ThreadSanitizer, though it runs them one after the other
    with pytest.raises(EmulationError, match=r"(?s)data race.*global_sum kernel.cu:3.*"
                       r"Thread T\d+ 't0,0,0 b[01],0,0'"):
        run(GLOBAL_RACE, "global_sum", block=(1, 1, 1), grid=(2, 1, 1), sanitize="thread")


@needs_tsan
def test_atomics_and_barriers_are_not_races_under_tsan():
    a = np.arange(128, dtype=np.float32)
    b = np.zeros(64, np.float32)
    emulate(ATOMIC_SUM, "atomic_sum", [(128,), (64,)], block=(32, 1, 1), grid=(4, 1, 1),
            sanitize="thread")(a, b)
    assert b[0] == a.sum()


def test_unknown_sanitizer_is_refused():
    with pytest.raises(ValueError, match=r"sanitize must be one of None, 'thread', got 'memory'"):
        run(ATOMIC_SUM, "atomic_sum", sanitize="memory")


# -- the same checks on the code generator's output -------------------------------------------

# lowered loop IR (what sched.lower.lower(func, target="cuda") returns), written by hand: the
# schedule checks would never make it, a barrier only half the block reaches
HALF_BARRIER = '''
@T.prim_func
def half_barrier(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    S = T.decl_buffer((64,), "float32", scope="shared")
    for tx in T.thread_binding(64, thread="threadIdx.x"):
        S[tx] = A[tx]
        if tx < 32:
            T.tvm_storage_sync("shared")
        B[tx] = S[(tx + 1) % 64]
'''


def generated(text: str, **options):
    """The emulated kernel of the CUDA C generated from lowered IR `text`, and its source."""
    import sched
    from sched.cuda.codegen import generate_cuda
    from sched.cuda.emu.kernel import EmulatedKernel
    from sched.lower.gpu_threads import launch_config

    lowered = sched.parse(text)
    launch = launch_config(lowered)
    source, name, _ = generate_cuda(lowered, launch)
    return EmulatedKernel(lowered, source, name, launch, **options), source


def barrier_line(source: str) -> int:
    return 1 + source.splitlines().index("        __syncthreads();")


def test_generated_barrier_half_the_block_reaches_is_reported_with_its_line():
    kernel, source = generated(HALF_BARRIER)
    line = barrier_line(source)
    a, b = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    with pytest.raises(EmulationError, match=rf"(?s)deadlock in block \(0, 0, 0\) of kernel "
                       rf"'half_barrier'.*threads 0-31 wait at __syncthreads\(\) on line "
                       rf"{line}\n  threads 32-63 returned from the kernel.*"
                       rf"source lines:\n {line:6d} |         __syncthreads\(\);"):
        kernel(a, b)


@needs_tsan
def test_generated_kernel_without_its_barrier_races_under_tsan():
    text = HALF_BARRIER.replace("        if tx < 32:\n", "").replace(
        '            T.tvm_storage_sync("shared")\n', "")
    kernel, source = generated(text, sanitize="thread")
    assert "__syncthreads" not in source
    a, b = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    with pytest.raises(EmulationError, match=r"(?s)data race.*half_barrier kernel.cu:\d+.*"
                       r"half_barrier kernel.cu:\d+"):
        kernel(a, b)


def test_generated_kernel_with_a_block_wide_barrier_runs():
    text = HALF_BARRIER.replace("        if tx < 32:\n", "").replace(
        '            T.tvm_storage_sync("shared")', '        T.tvm_storage_sync("shared")')
    kernel, _ = generated(text, sanitize="thread" if has_tsan() else None)
    a, b = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    kernel(a, b)
    np.testing.assert_array_equal(b, np.roll(a, -1))


@needs_tsan
@pytest.mark.parametrize("name", ["matmul", "softmax", "layer_norm"])
def test_hand_gpu_schedules_are_race_free_under_tsan(name):
    import sched
    from tests.test_hand_schedules import GPU_CASES, inputs_for

    schedule, shapes, reference, shares = GPU_CASES[name]
    assert shares                               # shared memory and barriers: worth checking
    arrays = inputs_for(shapes)
    out = np.zeros(reference(*arrays).shape, np.float32)
    sched.build(schedule().func, target="cuda-emu", sanitize="thread")(*arrays, out)
    np.testing.assert_allclose(out, reference(*[a.astype(np.float64) for a in arrays]),
                               rtol=1e-4, atol=1e-4)


@needs_tsan
def test_sanitizer_from_the_environment(monkeypatch):
    monkeypatch.setenv("SCHED_EMU_SANITIZE", "thread")
    kernel = emulate(ATOMIC_SUM, "atomic_sum", [(32,), (64,)], block=(32, 1, 1))
    assert kernel.sanitize == "thread" and "sanitize='thread'" in repr(kernel)
    monkeypatch.delenv("SCHED_EMU_SANITIZE")
    assert emulate(ATOMIC_SUM, "atomic_sum", [(32,), (64,)], block=(32, 1, 1)).sanitize is None


@needs_tsan
def test_redundant_identical_writes_are_named_as_such_under_tsan():
    # shared tiles fetched along threadIdx.x only: the threadIdx.y threads store the same
    # values (accepted by every step, right numbers); TSan reports write/write races, and the
    # message says what they are and how to give each element one writer (audit helper-45)
    import sched
    from sched import compute as te

    A = te.placeholder((8, 8), name="A")
    B = te.placeholder((8, 8), name="B")
    sch = sched.Schedule(te.create_prim_func([A, B, te.ops.matmul(A, B)], name="mm"))
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    bi, ty = sch.split(i, [None, 4])
    bj, tx = sch.split(j, [None, 4])
    ko, _ = sch.split(k, [None, 4])
    sch.reorder(bi, bj, ty, tx, ko)
    for loop, axis in ((bi, "blockIdx.y"), (bj, "blockIdx.x"), (ty, "threadIdx.y"),
                       (tx, "threadIdx.x")):
        sch.bind(loop, axis)
    shared = sch.cache_read(block, 0, "shared")
    sch.compute_at(shared, ko)
    _, x = sch.split(sch.fuse(*sch.get_loops(shared)[-2:]), [None, 4])
    sch.bind(x, "threadIdx.x")
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((8, 8)).astype("float32") for _ in range(2))
    c = np.zeros((8, 8), "float32")
    sched.build(sch.func, target="cuda-emu")(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    with pytest.raises(EmulationError, match=r"data race .* Both are writes: where the threads "
                                             r"store the same value"):
        sched.build(sch.func, target="cuda-emu", sanitize="thread")(a, b, c)
