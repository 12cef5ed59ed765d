"""What the CPU and GPU hand schedules share: the matmul function they schedule."""

from __future__ import annotations

from sched import compute as te


def _matmul_func(M, N, K, dtype="float32", epilogue=False):
    A = te.placeholder((M, K), dtype, name="A")
    B = te.placeholder((K, N), dtype, name="B")
    if not epilogue:
        return te.create_prim_func([A, B, te.ops.matmul(A, B)], name="matmul")
    bias = te.placeholder((N,), dtype, name="bias")
    D = te.ops.matmul_bias_relu(A, B, bias)
    return te.create_prim_func([A, B, bias, D], name="matmul_bias_relu")
