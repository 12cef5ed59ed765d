"""A step made of several steps (tile: split, split, reorder) is taken whole or not at all."""

import numpy as np
import pytest

import sched
from sched.errors import ScheduleError

# A[i, j] reads A[i + 1, j - 1] (mod 4): swapping i and j reverses a dependence, so the tile's
# reorder is refused; its two splits must not stay behind.
ROTATE = """
@T.prim_func
def main(A: T.Buffer((4, 4), "float32")):
    for i, j in T.grid(4, 4):
        with T.block("A"):
            vi, vj = T.axis.remap("SS", [i, j])
            A[vi, vj] = A[(vi + 1) % 4, (vj + 3) % 4] + T.float32(1)
"""


def test_refused_tile_leaves_function_trace_and_handles_unchanged():
    func = sched.parse(ROTATE)
    sch = sched.Schedule(func)
    i, j = sch.get_loops(sch.get_block("A"))
    before, steps = sch.func, len(sch.trace)
    with pytest.raises(ScheduleError, match="reorder"):
        sch.tile(i, j, 2, 2)
    assert sch.func is before
    assert len(sch.trace) == steps
    # the handles from before the refused tile still work, and the function still runs right
    sch.unroll(j)
    a = np.arange(16, dtype="float32").reshape(4, 4)
    expected, got = a.copy(), a.copy()
    sched.interpret(func, expected)
    sched.build(sch.func, target="c")(got)
    np.testing.assert_array_equal(got, expected)
    assert sch.trace.apply(func).func == sch.func
