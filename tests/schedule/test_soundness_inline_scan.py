"""compute_inline and reverse_compute_inline refuse a block that reads the buffer it writes:
its expression is not the stored value, which depends on values written before (fuzz finding
F10: after cache_write, inlining a scan into its write-back was accepted, wrong result)."""

import numpy as np
import pytest

import sched
from sched.errors import ScheduleError

SCAN = """
@T.prim_func
def main(Y: T.Buffer((8,), "float32"), W: T.Buffer((8,), "float32")):
    for j in range(8):
        with T.block("C"):
            vx = T.axis.spatial(8, j)
            W[vx] = T.if_then_else(vx > 0, W[vx - 1], T.float32(0.0)) + Y[vx]
"""

# a consumer that reads its own earlier output: folding it into the producer's store would
# read D before the producer's loop wrote it
CONSUMER_SCAN = """
@T.prim_func
def main(A: T.Buffer((8,), "float32"), D: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,), "float32")
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi] * T.float32(2)
    for i in range(8):
        with T.block("D"):
            vi = T.axis.spatial(8, i)
            D[vi] = T.if_then_else(vi > 0, D[vi - 1], T.float32(0.0)) + B[vi]
"""


def test_compute_inline_refuses_a_scan_behind_a_cache_write():
    func = sched.parse(SCAN)
    sch = sched.Schedule(func)
    sch.cache_write(sch.get_block("C"), 0, "global")
    with pytest.raises(ScheduleError, match="compute_inline: block 'C' reads the buffer it "
                       "writes"):
        sch.compute_inline(sch.get_block("C"))
    y = np.arange(8, dtype="float32")
    expected, got = np.zeros(8, "float32"), np.zeros(8, "float32")
    sched.interpret(func, y, expected)
    sched.build(sch.func, target="c")(y, got)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got, np.cumsum(y))


def test_reverse_compute_inline_refuses_a_consumer_reading_its_own_output():
    sch = sched.Schedule(sched.parse(CONSUMER_SCAN))
    with pytest.raises(ScheduleError, match="reverse_compute_inline: block 'D' reads the "
                       "buffer it writes"):
        sch.reverse_compute_inline(sch.get_block("D"))
