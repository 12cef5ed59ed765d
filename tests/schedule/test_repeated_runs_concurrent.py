"""A loop that no iteration variable of a block binds runs each instance of the block once per
iteration (`for t, i: B[vi] = B[vi] * 2 + A[vi]` runs B[vi] three times). The dependences are
those of first runs; run at the same time, the runs of one instance race where they are not
idempotent (RUNS_RULE): parallel, vectorize or bind of such a loop is refused (audit helper-46:
accepted, 16 to 71,248 elements wrong on the C target with two threads; a race under TSan)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import sched
from sched.errors import ScheduleError
from sched.schedule.tensor_intrin import TensorIntrin
from sched.script import T
from tests.conftest import assert_close


@T.prim_func
def thrice(a: T.handle, b: T.handle):
    n = T.int32()
    m = T.int32()
    A = T.match_buffer(a, (n, m), "float32")
    B = T.match_buffer(b, (n, m), "float32")
    for t, i, j in T.grid(3, n, m):  # noqa: B007 - the loop named in the messages
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = B[vi, vj] * T.float32(2) + A[vi, vj]


@T.prim_func
def thrice_idempotent(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32")):
    for t, i, j in T.grid(3, 4, 8):  # noqa: B007
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)


MESSAGE = (r"loop 't' runs instances of block B more than once, in different iterations of "
           r"it \(e.g. B\[vi=0, vj=0\]\), and each run changes what the next one reads or "
           r"writes: run at the same time, they would race")


@pytest.mark.parametrize("step", [
    lambda sch, t: sch.parallel(t),
    lambda sch, t: sch.bind(t, "threadIdx.x"),
    lambda sch, t: sch.bind(t, "blockIdx.x"),
])
def test_a_loop_rerunning_an_update_cannot_run_its_iterations_at_once(step):
    sch = sched.Schedule(thrice)
    t, _, _ = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match=MESSAGE):
        step(sch, t)


def test_fusing_the_other_loops_keeps_the_refusal():
    sch = sched.Schedule(thrice)
    t, i, j = sch.get_loops(sch.get_block("B"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sched.ConservativeAnalysisWarning)
        sch.fuse(i, j)
        with pytest.raises(ScheduleError, match=MESSAGE):
            sch.parallel(t)


def test_the_inner_loops_stay_parallel(rng):
    sch = sched.Schedule(thrice)
    _, i, _ = sch.get_loops(sch.get_block("B"))
    sch.parallel(i)
    a = rng.standard_normal((5, 7)).astype("float32")
    b = rng.standard_normal((5, 7)).astype("float32")
    expected = b.copy()
    for _ in range(3):
        expected = expected * 2 + a
    sched.build(sch.func, target="c")(a, b)
    assert_close(b, expected)


def test_idempotent_reruns_may_run_at_once(rng):
    # every run stores the same values from what no run writes
    sch = sched.Schedule(thrice_idempotent)
    t, _, _ = sch.get_loops(sch.get_block("B"))
    sch.parallel(t)
    a = rng.standard_normal((4, 8)).astype("float32")
    b = np.full((4, 8), np.nan, "float32")
    sched.build(sch.func, target="c")(a, b)
    assert_close(b, a * 2)



@T.prim_func
def row_plus_batch(A: T.Buffer((32,), "float32"), B: T.Buffer((2, 4, 32), "float32"),
                   C: T.Buffer((2, 4, 32), "float32")):
    for b, i, j in T.grid(2, 4, 32):
        with T.block("C"):
            vb, vi, vj = T.axis.remap("SSS", [b, i, j])
            C[vb, vi, vj] = A[vj] + B[vb, vi, vj]


@T.prim_func
def copy_16_desc(a: T.handle, b: T.handle):
    A = T.match_buffer(a, (16,), "float32", offset_factor=1)
    B = T.match_buffer(b, (16,), "float32", offset_factor=1, scope="shared")
    with T.block("root"):
        T.reads(A[0:16])
        T.writes(B[0:16])
        for i in range(16):
            with T.block("copy"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[vi]


@T.prim_func
def copy_16_impl(a: T.handle, b: T.handle):
    A = T.match_buffer(a, (16,), "float32", offset_factor=1)
    B = T.match_buffer(b, (16,), "float32", offset_factor=1, scope="shared")
    with T.block("root"):
        T.reads(A[0:16])
        T.writes(B[0:16])
        for i in T.vectorized(16):
            with T.block("copy"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[vi]


COPY_16 = "test_repeated_runs_copy_16_f32"
TensorIntrin.register(COPY_16, copy_16_desc, copy_16_impl, override=True)


def _fragment_tensorized_per_loop(bind_first: bool) -> sched.Schedule:
    """A's tile fetched to shared memory under a fused loop (i, jo) whose i part its region
    does not use, the fetch tensorized: instances of the new block differing in i store the
    same elements, and every iteration of the loop b (blockIdx.x) runs them again (TVM's mma
    schedule does this with its B fragment under blockIdx.y = fuse(i_1, j_1))."""
    sch = sched.Schedule(row_plus_batch)
    block = sch.get_block("C")
    b, i, j = sch.get_loops(block)
    if bind_first:
        sch.bind(b, "blockIdx.x")
    jo, _ = sch.split(j, [2, 16])
    fused = sch.fuse(i, jo)
    fetch = sch.cache_read(block, 0, "shared")
    sch.compute_at(fetch, fused)
    sch.tensorize(sch.get_loops(fetch)[-1], COPY_16)
    if not bind_first:
        sch.bind(b, "blockIdx.x")
    return sch


@pytest.mark.parametrize("bind_first", [True, False])
@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_reruns_overwriting_only_a_private_tile_may_run_at_once(rng, bind_first, target):
    # each thread block has its own shared copy of the tile, and every run stores A's values
    # there (refused before: another instance of the fetch stores the same elements between
    # an instance's runs, which the runs rule counted as not idempotent)
    sch = _fragment_tensorized_per_loop(bind_first)
    script = sch.func.script()
    assert 'with T.block("A_shared_o")' in script
    assert 'T.thread_binding(2, thread="blockIdx.x")' in script
    a = rng.standard_normal(32).astype("float32")
    bb = rng.standard_normal((2, 4, 32)).astype("float32")
    c = np.full((2, 4, 32), np.nan, "float32")
    sched.build(sch.func, target=target)(a, bb, c)
    assert_close(c, a + bb)

@T.prim_func
def local_rerun(A: T.Buffer((2, 8), "float32"), C: T.Buffer((2, 8), "float32")):
    L = T.alloc_buffer((8,), "float32", scope="local")
    for t, i in T.grid(2, 8):  # noqa: B007
        with T.block("L"):
            vi = T.axis.spatial(8, i)
            L[vi] = L[vi] * T.float32(2) + A[0, vi]
    for t, i in T.grid(2, 8):
        with T.block("C"):
            vt, vi = T.axis.remap("SS", [t, i])
            C[vt, vi] = L[vi]


def test_reruns_reading_what_they_overwrite_stay_refused_in_private_storage():
    # a private copy does not make a run that reads what the last run stored repeatable
    sch = sched.Schedule(local_rerun)
    t, _ = sch.get_loops(sch.get_block("L"))
    with pytest.raises(ScheduleError, match=r"loop 't' runs instances of block L more than once"):
        sch.bind(t, "blockIdx.x")
