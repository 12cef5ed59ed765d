"""Software-pipelined loops after later steps, and pipelines nested in pipelines: a step that
changes a pipelined loop's body is checked against its annotations (check_pipelines_kept), and
the lowering counts an outer loop's statements as written, a pipelined loop inside being one."""

import numpy as np
import pytest

import sched
from sched import compute as te

STAGE, ORDER = "software_pipeline_stage", "software_pipeline_order"


def _two_stages():
    A = te.placeholder((4, 8), name="A")
    S = te.compute((4, 8), lambda i, j: A[i, j] * 2.0, name="S")
    C = te.compute((4, 8), lambda i, j: S[i, j] + 1.0, name="C")
    sch = sched.Schedule(te.create_prim_func([A, C]))
    i, _ = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("S"), i)
    return sch, i


def _check(func):
    a = np.random.default_rng(0).random((4, 8), dtype=np.float32)
    c = np.zeros_like(a)
    sched.build(func, target="c")(a, c)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)


def test_a_pipeline_nested_in_a_pipeline_lowers_outer_first():
    # two statements in the outer loop, the first a pipelined loop of its own
    sch, i = _two_stages()
    sch.annotate(i, STAGE, [0, 1])
    sch.annotate(i, ORDER, [0, 1])
    inner = sch.get_loops(sch.get_block("S"))[1]
    sch.annotate(inner, STAGE, [1])
    sch.annotate(inner, ORDER, [0])
    _check(sch.func)


def test_a_step_that_changes_a_pipelined_body_is_refused_at_that_step():
    sch, i = _two_stages()
    sch.annotate(i, STAGE, [0, 1])
    sch.annotate(i, ORDER, [0, 1])
    j = sch.get_loops(sch.get_block("C"))[1]
    with pytest.raises(sched.ScheduleError, match="software-pipelined and this step changes "
                                                  "its body.*unannotate it first"):
        sch.compute_at(sch.get_block("S"), j)   # S under C's loop: one statement
    sch.split(j, [None, 2])                            # inside one statement: still two
    _check(sch.func)


NESTED = """
@T.prim_func
def main(A: T.Buffer((4, 8), "float32"), C: T.Buffer((4, 8), "float32")):
    for t in range(4):
        with T.block("row"):
            vt = T.axis.spatial(4, t)
            T.reads(A[vt, 0:8])
            T.writes(C[vt, 0:8])
            for y in range(8):
                with T.block("C"):
                    vi = T.axis.spatial(4, vt)
                    vj = T.axis.spatial(8, y)
                    C[vi, vj] = A[vi, vj] * T.float32(2.0) + T.float32(1.0)
"""


def test_a_pipeline_inside_a_block_of_a_pipelined_loop():
    # the outer loop holds one statement (the block "row"); its inner loop's prologue and
    # epilogue made three before the outer one was read, and the build refused (fuzz finding)
    sch = sched.Schedule(sched.parse(NESTED))
    t = sch.get_loops(sch.get_block("row"))[0]
    (y,) = sch.get_loops(sch.get_block("C"))
    sch.annotate(t, STAGE, [0])
    sch.annotate(t, ORDER, [0])
    sch.annotate(y, STAGE, [2])
    sch.annotate(y, ORDER, [0])
    _check(sch.func)



def test_binding_a_loop_around_a_pipeline_is_checked_against_it():
    # W's tile written on thread 0 and read by R on thread 1: in one program the order
    # [1, 0] kept every dependence, on threads R ran before W. The bind left the pipelined
    # loop as it was and was accepted; the build refused it (audit helper-190)
    from sched.script import T

    @T.prim_func
    def g(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
        for _bx in T.thread_binding(1, thread="blockIdx.x"):
            with T.block("tile"):
                S = T.alloc_buffer((8,), "float32", scope="shared")
                for tx in range(2):
                    for k in range(8):
                        with T.block("W"):
                            vk = T.axis.spatial(8, k)
                            T.where(tx == 0)
                            S[vk] = A[vk]
                        with T.block("R"):
                            vk = T.axis.spatial(8, k)
                            T.where(tx == 1)
                            C[vk] = S[vk] * T.float32(2)

    sch = sched.Schedule(g)
    tx, k = sch.get_loops(sch.get_block("W"))[-2:]
    sch.annotate(k, STAGE, [0, 0])
    sch.annotate(k, ORDER, [1, 0])
    with pytest.raises(sched.ScheduleError, match="bind: stages \\[0, 0\\], order \\[1, 0\\] "
                                                  "of loop 'k' would run R before W"):
        sch.bind(tx, "threadIdx.x")
