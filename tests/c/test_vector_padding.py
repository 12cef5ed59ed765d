"""Padding (`if_then_else` of an inlined pad producer) in a vectorized loop: the border lanes
read nothing outside the input (masked loads), and the results match numpy.

The inputs sit between inaccessible pages (mprotect), so a load outside them would crash; each
case runs in a child process, which turns a crash into a failed test.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import subprocess
import sys

import numpy as np
import pytest

import sched
from sched import compute as te

PAGE = mmap.PAGESIZE
PROT_NONE = 0


def guarded_copy(array: np.ndarray) -> np.ndarray:
    """A copy of `array` whose memory has an inaccessible page right before and right after
    it (its size is rounded to 64 bytes: only the tail of the last element's line is slack)."""
    nbytes = (array.nbytes + 63) // 64 * 64
    pages = (nbytes + PAGE - 1) // PAGE
    memory = mmap.mmap(-1, (pages + 2) * PAGE)
    base = ctypes.addressof(ctypes.c_char.from_buffer(memory))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    for page in (0, pages + 1):
        assert libc.mprotect(base + page * PAGE, PAGE, PROT_NONE) == 0
    start = (pages + 1) * PAGE - array.nbytes
    start -= start % 64
    view = np.frombuffer(memory, array.dtype, array.size, offset=start).reshape(array.shape)
    view[...] = array
    return view


def padded_conv(vector_bytes: int, fast_math: bool, reorder: bool = True) -> None:
    """conv2d 3x3, padding 1, the pad inlined, the output columns vectorized (inside the
    reduction loops, or outside them without `reorder`); its input guarded; compared with
    numpy (run in a child process)."""
    X = te.placeholder((1, 3, 12, 16), name="X")
    W = te.placeholder((4, 3, 3, 3), name="W")
    out = te.ops.conv2d_nchw(X, W, padding=1)
    sch = sched.Schedule(te.create_prim_func([X, W, out]))
    sch.compute_inline(sch.get_block("conv2d_pad"))
    n, k, p, q, rc, ry, rx = sch.get_loops(sch.get_block("conv2d"))
    if reorder:
        sch.reorder(rc, ry, rx, q)
    sch.vectorize(q)
    kernel = sched.build(sch.func, target="c", fast_math=fast_math)
    assert "sched_vload_masked_f32x" in kernel.source, kernel.source
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 3, 12, 16)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    result = np.zeros((1, 4, 12, 16), np.float32)
    kernel(guarded_copy(x), w, result)
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    expected = np.zeros_like(result)
    for dy in range(3):
        for dx in range(3):
            expected += np.einsum("nchw,kc->nkhw", padded[:, :, dy:dy + 12, dx:dx + 16],
                                  w[:, :, dy, dx])
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)


def pad_then_exp(vector_bytes: int, fast_math: bool) -> None:
    """A padded copy whose border is -inf, exp of it inlined: the pad's select in the same
    vectorized loop as the math; input guarded."""
    X = te.placeholder((5, 30), name="X")
    P = te.compute((7, 32), lambda i, j: te.if_then_else(
        te.all(i >= 1, i < 6, j >= 1, j < 31), X[i - 1, j - 1], float("-inf")), name="P")
    E = te.compute((7, 32), lambda i, j: te.exp(P[i, j]), name="E")
    sch = sched.Schedule(te.create_prim_func([X, E]))
    sch.compute_inline(sch.get_block("P"))
    sch.vectorize(sch.get_loops(sch.get_block("E"))[-1])
    kernel = sched.build(sch.func, target="c", fast_math=fast_math)
    assert "sched_vload_masked_f32x" in kernel.source and "expf(" not in kernel.source
    x = np.random.default_rng(1).standard_normal((5, 30)).astype(np.float32)
    result = np.full((7, 32), np.nan, np.float32)
    kernel(guarded_copy(x), result)
    expected = np.exp(np.pad(x, 1, constant_values=-np.inf).astype(np.float64))
    np.testing.assert_allclose(result, expected, rtol=3e-7, atol=0)


