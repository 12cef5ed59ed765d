"""`Schedule.concurrency_checked_at_end`: the rule of concurrent loops asked once, of the
function at the end of the context (the autoscheduler's sketches, its replays of records),
with every other check of every step kept."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import ScheduleError
from sched.schedule import Trace
from tests.conftest import assert_close
from tests.schedule.conftest import run_c


def row_sums():
    A = te.placeholder((16, 32), name="A")
    k = te.reduce_axis((0, 32), name="k")
    B = te.compute((16,), lambda i: te.sum(A[i, k], axis=k), name="B")
    C = te.compute((16,), lambda i: B[i] * 2.0, name="C")
    return te.create_prim_func([A, C])


def test_a_loop_that_carries_a_dependence_is_refused_at_the_end_naming_it_and_the_steps():
    sch = sched.Schedule(row_sums())
    with pytest.raises(ScheduleError) as error, sch.concurrency_checked_at_end():
        _, k = sch.get_loops(sch.get_block("B"))
        sch.parallel(k)                       # accepted for now: the reduce loop
        i, = sch.get_loops(sch.get_block("C"))
        sch.split(i, factors=[None, 4])
    message = str(error.value)
    assert "parallel, split (checked at the end of concurrency_checked_at_end)" in message
    assert "'k'" in message and "concurrent loop" in message
    # the refusal is the one the step itself gives outside the context
    plain = sched.Schedule(row_sums())
    with pytest.raises(ScheduleError, match="k"):
        plain.parallel(plain.get_loops(plain.get_block("B"))[1])


def test_other_checks_of_each_step_stay_immediate():
    sch = sched.Schedule(row_sums())
    with sch.concurrency_checked_at_end():
        i, _ = sch.get_loops(sch.get_block("B"))
        with pytest.raises(ScheduleError, match="reorder"):
            sch.reorder(sch.get_loops(sch.get_block("C"))[0], i)   # not one nest
        with pytest.raises(ScheduleError, match="split"):
            sch.split(i, factors=[3, 3])                                 # 9 != 16


def test_an_accepted_context_gives_the_function_of_the_same_steps_checked_one_by_one():
    def steps(sch):
        i, k = sch.get_loops(sch.get_block("B"))
        io, ii = sch.split(i, factors=[None, 4])
        sch.parallel(io)
        sch.unroll(ii)
        sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("C"))[0])
        sch.parallel(sch.get_loops(sch.get_block("C"))[0])

    deferred, plain = sched.Schedule(row_sums()), sched.Schedule(row_sums())
    with deferred.concurrency_checked_at_end():
        steps(deferred)
    steps(plain)
    assert deferred.func.script() == plain.func.script()
    assert str(deferred.trace) == str(plain.trace)
    a = np.random.default_rng(0).standard_normal((16, 32)).astype("float32")
    _, c = run_c(deferred.func, a, np.zeros(16, "float32"))
    assert_close(c, a.sum(axis=1) * 2)


def test_nested_contexts_ask_the_rule_once_at_the_outermost_end(monkeypatch):
    sch = sched.Schedule(row_sums())
    asked = []
    original = type(sch)._check_concurrent_loops

    def counting(self, kind, func, **options):
        asked.append(kind)
        return original(self, kind, func, **options)
    monkeypatch.setattr(type(sch), "_check_concurrent_loops", counting)
    with sch.concurrency_checked_at_end():
        with sch.concurrency_checked_at_end():
            sch.split(sch.get_loops(sch.get_block("C"))[0], factors=[None, 4])
        assert asked == ["split"]           # skipped inside (the step still asks; deferred)
        sch.parallel(sch.get_loops(sch.get_block("C"))[0])
    assert asked[-1].startswith("split, parallel (checked at the end")


def test_a_step_refused_inside_leaves_the_schedule_checking_each_step_again():
    sch = sched.Schedule(row_sums())
    with pytest.raises(ScheduleError), sch.concurrency_checked_at_end():
        sch.split(sch.get_loops(sch.get_block("C"))[0], factors=[3, 3])
    with pytest.raises(ScheduleError, match="concurrent loop|carr"):
        sch.parallel(sch.get_loops(sch.get_block("B"))[1])


def test_a_copy_made_inside_and_a_schedule_refused_at_the_end_check_their_next_step():
    sch = sched.Schedule(row_sums())
    with pytest.raises(ScheduleError), sch.concurrency_checked_at_end():
        sch.parallel(sch.get_loops(sch.get_block("B"))[1])
        copy = sch.copy()
    # an unroll cannot make a loop carry a dependence, but the steps before it were never
    # checked (audit: both were accepted, and built unchecked, wrong by 16-18)
    for schedule in (copy, sch):
        with pytest.raises(ScheduleError, match="concurrent loop 'k'"):
            schedule.unroll(schedule.get_loops(schedule.get_block("C"))[0])


def test_a_trace_replayed_with_the_rule_at_the_end_is_refused_where_its_end_breaks_it():
    sch = sched.Schedule(row_sums())
    with pytest.raises(ScheduleError), sch.concurrency_checked_at_end():
        sch.parallel(sch.get_loops(sch.get_block("B"))[1])
        trace = Trace(list(sch.trace.instructions))
    with pytest.raises(ScheduleError, match=r"parallel \(checked at the end"):
        trace.apply(row_sums(), concurrency_checked_at_end=True)
    with pytest.raises(ScheduleError, match="parallel"):
        trace.apply(row_sums())
    good = sched.Schedule(row_sums())
    good.parallel(good.get_loops(good.get_block("B"))[0])
    replayed = Trace(list(good.trace.instructions)).apply(row_sums(),
                                                          concurrency_checked_at_end=True)
    assert replayed.func.script() == good.func.script()


@pytest.mark.parametrize("error", [KeyError, ScheduleError])
def test_a_context_left_by_an_exception_has_the_next_step_check_the_whole_function(error):
    # found by an audit: a user's exception skipped the end, and an unroll or annotate after
    # it (steps that cannot make a loop carry a dependence) never asked the rule again
    sch = sched.Schedule(row_sums(), render_errors=False)
    with pytest.raises(error), sch.concurrency_checked_at_end():
        sch.parallel(sch.get_loops(sch.get_block("B"))[1])
        if error is KeyError:
            raise KeyError("the user's own error")
        sch.split(sch.get_loops(sch.get_block("C"))[0], factors=[3, 3])
    copy = sch.copy()
    with pytest.raises(ScheduleError, match=r"unroll \(the steps before it, in a "
                       r"concurrency_checked_at_end left by an exception, were never "
                       r"checked\): they made the concurrent loop 'k' carry a dependence"):
        sch.unroll(sch.get_loops(sch.get_block("C"))[0])
    with pytest.raises(ScheduleError, match="annotate"):
        copy.annotate(copy.get_loops(copy.get_block("B"))[0], "pragma", 1)


def test_a_context_left_by_an_exception_before_any_step_leaves_nothing_unchecked():
    sch = sched.Schedule(row_sums())
    with pytest.raises(KeyError), sch.concurrency_checked_at_end():
        raise KeyError("before any step")
    sch.unroll(sch.get_loops(sch.get_block("C"))[0])
    a = np.random.default_rng(1).standard_normal((16, 32)).astype("float32")
    _, c = run_c(sch.func, a, np.zeros(16, "float32"))
    assert_close(c, a.sum(axis=1) * 2)
