"""A Schedule refuses, at creation, a function that reads or writes out of bounds (issue 9,
item 8): scheduling a wrong program would only hide where it goes wrong."""

import pytest

import sched
from sched import compute as te
from sched.polyhedral.in_bounds import OutOfBoundsError


def test_schedule_refuses_a_compute_reading_past_its_input():
    P = te.placeholder((4, 8), name="P")
    Q = te.compute((4, 8), lambda i, j: P[i, j + 1], name="Q")      # j + 1 reaches P[i, 8]
    with pytest.raises(OutOfBoundsError, match=r"Schedule: .*'Q' reads P\[.*out of bounds"):
        sched.Schedule(te.create_prim_func([P, Q]))


def test_schedule_accepts_a_guarded_padding_read():
    P = te.placeholder((4, 8), name="P")
    Q = te.compute((4, 9), lambda i, j: te.if_then_else(j < 8, P[i, j], 0.0),
                   name="Q")
    sched.Schedule(te.create_prim_func([P, Q]))
