"""Hypothesis: random elementwise and reduction computes, built for C, agree with numpy."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sched
from sched import compute as te
from tests.conftest import assert_close

BINARY = {
    "add": (lambda a, b: a + b, np.add),
    "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply),
    "max": (te.max, np.maximum),
    "min": (te.min, np.minimum),
    "select": (lambda a, b: te.if_then_else(a > b, a, b * 0.5),
               lambda a, b: np.where(a > b, a, b * 0.5)),
}
UNARY = {
    "tanh": (te.tanh, np.tanh),
    "abs": (te.abs, np.abs),
    "neg": (lambda a: -a, np.negative),
}


def trees(depth: int):
    """Expression trees as nested tuples over leaves 'X' and 'Y'."""
    leaves = st.sampled_from(["X", "Y"])
    if depth == 0:
        return leaves
    smaller = trees(depth - 1)
    return st.one_of(
        leaves,
        st.tuples(st.sampled_from(sorted(BINARY)), smaller, smaller),
        st.tuples(st.sampled_from(sorted(UNARY)), smaller),
    )


def evaluate(tree, leaves, table_index):
    """Evaluate `tree` with te (table_index 0) or numpy (1) operations."""
    if isinstance(tree, str):
        return leaves[tree]
    if len(tree) == 3:
        op, a, b = tree
        return BINARY[op][table_index](evaluate(a, leaves, table_index),
                                       evaluate(b, leaves, table_index))
    op, a = tree
    return UNARY[op][table_index](evaluate(a, leaves, table_index))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=trees(3), rows=st.integers(1, 9), cols=st.integers(1, 13),
       reducer=st.sampled_from([None, "sum", "max", "min"]), seed=st.integers(0, 2**16))
def test_random_compute_matches_numpy(tree, rows, cols, reducer, seed):
    X = te.placeholder((rows, cols), name="X")
    Y = te.placeholder((rows, cols), name="Y")
    body = te.compute((rows, cols), lambda i, j: evaluate(tree, {"X": X[i, j], "Y": Y[i, j]}, 0),
                      name="body")
    if reducer is None:
        out, out_shape = body, (rows, cols)
    else:
        k = te.reduce_axis((0, cols), name="k")
        reduce = getattr(te, reducer)
        out = te.compute((rows,), lambda i: reduce(body[i, k], axis=k), name="out")
        out_shape = (rows,)
    kernel = sched.build(te.create_prim_func([X, Y, out]), target="c")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols), np.float32)
    y = rng.standard_normal((rows, cols), np.float32)
    result = np.zeros(out_shape, np.float32)
    kernel(x, y, result)
    expected = evaluate(tree, {"X": x.astype(np.float64), "Y": y.astype(np.float64)}, 1)
    expected = np.broadcast_to(expected, (rows, cols))
    if reducer is not None:
        expected = getattr(np, {"sum": "sum", "max": "max", "min": "min"}[reducer])(expected,
                                                                                    axis=1)
    assert_close(result, expected, rtol=1e-4, atol=1e-4)
