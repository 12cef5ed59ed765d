"""Arithmetic on bools computes on the values 0 and 1, a nonzero result True, on every target
as in the interpreter (lower/bool_arithmetic.py; audit helper-103: C stored 2 for True + True
and divided by a False divisor)."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched import compute as te


def _reference(b, b2):
    def as_bool(x):
        return (np.asarray(x) != 0).astype(np.int32)
    quotient = np.where(b2, b.astype(np.int32) // np.maximum(b2, 1), 0)   # x // 0 is 0
    return (as_bool(b.astype(np.int32) + b2) * 100 + as_bool(b.astype(np.int32) - b2) * 10
            + as_bool(quotient))


def _bool_ops(vectorize: bool):
    B = te.placeholder((8,), "bool", name="B")
    B2 = te.placeholder((8,), "bool", name="B2")
    C = te.compute((8,), lambda i: te.cast(B[i] + B2[i], "int32") * 100
                   + te.cast(B[i] - B2[i], "int32") * 10 + te.cast(B[i] // B2[i], "int32"),
                   name="C")
    sch = sched.Schedule(te.create_prim_func([B, B2, C]))
    if vectorize:
        sch.vectorize(sch.get_loops(sch.get_block("C"))[0])
    return sch.func


@pytest.mark.filterwarnings("ignore:build")
@pytest.mark.parametrize("target, vectorize", [("c", False), ("c", True), ("cuda-emu", False)])
def test_sums_differences_and_quotients_of_bools_are_bools(target, vectorize, rng):
    func = _bool_ops(vectorize)
    b, b2 = rng.random(8) < 0.5, rng.random(8) < 0.5
    b[:4], b2[:4] = [True, True, False, False], [True, False, True, False]
    expected = _reference(b, b2)
    c = np.zeros(8, np.int32)
    sched.interpret(func, b, b2, c)
    np.testing.assert_array_equal(c, expected)
    c = np.zeros(8, np.int32)
    sched.build(func, target=target)(b, b2, c)
    np.testing.assert_array_equal(c, expected)


def test_a_bool_sum_reduction_is_an_any():
    B = te.placeholder((4,), "bool", name="B")
    k = te.reduce_axis((0, 4), name="k")
    C = te.compute((1,), lambda _: te.sum(B[k], axis=k), name="C")
    kernel = sched.build(te.create_prim_func([B, C]), target="c")
    for values in ([1, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 1]):
        c = np.zeros(1, bool)
        kernel(np.array(values, bool), c)
        assert c[0] == any(values)
