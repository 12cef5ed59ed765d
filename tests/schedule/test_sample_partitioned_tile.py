"""sample_partitioned_tile (sched/schedule/partitioned_tile.py): perfect tiles whose inner part
is a multiple of a factor, as TVM's MetaSchedule draws them for tensor-core tiling; recorded
with their decision, replayed with another; invalid arguments and decisions refused."""

import math

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import ScheduleError
from sched.schedule.partitioned_tile import sample_partitioned
from sched.schedule.trace import Trace


def rows(n=96, m=8):
    A = te.placeholder((n, m), name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] * 3.0, name="B")
    return te.create_prim_func([A, B])


def run(func, n=96, m=8):
    a = np.random.default_rng(0).random((n, m), dtype=np.float32)
    b = np.zeros_like(a)
    sched.build(func, target="c")(a, b)
    np.testing.assert_allclose(b, a * 3, rtol=1e-6)


@pytest.mark.parametrize("n, partition_pos, innerpart_factor",
                         [(2, 0, 1), (3, 1, 16), (4, 2, 8), (4, 3, 3), (3, 3, 1), (2, 1, 96)])
def test_every_draw_is_a_tile_whose_inner_part_the_factor_divides(n, partition_pos,
                                                                   innerpart_factor):
    import random

    rng = random.Random(7)
    seen = set()
    for _ in range(200):
        factors = sample_partitioned(rng, 96, n, partition_pos, innerpart_factor)
        assert len(factors) == n and all(f >= 1 for f in factors)
        assert math.prod(factors) == 96
        assert math.prod(factors[partition_pos:]) % innerpart_factor == 0
        seen.add(tuple(factors))
    assert len(seen) > 1 or innerpart_factor == 96 and n == 2     # (2, 1, 96): only [1, 96]


def test_sampled_factors_feed_split_and_the_trace_replays():
    func = rows()
    sch = sched.Schedule(func, seed=5)
    i, _ = sch.get_loops(sch.get_block("B"))
    factors = sch.sample_partitioned_tile(i, n=3, partition_pos=1, innerpart_factor=16)
    assert math.prod(factors) == 96 and (factors[1] * factors[2]) % 16 == 0
    sch.split(i, factors=factors)
    line = str(sch.trace).splitlines()[2]
    assert line.startswith("v3, v4, v5 = sch.sample_partitioned_tile(l1, n=3, partition_pos=1, "
                           "innerpart_factor=16, decision=[")
    assert sch.trace.apply(func).func == sch.func
    assert Trace.from_json(sch.trace.to_json()).apply(func).func == sch.func
    replay = sched.Schedule(func)
    exec(str(sch.trace), {"sch": replay})
    assert replay.func == sch.func
    run(sch.func)


def test_a_new_decision_replays_into_another_split():
    func = rows()
    sch = sched.Schedule(func, seed=1)
    i, _ = sch.get_loops(sch.get_block("B"))
    factors = sch.sample_partitioned_tile(i, n=3, partition_pos=1, innerpart_factor=16,
                                          decision=[6, 4, 4])
    sch.split(i, factors=factors)
    assert "T.grid(6, 4, 4, 8)" in sch.func.script()
    index = next(k for k, step in enumerate(sch.trace.instructions)
                 if step.kind == "sample_partitioned_tile")
    other = Trace.from_json(sch.trace.with_decision(index, [3, 2, 16]).to_json()).apply(func)
    assert "T.grid(3, 2, 16, 8)" in other.func.script()
    run(other.func)


def test_tvm_defaults_draw_any_perfect_tile():
    sch = sched.Schedule(rows(), seed=2)
    i, _ = sch.get_loops(sch.get_block("B"))
    factors = sch.sample_partitioned_tile(i, n=4)
    assert math.prod(factors) == 96
    assert "partition_pos=0, innerpart_factor=1" in str(sch.trace)


def test_a_sampled_size_feeds_loop_partition():
    # the inner part's product (a multiple of 16) as the size of a first partition
    func = rows()
    sch = sched.Schedule(func, seed=0)
    i, _ = sch.get_loops(sch.get_block("B"))
    outer, inner = sch.sample_partitioned_tile(i, n=2, partition_pos=1, innerpart_factor=16,
                                               decision=[2, 48])
    sch.loop_partition(i, factors=[inner, None])
    assert "for i1 in T.serial(48, 96):" in sch.func.script()
    assert Trace.from_json(sch.trace.to_json()).apply(func).func == sch.func
    run(sch.func)


