"""merge (sched/schedule/loop_merge.py): sibling nests run as one, refused when the
interleaved order breaks a dependence."""

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import ScheduleError
from sched.schedule.trace import Trace
from sched.script import T


def three_stages(n=16):
    A = te.placeholder((n, n), name="A")
    B = te.compute((n, n), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((n, n), lambda i, j: B[i, j] + 1.0, name="C")
    D = te.compute((n, n), lambda i, j: A[i, j] - C[i, j], name="D")
    return te.create_prim_func([A, D])


def run(func, n=16):
    a = np.random.default_rng(0).random((n, n), dtype=np.float32)
    d = np.zeros((n, n), np.float32)
    sched.build(func, target="c")(a, d)
    np.testing.assert_allclose(d, a - (a * 2 + 1), rtol=1e-6)


def test_merge_inner_loops_merges_the_whole_chains():
    func = three_stages()
    sch = sched.Schedule(func)
    loops = [sch.get_loops(sch.get_block(name))[1] for name in ("B", "C", "D")]
    merged = sch.merge(*loops)
    script = sch.func.script()
    assert "for i, j in T.grid(16, 16):" in script and script.count("for ") == 1
    assert script.index('T.block("B")') < script.index('T.block("C")') < \
        script.index('T.block("D")')
    assert merged.name == "j"
    sch.parallel(sch.get_loops(sch.get_block("D"))[0])     # the merged nest is one loop nest
    assert sched.parse(sch.func.script()) == sch.func
    assert sch.trace.apply(func).func == sch.func
    assert Trace.from_json(sch.trace.to_json()).apply(func).func == sch.func
    run(sch.func)


def test_merge_outer_loops_keeps_inner_nests():
    func = three_stages()
    sch = sched.Schedule(func)
    b, c, d = (sch.get_loops(sch.get_block(name))[0] for name in ("B", "C", "D"))
    # the merged nest goes where the first one was: D would run before C, which it reads
    with pytest.raises(ScheduleError, match=r"merge: the new order runs D before C"):
        sch.merge(b, d)
    outer = [d, c]                                  # any order: program order decides
    sch.merge(*outer)
    script = sch.func.script()
    assert script.count("for i_1 in range(16):") == 1
    assert script.index('T.block("C")') < script.index('T.block("D")')
    run(sch.func)
    with pytest.raises(ScheduleError, match=r"loop 'i_2' no longer exists: merge merged it"):
        sch.split(outer[0], [None, 4])


def test_merge_refuses_an_order_that_reads_ahead():
    @T.prim_func
    def shifted(A: T.Buffer((9,), "float32"), C: T.Buffer((8,), "float32")):
        B = T.alloc_buffer((9,), "float32")
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(9, i)
                B[vi] = A[vi] * T.float32(2)
        for i2 in range(8):
            with T.block("C"):
                vi = T.axis.spatial(8, i2)
                C[vi] = B[vi + 1] + T.float32(1)

    sch = sched.Schedule(shifted)
    i = sch.get_loops(sch.get_block("B"))[0]
    i2 = sch.get_loops(sch.get_block("C"))[0]
    # C in iteration i reads B[i + 1], which B writes only in iteration i + 1
    with pytest.raises(ScheduleError, match=r"merge: .*the new order runs C before B"):
        sch.merge(i, i2)


def test_merge_refuses_nests_of_different_extents():
    A = te.placeholder((8, 4), name="A")
    B = te.compute((8, 4), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((4, 8), lambda j, i: B[i, j] + 1.0, name="C")
    sch = sched.Schedule(te.create_prim_func([A, C]))
    i = sch.get_loops(sch.get_block("B"))[0]
    j = sch.get_loops(sch.get_block("C"))[0]
    with pytest.raises(ScheduleError, match=r"merge: loop 'j_1' runs 4 iterations, loop 'i' "
                                            r"8: merged loops have the same extent"):
        sch.merge(i, j)


def test_merge_refuses_loops_not_starting_at_0_saying_so():
    # (the message compared the first loop with itself: audit helper-144)
    f = sched.parse("""
@T.prim_func
def f(A: T.Buffer((20,), "float32"), B: T.Buffer((20,), "float32"),
      C: T.Buffer((20,), "float32")):
    for i in T.serial(3, 17):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi] * T.float32(2)
    for i in T.serial(3, 17):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = A[vi] + T.float32(1)
""")
    sch = sched.Schedule(f)
    with pytest.raises(ScheduleError, match=r"merge: loop 'i' starts at 3, not 0"):
        sch.merge(sch.get_loops(sch.get_block("B"))[0], sch.get_loops(sch.get_block("C"))[0])


def test_merge_refuses_loops_of_one_nest_and_marked_loops():
    sch = sched.Schedule(three_stages())
    i, j = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match=r"loop 'j' is inside loop 'i'"):
        sch.merge(i, j)
    i_c = sch.get_loops(sch.get_block("C"))[0]
    sch.parallel(i_c)
    with pytest.raises(ScheduleError, match=r"merge: loop 'i_1' is parallel: merge makes a "
                                            r"serial loop"):
        sch.merge(i, i_c)
