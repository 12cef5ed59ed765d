"""Only the accumulator chain of one element is exempt from ordering (issue 9, item 2): an
update that reads another element of its own output, or its accumulator a second time, keeps
ordinary dependences, so a reorder that changes its result is refused."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched.errors import ScheduleError
from sched.polyhedral import dependences
from sched.script import T
from tests.conftest import assert_close


@T.prim_func
def reads_neighbour(A: T.Buffer((4,), "float32"), C: T.Buffer((9,), "float32")):
    for i, k in T.grid(8, 4):
        with T.block("U"):
            vi = T.axis.spatial(8, i)
            vk = T.axis.reduce(4, k)
            C[vi + 1] = C[vi + 1] + C[vi] * A[vk]


@T.prim_func
def reads_accumulator_twice(A: T.Buffer((4,), "float32"), C: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 4):
        with T.block("U"):
            vi = T.axis.spatial(8, i)
            vk = T.axis.reduce(4, k)
            C[vi] = C[vi] + C[vi] * C[vi] * A[vk]


@T.prim_func
def plain_sum(A: T.Buffer((8, 4), "float32"), C: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 4):
        with T.block("U"):
            vi = T.axis.spatial(8, i)
            vk = T.axis.reduce(4, k)
            with T.init():
                C[vi] = T.float32(0)
            C[vi] = C[vi] + A[vi, vk]


def neighbour_reference(a, c):
    c = c.astype(np.float64).copy()
    for i in range(8):
        for k in range(4):
            c[i + 1] = c[i + 1] + c[i] * a[k]
    return c


def test_update_reading_another_output_element_has_ordinary_dependences():
    deps = dependences(reads_neighbour)
    assert any(d.kind == "flow" and not d.is_reduction for d in deps)
    assert any(d.is_reduction for d in deps)        # the chain of C[vi + 1] itself


def test_reorder_of_an_update_reading_another_output_element_is_refused():
    sch = sched.Schedule(reads_neighbour)
    i, k = sch.get_loops(sch.get_block("U"))
    with pytest.raises(ScheduleError, match=r"reads C\[1\] written by U"):
        sch.reorder(k, i)
    a = np.array([0.5, -1.0, 0.25, 2.0], np.float32)
    c = np.linspace(-1, 1, 9).astype(np.float32)
    out = c.copy()
    sched.build(sch.func, target="c")(a, out)
    assert_close(out, neighbour_reference(a, c))


def test_update_reading_its_accumulator_twice_is_not_a_reduction_chain():
    sch = sched.Schedule(reads_accumulator_twice)
    i, k = sch.get_loops(sch.get_block("U"))
    sch.reorder(k, i)                 # each element's updates stay in k order: legal
    with pytest.raises(ScheduleError, match="reads C"):
        _reverse_k(sch)


def _reverse_k(sch):
    # run k backwards: an order the exemption would allow for a true reduction
    k = sch.get_loops(sch.get_block("U"))[0]
    k_0, k_1 = sch.split(k, [2, 2])
    sch.reorder(k_1, k_0)


def test_a_true_reduction_still_reorders():
    sch = sched.Schedule(plain_sum)
    i, k = sch.get_loops(sch.get_block("U"))
    sch.reorder(k, i)
    a = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)
    c = np.zeros(8, np.float32)
    sched.build(sch.func, target="c")(a, c)
    assert_close(c, a.sum(axis=1))
