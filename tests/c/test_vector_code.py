"""Vectorized loops become explicit SIMD code where the accesses allow it, else stay scalar."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched import compute as te
from tests.conftest import assert_close


@pytest.fixture(autouse=True)
def avx2_width(monkeypatch):
    """These tests spell the 32-byte vectors of an AVX2 host (test_vector_ops covers every
    width)."""
    monkeypatch.setenv("SCHED_VECTOR_BYTES", "32")


def vectorized_inner(func, block):
    sch = sched.Schedule(func)
    loops = sch.get_loops(sch.get_block(block))
    sch.vectorize(loops[-1])
    return sched.build(sch.func, target="c")


def test_contiguous_and_broadcast_accesses_become_vector_code(rng):
    A = te.placeholder((5, 48), name="A")
    s = te.placeholder((48,), name="s")
    C = te.compute((5, 48), lambda i, j: A[i, j] * s[j] - A[i, 0] + 1.0, name="C")
    kernel = vectorized_inner(te.create_prim_func([A, s, C]), "C")
    assert "j += 8) {  // vectorized: 8 lanes" in kernel.source
    assert "*(sched_f32x8*)&C[i * 48 + j] = " in kernel.source
    a, v = rng.standard_normal((5, 48), np.float32), rng.standard_normal(48, np.float32)
    out = np.zeros((5, 48), np.float32)
    kernel(a, v, out)
    assert_close(out, a * v - a[:, :1] + 1)


def test_strided_access_keeps_the_scalar_simd_loop(rng):
    A = te.placeholder((16, 8), name="A")
    func = te.create_prim_func([A, te.ops.transpose(A)])
    kernel = vectorized_inner(func, "transpose")
    assert "#pragma omp simd" in kernel.source and "sched_f32x8" not in kernel.source
    a = rng.standard_normal((16, 8), np.float32)
    out = np.zeros((8, 16), np.float32)
    kernel(a, out)
    np.testing.assert_array_equal(out, a.T)


def test_extent_not_a_multiple_of_the_lanes_stays_scalar(rng):
    A = te.placeholder((3, 12), name="A")
    kernel = vectorized_inner(te.create_prim_func(
        [A, te.compute((3, 12), lambda i, j: A[i, j] * 2.0, name="B")]), "B")
    assert "sched_f32x8" not in kernel.source
    a = rng.standard_normal((3, 12), np.float32)
    out = np.zeros_like(a)
    kernel(a, out)
    np.testing.assert_array_equal(out, a * 2)


def test_parallel_loop_inside_a_vectorized_loop_runs_serially(rng):
    A = te.placeholder((8, 6), name="A")
    sch = sched.Schedule(te.create_prim_func([A, te.compute((8, 6), lambda i, j: A[i, j] + 1.0,
                                                            name="B")]))
    i, j = sch.get_loops(sch.get_block("B"))
    sch.vectorize(i)
    sch.parallel(j)
    kernel = sched.build(sch.func, target="c")
    assert "// parallel inside a vectorized loop: serial" in kernel.source
    a = rng.standard_normal((8, 6), np.float32)
    out = np.zeros_like(a)
    kernel(a, out)
    np.testing.assert_array_equal(out, a + 1)
