"""cache_inplace (sched/schedule/cache_inplace.py): a block updating a buffer in place works on
a cache, filled before it and copied back after it, both stages next to the block; numbers
unchanged on the C target and cuda-emu; the trace; refusals."""

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import ScheduleError
from sched.schedule.trace import Trace
from sched.script import T


@T.prim_func
def scale(A: T.Buffer((64, 32), "float32")):
    for i, j in T.grid(64, 32):
        with T.block("S"):
            vi, vj = T.axis.remap("SS", [i, j])
            A[vi, vj] = A[vi, vj] * 2.0 + 1.0


@T.prim_func
def scan(A: T.Buffer((16,), "float32")):
    for i in range(1, 16):
        with T.block("P"):
            vi = T.axis.spatial(16, i)
            A[vi] = A[vi] + A[vi - 1]


@T.prim_func
def scale_then_shift(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("S"):
            vi = T.axis.spatial(8, i)
            A[vi] = A[vi] * 2.0
    for i in range(8):
        with T.block("T"):
            vi = T.axis.spatial(8, i)
            A[vi] = A[vi] + B[vi]


def run_scale(func, target="c"):
    a = np.random.default_rng(0).random((64, 32), dtype=np.float32)
    out = a.copy()
    sched.build(func, target=target)(out)
    np.testing.assert_allclose(out, a * 2 + 1, rtol=1e-6)


def check_replays(func, sch):
    assert sched.parse(sch.func.script()) == sch.func
    assert sch.trace.apply(func).func == sch.func
    assert Trace.from_json(sch.trace.to_json()).apply(func).func == sch.func


@pytest.mark.parametrize("scope", ["local", "shared"])
def test_the_stages_go_next_to_the_block_in_its_innermost_loop(scope):
    sch = sched.Schedule(scale)
    block = sch.get_block("S")
    read, write = sch.cache_inplace(block, 0, scope)
    assert (read.name, write.name) == (f"A_{scope}_fill", f"A_{scope}")
    script = sch.func.script()
    assert f'A_{scope} = T.alloc_buffer((64, 32), "float32", scope="{scope}")' in script
    # one loop nest: fill, update, copy back, one element per iteration (TVM's place)
    assert script.count("for ") == 1 and "for i, j in T.grid(64, 32):" in script
    assert script.index(f'T.block("A_{scope}_fill")') < script.index('T.block("S")') < \
        script.index(f'T.block("A_{scope}")')
    assert f"A_{scope}[vi, vj] = A_{scope}[vi, vj] * T.float32(2.0) + T.float32(1.0)" in script
    assert str(sch.trace).splitlines()[1] == f"b1, b2 = sch.cache_inplace(b0, 0, {scope!r})"
    check_replays(scale, sch)
    run_scale(sch.func)


def test_bound_to_threads_a_local_cache_stays_in_each_thread():
    sch = sched.Schedule(scale)
    block = sch.get_block("S")
    i, j = sch.get_loops(block)
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    sch.cache_inplace(block, 0, "local")
    script = sch.func.script()
    assert script.count("for ") == 2                       # the thread loops only
    check_replays(scale, sch)
    for target in ("c", "cuda-emu"):
        run_scale(sch.func, target)


def test_bound_to_threads_a_shared_cache_is_filled_outside_the_thread_loop():
    # shared memory is one for the threads of a block: the fill of a row goes under
    # blockIdx, before the threads update it (per thread it would run each copy 32 times)
    sch = sched.Schedule(scale)
    block = sch.get_block("S")
    i, j = sch.get_loops(block)
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    sch.cache_inplace(block, 0, "shared")
    script = sch.func.script()
    lines = script.splitlines()
    thread = next(k for k, line in enumerate(lines) if "threadIdx.x" in line)
    fill = next(k for k, line in enumerate(lines) if 'T.block("A_shared_fill")' in line)
    back = next(k for k, line in enumerate(lines) if 'T.block("A_shared")' in line)
    assert fill < thread < back
    assert 'T.thread_binding(64, thread="blockIdx.x")' in lines[fill - 2]
    check_replays(scale, sch)
    for target in ("c", "cuda-emu"):
        run_scale(sch.func, target)


def test_the_buffer_may_be_named_or_given():
    sch = sched.Schedule(scale)
    sch.cache_inplace("S", "A", "local")
    by_buffer = sched.Schedule(scale)
    block = by_buffer.get_block("S")
    buffer = scale.buffers[0]
    by_buffer.cache_inplace(block, buffer, "local")
    assert by_buffer.func == sch.func
    assert "sch.cache_inplace(b0, 0, 'local')" in str(by_buffer.trace)   # the index, for JSON
    check_replays(scale, by_buffer)


def test_a_scan_keeps_its_fill_before_the_loop():
    # filled per iteration, A_local[i - 1] would be read again from A after the update wrote
    # it: compute_at refuses, and the fill stays where cache_write puts it
    sch = sched.Schedule(scan)
    read, write = sch.cache_inplace(sch.get_block("P"), 0, "local")
    script = sch.func.script()
    assert "for ax0_1 in range(16):" in script
    assert script.index('T.block("A_local_fill")') < script.index("for i in T.serial(1, 16):")
    assert script.index('T.block("P")') < script.index('T.block("A_local")')
    check_replays(scan, sch)
    a = np.random.default_rng(1).random(16, dtype=np.float32)
    out = a.copy()
    sched.build(sch.func, target="c")(out)
    np.testing.assert_allclose(out, np.cumsum(a), rtol=1e-5)


def test_later_steps_schedule_the_stages_with_the_block():
    sch = sched.Schedule(scale)
    block = sch.get_block("S")
    sch.cache_inplace(block, 0, "local")
    i, j = sch.get_loops(block)
    jo, ji = sch.split(j, factors=[None, 8])
    sch.parallel(i)
    check_replays(scale, sch)
    run_scale(sch.func)


def test_a_block_that_only_reads_the_buffer_is_refused():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] * 2.0, name="B")
    sch = sched.Schedule(te.create_prim_func([A, B]))
    # B reads A but writes B: nothing to write back through the cache
    with pytest.raises(ScheduleError, match=r"cache_inplace: block 'B' reads 'A' but does not "
                                            r"write it: .*use sch.cache_read\(B, 'A', "
                                            r"'shared'\)"):
        sch.cache_inplace(sch.get_block("B"), 0, "shared")
    assert len(sch.trace) == 1                              # nothing recorded


