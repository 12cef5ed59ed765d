"""Names sched generates inside isl text never meet a user's: a symbolic dim named `a0` once
made the relation "carried by this loop" empty (its time variables were a0, a1, ...), so a
parallel loop over a scan was accepted (found by the program fuzzer; issue 9 item 7's class)."""

import numpy as np
import pytest

import sched
from sched.errors import ScheduleError

SCAN_OVER_A0 = """
@T.prim_func
def main(var_X: T.handle):
    a0 = T.int32()
    X = T.match_buffer(var_X, (a0,), "float32")
    for i in range(a0):
        with T.block("S"):
            vi = T.axis.spatial(a0, i)
            X[vi] = T.if_then_else(vi >= 1, X[vi - 1], T.float32(0)) + X[vi]
"""


@pytest.mark.parametrize("primitive", ["parallel", "bind"])
def test_a_dim_named_like_a_generated_name_keeps_the_scan_sequential(primitive):
    # isl read the generated `a0` of the time vector as the parameter: time entry 0 (always
    # 2) = a0, so only a0 = 2 was checked, where the tiled loop has a single tile
    func = sched.parse(SCAN_OVER_A0)
    sch = sched.Schedule(func)
    (i,) = sch.get_loops(sch.get_block("S"))
    outer, _ = sch.split(i, [None, 4])
    with pytest.raises(ScheduleError, match="flow dependence on 'X'"):
        if primitive == "parallel":
            sch.parallel(outer)
        else:
            sch.bind(outer, "blockIdx.x")
    x = np.arange(9, dtype="float32")
    expected, got = x.copy(), x.copy()
    sched.interpret(func, expected)
    sched.build(sch.func, target="c")(got)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got, np.cumsum(x))
