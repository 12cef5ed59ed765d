"""annotate_buffer_access (sched/schedule/buffer_access.py): a block's declared region replaced
by one a function of its iteration variables gives, marked as TVM marks it, and only where isl
proves it holds what the block accesses; TVM's tests adapted, round trips, numbers, refusals."""

import numpy as np
import pytest

import sched
from sched.errors import ScheduleError
from sched.schedule.trace import Trace
from sched.script import T


@T.prim_func
def two_stages(A: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
    B = T.alloc_buffer((128, 128), "float32")
    for i, j in T.grid(128, 128):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(128, 128):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + 1.0


def check_replays(func, sch):
    assert sched.parse(sch.func.script()) == sch.func
    assert sch.trace.apply(func).func == sch.func
    assert Trace.from_json(sch.trace.to_json()).apply(func).func == sch.func


def run(func):
    a = np.random.default_rng(0).random((128, 128), dtype=np.float32)
    c = np.zeros((128, 128), np.float32)
    sched.build(func, target="c")(a, c)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)


def test_read_region_is_replaced_and_marked():
    sch = sched.Schedule(two_stages)
    sch.annotate_buffer_access(sch.get_block("B"), 0, "read",
                               lambda vi, vj: ((vi - 1, vi + 1), (vj - 1, vj + 1)))
    script = sch.func.script()
    assert "T.reads(A[vi - 1:vi + 1, vj - 1:vj + 1])" in script
    assert 'T.block_attr({"explicit_read_region": [0]})' in script
    assert str(sch.trace).splitlines()[-1] == (
        "sch.annotate_buffer_access(b0, 0, 'read', lambda vi, vj: ((vi - 1, vi + 1), "
        "(vj - 1, vj + 1)))")
    check_replays(two_stages, sch)
    run(sch.func)


def test_write_region_is_replaced_and_marked():
    sch = sched.Schedule(two_stages)
    sch.annotate_buffer_access("B", 0, "write", lambda vi, vj: ((vi, vi + 2), (vj, vj + 2)))
    script = sch.func.script()
    assert "T.writes(B[vi:vi + 2, vj:vj + 2])" in script
    assert 'T.block_attr({"explicit_write_region": [0]})' in script
    check_replays(two_stages, sch)
    run(sch.func)


def test_read_and_write_then_read_again_keep_one_mark_each():
    sch = sched.Schedule(two_stages)
    sch.annotate_buffer_access("B", 0, "read", lambda vi, vj: ((vi - 1, vi + 2), (vj - 1, vj + 2)))
    sch.annotate_buffer_access("B", 0, "write", lambda vi, vj: ((vi, vi + 2), (vj, vj + 2)))
    sch.annotate_buffer_access("B", 0, "read", lambda vi, vj: ((vi - 2, vi + 3), (vj - 2, vj + 3)))
    script = sch.func.script()
    assert "T.reads(A[vi - 2:vi + 3, vj - 2:vj + 3])" in script
    assert 'T.block_attr({"explicit_read_region": [0], "explicit_write_region": [0]})' in script
    check_replays(two_stages, sch)


def test_a_point_per_dimension_and_compute_at_afterwards_keep_the_numbers():
    # sched's compute_at takes what the consumer reads from its body, not from the region
    sch = sched.Schedule(two_stages)
    sch.annotate_buffer_access("C", 0, "read", lambda vi, vj: (vi, (vj - 4, vj + 4)))
    i, _ = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("B"), i)
    check_replays(two_stages, sch)
    run(sch.func)


def test_a_region_smaller_than_the_accesses_is_refused():
    # B is read at (vi, vj), which [vi + 1, vi + 2) does not hold
    sch = sched.Schedule(two_stages)
    with pytest.raises(ScheduleError, match=r"block 'C' reads B\[(\d+), (\d+)\] at vi=\1, "
                       r"vj=\2, outside the region B\[vi \+ 1:vi \+ 1 \+ 1, vj:vj \+ 1\] "
                       r"given for it: a declared region must hold every element"):
        sch.annotate_buffer_access("C", 0, "read", lambda vi, vj: ((vi + 1, vi + 2), vj))
    assert len(sch.trace) == 0