def test_a_decision_whose_inner_part_the_factor_does_not_divide_is_refused():
    sch = sched.Schedule(rows())
    i, _ = sch.get_loops(sch.get_block("B"))
    # 4 * 3 is no multiple of 16 (TVM would mend it into [6, 16, 1]; sched says so)
    with pytest.raises(ScheduleError, match=r"sample_partitioned_tile: decision \[8, 4, 3\]: "
                                            r"the product 12 of the factors from "
                                            r"partition_pos=1 on is not a multiple of "
                                            r"innerpart_factor=16"):
        sch.sample_partitioned_tile(i, n=3, partition_pos=1, innerpart_factor=16,
                                    decision=[8, 4, 3])
    assert len(sch.trace) == 2                              # nothing recorded


def test_a_decision_that_is_no_tile_of_the_extent_is_refused():
    sch = sched.Schedule(rows())
    i, _ = sch.get_loops(sch.get_block("B"))
    # 4 * 16 covers 64 of 96 rows: a split by it would leave rows out
    with pytest.raises(ScheduleError, match=r"decision \[4, 16\]: their product 64 is not "
                                            r"the loop extent 96"):
        sch.sample_partitioned_tile(i, n=2, partition_pos=1, innerpart_factor=16,
                                    decision=[4, 16])
    with pytest.raises(ScheduleError, match=r"decision \[96\]: expected 2 positive integers"):
        sch.sample_partitioned_tile(i, n=2, decision=[96])


def test_a_factor_that_does_not_divide_the_extent_is_refused():
    sch = sched.Schedule(rows())
    i, _ = sch.get_loops(sch.get_block("B"))
    # no tile of 96 has an inner part that is a multiple of 64 (TVM returns [-1, 1])
    with pytest.raises(ScheduleError, match=r"innerpart_factor=64 does not divide the extent "
                                            r"96 of loop 'i', .*give a divisor of 96"):
        sch.sample_partitioned_tile(i, n=2, partition_pos=1, innerpart_factor=64)


def test_bad_arguments_are_refused():
    sch = sched.Schedule(rows())
    i, _ = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match=r"argument 2, 'n' to sample_partitioned_tile: "
                                            r"expected an integer >= 2, got 1"):
        sch.sample_partitioned_tile(i, n=1)
    with pytest.raises(ScheduleError, match=r"'partition_pos' to sample_partitioned_tile: "
                                            r"expected a position in \[0, 3\]"):
        sch.sample_partitioned_tile(i, n=3, partition_pos=4)
    with pytest.raises(ScheduleError, match=r"partition_pos=3 leaves no inner factor"):
        sch.sample_partitioned_tile(i, n=3, partition_pos=3, innerpart_factor=2)
    with pytest.raises(ScheduleError, match=r"'innerpart_factor' to sample_partitioned_tile: "
                                            r"expected an integer >= 1, got 0"):
        sch.sample_partitioned_tile(i, n=3, innerpart_factor=0)


def test_a_symbolic_extent_is_refused():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    sch = sched.Schedule(te.create_prim_func([A, B]))
    (i,) = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match=r"loop 'i' has the symbolic extent n; tiles are "
                                            r"sampled for constant extents"):
        sch.sample_partitioned_tile(i, n=2)


def test_a_decision_of_numpy_integers_is_taken_as_split_takes_them():
    """A decision read back from numpy (audit, helper-40: refused, 'expected 2 positive
    integers')."""
    A = te.placeholder((10,), name="A")
    sch = sched.Schedule(te.create_prim_func([A, te.compute((10,), lambda i: A[i] + 1.0,
                                                            name="B")]))
    (i,) = sch.get_loops(sch.get_block("B"))
    factors = sch.sample_partitioned_tile(i, 2, 1, 5, decision=list(np.array([2, 5])))
    assert sch.trace.instructions[-1].decision == (2, 5)
    sch.split(i, factors)
    assert "for i_0, i_1 in T.grid(2, 5):" in sch.func.script()
