"""A binding that leaves its domain only where the model widened a loop bound (a select in a
cache copy's extent over a symbolic dim) is unproven, not a definite error (fuzz finding F8:
an accepted cache_read failed to build with a wrong counterexample)."""

import numpy as np

import sched
from sched.polyhedral.in_bounds import bounds_report

GATHER = """
@T.prim_func
def main(var_B: T.handle, I: T.Buffer((16,), "int32")):
    n = T.int32()
    B = T.match_buffer(var_B, (n,), "int32")
    for i in range(n):
        with T.block("B"):
            vi = T.axis.spatial(n, i)
            B[vi] = I[vi % 16]
"""


def test_cache_read_over_a_symbolic_dim_builds_and_runs():
    sch = sched.Schedule(sched.parse(GATHER))
    sch.cache_read(sch.get_block("B"), 0, "global")
    assert not bounds_report(sch.func).always
    kernel = sched.build(sch.func, target="c")
    for n in (1, 5, 20):
        b, index = np.zeros(n, np.int32), np.arange(16, dtype=np.int32)
        kernel(b, index)
        np.testing.assert_array_equal(b, np.arange(n) % 16)
