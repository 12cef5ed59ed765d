"""A read under a condition that never holds touches no element: cache_read copies the whole
buffer instead of crashing in isl on an empty box (found by the program fuzzer)."""

import numpy as np

import sched

NEVER_READ = """
@T.prim_func
def main(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = T.if_then_else(vi + 2 < 2, A[vi + 2], T.float32(0)) + T.float32(1)
"""


def test_cache_read_of_a_buffer_read_under_a_false_guard_runs():
    func = sched.parse(NEVER_READ)
    sch = sched.Schedule(func)
    sch.cache_read(sch.get_block("B"), 0, "global")
    a, b = np.arange(8, dtype="float32"), np.zeros(8, "float32")
    sched.build(sch.func, target="c")(a, b)
    np.testing.assert_array_equal(b, np.ones(8))