def test_a_bad_index_or_scope_is_refused():
    sch = sched.Schedule(scale)
    block = sch.get_block("S")
    with pytest.raises(ScheduleError, match=r"argument 2, 'read_buffer_index' to cache_inplace: "
                                            r"expected an index in \[0, 1\) into the reads of "
                                            r"block 'S' \(0: A\), got 3"):
        sch.cache_inplace(block, 3, "local")
    with pytest.raises(ScheduleError, match=r"argument 3, 'storage_scope' to cache_inplace: "
                                            r"unknown storage scope 'register'"):
        sch.cache_inplace(block, 0, "register")


def test_another_writer_of_the_buffer_is_refused():
    sch = sched.Schedule(scale_then_shift)
    # T also updates A: cache_write's rule, one writer (the cache would miss T's values)
    with pytest.raises(ScheduleError, match=r"cache_inplace: block\(s\) T write 'A' too; "
                                            r".*under its rules"):
        sch.cache_inplace(sch.get_block("S"), 0, "local")


def test_a_reduction_with_its_init_is_refused():
    A = te.placeholder((8, 16), name="A")
    B = te.placeholder((16, 4), name="B")
    sch = sched.Schedule(te.create_prim_func([A, B, te.ops.matmul(A, B)]))
    # C reads only what its init wrote: no read stage to make (cache_write is the step)
    with pytest.raises(ScheduleError, match=r"block 'C' reads only elements of 'C' it wrote "
                                            r"itself .*use sch.cache_write\(C, 'C', 'local'\)"):
        sch.cache_inplace(sch.get_block("C"), "C", "local")
