"""A scalar parameter in a buffer shape (issue 9, item 12): `n: T.int32` with
`T.match_buffer(a, (8, n))` is the value passed for it, and the array's shape is checked
against it (it used to raise KeyError at the call)."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched.errors import KernelArgumentError
from sched.script import T


@T.prim_func
def add_one(a: T.handle, n: T.int32):
    A = T.match_buffer(a, (8, n), "float32")
    for i, j in T.grid(8, n):
        with T.block("S"):
            vi, vj = T.axis.remap("SS", [i, j])
            A[vi, vj] = A[vi, vj] + T.float32(1)


def test_a_scalar_parameter_in_a_shape_takes_the_value_passed(rng):
    kernel = sched.build(add_one, target="c")
    a = rng.standard_normal((8, 5)).astype(np.float32)
    got = a.copy()
    kernel(got, 5)
    np.testing.assert_allclose(got, a + 1)


def test_a_shape_that_disagrees_with_the_scalar_is_a_clear_error():
    kernel = sched.build(add_one, target="c")
    with pytest.raises(KernelArgumentError, match=r"argument 1 'A': expected shape \(8, 6\) "
                                                   r"\(n = 6 \(argument 2\)\), got \(8, 5\)"):
        kernel(np.zeros((8, 5), np.float32), 6)
