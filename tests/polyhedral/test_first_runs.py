"""The first run of each instance, computed without isl's lexmin (which loses instances of
some quasi-affine schedules: then their dependences vanished and decompose_reduction hoisted
inits above updates that read other elements; found by the program fuzzer)."""

import islpy as isl
import numpy as np
import pytest

import sched
from sched.errors import ScheduleError
from sched.polyhedral.dependences import first_runs, last_runs

# the schedule of an init after `fuse(k, i)` with the binding vx = k * 5 % 6
FUSED_INIT = isl.Map("{ I[vx] -> [f] : (-floor(f / 5)) mod 6 = vx and f mod 5 = 0 and "
                     "0 <= vx <= 5 and 0 <= f <= 29 }")


def test_first_runs_keeps_every_instance_of_a_quasi_affine_schedule():
    assert first_runs(FUSED_INIT).is_equal(FUSED_INIT)
    assert last_runs(FUSED_INIT).is_equal(FUSED_INIT)


def test_first_and_last_runs_of_an_instance_that_runs_twice():
    twice = isl.Map("{ S[v] -> [t] : 0 <= t < 8 and v = t mod 4 }")
    assert first_runs(twice).is_equal(isl.Map("{ S[v] -> [v] : 0 <= v < 4 }"))
    assert last_runs(twice).is_equal(isl.Map("{ S[v] -> [v + 4] : 0 <= v < 4 }"))


# found by the fuzzer: B runs each instance twice (so the schedule is not single-valued and
# its first runs are taken); C.1's update reads another element of its output, initialized
# later in the original order; after fuse, isl's lexmin kept only C.1's init of element 0
PROGRAM = """
@T.prim_func
def fuzz(a0: T.Buffer((6,), "float32"), fmaxf: T.Buffer((6, 3), "float32"),
         Idx: T.Buffer((16,), "int32"), exp: T.Buffer((6,), "float32")):
    with T.block("root"):
        v0 = T.alloc_buffer((6,), "float32")
        for t, x in T.grid(6 * 2, 4):
            with T.block("B"):
                vi = T.axis.spatial(6, t % 6)
                vr = T.axis.reduce(4, x)
                T.reads(v0[vi], a0[vi + 1])
                T.writes(v0[vi])
                with T.init():
                    v0[vi] = T.float32(-100.0)
                v0[vi] = T.max(v0[vi], T.if_then_else(vi + 1 < 6, a0[vi + 1], T.float32(0.0)))
        for k, i in T.grid(6, 5):
            with T.block("C.1"):
                vx = T.axis.spatial(6, k * 5 % 6)
                a0_ = T.axis.reduce(5, i)
                T.reads(exp[0:6], a0[vx])
                T.writes(exp[vx])
                with T.init():
                    exp[vx] = T.float32(0.0)
                exp[vx] = exp[vx] + (exp[(vx + 1) % 6] + a0[vx])
"""


def test_decompose_reduction_keeps_the_init_after_an_earlier_read_of_its_element():
    func = sched.parse(PROGRAM)
    sch = sched.Schedule(func)
    sch.fuse(*sch.get_loops(sch.get_block("C.1")))
    with pytest.raises(ScheduleError, match="decompose_reduction: the new order runs C.1"):
        sch.decompose_reduction(sch.get_block("C.1"), sch.get_loops(sch.get_block("C.1"))[0])
    rng = np.random.default_rng(0)
    args = [rng.integers(-3, 4, 6).astype("float32"), np.zeros((6, 3), "float32"),
            np.zeros(16, "int32"), rng.integers(-3, 4, 6).astype("float32")]
    expected, got = [a.copy() for a in args], [a.copy() for a in args]
    sched.interpret(func, *expected)
    sched.build(sch.func, target="c")(*got)
    np.testing.assert_array_equal(got[3], expected[3])
