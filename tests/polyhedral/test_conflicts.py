"""The concurrency rule's first question (conflicts.iterations_touch: do the iterations of the
loop touch each other's elements at all?) only answers "accepted" sooner: the rule with it and
the rule without it (every dependence computed) give the same verdict for every loop, asked as
a parallel and as a vectorized loop, on hand schedules and on random scheduled programs."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sched
from sched import hand_schedules
from sched.errors import ScheduleError
from sched.ir import For, collect
from sched.polyhedral import clear_caches, concurrency
from sched.polyhedral.concurrency import concurrency_violation
from sched.polyhedral.conflicts import iterations_touch
from sched.polyhedral.model import build_model
from sched.script import T
from tests.fuzz.programs import programs
from tests.fuzz.steps import apply_random_step


def verdicts(func, monkeypatch, fast: bool) -> dict:
    """Loop name and kind -> whether the rule refuses it."""
    if not fast:
        monkeypatch.setattr(concurrency, "iterations_touch", lambda *args: True)
    clear_caches()
    try:
        found = {}
        for loop in collect(func.body, For):
            for kind in ("parallel", "vectorized"):
                name = loop.loop_var.name
                found[name, kind] = concurrency_violation(func, name, kind) is not None
        return found
    finally:
        monkeypatch.undo()
        clear_caches()


def assert_same_verdicts(func, monkeypatch) -> int:
    fast, full = verdicts(func, monkeypatch, True), verdicts(func, monkeypatch, False)
    assert fast == full
    return len(fast)


@T.prim_func
def neighbours(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(15):
        with T.block("B"):
            vi = T.axis.spatial(15, i)
            B[vi + 1] = B[vi] + A[vi]


@T.prim_func
def independent(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.axis.spatial(16, i)
            B[vi] = A[vi] * T.float32(2)


def test_iterations_that_touch_nothing_in_common_are_accepted_without_dependences():
    model = build_model(independent)
    statements = list(model.statements.values())
    params = statements[0].domain_texts[1]
    assert not iterations_touch(statements, 1, params)
    assert concurrency_violation(independent, "i", "parallel") is None


def test_iterations_that_touch_one_element_go_to_the_dependences():
    model = build_model(neighbours)
    statements = list(model.statements.values())
    assert iterations_touch(statements, 1, statements[0].domain_texts[1])
    violation = concurrency_violation(neighbours, "i", "parallel")
    assert violation is not None and "carries" in violation.reason


@pytest.mark.parametrize("schedule", [
    lambda: hand_schedules.cpu_matmul(64, 64, 64),
    lambda: hand_schedules.cpu_conv2d(1, 16, 14, 14, 16),
    lambda: hand_schedules.cpu_softmax(64, 128),
    lambda: hand_schedules.cpu_layer_norm(64, 128),
], ids=["cpu_matmul", "cpu_conv2d", "cpu_softmax", "cpu_layer_norm"])
def test_same_verdicts_on_hand_schedules(schedule, monkeypatch):
    assert assert_same_verdicts(schedule().func, monkeypatch) > 0


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(program=programs(), data=st.data())
def test_same_verdicts_on_random_scheduled_programs(program, data):
    with pytest.MonkeyPatch.context() as monkeypatch:
        try:
            sch = sched.Schedule(program.func, seed=0)
        except ScheduleError:
            return
        log: list[str] = []
        for _ in range(data.draw(st.integers(0, 5))):
            try:
                apply_random_step(sch, data, log, None, program.features)
            except ScheduleError:
                pass
        assert_same_verdicts(sch.func, monkeypatch)