def test_an_unprovable_access_is_refused():
    # TVM's resize test: a float computation as index, which isl cannot bound, so the region
    # (right as it is) cannot be checked, and sched does not trust it
    @T.prim_func
    def resize(x: T.Buffer((1, 1, 32, 32), "float16"), y: T.Buffer((1, 1, 16, 16), "float16")):
        for i0, i1, i2, i3 in T.grid(1, 1, 16, 16):
            with T.block("resize"):
                v0, v1, v2, v3 = T.axis.remap("SSSS", [i0, i1, i2, i3])
                y[v0, v1, v2, v3] = x[v0, v1, T.Cast("int32", T.floor(T.Cast("float32", v2 * 2)
                                                                      + T.float32(0.5))), v3 * 2]
    with pytest.raises(ScheduleError, match="isl cannot bound what block 'resize' reads of "
                       "'x'.*does not trust a declared region it cannot check"):
        sched.Schedule(resize).annotate_buffer_access(
            "resize", 0, "read", lambda n, c, h, w: (n, c, (h * 2 - 3, h * 2 + 3),
                                                     (w * 2 - 3, w * 2 + 3)))


def test_a_region_that_is_not_affine_is_refused():
    sch = sched.Schedule(two_stages)
    with pytest.raises(ScheduleError, match="is not affine in the block's iteration variables"):
        sch.annotate_buffer_access("B", 0, "read", lambda vi, vj: ((0, vi * vj + 1), vj))


def test_an_opaque_block_is_refused():
    @T.prim_func
    def opaque(A: T.Buffer((16,), "float32")):
        for i in range(8):
            with T.block("E"):
                vi = T.axis.spatial(8, i)
                T.reads(A[vi * 2])
                T.writes(A[vi * 2])
                T.evaluate(T.call_extern("int32", "f", T.address_of(A[vi * 2])))
    with pytest.raises(ScheduleError, match="block 'E' makes an opaque call: its declared "
                       "regions are what the call may touch"):
        sched.Schedule(opaque).annotate_buffer_access("E", 0, "read", lambda vi: (vi * 2,))


@pytest.mark.parametrize("args, message", [
    ((0, "readwrite", lambda vi, vj: (vi, vj)), "argument 3, 'buf_type'.*got 'readwrite'"),
    ((1, "read", lambda vi, vj: (vi, vj)), r"expected an index in \[0, 1\) into the reads"),
    ((0, "read", lambda vi: (vi,)), "calling it with the block's 2 iteration variables failed"),
    ((0, "read", lambda vi, vj: (vi,)), "it gives 1 ranges, but 'A' has 2 dimensions"),
    ((0, "read", lambda vi, vj: ((vi, vi + 1, 2), vj)), "an index or a pair"),
])
def test_bad_arguments_are_refused(args, message):
    with pytest.raises(ScheduleError, match=message):
        sched.Schedule(two_stages).annotate_buffer_access("B", *args)


def test_a_block_holding_blocks_is_refused():
    """blockize's outer block has no accesses of its own: its region could not be checked
    against anything (audit helper-43: A[0, 0] was accepted for a read of A[4v:4v+4, 0:128])."""
    sch = sched.Schedule(two_stages)
    i, _ = sch.get_loops(sch.get_block("B"))
    _, inner = sch.split(i, [None, 4])
    outer = sch.blockize(inner)
    with pytest.raises(ScheduleError, match="holds blocks and has no accesses of its own"):
        sch.annotate_buffer_access(outer, 0, "read", lambda v: ((0, 1), (0, 1)))


def test_t_min_in_the_ranges_builds_the_expression():
    """`T.min` outside a function is the IR's min in a lambda (it was a placeholder, and the
    step crashed with a TypeError)."""
    sch = sched.Schedule(two_stages)
    sch.annotate_buffer_access(sch.get_block("C"), 0, "read",
                               lambda vi, vj: ((vi, T.min(vi + 1, 128)), (vj, vj + 1)))
    assert "T.reads(B[vi:vi + T.min(1, 128 - vi), vj])" in \
        sch.func.script()
    check_replays(two_stages, sch)
    run(sch.func)
