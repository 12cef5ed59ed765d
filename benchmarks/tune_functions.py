"""The functions the tuning benchmarks (tune_cpu.py, tune_gpu.py) tune, as users write them."""

from __future__ import annotations

from sched import compute as te


def matmul(size: int):
    A = te.placeholder((size, size), name="A")
    B = te.placeholder((size, size), name="B")
    return te.create_prim_func([A, B, te.ops.matmul(A, B)], name="matmul")


def softmax(rows: int, cols: int):
    X = te.placeholder((rows, cols), name="X")
    return te.create_prim_func([X, te.ops.softmax(X)], name="softmax")


def layer_norm(rows: int, cols: int):
    X = te.placeholder((rows, cols), name="X")
    g, b = te.placeholder((cols,), name="g"), te.placeholder((cols,), name="b")
    return te.create_prim_func([X, g, b, te.ops.layer_norm(X, g, b)], name="layer_norm")
