"""Random elementwise kernels (selects, comparisons, casts, min/max, math, integer lanes, the
loop variable as a value) vectorized along their columns compute what the same kernels compute
unvectorized: the same NaN and infinity positions, values within float rounding (gcc may fuse
a multiply-add in one and not the other; the math functions differ by their stated ulps)."""

from __future__ import annotations

import random

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.ir.nodes import FloatImm

ROWS, COLS = 3, 40          # 40: 32 lanes in vectors and 8 scalar on AVX-512 / 5 x 8 on AVX2


class RandomKernel:
    """A random expression tree over A, B (float32) and N (int32) at [i, j]."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)
        self.A = te.placeholder((ROWS, COLS), name="A")
        self.B = te.placeholder((ROWS, COLS), name="B")
        self.N = te.placeholder((ROWS, COLS), "int32", name="N")

    def float_expr(self, i, j, depth: int):
        r = self.random
        if depth == 0 or r.random() < 0.2:
            return r.choice([lambda: self.A[i, j], lambda: self.B[i, j], lambda: self.A[i, 0],
                             lambda: te.cast(j, "float32"), lambda: te.cast(self.N[i, j],
                                                                            "float32"),
                             lambda: FloatImm(r.choice([0.5, -2.0, 0.0, 3.0]))])()
        a = self.float_expr(i, j, depth - 1)
        kind = r.choice(["add", "sub", "mul", "div", "min", "max", "select", "cast64", "math",
                         "bool"])
        if kind in ("add", "sub", "mul", "div"):
            b = self.float_expr(i, j, depth - 1)
            return {"add": a + b, "sub": a - b, "mul": a * b, "div": a / b}[kind]
        if kind in ("min", "max"):
            return getattr(te, kind)(a, self.float_expr(i, j, depth - 1))
        if kind == "select":
            return te.if_then_else(self.condition(i, j, depth - 1), a,
                                   self.float_expr(i, j, depth - 1))
        if kind == "cast64":
            return te.cast(te.cast(a, "float64") * 1.5, "float32")
        if kind == "bool":
            return te.cast(self.condition(i, j, depth - 1), "float32") + a
        # not sigmoid: below x = -88 the scalar 1 / (1 + expf(-x)) is 0, the vector one the
        # (denormal) value, and a division by it tells them apart
        op = r.choice(["exp", "log", "tanh", "erf", "sqrt", "abs"])
        return getattr(te, op)(a * 0.25)

    def condition(self, i, j, depth: int):
        r = self.random
        kind = r.choice(["float", "int", "lane", "and", "or", "not"] if depth > 0
                        else ["float", "int", "lane"])
        if kind == "float":
            return self.float_expr(i, j, 0) < self.float_expr(i, j, 0)
        if kind == "int":
            return self.N[i, j] * 3 - j > r.choice([-5, 0, 7])
        if kind == "lane":
            return j >= r.choice([1, 8, 20])
        if kind == "not":
            return ~self.condition(i, j, depth - 1)
        a, b = self.condition(i, j, depth - 1), self.condition(i, j, depth - 1)
        return te.all(a, b) if kind == "and" else te.any(a, b)

    def kernels(self):
        depth = self.random.choice([2, 3, 4])
        C = te.compute((ROWS, COLS), lambda i, j: self.float_expr(i, j, depth), name="C")
        func = te.create_prim_func([self.A, self.B, self.N, C])
        sch = sched.Schedule(func)
        sch.vectorize(sch.get_loops(sch.get_block("C"))[-1])
        return sched.build(func, target="c"), sched.build(sch.func, target="c")


@pytest.mark.parametrize("seed", range(24))
def test_random_kernel_vectorized_matches_scalar(seed):
    scalar, vector = RandomKernel(seed).kernels()
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal((ROWS, COLS)) * 3).astype(np.float32)
    b = (rng.standard_normal((ROWS, COLS)) * 3).astype(np.float32)
    a.flat[:4] = [0.0, -0.0, np.inf, np.nan]
    b.flat[4:8] = [np.nan, -np.inf, 0.0, 1e-40]
    n = rng.integers(-4, 5, (ROWS, COLS), dtype=np.int32)
    expected, actual = np.zeros_like(a), np.zeros_like(a)
    scalar(a, b, n, expected)
    vector(a, b, n, actual)
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected))
    np.testing.assert_array_equal(np.isinf(actual), np.isinf(expected))
    finite = np.isfinite(expected)
    np.testing.assert_allclose(actual[finite], expected[finite], rtol=1e-4, atol=1e-5)
