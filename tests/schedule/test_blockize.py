"""blockize (sched/schedule/blockize.py): the subtree of a loop becomes one block with the old
blocks nested inside; the numbers do not change and later steps work on the new block."""

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import ScheduleError
from sched.script import T


def matmul(n=16):
    A = te.placeholder((n, n), "float32", name="A")
    B = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return te.create_prim_func([A, B, C])


def check_matmul(func, n=16):
    rng = np.random.default_rng(0)
    a, b = (rng.random((n, n), dtype=np.float32) for _ in range(2))
    for run in (lambda *x: sched.build(func, target="c")(*x),
                lambda *x: sched.interpret(func, *x)):
        c = np.zeros((n, n), np.float32)
        run(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def tiled(func):
    sch = sched.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    io, ii = sch.split(i, [None, 4])
    jo, ji = sch.split(j, [None, 4])
    ko, ki = sch.split(k, [None, 8])
    sch.reorder(io, jo, ko, ii, ji, ki)
    return sch, (io, jo, ko, ii, ji, ki)


def test_blockize_a_matmul_tile():
    func = matmul()
    sch, (io, jo, ko, ii, ji, ki) = tiled(func)
    tile = sch.blockize(ii)
    script = sch.func.script()
    assert tile.name == "C_o"
    assert 'v_i_0, v_j_0, v_k_0 = T.axis.remap("SSR", [i_0, j_0, k_0])' in script
    assert "T.writes(C[v_i_0 * 4:v_i_0 * 4 + 4, v_j_0 * 4:v_j_0 * 4 + 4])" in script
    assert "A[v_i_0 * 4:v_i_0 * 4 + 4, v_k_0 * 8:v_k_0 * 8 + 8]" in script
    assert "v_k = T.axis.reduce(16, v_k_0 * 8 + k_1)" in script
    assert sched.parse(script) == sch.func
    assert sch.trace.apply(func).func == sch.func
    # the loops of the nested block stop at the new block, as in TVM
    assert [lp.name for lp in sch.get_loops(sch.get_block("C"))] == ["i_1", "j_1", "k_1"]
    assert [lp.name for lp in sch.get_loops(tile)] == ["i_0", "j_0", "k_0"]
    check_matmul(sch.func)


def test_steps_on_a_blockized_tile_are_still_checked():
    sch, (io, jo, ko, ii, ji, ki) = tiled(matmul())
    sch.blockize(ii)
    sch.parallel(io)
    # the outer block's k_0 is a reduce variable: its loop carries the reduction
    with pytest.raises(ScheduleError, match=r"parallel: loop 'k_0' carries a reduction"):
        sch.parallel(ko)
    sch.cache_read(sch.get_block("C_o"), "A", "local")
    check_matmul(sch.func)


def test_blockize_of_a_loop_feeding_spatial_and_reduce_variables_is_refused():
    A = te.placeholder((8, 8), "float32", name="A")
    k = te.reduce_axis((0, 8), name="k")
    S = te.compute((8,), lambda i: te.sum(A[i, k], axis=k), name="S")
    sch = sched.Schedule(te.create_prim_func([A, S]))
    i, k = sch.get_loops(sch.get_block("S"))
    fused = sch.fuse(i, k)
    outer, inner = sch.split(fused, [None, 4])
    # outer gives both vi and vk: the new block's variable would be neither
    with pytest.raises(ScheduleError, match=r"blockize: loop 'i_k_fused_0' outside loop "
                                            r"'i_k_fused_1' feeds both spatial and reduce "
                                            r"iteration variables"):
        sch.blockize(inner)


@T.prim_func
def rows_summed_twice(X: T.Buffer((4,), "float32"), Z: T.Buffer((4, 3), "float32")):
    for i in range(8):
        with T.block("outer"):
            vo = T.axis.spatial(4, i % 4)
            T.reads(Z[0:4, 0:3])
            T.writes(X[0:4])
            for t in range(3):
                with T.block("inner"):
                    vj = T.axis.spatial(4, vo)
                    vk = T.axis.reduce(3, t)
                    with T.init():
                        X[vj] = T.float32(0)
                    X[vj] = X[vj] + Z[vj, vk]


def test_blockize_inside_a_nested_block():
    # the new block's regions came from polyhedral/ over the loops around the nested block,
    # including `i` outside block "outer", which the new block (inside "outer") may not name:
    # the step crashed in the verifier (found by the fuzzer). Such a box is the whole buffer
    sch = sched.Schedule(rows_summed_twice)
    sch.blockize(sch.get_loops(sch.get_block("inner"))[0])
    script = sch.func.script()
    assert "v_vo = T.axis.spatial(4, vo)" in script
    assert sched.parse(script) == sch.func
    z = np.arange(12, dtype=np.float32).reshape(4, 3)
    x = np.zeros(4, np.float32)
    sched.build(sch.func, target="c")(x, z)
    np.testing.assert_array_equal(x, z.sum(axis=1))
