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
