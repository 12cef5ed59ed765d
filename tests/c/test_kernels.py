"""C kernels against numpy: hand-built block IR and te computes, every buffer dtype."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import sched
from sched import compute as te
from sched.ir import (
    Buffer,
    BufferStore,
    Cast,
    For,
    IntImm,
    IRMutator,
    LetStmt,
    Not,
    PrimFunc,
    Select,
    Var,
)
from tests.conftest import assert_close
from tests.lower.block_ir import add_2d, matmul, scale_split, two_stage


def test_elementwise_add(rng):
    kernel = sched.build(add_2d(rows=16, cols=8))
    a, b = rng.standard_normal((2, 16, 8), np.float32)
    c = np.zeros((16, 8), np.float32)
    kernel(a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_matmul_with_reduction_init(rng):
    kernel = sched.build(matmul(m=16, n=4, k=8))
    a = rng.standard_normal((16, 8), np.float32)
    b = rng.standard_normal((8, 4), np.float32)
    c = np.full((16, 4), np.nan, np.float32)      # the init must overwrite what is there
    kernel(a, b, c)
    assert_close(c, a @ b)


def test_symbolic_dim_runs_at_two_sizes_without_rebuilding(rng):
    n = te.var("n")
    A = te.placeholder((n, 3), name="A")
    B = te.compute((n, 3), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    kernel = sched.build(te.create_prim_func([A, B]))
    for size in (5, 17):
        a = rng.standard_normal((size, 3), np.float32)
        b = np.zeros_like(a)
        kernel(a, b)
        assert_close(b, a * 2 + 1)
    assert "int32_t n)" in kernel.source


def test_parallel_loop(rng):
    kernel = sched.build(add_2d(rows=64, cols=32, outer_kind="parallel",
                                inner_kind="vectorized"))
    assert "#pragma omp parallel for" in kernel.source
    a, b = rng.standard_normal((2, 64, 32), np.float32)
    c = np.zeros((64, 32), np.float32)
    kernel(a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_unrolled_and_thread_bound_loops_run_serially(rng):
    for kinds in (("unrolled", "thread_binding"), ("thread_binding", "unrolled")):
        kernel = sched.build(add_2d(rows=4, cols=8, outer_kind=kinds[0], inner_kind=kinds[1]))
        a, b = rng.standard_normal((2, 4, 8), np.float32)
        c = np.zeros((4, 8), np.float32)
        kernel(a, b, c)
        np.testing.assert_array_equal(c, a + b)


def test_intermediate_buffer_of_root_block(rng):
    for n, size in ((None, 10), (Var("n"), 1000)):
        kernel = sched.build(two_stage(n))
        a = rng.standard_normal(size, np.float32)
        b = np.zeros_like(a)
        kernel(a, b)
        assert_close(b, a * 2 + 1)


def test_non_dividing_split_writes_only_inside_the_predicate(rng):
    kernel = sched.build(scale_split(extent=100, factor=32))
    a = rng.standard_normal(100, np.float32)
    b = np.zeros(100, np.float32)
    kernel(a, b)
    np.testing.assert_array_equal(b, a * 2)


def test_float16_add(rng):
    kernel = sched.build(add_2d(rows=4, cols=8, dtype="float16"))
    a, b = rng.standard_normal((2, 4, 8)).astype(np.float16)
    c = np.zeros((4, 8), np.float16)
    kernel(a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_bfloat16_add_with_torch_tensors_and_numpy_uint16():
    kernel = sched.build(add_2d(rows=4, cols=8, dtype="bfloat16"))
    generator = torch.Generator().manual_seed(0)
    a, b = torch.randn((2, 4, 8), generator=generator).to(torch.bfloat16)
    c = torch.zeros((4, 8), dtype=torch.bfloat16)
    kernel(a, b, c)
    assert torch.equal(c, a + b)                    # one rounding to nearest even, as torch
    as_bits = [t.view(torch.uint16).numpy() for t in (a, b)]
    c_bits = np.zeros((4, 8), np.uint16)
    kernel(*as_bits, c_bits)
    np.testing.assert_array_equal(c_bits, (a + b).view(torch.uint16).numpy())


def test_int8_wraps_like_numpy(rng):
    A = te.placeholder((64,), "int8", name="A")
    B = te.placeholder((64,), "int8", name="B")
    C = te.compute((64,), lambda i: A[i] * B[i] + A[i], name="C")
    kernel = sched.build(te.create_prim_func([A, B, C]))
    a, b = rng.integers(-128, 128, (2, 64), dtype=np.int8)
    c = np.zeros(64, np.int8)
    kernel(a, b, c)
    np.testing.assert_array_equal(c, a * b + a)


def test_integer_floor_division_and_modulo_match_python(rng):
    A = te.placeholder((64,), "int32", name="A")
    Q = te.compute((64,), lambda i: A[i] // 7 + A[i] % (-5), name="Q")
    kernel = sched.build(te.create_prim_func([A, Q]))
    a = rng.integers(-1000, 1000, 64, dtype=np.int32)
    q = np.zeros(64, np.int32)
    kernel(a, q)
    np.testing.assert_array_equal(q, a // 7 + a % -5)


def test_bool_buffers(rng):
    A = te.placeholder((32,), "float32", name="A")
    M = te.placeholder((32,), "bool", name="M")
    B = te.compute((32,), lambda i: te.all(A[i] > 0.0, M[i]), name="B")
    kernel = sched.build(te.create_prim_func([A, M, B]))
    a = rng.standard_normal(32, np.float32)
    m = rng.integers(0, 2, 32).astype(bool)
    b = np.zeros(32, bool)
    kernel(a, m, b)
    np.testing.assert_array_equal(b, (a > 0) & m)


def test_math_intrinsics(rng):
    A = te.placeholder((16,), name="A")
    ops = {"exp": (te.exp, np.exp), "tanh": (te.tanh, np.tanh),
           "sigmoid": (te.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
           "rsqrt": (lambda x: te.rsqrt(te.abs(x) + 1.0), lambda x: 1 / np.sqrt(np.abs(x) + 1))}
    a = rng.standard_normal(16, np.float32)
    for name, (te_op, np_op) in ops.items():
        B = te.compute((16,), _elementwise(te_op, A), name=name)
        kernel = sched.build(te.create_prim_func([A, B]))
        b = np.zeros(16, np.float32)
        kernel(a, b)
        assert_close(b, np_op(a.astype(np.float64)))


def _elementwise(op, tensor):
    return lambda i: op(tensor[i])


def test_torch_cpu_tensors(rng):
    kernel = sched.build(matmul(m=16, n=4, k=8))
    a, b = torch.randn(16, 8), torch.randn(8, 4)
    c = torch.empty(16, 4)
    kernel(a, b, c)
    torch.testing.assert_close(c, a @ b)


def test_kernel_attributes():
    func = add_2d()
    kernel = sched.build(func)
    assert kernel.func is func
    assert "void add_2d(" in kernel.source
    assert kernel.lowered.params == func.params
    assert kernel.library_path.name == "kernel.so"


@pytest.mark.parametrize("kind", ["parallel", "vectorized"])
def test_te_matmul_with_scheduled_loop_kind(rng, kind):
    A = te.placeholder((32, 16), name="A")
    B = te.placeholder((16, 8), name="B")
    k = te.reduce_axis((0, 16), name="k")
    C = te.compute((32, 8), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    func = with_outer_loop_kind(te.create_prim_func([A, B, C]), kind)
    kernel = sched.build(func)
    a = rng.standard_normal((32, 16), np.float32)
    b = rng.standard_normal((16, 8), np.float32)
    c = np.zeros((32, 8), np.float32)
    kernel(a, b, c)
    assert_close(c, a @ b)


def with_outer_loop_kind(func, kind):
    """`func` with its outermost loop of kind `kind` (until schedule primitives land)."""

    class Outer(IRMutator):
        done = False

        def visit_For(self, loop):
            if self.done:
                return loop
            self.done = True
            return dataclasses.replace(loop, kind=kind)

    return dataclasses.replace(func, body=Outer().visit(func.body))


def test_let_select_cast_not_and_a_loop_from_an_offset(rng):
    # for i in range(2, 10): x = A[i] * 3; B[i] = float(x) if not x < 0 else float(x // 2)
    A = Buffer("A", (IntImm(12),), "int32")
    B = Buffer("B", (IntImm(12),), "float32")
    i, x = Var("i"), Var("x")
    value = Select(Not(x < 0), Cast("float32", x), Cast("float32", x // 2))
    body = For(i, IntImm(2), IntImm(8), "serial",
               LetStmt(x, A[i] * 3, BufferStore(B, value, (i,))))
    kernel = sched.build(PrimFunc("let_select", (A, B), body))
    assert "for (int32_t i = 2; i < 10; ++i) {" in kernel.source
    a = rng.integers(-50, 50, 12, dtype=np.int32)
    b = np.zeros(12, np.float32)
    kernel(a, b)
    x_np = a[2:10] * 3
    np.testing.assert_array_equal(b[2:10], np.where(x_np >= 0, x_np, x_np // 2))
    assert not b[:2].any() and not b[10:].any()