@pytest.mark.parametrize("fast_math", [False, True], ids=["exact", "fast_math"])
@pytest.mark.parametrize("vector_bytes", [16, 32, 64])
@pytest.mark.parametrize("case", ["padded_conv", "padded_conv_reductions_inside",
                                  "pad_then_exp"])
def test_padding_vectorizes_without_reading_outside_the_input(case, vector_bytes, fast_math):
    call = "padded_conv({}, {}, reorder=False)" if case == "padded_conv_reductions_inside" \
        else case + "({}, {})"
    code = (f"from tests.c.test_vector_padding import {case.split('_reductions')[0]}; "
            + call.format(vector_bytes, fast_math))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ,
                                 "SCHED_VECTOR_BYTES": str(vector_bytes)})
    assert result.returncode == 0, f"exit status {result.returncode}\n{result.stderr[-3000:]}"


def test_a_select_inside_a_scalar_condition_reads_only_where_the_scalar_code_does(rng):
    # rows i >= 4 of the output read no row of A (A has 4): the lane mask of the inner select
    # must not be computed (with its load of A) before the outer, row-only condition
    A = te.placeholder((4, 32), name="A")
    B = te.compute((6, 32), lambda i, j: te.if_then_else(
        i < 4, te.if_then_else(A[te.min(i, 3), j] > 0.0, A[te.min(i, 3), j], 0.0) + 1.0,
        -1.0), name="B")
    sch = sched.Schedule(te.create_prim_func([A, B]))
    sch.vectorize(sch.get_loops(sch.get_block("B"))[-1])
    kernel = sched.build(sch.func, target="c")
    assert "vectorized: " in kernel.source and "sched_mask_1 = " not in kernel.source
    a = rng.standard_normal((4, 32)).astype(np.float32)
    out = np.zeros((6, 32), np.float32)
    kernel(a, out)
    np.testing.assert_array_equal(out[:4], np.maximum(a, 0) + 1)
    np.testing.assert_array_equal(out[4:], -1)


def scalar_and_or(op: str) -> None:
    """`L[i] != 0 and A[i * i, j] > 0` (or `L[i] == 0 or ...`) vectorized along j: where the
    row's flag decides, the scalar code reads no row of A (rows 4 and 9 do not exist); A
    guarded, compared with numpy (run in a child process)."""

    source = f"""
@T.prim_func
def main(L: T.Buffer((4,), "int32"), A: T.Buffer((4, 64), "float32"),
         B: T.Buffer((4, 64), "float32")):
    for i, j in T.grid(4, 64):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = T.if_then_else({'L[vi] != 0 and' if op == 'and' else 'L[vi] == 0 or'}
                                       A[vi * vi, vj] > T.float32(0), T.float32(1), T.float32(0))
"""
    sch = sched.Schedule(sched.parse(source))
    sch.vectorize(sch.get_loops(sch.get_block("B"))[-1])
    kernel = sched.build(sch.func, target="c")
    assert "vectorized: " in kernel.source, kernel.source
    rng = np.random.default_rng(1)
    flags = np.array([1, 1, 0, 0], np.int32)
    a = rng.standard_normal((4, 64)).astype(np.float32)
    out = np.full((4, 64), -1.0, np.float32)
    kernel(flags, guarded_copy(a), out)
    decided = 0.0 if op == "and" else 1.0
    expected = [[decided if flags[i] == 0 else float(a[i * i, j] > 0) for j in range(64)]
                for i in range(4)]
    np.testing.assert_array_equal(out, np.array(expected, np.float32))


@pytest.mark.parametrize("op", ["and", "or"])
def test_and_or_with_a_row_flag_reads_only_where_the_scalar_code_does(op):
    # audit (helper-81): with the left operand the same on every lane, the right one's
    # loads were whole vectors with no mask: rows 4 and 9 of A were read (a crash)
    result = subprocess.run(
        [sys.executable, "-c",
         f"from tests.c.test_vector_padding import scalar_and_or; scalar_and_or({op!r})"],
        capture_output=True, text=True)
    assert result.returncode == 0, f"exit status {result.returncode}\n{result.stderr[-3000:]}"
