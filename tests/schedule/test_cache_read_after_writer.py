"""cache_read of a buffer written inside the consumer's loop nest copies after the writer, as
TVM's does (schedule/cache_placement.py): the copy of what the consumer reads per iteration,
right before the statement that holds the consumer; a writer inside that statement is
refused."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import ScheduleError
from sched.schedule.trace import Trace


def two_stage(rows=8, cols=8):
    A = te.placeholder((rows, cols), name="A")
    B = te.compute((rows, cols), lambda i, j: A[i, j] * 2.0, name="B")
    return te.create_prim_func([A, te.compute((rows, cols), lambda i, j: B[i, j] + 1.0,
                                              name="C")])


def run_two_stage(func):
    a = np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32)
    c = np.zeros((8, 8), np.float32)
    sched.build(func, target="c")(a, c)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)


def test_cache_read_copies_after_a_writer_in_the_consumers_loop_nest():
    sch = sched.Schedule(two_stage())
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.reverse_compute_at(sch.get_block("C"), i)
    copy = sch.cache_read(sch.get_block("C"), 0, "local")
    script = sch.func.script()
    # under i: B's row, then its copy (one row: the box C reads per i), then C
    assert script.index('T.block("B")') < script.index('T.block("B_local")') \
        < script.index('T.block("C")')
    assert "for ax0_1, ax1 in T.grid(1, 8):" in script
    assert "v0 = T.axis.spatial(8, ax0_1 + i)" in script
    assert len(sch.get_loops(copy)) == 3
    run_two_stage(sch.func)
    replayed = Trace.from_json(sch.trace.to_json()).apply(sch.original_func)
    assert replayed.func.script() == script


TWO_WRITERS = '''
@T.prim_func
def main(A: T.Buffer((8, 4), "float32"), C: T.Buffer((8, 4), "float32")):
    with T.block("root"):
        B = T.alloc_buffer((8, 4))
        for i in range(8):
            for j in range(4):
                with T.block("B0"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vi, vj] = A[vi, vj]
            for j in range(4):
                with T.block("B1"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vi, vj] = B[vi, vj] * T.float32(2)
                with T.block("C"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    C[vi, vj] = B[vi, vj] + T.float32(1)
'''


# B1 writes B inside the statement (the second j loop) that holds C: a copy before that
# statement would miss B1's writes
def test_cache_read_refuses_a_writer_beside_the_consumer():
    sch = sched.Schedule(sched.parse(TWO_WRITERS))
    with pytest.raises(ScheduleError, match=r"cache_read: block\(s\) B1 write 'B' next to "
                                            r"block 'C', after the cache would be filled"):
        sch.cache_read(sch.get_block("C"), 0, "local")
