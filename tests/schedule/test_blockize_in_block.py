"""TVM's order on a blockized reduction: cache_write of the outer block writes back without
first filling the cache (its nested block initializes every element it accumulates), and
tensorize's blockize of a loop inside the outer block gives regions in the outer block's
variables (exact, quasi-affine ones too), not the whole buffer."""

from __future__ import annotations

import numpy as np

import sched
from sched import compute as te


def matmul(n=32):
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return te.create_prim_func([A, B, C])


def check(func, n=32):
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    c = np.full((n, n), np.nan, np.float32)
    sched.build(func, target="c")(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def blockized():
    sch = sched.Schedule(matmul())
    i, j, k = sch.get_loops(sch.get_block("C"))
    io, ii = sch.split(i, [None, 16])
    jo, ji = sch.split(j, [None, 16])
    ko, ki = sch.split(k, [None, 8])
    sch.reorder(io, jo, ko, ii, ji, ki)
    return sch, sch.blockize(ii), ii, ko


def test_cache_write_of_a_blockized_reduction_needs_no_fill():
    sch, outer, _, _ = blockized()
    sch.cache_write(outer, 0, "local")
    assert "C_local_fill" not in sch.func.script()
    check(sch.func)


def test_blockize_inside_a_block_gives_regions_in_its_variables():
    sch, outer, ii, ko = blockized()
    sch.decompose_reduction(outer, ko)
    _, i3 = sch.split(ii, [None, 4])
    sch.blockize(i3)
    script = sch.func.script()
    assert ("T.reads(A[v_v_i_0 * 16 + v_i_1_0 * 4:v_v_i_0 * 16 + v_i_1_0 * 4 + 4, "
            "v_v_k_0 * 8:v_v_k_0 * 8 + 8]") in script
    check(sch.func)


def test_blockize_inside_a_block_of_a_quasi_affine_access():
    # the layout TVM gives a warp buffer: tiles of 16 as [i // 16, j // 16, i % 16, j % 16]
    sch, outer, ii, ko = blockized()
    local = sch.cache_write(outer, 0, "local")
    sch.transform_layout(local, ("read", 0),
                         lambda i, j: (i // 16, j // 16, i % 16, j % 16))
    sch.decompose_reduction(outer, ko)
    sch.blockize(ii)
    script = sch.func.script()
    assert "C_local[v_v_i_0, v_v_j_0, 0:16, 0:16]" in script
    check(sch.func)
