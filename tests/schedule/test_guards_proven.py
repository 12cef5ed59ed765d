"""compute_at under a fused, thread-bound loop (TVM's `fuse(j2, i2)`) writes no guard that isl
proves always true on the loops' ranges (a `T.where` there would block tensorize)."""

from __future__ import annotations

import numpy as np

import sched
from sched import compute as te
from sched.ir.nodes import Range, Var, const
from sched.polyhedral.expr_equality import holds_on_box


def matmul(n=64):
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return te.create_prim_func([A, B, C])


def test_compute_at_under_a_fused_thread_loop_writes_no_always_true_guard():
    # TVM's thread_idy = fuse(j2, i2): the tile's rows are ty % 2 * 16 + ..., which the
    # linear forms cannot bound; isl proves them in [0, 64)
    sch = sched.Schedule(matmul())
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i0, i1, i2 = sch.split(i, [2, 2, 16])
    j0, j1, j2 = sch.split(j, [2, 2, 16])
    ko, ki = sch.split(k, [None, 16])
    sch.reorder(i0, j0, j1, i1, ko, ki, i2, j2)
    bx = sch.fuse(i0, j0)
    ty = sch.fuse(j1, i1)
    sch.bind(bx, "blockIdx.x")
    sch.bind(ty, "threadIdx.y")
    local = sch.cache_read(block, 0, "local")
    sch.compute_at(local, ko)
    script = sch.func.script()
    assert "T.where" not in script
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((64, 64)).astype(np.float32) for _ in range(2))
    c = np.zeros((64, 64), np.float32)
    sched.build(sch.func, target="c")(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_holds_on_box_decides_quasi_affine_bounds():
    ty, ax = Var("ty", "int32"), Var("ax", "int32")
    box = {ty: Range(const(0, "int32"), const(4, "int32")),
           ax: Range(const(0, "int32"), const(16, "int32"))}
    row = ty % 2 * 16 + ax
    assert holds_on_box(row, "<", const(32, "int32"), box) is True
    assert holds_on_box(row, "<", const(31, "int32"), box) is False
    assert holds_on_box(row, ">=", const(0, "int32"), box) is True
    assert holds_on_box(ty * ax, "<", const(64, "int32"), box) is None
