"""Bindings and predicates that are piecewise affine (selects with affine conditions over
affine pieces) are exact in the model: one disjunct per piece (audit helper-98's compute_at
of a producer read at rows i and n - 1 - i was refused as "not affine")."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched.polyhedral.in_bounds import OutOfBoundsError

SOURCE = '''
@T.prim_func
def f(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, T.if_then_else(i < 4, i * 2, (i - 4) * 2 + OFFSET))
            BODY
'''


def piecewise(offset: int, body: str = "B[vi] = A[vi] * T.float32(2)"):
    return sched.parse(SOURCE.replace("OFFSET", str(offset)).replace("BODY", body))


def test_a_piecewise_permutation_is_exact_and_its_loop_may_run_in_parallel(rng):
    sch = sched.Schedule(piecewise(1))
    sch.parallel(sch.get_loops(sch.get_block("B"))[0])
    assert sch.notes == []                           # exact: no conservative analysis
    a = rng.standard_normal(8).astype(np.float32)
    b = np.full(8, np.nan, np.float32)
    sched.build(sch.func, target="c")(a, b)
    np.testing.assert_array_equal(b, 2 * a)


def test_a_piecewise_binding_outside_its_domain_is_refused_with_the_point():
    with pytest.raises(OutOfBoundsError, match="at i=4 the binding of 'vi' is outside its "
                                               r"domain \[0, 8\)"):
        sched.Schedule(piecewise(9))


def test_a_piecewise_binding_that_repeats_an_instance_keeps_a_read_modify_write_serial():
    sch = sched.Schedule(piecewise(0, "B[vi] = B[vi] + A[vi]"))
    with pytest.raises(sched.ScheduleError, match=r"runs instances of block B more than once"):
        sch.parallel(sch.get_loops(sch.get_block("B"))[0])
    a = np.arange(8, dtype=np.float32)
    b = np.ones(8, np.float32)
    sched.build(sch.func, target="c")(a, b)
    expected = np.ones(8, np.float32)
    for i in range(8):
        vi = 2 * i if i < 4 else 2 * (i - 4)
        expected[vi] += a[vi]
    np.testing.assert_array_equal(b, expected)
