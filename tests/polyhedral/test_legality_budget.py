"""The isl operation budget of a step's legality (polyhedral/legality.py
LEGALITY_OPERATIONS): a compute_at over a layout `((i * 3) % 7, i // 7)` of a symbolic size
ran for more than ten minutes (audit helper-187); past the budget the step is refused as
unproven, with a message that says so, and the function is left as it was."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.polyhedral import legality


def _chain(n):
    A = te.placeholder((n,), "float32", name="A")
    B = te.compute((n,), lambda i: A[i] * 2, name="B")
    C = te.compute((n,), lambda i: B[i] + 1, name="C")
    return te.create_prim_func([A, C])


def _compute_at(func):
    sch = sched.Schedule(func)
    (i,) = sch.get_loops(sch.get_block("C"))
    outer, _ = sch.split(i, [None, 4])
    sch.compute_at(sch.get_block("B"), outer)
    return sch


def test_a_step_past_the_budget_is_refused_as_unproven(monkeypatch):
    sched.polyhedral.clear_caches()
    monkeypatch.setattr(legality, "LEGALITY_OPERATIONS", 200)
    sch = sched.Schedule(_chain(te.var("n")))
    (i,) = sch.get_loops(sch.get_block("C"))
    outer, _ = sch.split(i, [None, 4])
    before = sch.func
    with pytest.raises(sched.ScheduleError, match="took isl more than 200 operations .* "
                                                  "refused as unproven") as refused:
        sch.compute_at(sch.get_block("B"), outer)
    assert sch.func is before
    # (no other loop is asked for the message: each would cost the budget again)
    assert "legal alternatives" not in str(refused.value)


def test_the_same_step_within_the_budget_is_accepted_and_computes():
    sch = _compute_at(_chain(te.var("n")))
    a = np.arange(9, dtype=np.float32)
    c = np.zeros(9, np.float32)
    sched.build(sch.func, target="c")(a, c)
    np.testing.assert_array_equal(c, a * 2 + 1)
