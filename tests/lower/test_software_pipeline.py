"""Software pipelining (lower/software_pipeline.py, polyhedral/software_pipeline.py): a GPU
matmul whose shared-memory K loop is pipelined over 2 and 3 stages computes what numpy does on
the C target and as emulated CUDA (cp.async landing at its wait); the lowered IR has its
prologue, steady loop and epilogue and multi-buffered tiles; illegal stages and orders are
refused with the dependence named; the annotations and the async statements print and parse
back."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import sched
from sched import compute as te
from sched import hand_schedules as hs
from sched.errors import ScheduleError
from sched.hand_schedules.common import _matmul_func
from sched.ir.functor import collect
from sched.ir.nodes import Allocate, AsyncCommit, AsyncCopy, AsyncWait, Barrier, For
from sched.lower import lower
from sched.schedule import Schedule
from sched.schedule.trace import Trace
from sched.script import T
from tests.conftest import assert_close


def _pipelined(stages: int, K=64) -> Schedule:
    return hs.gpu_matmul_pipelined(64, 64, K, block_tile=(32, 32), thread_tile=(4, 4),
                                   stages=stages)


def _run(func, target: str, a, b):
    out = np.zeros((a.shape[0], b.shape[1]), np.float32)
    sched.build(func, target=target)(a, b, out)
    return out


def _inputs(m, k, n, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, k)).astype(np.float32),
            rng.standard_normal((k, n)).astype(np.float32))


@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_pipelined_matmul_matches_numpy(stages, target):
    a, b = _inputs(64, 64, 64, seed=stages)
    assert_close(_run(_pipelined(stages).func, target, a, b),
                 a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_symbolic_trip_count_shorter_and_longer_than_the_pipeline(target):
    # K = 8 is one iteration of the K loop, fewer than the 3 stages: the prologue and the
    # epilogue are guarded by the iteration count, decided at run time
    sch = hs.gpu_matmul_pipelined(32, 32, te.var("depth"), block_tile=(32, 32),
                                  thread_tile=(4, 4), stages=3)
    kernel = sched.build(sch.func, target=target)
    for depth in (8, 40):
        a, b = _inputs(32, depth, 32, seed=depth)
        out = np.zeros((32, 32), np.float32)
        kernel(a, b, out)
        assert_close(out, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)


def _staged_elementwise(stages=(0, 1)) -> Schedule:
    """Y = 2 X + 1 in tiles of 32: each tile staged in shared memory by the threads, the copy of
    tile k + 1 (stage 0, asynchronous) overlapping the compute of tile k (stage 1)."""
    X = te.placeholder((512,), name="X")
    Y = te.compute((512,), lambda i: X[i] * 2.0 + 1.0, name="Y")
    sch = Schedule(te.create_prim_func([X, Y]))
    block = sch.get_block("Y")
    bx, tile, tx = sch.split(sch.get_loops(block)[0], [2, None, 32])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    cache = sch.cache_read(block, 0, "shared")
    sch.compute_at(cache, tile)
    sch.bind(sch.get_loops(cache)[-1], "threadIdx.x")
    sch.annotate(tile, "software_pipeline_stage", list(stages))
    sch.annotate(tile, "software_pipeline_order", [0, 1])
    sch.annotate(tile, "software_pipeline_async_stages", [stages[0]])
    return sch


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_staged_elementwise_with_thread_loops_in_each_stage(target):
    x = np.random.default_rng(1).standard_normal(512).astype(np.float32)
    out = np.zeros(512, np.float32)
    kernel = sched.build(_staged_elementwise().func, target=target)
    kernel(x, out)
    assert_close(out, x * 2 + 1)
    if target == "cuda-emu":          # one float per thread: 4-byte copies, one group in flight
        assert "cp.async.ca.shared.global [%0], [%1], 4;" in kernel.source
        assert '"cp.async.wait_group %0;\\n" :: "n"(1)' in kernel.source


@pytest.mark.parametrize("stages", [(0, 2), (1, 3), (0, 3)])
@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_a_prologue_repeating_thread_loops_declares_each_index_in_a_block_of_its_own(
        stages, target):
    # a stage more than one ahead repeats the copy's thread loop in the prologue (and the
    # compute's in the epilogue), beside the first copy in one C scope
    x = np.random.default_rng(2).standard_normal(512).astype(np.float32)
    out = np.full(512, np.nan, np.float32)
    kernel = sched.build(_staged_elementwise(stages).func, target=target)
    kernel(x, out)
    assert_close(out, x * 2 + 1)
    if target == "cuda-emu":
        declared = [line.strip() for line in kernel.source.splitlines()
                    if line.strip().startswith("const int32_t") and "threadIdx.x" in line]
        assert len(declared) > len(set(declared))       # repeated, each in its own block


@T.prim_func
def _let_in_each_iteration(X: T.Buffer((8,), "float32"), Y: T.Buffer((8,), "float32")):
    for j in range(8):
        with T.block("B"):
            vj = T.axis.remap("S", [j])
            x_: T.float32 = T.max(X[vj], T.float32(0))
            Y[vj] = x_ * T.float32(2)


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_a_let_copied_into_the_epilogue_is_declared_once_per_scope(target):
    # the epilogue's copies of the body (iterations 6 and 7) each declare `x_`: each in a
    # scope of its own, not twice in one (a C compile error)
    sch = Schedule(_let_in_each_iteration)
    (loop,) = sch.get_loops(sch.get_block("B"))
    if target == "cuda-emu":                        # one thread runs the pipelined loop
        thread, loop = sch.split(loop, [1, None])
        sch.bind(thread, "threadIdx.x")
    sch.annotate(loop, "software_pipeline_order", [0])
    sch.annotate(loop, "software_pipeline_stage", [2])
    x = np.random.default_rng(2).standard_normal(8).astype(np.float32)
    out = np.zeros(8, np.float32)
    kernel = sched.build(sch.func, target=target)
    kernel(x, out)
    assert_close(out, np.maximum(x, 0) * 2)
    assert kernel.source.count("x_ = ") >= 2


def test_pipelined_matmul_has_no_race_under_thread_sanitizer():
    # cuda-emu under ThreadSanitizer: a barrier missing between a compute that reads a tile
    # and the asynchronous copy that refills it would be reported with both accesses
    a, b = _inputs(64, 64, 64)
    out = np.zeros((64, 64), np.float32)
    sched.build(_pipelined(3).func, target="cuda-emu", sanitize="thread")(a, b, out)
    assert_close(out, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)


def test_c_target_pipeline_runs_threads_in_reverse_order():
    a, b = _inputs(64, 64, 64)
    out = np.zeros((64, 64), np.float32)
    sched.build(_pipelined(2).func, target="c", thread_order="reverse")(a, b, out)
    assert_close(out, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)


def test_lowered_cuda_has_prologue_steady_loop_and_epilogue():
    lowered = lower(_pipelined(2).func, target="cuda")
    shared = {a.buffer.name: a.buffer.shape[0].value for a in collect(lowered.body, Allocate)
              if a.buffer.scope == "shared"}
    assert shared == {"A_shared": 2 * 32 * 16, "B_shared": 2 * 16 * 32}   # two copies each
    steady = [loop for loop in collect(lowered.body, For) if loop.loop_var.name == "k_0"]
    assert len(steady) == 1
    assert (steady[0].min.value, steady[0].extent.value) == (1, 3)
    assert not steady[0].annotations             # the pipeline annotations are consumed
    # A and B copied for iteration 0 (prologue), then each steady iteration; one commit per
    # copy and iteration, the epilogue's two empty; a wait then a barrier before each compute
    assert len(collect(lowered.body, AsyncCopy)) == 2 + 2
    assert len(collect(lowered.body, AsyncCommit)) == 2 + 2 + 2
    waits = [w.pending for w in collect(lowered.body, AsyncWait)]
    assert waits == [2, 2, 0]
    text = lowered.script()
    assert text.count('T.ptx_wait_group(2)\n') == 2
    for block in text.split("T.ptx_wait_group(2)")[1:]:
        assert block.lstrip().startswith('T.tvm_storage_sync("shared")')
    assert "k_0 % 2 * 512" in text                 # iteration k copies into tile k % 2


def test_three_stages_keep_three_tiles_and_two_groups_in_flight():
    lowered = lower(_pipelined(3).func, target="cuda")
    shared = {a.buffer.name: a.buffer.shape[0].value for a in collect(lowered.body, Allocate)
              if a.buffer.scope == "shared"}
    assert shared == {"A_shared": 3 * 512, "B_shared": 3 * 512}
    # before the compute of iteration k - 2: the copies of k - 1 and k (four groups) may fly
    assert {w.pending for w in collect(lowered.body, AsyncWait)} == {4, 0}


def test_c_target_runs_the_same_pipeline_with_plain_copies():
    lowered = lower(_pipelined(2).func, target="c")
    assert not collect(lowered.body, AsyncCopy) and not collect(lowered.body, AsyncWait)
    shared = [a.buffer.shape[0].value for a in collect(lowered.body, Allocate)
              if a.buffer.scope == "shared"]
    assert shared == [1024, 1024]


def test_cuda_source_copies_with_cp_async_and_waits_for_groups():
    source = sched.build(_pipelined(2).func, target="cuda-emu").source
    assert source.count("cp.async.cg.shared.global [%0], [%1], 16;") == 4   # float4 tiles
    assert source.count('asm volatile("cp.async.commit_group;\\n" ::);') == 6
    assert source.count('"cp.async.wait_group %0;\\n" :: "n"(2)') == 2
    assert "__cvta_generic_to_shared(" in source


def test_a_wait_that_lets_the_needed_group_fly_reads_stale_tiles(monkeypatch):
    # the emulator lands a copy at the wait that covers it: one group too many left in
    # flight and the compute reads tiles not yet copied (NaN in fresh shared memory)
    import sched.lower.software_pipeline as pipelining

    count = pipelining._Steps._groups_between
    monkeypatch.setattr(pipelining._Steps, "_groups_between",
                        lambda self, w, r: count(self, w, r) + 1)
    a, b = _inputs(64, 64, 64)
    out = _run(_pipelined(2).func, "cuda-emu", a, b)
    assert not np.allclose(out, a @ b, atol=1e-3)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_pipelined_kernel_compiles_for_the_arch(arch, tmp_path):
    kernel = sched.build(_pipelined(3).func, target="cuda", arch=arch)
    assert kernel.cubin[:4] == b"\x7fELF"
    assert kernel.resources.spill_stores == 0 and kernel.resources.spill_loads == 0
    assert kernel.resources.static_shared_bytes == 2 * 3 * 512 * 4
    cuobjdump = shutil.which("cuobjdump")
    if cuobjdump is not None:          # in SASS, cp.async is LDGSTS
        path = tmp_path / "kernel.cubin"
        path.write_bytes(kernel.cubin)
        sass = subprocess.run([cuobjdump, "-sass", str(path)], capture_output=True,
                              text=True, check=True).stdout
        assert "LDGSTS" in sass


# -- refusals ------------------------------------------------------------------------------


def _annotated(stage, order=None, async_stages=None):
    sch = hs.gpu_matmul(64, 64, 64, block_tile=(32, 32), thread_tile=(4, 4))
    k_outer = sch.get_loops(sch.get_block("C_update"))[4]
    sch.annotate(k_outer, "software_pipeline_stage", stage)
    if order is not None:
        sch.annotate(k_outer, "software_pipeline_order", order)
    if async_stages is not None:
        sch.annotate(k_outer, "software_pipeline_async_stages", async_stages)
    return sch


def test_refuses_a_stage_that_runs_the_compute_before_its_tile_is_copied():
    # the copies in stage 1 would fill the tile of iteration k one iteration after the
    # compute of iteration k read it
    with pytest.raises(ScheduleError, match=r"(?s)annotate: stages \[1, 1, 0\].*would run "
                       r"C_update before A_shared.*flow dependence on 'A_shared'.*C_update\["):
        _annotated([1, 1, 0], [0, 1, 2])


def test_refuses_an_order_that_puts_the_compute_first_in_its_stage():
    # one stage: the order alone decides, and the compute may not come before the copies
    with pytest.raises(ScheduleError, match="would run C_update before A_shared"):
        _annotated([0, 0, 0], [2, 0, 1])


def test_refuses_a_stage_list_that_does_not_fit_the_body():
    with pytest.raises(ScheduleError, match=r"has 2 entries, but the loop body has 3 "
                       r"statements"):
        _annotated([0, 1])


def test_refuses_an_order_that_is_not_a_permutation():
    with pytest.raises(ScheduleError, match="distinct position 0..2"):
        _annotated([0, 0, 1], [0, 0, 1])


def test_refuses_the_last_stage_as_asynchronous():
    # nothing would consume what the last stage copies within the pipeline
    with pytest.raises(ScheduleError, match="asynchronous stage must be one of the stages"):
        _annotated([0, 0, 1], [0, 1, 2], [1])


def test_refuses_to_pipeline_a_thread_bound_loop():
    sch = hs.gpu_matmul(64, 64, 64, block_tile=(32, 32), thread_tile=(4, 4))
    tx = sch.get_loops(sch.get_block("C_update"))[3]
    with pytest.raises(ScheduleError, match="only a serial loop can be software-pipelined"):
        sch.annotate(tx, "software_pipeline_stage", [0, 1])


CARRIED = """
@T.prim_func
def carried(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    S = T.alloc_buffer((2,), "float32")
    for k in range(8):
        with T.block("P"):
            vk = T.axis.spatial(8, k)
            S[vk % 2] = A[vk]
        with T.block("Q"):
            vk = T.axis.spatial(8, k)
            B[vk] = S[(vk + 1) % 2]
"""


def test_refuses_to_multi_buffer_a_buffer_read_in_the_next_iteration():
    # Q reads what P wrote one iteration before: two copies of S, one per iteration in
    # flight, would hand Q the other copy
    sch = Schedule(sched.parse(CARRIED))
    (k,) = sch.get_loops(sch.get_block("P"))
    sch.annotate(k, "software_pipeline_stage", [0, 1])
    with pytest.raises(ScheduleError, match="buffer 'S' .* carries values from one iteration"):
        sch.annotate(k, "software_pipeline_order", [0, 1])


ROW_SUMS = """
@T.prim_func
def row_sums(A: T.Buffer((4, 3), "float32"), C: T.Buffer((4,), "float32")):
    for i, k in T.grid(4, 3):
        with T.block("C"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                C[vi] = T.float32(0)
            C[vi] = C[vi] + A[vi, vk]
"""


def test_refuses_a_loop_whose_one_block_runs_as_init_and_update():
    # the block is one statement here, two once lowered (the init, then the update): the
    # annotation was accepted with one stage and the build refused it (found by the fuzzer)
    sch = Schedule(sched.parse(ROW_SUMS))
    i, k = sch.get_loops(sch.get_block("C"))
    with pytest.raises(ScheduleError, match=r"loop 'k' holds one block, 'C', which runs as "
                       r"several statements \(its init and its update\).*"
                       r"decompose_reduction"):
        sch.annotate(k, "software_pipeline_stage", [1])
    # and the lowering refuses the same annotations written by hand, with the same message
    text = ROW_SUMS.replace("for i, k in T.grid(4, 3):", 'for i in range(4):\n'
                            '      for k in T.serial(3, annotations='
                            '{"software_pipeline_stage": [1]}):')
    assert "software_pipeline_stage" in sched.parse(text).script()
    with pytest.raises(ScheduleError, match="holds one block, 'C', which runs as several"):
        lower(sched.parse(text), target="c")


def test_lowering_checks_annotations_written_by_hand():
    # the same annotations, legal when set by the schedule, made illegal in the script text:
    # lower() proves them again and refuses
    text = _pipelined(2).func.script().replace('"software_pipeline_stage": [0, 0, 1]',
                                                '"software_pipeline_stage": [1, 1, 0]')
    with pytest.raises(ScheduleError, match="software_pipeline: .*would run C_update before"):
        lower(sched.parse(text), target="c")


# -- printing, parsing, traces -------------------------------------------------------------


def test_annotations_print_as_lists_and_parse_back():
    func = _pipelined(3).func
    text = func.script()
    assert ('annotations={"software_pipeline_stage": [0, 0, 2], "software_pipeline_order": '
            '[0, 1, 2], "software_pipeline_async_stages": [0]}') in text
    assert sched.parse(text) == func


def test_lowered_async_statements_print_and_parse_back():
    lowered = lower(_pipelined(2).func, target="cuda")
    text = lowered.script()
    assert "with T.async_copy():" in text and "T.ptx_commit_group()" in text
    assert sched.parse(text) == lowered


def test_trace_replays_the_annotations():
    sch = _pipelined(2)
    assert "software_pipeline_stage" in str(sch.trace)
    for trace in (sch.trace, Trace.from_json(sch.trace.to_json())):
        assert trace.apply(_matmul_func(64, 64, 64)).func == sch.func


def test_barriers_follow_every_wait():
    lowered = lower(_pipelined(3).func, target="cuda")

    def check(stmts):
        for index, stmt in enumerate(stmts):
            if isinstance(stmt, AsyncWait) and stmt.pending:
                assert isinstance(stmts[index + 1], Barrier)

    from sched.ir.nodes import SeqStmt

    for sequence in collect(lowered.body, SeqStmt):
        check(sequence.stmts)


@pytest.mark.parametrize("step", ["parallel", "vectorize", "bind"])
def test_refuses_to_make_a_pipelined_loop_concurrent(step):
    # the step was accepted and the build refused the pipeline on a parallel loop (found by
    # the fuzzer): the step refuses, saying to unannotate first
    sch = Schedule(sched.parse(CARRIED))
    (k,) = sch.get_loops(sch.get_block("P"))
    sch.annotate(k, "software_pipeline_stage", [0, 0])
    before = sch.func
    args = (k, "threadIdx.x") if step == "bind" else (k,)
    with pytest.raises(ScheduleError, match=r"loop 'k' is software-pipelined "
                       r"\(software_pipeline_stage\): .*sch.unannotate\(loop, key\)"):
        getattr(sch, step)(*args)
    assert sch.func == before


@T.prim_func
def written_by_thread_0_read_by_thread_1(A: T.Buffer((8,), "float32"),
                                         C: T.Buffer((8,), "float32")):
    for bx in T.thread_binding(1, thread="blockIdx.x"):  # noqa: B007
        with T.block("tile"):
            S = T.alloc_buffer((8,), "float32", scope="shared")
            for tx in T.thread_binding(2, thread="threadIdx.x"):
                for k in range(8):
                    with T.block("W"):
                        vk = T.axis.spatial(8, k)
                        T.where(tx == 0)
                        S[vk] = A[vk]
                    with T.block("R"):
                        vk = T.axis.spatial(8, k)
                        T.where(tx == 1)
                        C[vk] = S[vk] * T.float32(2)


@pytest.mark.parametrize("stages, order", [([0, 0], [1, 0]), ([1, 0], [0, 1])])
def test_a_pipeline_that_puts_a_reader_before_another_threads_writer_is_refused(stages, order):
    """In the function's order thread 0's iterations all come before thread 1's, so a stage
    order that runs R before W in each iteration broke no dependence there; in the threads'
    program thread 1 then read S[k] before thread 0 wrote it (audit helper-68: NaN on
    cuda-emu, garbage on c). The pipelined times are compared in each thread's program too."""
    a = np.arange(1, 9, dtype="float32")
    c = np.full(8, np.nan, "float32")
    sched.build(written_by_thread_0_read_by_thread_1, target="cuda-emu")(a, c)
    np.testing.assert_array_equal(c, a * 2)
    sch = sched.Schedule(written_by_thread_0_read_by_thread_1)
    k = sch.get_loops(sch.get_block("W"))[-1]
    sch.annotate(k, "software_pipeline_stage", stages)
    with pytest.raises(ScheduleError, match="would run R before W"):
        sch.annotate(k, "software_pipeline_order", order)



def _per_thread_pipeline(extent: str):
    return sched.parse(f"""
@T.prim_func
def f(A: T.Buffer((32, 32), "float32"), C: T.Buffer((32,), "float32")):
    S = T.alloc_buffer((32,), "float32", scope="shared")
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        with T.block("init"):
            vt = T.axis.spatial(32, tx)
            C[vt] = T.float32(0)
        for k in T.serial({extent}, annotations={{"software_pipeline_stage": [0, 1],
                                                 "software_pipeline_order": [0, 1]}}):
            with T.block("S"):
                vt = T.axis.spatial(32, tx)
                vk = T.axis.opaque(32, k)
                S[vt] = A[vt, vk] * T.float32(2)
            with T.block("C"):
                vt = T.axis.spatial(32, tx)
                vk = T.axis.opaque(32, k)
                C[vt] = C[vt] + S[vt]
""")


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_a_pipelined_buffer_of_each_threads_own_slot_needs_no_barrier(target):
    """S[k % 2, tx] written and S[(k - 1) % 2, tx] read after multi-buffering are thread tx's
    own: the barriers put between them (compared as different indices) made a loop whose
    extent depends on the thread refused, and a constant one synchronize three times for
    nothing (audit helper-180)."""
    a = np.random.default_rng(0).random((32, 32), dtype=np.float32)
    out = np.zeros(32, np.float32)
    sched.build(_per_thread_pipeline("tx + 1"), target=target)(a, out)
    np.testing.assert_allclose(out, [2 * a[t, :t + 1].sum() for t in range(32)], rtol=1e-5)
    own = sched.build(_per_thread_pipeline("32"), target="cuda", arch="sm_90")
    assert "__syncthreads" not in own.source


@T.prim_func
def _copy_then_zero_its_source(X: T.Buffer((256,), "float32"), Y: T.Buffer((256,), "float32")):
    with T.block("root"):
        S = T.alloc_buffer((256,), "float32", scope="shared")
        for _b in T.thread_binding(1, thread="blockIdx.x"):
            for k in range(8):
                for t in T.thread_binding(32, thread="threadIdx.x"):
                    with T.block("S"):
                        v = T.axis.spatial(256, k * 32 + t)
                        S[v] = X[v]
                for t in T.thread_binding(32, thread="threadIdx.x"):
                    with T.block("Z"):
                        v = T.axis.spatial(256, k * 32 + t)
                        X[v] = T.float32(0)
                for t in T.thread_binding(32, thread="threadIdx.x"):
                    with T.block("Y"):
                        v = T.axis.spatial(256, k * 32 + t)
                        Y[v] = S[v] * T.float32(2) + T.float32(1)


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_a_statement_writing_an_async_copys_source_waits_for_the_copy(rng, target):
    # the copy reads X when it lands (at its wait): the zeroing of X after its issue reached
    # it first on cuda-emu, and every Y was 1 (audit helper-188)
    sch = Schedule(_copy_then_zero_its_source)
    k = sch.get_loops(sch.get_block("S"))[1]
    sch.annotate(k, "software_pipeline_stage", [0, 0, 1])
    sch.annotate(k, "software_pipeline_order", [0, 1, 2])
    sch.annotate(k, "software_pipeline_async_stages", [0])
    x = rng.standard_normal(256).astype(np.float32)
    expected = 2 * x + 1
    y = np.zeros(256, np.float32)
    kernel = sched.build(sch.func, target=target)
    kernel(x, y)
    assert_close(y, expected)
    assert (x == 0).all()
    if target == "cuda-emu":     # after each issue, a wait before the store to X
        for after_commit in kernel.source.split("cp.async.commit_group")[1:]:
            if "X[" in after_commit:
                assert "wait_group" in after_commit[:after_commit.index("X[")]


@T.prim_func
def _guard_reads_what_the_loop_writes(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    S = T.alloc_buffer((8,), "float32")
    for k in range(8):
        with T.block("P"):
            vk = T.axis.spatial(8, k)
            S[vk] = A[vk] * T.float32(2)
        with T.block("Q"):
            vk = T.axis.spatial(8, k)
            T.where(S[k] > T.float32(0))
            B[vk] = T.float32(1)


@T.prim_func
def _store_outside_blocks(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    S = T.alloc_buffer((8,), "float32")
    for k in range(8):
        with T.block("P"):
            vk = T.axis.spatial(8, k)
            S[vk] = A[vk] * T.float32(2)
        B[k] = S[k] + T.float32(1)


@pytest.mark.parametrize("func, reason", [
    (_guard_reads_what_the_loop_writes, "a predicate, condition, loop bound or let under it "
                                        "reads 'S'"),
    (_store_outside_blocks, "it holds the store B\\[...\\] outside any block")])
@pytest.mark.parametrize("stages, order", [([0, 0], [1, 0]), ([1, 0], [0, 1])])
def test_a_pipeline_over_accesses_the_analysis_does_not_see_is_refused(func, reason, stages,
                                                                       order):
    # the guard read S before P stored it, the bare store ran a stage early: wrong numbers on
    # the C target (audit helper-188)
    sch = Schedule(func)
    (k,) = sch.get_loops(sch.get_block("P"))
    sch.annotate(k, "software_pipeline_stage", stages)
    with pytest.raises(ScheduleError, match=reason):
        sch.annotate(k, "software_pipeline_order", order)
